"""End to end: bad input counted with examples, counts add up, layout, atomic write, workers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.events import Emitter
from engine.preprocess import pipeline as pipeline_mod
from engine.preprocess import readers, run_preprocess
from engine.preprocess.encode import load_encoder

from .conftest import assert_same_dataset, review, write_lines

Run = Callable[..., dict[str, Any]]


def _bad_file(tmp_path: Path) -> Path:
    lines = [
        review("Great strings, sound great!", 5),  # 1
        review("Great strings; sound GREAT", 4),  # 2 duplicate of 1 after cleaning
        review("great strings sound great", 4),  # 3 duplicate → mode tie 4/5... 4 has 2, 5 has 1
        b"",  # 4 empty_line
        b'{"reviewText": "broken", ',  # 5 malformed_json
        b'{"reviewText": "caf\xe9 bad", "overall": 1}',  # 6 invalid_utf8
        b"[1, 2, 3]",  # 7 not_an_object
        b'{"overall": 3}',  # 8 missing_text
        b'{"reviewText": ["x"], "overall": 3}',  # 9 text_not_string
        review("", 5),  # 10 empty_text
        b'{"reviewText": "fine"}',  # 11 missing_rating
        review("fine", "lots"),  # 12 bad_rating
        review("fine", 9),  # 13 rating_out_of_range
        review("x" * (11 << 20), 5),  # 14 too_long (11 MB line)
        review("It is what it is.", 5),  # 15 only_stopwords
        review("Terrible tuner, broke in a day", 1),  # 16
        review("Terrible tuner broke in a day!!", 2),  # 17 duplicate, tie 1/2 → 1
    ]
    return write_lines(tmp_path / "bad.jsonl", lines)


def test_every_bad_input_is_counted_with_examples(tmp_path: Path, preprocess: Run) -> None:
    path = _bad_file(tmp_path)
    empty = write_lines(tmp_path / "empty.jsonl", [], end_newline=False)
    got = preprocess([path, empty], test_fraction=0.0, preset="stopwords")  # only_stopwords
    stats = got["stats"]
    expected = {
        "empty_line": 1,
        "malformed_json": 1,
        "invalid_utf8": 1,
        "not_an_object": 1,
        "missing_text": 1,
        "text_not_string": 1,
        "empty_text": 1,
        "missing_rating": 1,
        "bad_rating": 1,
        "rating_out_of_range": 1,
        "too_long": 1,
        "only_stopwords": 1,
    }
    assert {k: v for k, v in stats["skipped"].items() if v} == expected
    examples = {k: v for k, v in stats["skipped_examples"].items()}
    assert examples["too_long"] == [f"{path}:14"]
    assert examples["invalid_utf8"] == [f"{path}:6"]
    assert examples["empty_line"] == [f"{path}:4"]
    assert stats["read"] == 17
    assert stats["duplicates"] == 3
    assert stats["kept"] == 2
    assert stats["read"] == stats["kept"] + stats["skipped_total"] + stats["duplicates"]
    assert stats["empty_files"] == [str(empty)]
    assert (stats["positive"], stats["negative"], stats["train"], stats["test"]) == (1, 1, 2, 0)
    # great strings (4,4,5 → 4 → positive); terrible tuner (1,2 tie → 1 → negative)
    itos = got["vocab"]["itos"]
    rows = {
        " ".join(itos[t] for t in row[:n]): label
        for row, n, label in zip(
            got["train/tokens"], got["train/lengths"], got["train/labels"], strict=True
        )
    }
    assert rows == {"great strings sound great": 1, "terrible tuner broke day": 0}


def test_more_than_five_examples_keeps_the_first_five(tmp_path: Path, preprocess: Run) -> None:
    lines = [review("ok text", 5)] + [b"{bad"] * 9 + [review("poor text", 1)]  # both classes
    stats = preprocess([write_lines(tmp_path / "m.jsonl", lines)])["stats"]
    assert stats["skipped"]["malformed_json"] == 9
    assert [e.rsplit(":", 1)[1] for e in stats["skipped_examples"]["malformed_json"]] == [
        "2",
        "3",
        "4",
        "5",
        "6",
    ]


def _corpus(tmp_path: Path, n: int = 3000, name: str = "c.jsonl") -> Path:
    words = ["good", "bad", "great", "awful", "strings", "tuner", "cable", "sound", "not", "love"]
    rng = np.random.default_rng(3)
    lines = []
    for i in range(n):
        k = int(rng.integers(2, 30))
        text = " ".join(words[j] for j in rng.integers(0, len(words), k))
        if i % 4:
            text += f" item{i % 900}"
        lines.append(review(text.title() + "!", int(rng.integers(1, 6))))
    return write_lines(tmp_path / name, lines)


def test_dataset_layout_and_attributes(tmp_path: Path, preprocess: Run) -> None:
    got = preprocess([_corpus(tmp_path)], vocab_size=50, seq_len=12)
    attrs = got["attrs"]
    assert (attrs["vocab_size"], attrs["seq_len"], attrs["pad_id"], attrs["unk_id"]) == (
        50,
        12,
        0,
        1,
    )
    assert attrs["format_version"] == 1 and attrs["num_ids"] == 52
    for split in ("train", "test"):
        tokens, labels, lengths = (got[f"{split}/{n}"] for n in ("tokens", "labels", "lengths"))
        assert tokens.dtype == np.uint16 and labels.dtype == np.uint8
        assert tokens.shape == (len(labels), 12) and lengths.shape == (len(labels),)
        assert 1 < got[f"{split}/chunks"][0] <= len(labels) and got[f"{split}/chunks"][1] == 12
        assert (lengths >= 1).all() and (lengths <= 12).all()
        mask = np.arange(12)[None, :] < lengths[:, None]
        assert (tokens[~mask] == 0).all() and (tokens[mask] >= 1).all() and tokens.max() < 52
    stats = got["stats"]
    assert stats["train"] == len(got["train/labels"]) and stats["test"] == len(got["test/labels"])
    assert 0.05 < stats["test"] / stats["kept"] < 0.16
    vocab = got["vocab"]
    assert vocab["itos"][:2] == ["<pad>", "<unk>"] and len(vocab["itos"]) == 52
    assert vocab["settings"]["seq_len"] == 12 and "not" not in vocab["settings"]["stopwords"]


def test_workers_and_runs_give_identical_outputs(
    tmp_path: Path, preprocess: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _corpus(tmp_path, 4000)
    one = preprocess([path], workers=1)
    monkeypatch.setattr(readers, "MIN_SPLIT_BYTES", 20_000)  # several ranges per worker
    two = preprocess([path], workers=2)
    three = preprocess([path], workers=3)
    assert_same_dataset(one, two)
    assert_same_dataset(one, three)
    assert two["stats"]["read"] == 4000


def test_keep_negations_changes_stopwords(tmp_path: Path, preprocess: Run) -> None:
    path = write_lines(tmp_path / "n.jsonl", [review("Not good, don't buy", 1), review("good", 5)])
    dropped = preprocess([path], test_fraction=0.0, keep_negations=False)
    kept = preprocess([path], test_fraction=0.0)
    assert "not" not in dropped["vocab"]["itos"] and "dont" not in dropped["vocab"]["itos"]
    assert {"not", "dont"} <= set(kept["vocab"]["itos"])
    assert sorted(kept["train/lengths"].tolist()) == [1, 4]


def test_vocab_counts_training_texts_only(tmp_path: Path, preprocess: Run) -> None:
    lines = [review(f"common word{i}", 5 if i else 1) for i in range(200)]  # both classes
    got = preprocess([write_lines(tmp_path / "v.jsonl", lines)], test_fraction=0.5, vocab_size=1000)
    itos = got["vocab"]["itos"]
    assert itos[2] == "common"
    test_ids = got["test/tokens"][:, 1]
    assert (test_ids == 1).all()  # words only seen in test texts are unknown


def test_encoder_reproduces_dataset_encoding(tmp_path: Path, preprocess: Run) -> None:
    texts = ["Great &amp; LOUD amp, not bad", "Tuner broke!! Would not buy", "love the cable"]
    lines = [review(t, r) for t, r in zip(texts, (5, 1, 5), strict=True)]  # both classes
    path = write_lines(tmp_path / "e.jsonl", lines)
    got = preprocess([path], test_fraction=0.0, seq_len=4)
    encoder = load_encoder(got["out"])
    tokens, lengths = encoder.encode_texts(texts)
    rows = {tuple(r) for r in got["train/tokens"].tolist()}
    assert {tuple(r) for r in tokens.tolist()} == rows
    assert sorted(lengths.tolist()) == sorted(got["train/lengths"].tolist())
    empty_tokens, empty_len = encoder.encode_texts(["!!", ""])  # nothing left after cleaning
    assert empty_len.tolist() == [0, 0] and not empty_tokens.any()


def test_atomic_write_keeps_the_old_set_on_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _corpus(tmp_path, 200)
    out = tmp_path / "out"
    cfg = PreprocessConfig(inputs=[str(path)], output=str(out), workers=1)
    run_preprocess(cfg)
    assert (out / "dataset.h5").exists()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pipeline_mod, "publish_dataset", crash)
    with pytest.raises(OSError, match="disk full"):
        run_preprocess(cfg)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # never a stale pair
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_publish_writes_the_json_files_then_the_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.preprocess import writer

    tmp_h5, final = tmp_path / "tmp.h5", tmp_path / "dataset.h5"
    tmp_h5.write_bytes(b"h5")
    docs = {tmp_path / "vocab.json": {"a": 1}, tmp_path / "stats.json": {"b": 2}}
    writer.publish_dataset(tmp_h5, final, docs)
    assert final.read_bytes() == b"h5" and not tmp_h5.exists()
    assert json.loads((tmp_path / "stats.json").read_text()) == {"b": 2}

    tmp_h5.write_bytes(b"new")
    real_fsync = writer.os.fsync

    def fsync(fd: int) -> None:  # the dataset's fsync fails (a full disk), the JSON ones do not
        if writer.os.path.realpath(f"/proc/self/fd/{fd}") == str(tmp_h5.resolve()):
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(writer.os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        writer.publish_dataset(tmp_h5, final, docs)
    assert final.read_bytes() == b"h5"  # the failed dataset never replaced the published one
    assert tmp_h5.read_bytes() == b"new"


def test_events_are_emitted(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []

    class Sink:
        def write(self, event: dict[str, Any]) -> None:
            events.append(dict(event))

        def close(self) -> None:
            pass

    cfg = PreprocessConfig(inputs=[str(_corpus(tmp_path, 100))], output=str(tmp_path / "o"))
    stats = run_preprocess(cfg, Emitter(Sink()))
    types = [e["type"] for e in events]
    assert types[0] == "stage_start" and types[-2:] == ["summary", "stage_end"]
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"] == stats["input_bytes"]
    assert events[-1]["status"] == "ok" and events[-2]["kept"] == stats["kept"]


def test_missing_input_names_it(tmp_path: Path) -> None:
    cfg = PreprocessConfig(inputs=[str(tmp_path / "nope.json.gz")], output=str(tmp_path / "o"))
    with pytest.raises(InputError, match=r"nope\.json\.gz") as exc:
        run_preprocess(cfg)
    assert exc.value.exit_code == 2
    assert not (tmp_path / "o" / "dataset.h5").exists()


def test_an_empty_input_file_given_by_name_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file among the inputs (a failed download) was listed in stats.json's
    empty_files only; an empty file in an input folder already got a warning."""
    from tui.cli import main

    empty = tmp_path / "part-2.jsonl"
    empty.write_bytes(b"")
    full = write_lines(tmp_path / "part-1.jsonl", [review("sturdy stand", 5), review("wobbly", 1)])
    out = tmp_path / "out"
    argv = ["preprocess", "-i", str(full), str(empty), "-o", str(out), "--workers", "1", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    stats = json.loads(captured.out)
    assert stats["warnings"][0] == {
        "code": "empty_input_file",
        "message": f"1 input file(s) hold no lines: {empty}",
    }
    assert f"WARNING: 1 input file(s) hold no lines: {empty}" in " ".join(captured.err.split())
    assert [w["code"] for w in stats["warnings"][1:]] == ["empty_test_split"]  # 2 reviews


def test_an_empty_test_split_is_warned_about_since_training_refuses_it(
    tmp_path: Path, preprocess: Run
) -> None:
    path = _corpus(tmp_path, 200)
    none_held_out = preprocess([path], test_fraction=0.0)
    assert none_held_out["stats"]["test"] == 0
    assert [w["code"] for w in none_held_out["stats"]["warnings"]] == ["empty_test_split"]
    assert "test_fraction 0 of" in none_held_out["stats"]["warnings"][0]["message"]
    held_out = preprocess([path])
    assert held_out["stats"]["test"] > 0 and held_out["stats"]["warnings"] == []


def test_a_split_of_one_class_is_warned_about_since_training_refuses_it(
    tmp_path: Path, preprocess: Run
) -> None:
    """A trial's 400 reviews with 2 negative ones ended "ok" with a test split of 47 positive
    reviews, which `sentitop train` then refused; 5,000 bad lines and 2 good ones gave a
    train and a test split of one review each, and the skipped share read "100%"."""
    rows = [review(f"solid stand number {i} works", 5) for i in range(398)]
    skewed = write_lines(tmp_path / "skew.jsonl", [*rows, review("broke", 1), review("junk", 1)])
    got = preprocess([skewed])
    test_n = got["stats"]["test"]
    with h5py.File(got["out"] / "dataset.h5") as fh:
        assert not np.count_nonzero(fh["test/labels"][:] == 0)  # the 2 negatives: in train
    codes = [w["code"] for w in got["stats"]["warnings"]]
    assert codes == ["class_share", "one_class_split"]
    assert got["stats"]["warnings"][1]["message"].startswith(
        f"all {test_n:,} reviews of the test split are positive: `sentitop train` will refuse"
    )
    bad = [json.dumps({"reviewText": f"text {i}", "overall": "five"}).encode() for i in range(5000)]
    two = write_lines(tmp_path / "two.jsonl", [*bad, review("lovely", 5), review("awful", 1)])
    got = preprocess([two], test_fraction=0.5)
    assert (got["stats"]["train"], got["stats"]["test"]) == (1, 1)
    said = [w["message"] for w in got["stats"]["warnings"]]
    assert "skipped 99.96% of 5,002 lines" in said[0]
    assert said[1].startswith("the one review of the train split is ")
    assert said[2].startswith("the one review of the test split is ")
    fine = preprocess([_corpus(tmp_path, 200)])
    assert fine["stats"]["warnings"] == []


def test_a_one_class_split_is_found_chunk_by_chunk(tmp_path: Path) -> None:
    """The check read a split's labels whole (≈ 20 M at the corpus's size); it now reads a
    chunk at a time and stops once both classes showed, and still finds a split whose other
    class is only in its last chunk, or nowhere."""
    from engine.preprocess.quality import one_class_splits

    def splits(train: list[int], test: list[int]) -> list[str]:
        path = tmp_path / "dataset.h5"
        with h5py.File(path, "w") as fh:
            for name, labels in (("train", train), ("test", test)):
                chunks = (min(4, len(labels)),)
                fh.create_dataset(f"{name}/labels", data=np.array(labels, "u1"), chunks=chunks)
        return [w["message"].split(":")[0] for w in one_class_splits(path)]

    assert splits([1] * 11 + [0], [0, 1]) == []  # the negative in the third chunk
    assert splits([1] * 12, [0] * 9) == [
        "all 12 reviews of the train split are positive",
        "all 9 reviews of the test split are negative",
    ]


def test_gzip_and_plain_inputs_agree(tmp_path: Path, preprocess: Run) -> None:
    plain = _corpus(tmp_path, 500)
    gz = tmp_path / "c.jsonl.gz"
    import gzip

    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = preprocess([plain]), preprocess([gz])
    assert_same_dataset(a, b)
    assert json.loads((a["out"] / "stats.json").read_text())["read"] == 500


def test_imdb_layout_uses_its_ten_star_scale(tmp_path: Path, preprocess: Run) -> None:
    rows = [("A wonderful film", 9), ("Dull and slow", 2), ("Mixed feelings", 5), ("Great", 10)]
    lines = [
        json.dumps({"id": i, "label": int(r > 5), "rating": r, "text": t}).encode()
        for i, (t, r) in enumerate(rows)
    ]
    path = write_lines(tmp_path / "imdb.jsonl", lines)
    got = preprocess([path], test_fraction=0.0)
    assert got["stats"]["skipped_total"] == 0
    assert (got["stats"]["positive"], got["stats"]["negative"]) == (3, 1)  # 5 > negative_max 4
    strict = preprocess([path], test_fraction=0.0, negative_max=5)
    assert (strict["stats"]["positive"], strict["stats"]["negative"]) == (2, 2)
    assert strict["vocab"]["settings"]["specs"][0]["negative_max"] == 5
    with pytest.raises(InputError, match=r"--negative-max 10: .* 1\.\.9 \(the scale of .*imdb"):
        preprocess([path], negative_max=10)
    with pytest.raises(InputError, match=r"--rating-max 1: the highest rating must be above"):
        preprocess([path], rating_max=1)


def test_append_summary_and_fine_food_fields(tmp_path: Path, preprocess: Run) -> None:
    line = json.dumps({"Id": 1, "Score": 4, "Text": "Tasty snack", "Summary": "Yummy"}).encode()
    low = json.dumps({"Id": 2, "Score": 1, "Text": "Snack", "Summary": "Tasty"}).encode()
    path = write_lines(tmp_path / "food.jsonl", [line, low])  # both classes
    plain = preprocess([path], test_fraction=0.0)
    both = preprocess([path], test_fraction=0.0, append_summary=True)
    assert plain["vocab"]["itos"][2:] == ["snack", "tasty"]
    assert both["vocab"]["itos"][2:] == ["snack", "tasty", "yummy"]
    assert both["vocab"]["settings"]["specs"][0]["summary_field"] == "Summary"
