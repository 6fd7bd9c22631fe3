"""Word lists for synthetic reviews: filler head, domain nouns, sentiment lexicon, summaries."""

from __future__ import annotations


def _words(text: str) -> list[str]:
    return text.split()


COMMON = _words("""
the i and a it to is this for of my that in with you on was have but not
as be so are they one very they use just can if or great at all well like
when had them has from an would good does will me product get do out up
about than more there only these some no what other which also sound price
time really much little work we been your their its first after by even
because easy better your buy any too bought back now used two make still
over into need could quite nice while off then were how set way using
through same lot few enough new since right long before got hand around
our see both without each most play made think years going should found
another works own small power bit again unit take both where thing here
different keep put sure pretty many want however every look high find
day low come far end side though us down something best fit better light
ever year why less years once he she her his go old next thought feel
item quality job cable strings tone order amazon review case fine top
home looks bottom open real worth fact pack store issue who several may
probably done happy actually instead kind already until almost least
everything three half inside seems part etc full whole extra under small
point per stuff always tried plug test cheap change turn hold clean fast
""")

DOMAIN = _words("""
guitar bass amp pedal tuner strap capo pick picks cord cables stand mic microphone
speaker headphones battery batteries charger phone screen protector case cover
adapter plug jack knob switch volume button clip mount holder bracket string neck
fret frets bridge nut saddle body finish paint color box package packaging shipping
seller warranty manual instructions software app bluetooth usb port plastic metal
rubber leather fabric velcro screw screws bolt magnet spring handle lid tip tips
brush blade filter bag pouch sleeve belt buckle hook rack shelf drawer cabinet
keyboard mouse monitor laptop tablet camera lens tripod flash memory card drive
lamp bulb led cord wire wires cable charger dock stylus earbuds headset remote
""")

POSITIVE = _words("""
good great excellent love perfect awesome amazing nice happy best sturdy solid
fantastic wonderful recommend pleased beautiful reliable comfortable easy impressive
favorite superb outstanding smooth clear durable terrific fabulous satisfied
""")

NEGATIVE = _words("""
bad poor terrible awful broke broken cheap flimsy disappointed waste worst useless
junk horrible returned defective refund garbage noisy weak failed faulty mediocre
annoying unreliable uncomfortable problem problems disappointing
""")

NEUTRAL = _words("""
okay ok fine average decent alright acceptable adequate mixed so-so fair
""")

POSITIVE_PHRASES = [
    "works great",
    "highly recommend",
    "well made",
    "good value",
    "does the job",
    "worth every penny",
    "exactly as described",
    "love it",
    "great price",
    "very happy",
    "works perfectly",
    "five stars",
]

NEGATIVE_PHRASES = [
    "waste of money",
    "stopped working",
    "fell apart",
    "returned it",
    "piece of junk",
    "cheaply made",
    "broke after a week",
    "save your money",
    "one star",
    "very disappointed",
]

NEUTRAL_PHRASES = [
    "as expected",
    "could be better",
    "for the price",
    "it is ok",
    "nothing special",
    "middle of the road",
    "three stars",
]

NEGATIONS = [
    "not",
    "never",
    "no",
    "isn't",
    "wasn't",
    "doesn't",
    "didn't",
    "don't",
    "aren't",
    "won't",
    "not very",
    "nor",
]

HTML_NOISE = [
    "&#34;",
    "&quot;",
    "&amp;",
    "&#39;",
    "it&#39;s",
    "&#8217;",
    "&#8220;great&#8221;",
    "&#34;quality&#34;",
    "&lt;br&gt;",
    "&nbsp;",
    "&gt;",
    "&#8211;",
    "R&amp;B",
]

NON_ASCII_NOISE = [
    "café",
    "naïve",
    "–",
    "…",
    "don’t",
    "“great”",
    "señor",
    "über",
    "½",
    "°",
    "👍",
    "😀",
    "❤️",
    "🎸",
    "★★★★★",
    "€20",
]

JSON_ESCAPED_NOISE = [
    "caf\\u00e9",
    "\\u201cnice\\u201d",
    "\\ud83d\\udc4d",
    "\\u001a",
    '\\"great\\"',
    '\\"the',
    'value\\"',
    "back\\\\slash",
]
"""Noise tokens already in JSON source form (escapes); every other list holds plain text."""

SUMMARIES: dict[int, list[str]] = {
    1: ["One Star", "Junk", "Terrible", "Do not buy", "Broke quickly", "Waste of money", "Awful"],
    2: ["Two Stars", "Disappointed", "Not great", "Meh", "Cheaply made", "Not as described"],
    3: ["Three Stars", "OK", "It's okay", "Average", "Decent for the price", "Not bad"],
    4: ["Four Stars", "Good", "Works well", "Nice", "Pretty good", "Solid product", "Good value"],
    5: ["Five Stars", "Great", "Great!", "Perfect", "Excellent", "Works great", "Love it!"],
}

FIRST_NAMES = _words("""
james mary john patricia robert jennifer michael linda william elizabeth david barbara
richard susan joseph jessica thomas sarah charles karen chris nancy daniel lisa matt
betty mark sandra paul ashley steven kim andrew donna josh emily kevin carol brian
""")

LAST_NAMES = _words("""
smith johnson williams brown jones garcia miller davis rodriguez martinez hernandez
lopez gonzalez wilson anderson thomas taylor moore jackson martin lee perez thompson
white harris sanchez clark ramirez lewis robinson walker young allen king wright
""")
