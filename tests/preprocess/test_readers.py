"""Line-aligned ranges and block reading: every line read exactly once, long lines dropped."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from engine.preprocess import readers
from engine.preprocess.readers import MapTask, iter_line_blocks, iter_task_blocks, plan_tasks


def _lines_of(path: Path, tasks: list[MapTask], max_line: int, block: int) -> list[bytes]:
    out: list[bytes] = []
    for task in tasks:
        for lines, too_long in iter_task_blocks(task, max_line, block):
            assert all(lines[i] == b"" for i in too_long)
            out.extend(b"<long>" if i in too_long else line for i, line in enumerate(lines))
    return out


@pytest.mark.parametrize("end_newline", [True, False])
def test_ranges_cover_every_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end_newline: bool
) -> None:
    rng = random.Random(7)
    lines = [b"x" * rng.choice([0, 1, 5, 40, 300]) + str(i).encode() for i in range(150)]
    lines[17] = b""  # blank line in the middle
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if end_newline else b""))
    size = path.stat().st_size
    for split in (5, 64, 333, size):
        monkeypatch.setattr(readers, "MIN_SPLIT_BYTES", split)
        monkeypatch.setattr(readers, "MAX_SPLIT_BYTES", split)
        for together in (0, 2, 3):
            tasks = plan_tasks([str(path)], [size], workers=2, finish_together=together)
            for block in (3, 50, 1 << 20):
                assert _lines_of(path, tasks, 10_000, block) == lines, (split, block, together)


def test_ranges_shrink_at_the_end_when_workers_share_a_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "MIN_SPLIT_BYTES", 4000)
    monkeypatch.setattr(readers, "MAX_SPLIT_BYTES", 4000)
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"".join(b"%06d\n" % i for i in range(20_000)))  # 140,000 bytes
    size = path.stat().st_size
    even = plan_tasks([str(path)], [size], workers=2)
    tapered = plan_tasks([str(path)], [size], workers=2, finish_together=2)
    assert {t.nbytes for t in even[:-1]} == {4000}
    sizes = [t.nbytes for t in tapered]
    assert sizes == sorted(sizes, reverse=True)  # largest first, as the queue hands them out
    assert sizes[0] == 4000 and max(sizes[-4:]) <= 1000  # the last ones: a quarter or less
    assert sum(sizes) == size and [t.start for t in tapered[1:]] == [t.end for t in tapered[:-1]]
    assert [t.split_no for t in tapered] == list(range(len(tapered)))


def test_too_long_lines_are_replaced_not_held() -> None:
    data = b"a\n" + b"z" * 5000 + b"\nb\n" + b"y" * 5000
    got = []
    for lines, too_long in iter_line_blocks(io.BytesIO(data), None, 64, 100):
        got.extend(b"<long>" if i in too_long else line for i, line in enumerate(lines))
    assert got == [b"a", b"<long>", b"b", b"<long>"]


def test_gzip_and_empty_files_are_single_tasks(tmp_path: Path) -> None:
    import gzip

    gz = tmp_path / "a.gz"
    gz.write_bytes(gzip.compress(b"one\ntwo\n"))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    tasks = plan_tasks([str(gz), str(empty)], [gz.stat().st_size, 0], workers=4)
    assert [(t.gzip, t.start, t.end) for t in tasks] == [
        (True, 0, gz.stat().st_size),
        (False, 0, 0),
    ]
    assert _lines_of(gz, tasks, 100, 1 << 20) == [b"one", b"two"]


class _Pairs(list[tuple[int, int]]):
    def append_pair(self, nbytes: int, lines: int) -> None:
        self.append((nbytes, lines))


def test_progress_bytes_add_up_to_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip

    from engine.preprocess.mapper import MapStats, map_task
    from engine.preprocess.records import RecordSpec

    data = b"".join(b'{"reviewText": "text %d", "overall": 5}\n' % i for i in range(3000))
    plain = tmp_path / "p.jsonl"
    plain.write_bytes(data)
    gz = tmp_path / "p.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    monkeypatch.setattr(readers, "MIN_SPLIT_BYTES", 10_000)
    monkeypatch.setattr(readers, "MAX_SPLIT_BYTES", 10_000)
    for path in (plain, gz):
        size = path.stat().st_size
        seen = _Pairs()
        agg: dict[bytes, int] = {}
        stats = MapStats()
        for task in plan_tasks([str(path)], [size], workers=2):
            map_task(task, RecordSpec(), 1000, agg, stats, progress=seen.append_pair)
        assert sum(b for b, _ in seen) == size and all(b >= 0 for b, _ in seen)
        assert sum(n for _, n in seen) == stats.read == 3000 == len(agg)


def test_a_0_1_label_field_is_read_as_negative_and_positive(tmp_path: Path) -> None:
    """Binary-labelled files (text + label, or --label-field NAME) preprocess with label 0
    negative and 1 positive; a label outside 0/1 is skipped as out of range, and star-rating
    overrides cannot be mixed with a label field."""
    import json

    from engine.config import PreprocessConfig
    from engine.errors import InputError
    from engine.preprocess import run_preprocess

    rows = [{"text": f"review number {i} is {'good' if i % 3 else 'bad'}", "label": int(i % 3 > 0)}
            for i in range(60)] + [{"text": "a five", "label": 5}]  # fmt: skip
    src = tmp_path / "binary.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats = run_preprocess(PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "a")))
    assert (stats["positive"], stats["negative"]) == (40, 20)
    assert stats["skipped"]["rating_out_of_range"] == 1
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(
        "".join(json.dumps({"body": r["text"], "y": r["label"]}) + "\n" for r in rows)
    )
    cfg = PreprocessConfig(inputs=[str(renamed)], output=str(tmp_path / "b"), text_field="body",
                           label_field="y")  # fmt: skip
    again = run_preprocess(cfg)
    assert (again["positive"], again["negative"]) == (40, 20)
    with pytest.raises(InputError, match="--label-field reads a 0/1 label"):
        run_preprocess(cfg, rating_max=10)


STARS = [5, 4, 1, 5, 2, 5, 3, 5, 5, 4, 5, 1]
"""A 1-5 star field: read as a 0/1 label, its 1★ reviews were the positives and the rest
skipped."""


@pytest.mark.parametrize(
    ("values", "count", "first", "says", "hint"),
    [
        (STARS, 10, "in.jsonl:1 value 5.0", "it looks like a rating", "--rating-field stars"),
        (  # 0-5 stars: 0★ and 1★ passed as negative and positive, a dataset was written
            [0, 1, 2, 3, 4, 5] * 2,
            8,
            "in.jsonl:3 value 2.0",
            "it looks like a rating",
            "--rating-field stars",
        ),
        (
            ["pos", "neg", 1, 0, "pos", "neg"] * 2,
            8,
            'in.jsonl:1 value "pos"',
            "it is not a 0/1 label",
            "map its values to 0 (negative) and 1 (positive)",
        ),
    ],
)
def test_a_label_field_that_is_not_0_1_is_an_error_not_a_dataset(
    tmp_path: Path, values: list[object], count: int, first: str, says: str, hint: str
) -> None:
    """--label-field on a star-rating field read 1★ reviews as positive and skipped the others:
    a 1-5 field stopped at "all usable reviews are positive", a 0-5 one produced a dataset with
    a warning. A field that is not 0/1 on many lines is now named as such (exit 2)."""
    import json

    from engine.config import PreprocessConfig
    from engine.errors import InputError
    from engine.preprocess import run_preprocess

    src = tmp_path / "in.jsonl"
    words = ["fine cable", "awful strings", "good stand", "bad tuner"]
    rows = [
        {"body": f"{words[i % 4]} number {i}", "stars": float(v) if isinstance(v, int) else v}
        for i, v in enumerate(values)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = PreprocessConfig(
        inputs=[str(src)], output=str(tmp_path / "o"), text_field="body", label_field="stars"
    )
    with pytest.raises(InputError) as caught:
        run_preprocess(cfg)
    message = caught.value.message
    assert f"field `stars` holds values other than 0/1 on {count} of {len(values)} lines" in message
    assert f"(e.g. {tmp_path / first})" in message and says in message
    assert hint in (caught.value.hint or "")
    assert not (tmp_path / "o" / "dataset.h5").exists()


def test_a_few_bad_labels_stay_skipped_lines(tmp_path: Path) -> None:
    """The rule is a share: a label field with 0/1 on most lines keeps its few others skipped."""
    from engine.errors import InputError
    from engine.preprocess.readers import check_label_values, label_spec
    from engine.preprocess.records import RecordSpec

    spec = label_spec("text", "label")
    check_label_values([], spec, {"rating_out_of_range": 20}, 100)  # 20 %: skipped, warned
    check_label_values([], RecordSpec(), {"rating_out_of_range": 90}, 100)  # stars: not a label
    with pytest.raises(InputError, match="on 21 of 100 lines: it is not a 0/1 label"):
        check_label_values([], spec, {"rating_out_of_range": 11, "bad_rating": 10}, 100)


@pytest.mark.parametrize(
    ("rows", "options", "said", "hint"),
    [
        (  # no flag: the fields a file's records suggest
            [{"text": "great stuff here", "sentiment": 1}, {"text": "awful", "sentiment": 0}],
            {},
            "cannot tell the review text and rating fields apart (fields seen: sentiment, text)",
            "pass --text-field text --label-field sentiment (0 negative, 1 positive)",
        ),
        (
            [
                {"body": "great stuff here", "stars": 5, "id": 1},
                {"body": "bad", "stars": 1, "id": 2},
            ],
            {},
            "cannot tell the review text and rating fields apart (fields seen: body, id, stars)",
            "pass --text-field body --rating-field stars (1-5 stars)",
        ),
        (  # a known rating name before stray numbers ("--rating-field b" was suggested)
            [{"a": 1}, {"b": 2}, {"reviewText": "good"}, {"overall": 5}],
            {},
            "cannot tell the review text and rating fields apart (fields seen: a, b, overall,",
            "pass --text-field reviewText --rating-field overall (1-5 stars)",
        ),
        (  # the text field is the longest string one, not reviewText: the label is what is absent
            [{"text": "great stuff here", "sentiment": 1}, {"text": "awful", "sentiment": 0}],
            {"label_field": "label"},
            "no usable review in 2 line(s): 2 missing_rating (label field `label` absent or null",
            "--label-field",
        ),
        (
            [{"text": "great stuff here", "sentiment": "pos"}, {"text": "bad", "sentiment": "neg"}],
            {"label_field": "sentiment"},
            "2 bad_rating (label field `sentiment` not 0 or 1",
            "--label-field",
        ),
        (
            [{"body": "great stuff here", "stars": 5}, {"body": "bad", "stars": 1}],
            {"text_field": "body"},
            "2 missing_rating (rating field `overall` absent or null",
            "--rating-field",
        ),
    ],
)
def test_unreadable_fields_are_named_with_what_to_pass(
    tmp_path: Path, rows: list[dict[str, object]], options: dict[str, str], said: str, hint: str
) -> None:
    """--label-field on a file without a known layout read `reviewText` and said "missing_text
    (text field absent)"; a label of "pos" said "rating not a whole number"; the hint never
    named --label-field."""
    import json

    from engine.config import PreprocessConfig
    from engine.errors import InputError
    from engine.preprocess import run_preprocess

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "o"), **options)
    with pytest.raises(InputError) as caught:
        run_preprocess(cfg)
    assert said in caught.value.message
    assert hint in (caught.value.hint or "")


def test_plain_size_of_gzip_files(tmp_path: Path) -> None:
    """Exact for a small file (members after members too), within a few % past the sample,
    the file's own size for a plain or damaged one."""
    import gzip
    import random

    from engine.preprocess.readers import SIZE_SAMPLE, plain_size

    rng = random.Random(3)
    words = [f"w{i}" for i in range(3000)]
    text = " ".join(rng.choice(words) for _ in range(2_000_000)).encode()
    cases = {
        "small.gz": (gzip.compress(text[:50_000]), 50_000),
        "two.gz": (gzip.compress(text[:30_000]) + gzip.compress(text[:20_000]), 50_000),
        "big.gz": (gzip.compress(text), len(text)),
    }
    for name, (data, size) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        got = plain_size(str(path), len(data))
        assert got == size if len(data) <= SIZE_SAMPLE else abs(got / size - 1) < 0.05, name
    assert len(cases["big.gz"][0]) > SIZE_SAMPLE
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(cases["small.gz"][0][:10] + b"\0" * 500)
    assert plain_size(str(damaged), 510) == 510
    flat = tmp_path / "flat.jsonl"
    flat.write_bytes(text[:1000])
    assert plain_size(str(flat), 1000) == 1000


def test_skip_examples_are_the_earliest_lines_whatever_order_the_tasks_ran() -> None:
    """Each worker kept the first 5 skipped lines it met: tasks run largest first and go to
    whichever worker asks, so stats.json's examples changed from run to run with 2 workers."""
    from engine.preprocess.mapper import MAX_EXAMPLES, MapStats

    lines = [(file, 0, line) for file in range(3) for line in (7, 3, 11)]
    one = MapStats()
    for where in reversed(lines):  # the last file's lines first (its task was the largest)
        one.skip("malformed_json", *where)
    a, b = MapStats(), MapStats()  # the same lines split between two workers, either way
    for i, where in enumerate(lines):
        (a if i % 2 else b).skip("malformed_json", *where)
    b.merge(a)
    earliest = sorted(lines)[:MAX_EXAMPLES]
    assert sorted(one.examples["malformed_json"]) == earliest
    assert sorted(b.examples["malformed_json"]) == earliest
    assert one.skipped == b.skipped == {"malformed_json": 9}
