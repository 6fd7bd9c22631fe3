"""Data-quality gates: input no result can come from is refused (exit 2, naming the file, nothing
written as done) by preprocess, train and run; a suspicious one is warned about loudly."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.events import read_events
from engine.sentiment.splits import majority_check
from tests.bad_inputs import BAD_INPUTS, labelled_dataset
from tui.cli import main


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_preprocess_refuses_unusable_input(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = BAD_INPUTS[kind](tmp_path)
    out = tmp_path / "out"
    rc = main(["preprocess", "-i", str(path), "-o", str(out), "--workers", "1", "--json"])
    captured = capsys.readouterr()
    assert rc == 2
    assert str(path) in captured.err and "bad input" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""  # no stats: nothing is done
    assert not any((out / name).exists() for name in ("dataset.h5", "stats.json", "vocab.json"))


def test_preprocess_says_what_was_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reasons = {
        "empty file": "empty input",
        "garbage bytes": "invalid_utf8",
        "all one class": "all 200 usable reviews are positive",
        "100% skipped lines": "200 rating_out_of_range (rating field `overall` outside 1..5",
        "truncated gzip": "not a readable gzip file (Compressed file ended",
        "damaged gzip": "not a readable gzip file",
    }
    for kind, reason in reasons.items():
        path = BAD_INPUTS[kind](tmp_path)
        assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o"), "--json"]) == 2
        assert reason in capsys.readouterr().err, kind


def test_one_class_left_says_what_was_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """600 lines, 400 of them out of the rating range: "all 200 usable reviews are positive",
    with nothing about the 400 lines skipped, the likelier cause (their ratings, 0 and 6)."""
    path = tmp_path / "r.jsonl"
    rows = [("good stuff number %d", 5), ("odd one %d", 6), ("zero %d", 0)]
    path.write_text("".join(
        json.dumps({"reviewText": text % i, "overall": stars}) + "\n"
        for i in range(200) for text, stars in rows
    ))  # fmt: skip
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o"), "--json"]) == 2
    err = capsys.readouterr().err
    assert "all 200 usable reviews are positive" in err
    assert "400 of the 600 lines were skipped: 400 rating_out_of_range" in err
    assert "outside 1..5" in err  # the reason, as the no-usable-review error gives it


@pytest.mark.parametrize(
    ("line", "args", "hint"),
    [
        ("x" * 3000, ["--max-line-bytes", "2000"],
         "its lines are longer than --max-line-bytes (2,000 bytes; in a profile "
         "preprocess.max_line_bytes): raise it if they are reviews"),
        ("the and of it", ["--preset", "seed"],
         "--preset seed drops stopwords, and these reviews hold nothing else: --preset default "
         "keeps every word"),
    ],
)  # fmt: skip
def test_input_skipped_for_a_setting_names_that_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, args: list[str], hint: str
) -> None:
    """Both hinted at the file format (--format, --text-field, ...), which was not the cause."""
    path = tmp_path / "in.jsonl"
    words = ["the", "and", "of", "it", "a", "an", "is", "was"]  # distinct texts, stopwords only
    rows = [json.dumps({"reviewText": f"{line} {i}" if "x" in line else " ".join(words[: i + 1]),
                        "overall": i % 5 + 1}) for i in range(8)]  # fmt: skip
    path.write_text("\n".join(rows) + "\n")
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o"), *args]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"hint: {hint}" in err and "--text-field" not in err


def _mixed(path: Path, *, good: int, bad: int, negatives: int) -> Path:
    rows = [
        json.dumps({"reviewText": f"fine sturdy item {i}", "overall": 1 if i < negatives else 5})
        for i in range(good)
    ]
    path.write_text("\n".join(rows + ["{not json"] * bad) + "\n")
    return path


def test_high_skipped_share_and_rare_class_warn_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _mixed(tmp_path / "m.jsonl", good=300, bad=100, negatives=6)  # 25 % skipped, 2 % neg.
    out = tmp_path / "out"
    assert main(["preprocess", "-i", str(path), "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    stats = json.loads(captured.out)
    codes = ["skipped_share", "class_share", "one_class_split"]  # (6 negatives: none in test)
    assert [w["code"] for w in stats["warnings"]] == codes
    assert json.loads((out / "stats.json").read_text())["warnings"] == stats["warnings"]
    assert "WARNING" in captured.err and "skipped 25% of 400 lines" in captured.err
    assert "only 2.0% of 300 usable reviews are negative" in " ".join(captured.err.split())
    # the thresholds are settings: raised past the data, no warning
    rc = main(["preprocess", "-i", str(path), "-o", str(out), "--json",
               "--max-skipped-share", "0.3", "--min-class-share", "0.01"])  # fmt: skip
    captured = capsys.readouterr()
    left = json.loads(captured.out)["warnings"]  # no threshold makes train take a one-class split
    assert rc == 0 and [w["code"] for w in left] == ["one_class_split"]
    assert "skipped" not in captured.err and "only 2.0%" not in captured.err


def test_preprocess_events_carry_the_warnings(tmp_path: Path) -> None:
    from engine.config import PreprocessConfig
    from engine.events import Emitter, JsonlFileSink
    from engine.preprocess import run_preprocess

    path = _mixed(tmp_path / "m.jsonl", good=300, bad=100, negatives=100)
    sink = JsonlFileSink(tmp_path / "events.jsonl")
    run_preprocess(PreprocessConfig(inputs=[str(path)], output=str(tmp_path / "o")), Emitter(sink))
    sink.close()
    warnings = [e for e in read_events(tmp_path / "events.jsonl") if e["type"] == "warning"]
    assert [(w["stage"], w["code"]) for w in warnings] == [("preprocess", "skipped_share")]


SPLITS = {
    "empty dataset (empty file, garbage, all skipped)": ([], [], "train split is empty"),
    "one-class train split": ([1] * 40, [0, 1] * 5, "all 40 reviews of the train split are pos"),
    "empty test split": ([0, 1] * 20, [], "test split is empty"),
    "one-class test split": ([0, 1] * 20, [0] * 6, "all 6 reviews of the test split are neg"),
}


@pytest.mark.parametrize("case", sorted(SPLITS))
def test_train_refuses_empty_or_one_class_splits(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, test, reason = SPLITS[case]
    data = labelled_dataset(tmp_path / "data", train, test)
    run_dir = tmp_path / "run"
    rc = main(["train", "--data", str(data), "--run-dir", str(run_dir), "--epochs", "1"])
    captured = capsys.readouterr()
    assert rc == 2
    assert str(data / "dataset.h5") in captured.err and reason in captured.err
    assert "accuracy" not in captured.out and not (run_dir / "summary.json").exists()


@pytest.mark.slow
def test_a_rank_refuses_a_one_class_split_too(tmp_path: Path) -> None:
    """What `sentitop run` and torchrun start: the rank itself exits 2 before training."""
    from engine.sentiment.train import main as rank_main

    data = labelled_dataset(tmp_path / "data", [1] * 40, [0, 1] * 5)
    rc = rank_main(["--data", str(data), "--run-dir", str(tmp_path / "run"), "--epochs", "1"])
    assert rc == 2
    errors = [e for e in read_events(tmp_path / "run" / "events.jsonl") if e["type"] == "error"]
    assert "train split are positive" in errors[0]["message"]


def test_train_nproc_0_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = labelled_dataset(tmp_path / "data", [0, 1] * 20, [0, 1] * 5)
    rc = main(["train", "--data", str(data), "--run-dir", str(tmp_path / "r"), "--nproc", "0"])
    assert rc == 2 and "--nproc = 0 must be >= 1" in capsys.readouterr().err


def test_majority_check() -> None:
    assert majority_check(None, None) == {"majority_rate": None, "warnings": []}
    good = majority_check([[40, 10], [5, 45]], 0.85)  # 50/50 split, 85 % right
    assert good == {"majority_rate": 0.5, "warnings": []}
    lazy = majority_check([[0, 30], [0, 70]], 0.7)  # always positive on a 70 % positive split
    assert lazy["majority_rate"] == pytest.approx(0.7)
    (warning,) = lazy["warnings"]
    assert warning["code"] == "below_majority"
    assert "always answering positive" in warning["message"]


@pytest.mark.slow
def test_a_run_that_learned_nothing_says_so(tmp_path: Path) -> None:
    """Every review holds the same token: the model can only answer one class."""
    from engine.sentiment.train import main as rank_main

    data = labelled_dataset(tmp_path / "data", [1, 1, 0] * 30, [1, 1, 1, 0] * 5)
    run = tmp_path / "run"
    argv = ["--data", str(data), "--run-dir", str(run), "--epochs", "1"]
    assert rank_main([*argv, "--warmup-steps", "0"]) == 0  # a 1-step run: no warmup_long too
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok"  # a warning, not a failure
    assert summary["majority_rate"] == pytest.approx(0.75)
    assert summary["accuracy"] <= 0.75
    assert [w["code"] for w in summary["warnings"]] == ["below_majority"]
    events = [e for e in read_events(run / "events.jsonl") if e["type"] == "warning"]
    assert events and events[0]["code"] == "below_majority" and events[0]["stage"] == "train"


def _synthetic_profile(path: Path, synthetic: str) -> Path:
    path.write_text(
        f"name: tiny\nprovider: local\ndata:\n  synthetic: {synthetic}\n"
        "preprocess: {vocab_size: 500, seq_len: 24}\n"
        "train: {nproc: 1, epochs: 1, batch_size: 16, threads: 1, checkpoint_every_min: 0}\n"
    )
    return path


def test_too_small_synthetic_data_names_the_profile_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """300KB at the corpus's duplicate rate keeps 53 reviews and 1 test review: exit 2 before
    any rank starts, with a hint at the profile's own settings (not "preprocess more")."""
    profile = _synthetic_profile(tmp_path / "p.yaml", "{size: 300KB, seed: 1}")
    rc = main(["run", str(profile), "--runs-dir", str(tmp_path / "runs"), "--json"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "test split" in err and "data.synthetic.distinct" in err and "53 reviews kept" in err
    (run,) = (tmp_path / "runs").iterdir()
    assert not (run / "train").exists() or not any((run / "train").iterdir())


def test_synthetic_distinct_share_reaches_the_generator(tmp_path: Path) -> None:
    from engine.events import Emitter
    from remote.datasets import synthetic_inputs
    from remote.profile import load_profile

    plain = load_profile(_synthetic_profile(tmp_path / "a.yaml", "{size: 100KB, seed: 1}"))
    varied = load_profile(
        _synthetic_profile(tmp_path / "b.yaml", "{size: 100KB, seed: 1, distinct: 0.9}")
    )
    emitter = Emitter(None)

    def distinct_share(profile: object) -> float:
        (path,) = synthetic_inputs(profile, emitter)  # type: ignore[arg-type]
        texts = []
        for line in Path(path).read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):  # malformed on purpose
                texts.append(json.loads(line)["reviewText"])
        return len(set(texts)) / len(texts)

    assert distinct_share(plain) < 0.4 < 0.8 < distinct_share(varied)
    bad = _synthetic_profile(tmp_path / "c.yaml", "{size: 100KB, distinct: 0}")
    with pytest.raises(Exception, match="distinct"):
        load_profile(bad)


def test_a_cached_dataset_of_a_folder_is_redone_when_a_file_in_it_changes(tmp_path: Path) -> None:
    """The cache key stamps the folder's review files, not the folder (whose mtime does not
    change when a file in it is rewritten)."""
    import os

    from engine.config import PreprocessConfig
    from remote.datasets import dataset_key

    folder = tmp_path / "reviews"
    folder.mkdir()
    review = folder / "a.jsonl"
    review.write_text('{"reviewText": "good", "overall": 5}\n')
    cfg = PreprocessConfig(inputs=[str(folder)], output=str(tmp_path / "out"))
    before = dataset_key(cfg)
    folder_mtime = folder.stat().st_mtime_ns
    review.write_text('{"reviewText": "bad and longer", "overall": 1}\n')
    os.utime(review, (1, 1))
    assert folder.stat().st_mtime_ns == folder_mtime
    assert dataset_key(cfg) != before


def test_a_setting_added_later_keeps_the_cached_datasets_key_at_its_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """title_rows came after datasets were cached: off, it must not change the key (a cached
    92 GB corpus preprocessed again after an upgrade); on, it must."""
    from engine import config as engine_config
    from engine.config import PreprocessConfig
    from remote.datasets import dataset_key

    review = tmp_path / "a.jsonl"
    review.write_text('{"reviewText": "good", "overall": 5, "summary": "fine"}\n')
    cfg = PreprocessConfig(inputs=[str(review)], output=str(tmp_path / "out"))
    current = dataset_key(cfg)
    assert dataset_key(replace(cfg, title_rows=True)) != current
    real = engine_config.config_to_dict

    def without_title_rows(c: object) -> dict[str, object]:
        out = dict(real(c))  # type: ignore[arg-type]
        out.pop("title_rows", None)
        return out

    monkeypatch.setattr("remote.datasets.config_to_dict", without_title_rows)
    assert dataset_key(cfg) == current  # the key the release before title_rows computed


@pytest.mark.parametrize("layout", ["latin-1", "json array", "pretty json array", "not gzip"])
def test_unusable_input_gets_the_hint_that_fixes_it(
    layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial's Latin-1 file ("200 invalid_utf8") and JSON-array file ("not_an_object") were
    told to check --text-field / --format, which fixes neither."""
    rows = [{"reviewText": f"café number {i} was fine", "overall": 5 - i % 5} for i in range(20)]
    path = tmp_path / ("r.jsonl.gz" if layout == "not gzip" else "r.json")
    if layout == "not gzip":  # a .gz name on other bytes: "not UTF-8 (Latin-1?)" misled
        import bz2

        path.write_bytes(bz2.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows)))
    elif layout == "latin-1":
        path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                         .encode("latin-1"))  # fmt: skip
    else:
        path.write_text(json.dumps(rows, indent=2 if layout.startswith("pretty") else None))
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o")]) == 2
    hint = " ".join(capsys.readouterr().err.split()).split("hint: ")[1]
    if layout == "not gzip":
        assert hint.startswith(f"{path} is named .gz but is not gzip (no gzip header)")
    elif layout == "latin-1":
        assert hint.startswith("the file is not UTF-8 text") and "iconv" in hint
    else:
        assert hint.startswith("the file is one JSON array, not JSON lines") and "jq -c" in hint


def test_one_review_repeated_says_the_repeats_were_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """500 identical lines read "the one usable review is positive": 499 lines gone unsaid."""
    path = tmp_path / "same.jsonl"
    line = json.dumps({"reviewText": "works great, love it", "overall": 5})
    path.write_text((line + "\n") * 500)
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o"), "--json"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the one usable review is positive (499 more of the 500 lines repeated a text)" in err


def test_binary_garbage_is_not_told_to_convert_from_latin_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random bytes got the Latin-1 hint (`iconv -f latin1`): converting them gives UTF-8 junk."""
    path = BAD_INPUTS["garbage bytes"](tmp_path)
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o")]) == 2
    hint = " ".join(capsys.readouterr().err.split()).split("hint: ")[1]
    assert hint.startswith(f"{path} is binary data, not text") and "iconv" not in hint
