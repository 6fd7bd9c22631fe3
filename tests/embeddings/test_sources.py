"""A corpus from several review files and folders: each layout's text, preprocessing's cleaning."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from engine.embeddings.config import EmbedConfig
from engine.embeddings.prepare import load_docs_corpus
from engine.embeddings.sources import Sources, SourceStats, expand_inputs
from engine.errors import InputError
from engine.preprocess.text import clean_text
from engine.sentiment.pretrained import Pretrained, align
from tui.cli import main as sentitop

MCAULEY = [{"reviewText": "Don't buy it &amp; never again", "overall": 1.0, "summary": "Bad"}]
IMDB = [{"id": 1, "split": "train", "label": 1, "rating": 9, "text": "A GREAT film, truly great."}]
FINE_FOOD = [{"Score": 5, "Text": "Tasty café snacks", "Summary": "yum"}]
ALEXA = [{"rating": 4, "verified_reviews": "Alexa plays music", "variation": "x"}]
TEXT_ONLY = [{"text": "no rating here but words"}]


def _write(path: Path, rows: list[dict[str, object]], gz: bool = False) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A folder of five layouts (one gzip), plus a README that is not read."""
    root = tmp_path / "data"
    root.mkdir()
    _write(root / "a_mcauley.jsonl.gz", MCAULEY, gz=True)
    _write(root / "b_imdb.jsonl", IMDB)
    _write(root / "c_food.jsonl", FINE_FOOD)
    _write(root / "d_alexa.jsonl", ALEXA)
    _write(root / "e_text.jsonl", TEXT_ONLY)
    (root / "README.md").write_text("# not a review file\n")
    return root


def test_a_folder_gives_every_layouts_text_cleaned_as_preprocessing_cleans(folder: Path) -> None:
    sources = Sources([str(folder)])
    docs = list(sources)
    texts = [MCAULEY[0]["reviewText"], IMDB[0]["text"], FINE_FOOD[0]["Text"],
             ALEXA[0]["verified_reviews"], TEXT_ONLY[0]["text"]]  # fmt: skip
    assert docs == [clean_text(str(t)).decode().split() for t in texts]
    assert docs[0] == ["dont", "buy", "it", "never", "again"]  # same rules as preprocessing
    assert docs[2] == ["tasty", "cafe", "snacks"]
    assert [s.text_field for s in sources.stats] == [
        "reviewText", "text", "Text", "verified_reviews", "text"
    ]  # fmt: skip
    assert all(s.docs == 1 for s in sources.stats)


def test_files_and_folders_mix_in_the_order_given(folder: Path, tmp_path: Path) -> None:
    extra = _write(tmp_path / "more.jsonl", [{"text": "first words"}, {"text": "  !!  "}])
    files = expand_inputs([str(extra), str(folder)])
    assert files[0] == str(extra) and len(files) == 6
    assert not any(f.endswith("README.md") for f in files)
    sources = Sources([str(extra), str(folder)])
    docs = list(sources)
    assert docs[0] == ["first", "words"] and len(docs) == 6
    assert (sources.stats[0].docs, sources.stats[0].skipped) == (1, 1)  # no word: passed over


def test_dedupe_drops_texts_repeated_across_files(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [{"text": "Same words."}, {"text": "other"}])
    b = _write(tmp_path / "b.jsonl", [{"text": "same WORDS"}])
    assert len(list(Sources([str(a), str(b)]))) == 3
    stats: list[SourceStats] = []
    sources = Sources([str(a), str(b)], dedupe=True, stats=stats)
    assert list(sources) == [["same", "words"], ["other"]]
    assert [(s.docs, s.duplicates) for s in stats] == [(2, 0), (0, 1)]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.jsonl", "missing.jsonl not found"),
        (lambda d: _write(d / "empty.jsonl", []), "empty.jsonl is empty"),
        (lambda d: (d / "sub").mkdir() or d / "sub", "holds no review file"),
        (lambda d: _write(d / "ids.jsonl", [{"id": 1, "n": 2}]), "no text field found"),
        (lambda d: _write(d / "blank.jsonl", [{"text": "?!"}]), "no record with any word"),
    ],
)
def test_unusable_inputs_are_errors_naming_the_path(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    good = _write(tmp_path / "good.jsonl", IMDB)
    bad = make(tmp_path)
    with pytest.raises(InputError, match=message):
        list(Sources([str(good), str(bad)]))


def test_the_corpus_of_several_inputs_aligns_with_a_classifier_vocabulary(folder: Path) -> None:
    cfg = EmbedConfig(run_dir="unused", input=[str(folder)], min_count=1, max_vocab=100)
    corpus = load_docs_corpus(cfg)
    assert {"dont", "great", "cafe", "alexa", "rating"} <= set(corpus.itos)
    vectors = np.arange(corpus.vocab_size * 2, dtype=np.float32).reshape(-1, 2)
    pre = Pretrained(vectors, corpus.itos, Path("run"))
    itos = ["<pad>", "<unk>", "dont", "great", "cafe", "unseenword"]  # a dataset's vocab.json
    aligned = align(pre, itos, seed=0)
    assert (aligned.found, aligned.missing) == (3, 1)
    assert aligned.table[2].tolist() == vectors[corpus.itos.index("dont")].tolist()


def test_sentitop_embed_takes_several_inputs(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.embeddings.cli import config_from_args
    from tui.cli import build_parser

    argv = ["embed", "--input", "a.jsonl", str(folder), "--input", "b.jsonl",
            "--run-dir", str(tmp_path / "r"), "--dedupe"]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(argv))
    assert cfg.inputs == ["a.jsonl", str(folder), "b.jsonl"] and cfg.dedupe
    assert EmbedConfig.from_dict(cfg.to_dict()) == cfg
    assert EmbedConfig(run_dir="r", input="one.jsonl").inputs == ["one.jsonl"]
    # a missing file among several is named, exit 2, before any rank starts
    code = sentitop(["embed", "--input", str(folder), str(tmp_path / "nope.jsonl"),
                     "--run-dir", str(tmp_path / "r2"), "--device", "cpu"])  # fmt: skip
    assert code == 2
    assert "nope.jsonl not found" in capsys.readouterr().err


def test_a_folders_empty_and_foreign_files_are_skipped_with_warnings_naming_them(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One empty .jsonl failed the whole run; a stray binary was passed over without a word."""
    (folder / "f_empty.jsonl").write_bytes(b"")
    (folder / "stray.bin").write_bytes(bytes(range(256)))
    warnings: list[dict[str, str]] = []
    files = expand_inputs([str(folder)], warnings)
    assert len(files) == 5 and not any(f.endswith(("f_empty.jsonl", ".bin")) for f in files)
    assert [w["code"] for w in warnings] == ["empty_input_file", "unknown_input_file"]
    assert warnings[0]["message"] == f"{folder}: skipped 1 empty review file(s): f_empty.jsonl"
    assert "skipped 2 file(s) that are not review files" in warnings[1]["message"]
    assert warnings[1]["message"].endswith(": README.md, stray.bin")

    run_dir = tmp_path / "run"
    argv = ["embed", "--input", str(folder), "--run-dir", str(run_dir), "--mode", "svd",
            "--dim", "2", "--min-count", "1", "--negatives", "1", "--json"]  # fmt: skip
    assert sentitop(argv) == 0
    err = capsys.readouterr().err
    assert f"WARNING: {folder}: skipped 1 empty review file(s): f_empty.jsonl" in err
    assert "README.md, stray.bin" in err and "Traceback" not in err
    recorded = json.loads((run_dir / "prepare.json").read_text())["stats"]["warnings"]
    assert [w["code"] for w in recorded] == ["empty_input_file", "unknown_input_file"]


def test_many_foreign_files_are_counted_and_the_first_few_named(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", IMDB)
    for n in range(5):
        (tmp_path / f"x{n}.bin").write_bytes(b"\0")
    (tmp_path / ".hidden").write_bytes(b"\0")  # hidden files and subfolders are not mentioned
    (tmp_path / "sub").mkdir()
    warnings: list[dict[str, str]] = []
    assert expand_inputs([str(tmp_path)], warnings) == [str(tmp_path / "a.jsonl")]
    (warning,) = warnings
    assert warning["message"].endswith("skipped 5 file(s) that are not review files "
                                       "(.jsonl, .jsonl.gz, .json, .json.gz, .ndjson, "
                                       ".ndjson.gz): x0.bin, x1.bin, x2.bin (+2 more)")  # fmt: skip


def test_a_folder_of_only_empty_review_files_is_an_error_naming_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_bytes(b"")
    (data / "b.json").write_bytes(b"")
    argv = ["embed", "--input", str(data), "--run-dir", str(tmp_path / "r"), "--mode", "svd"]
    assert sentitop(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"bad input: {data}: folder holds only empty review files (a.jsonl, b.json)"
    )
    assert "Traceback" not in err
