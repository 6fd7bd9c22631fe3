"""`sentitop eval` / `predict` as a new user meets them: long texts shown short, files that are
not what the command reads, one-class files, other kinds of run folders, and --json warnings."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from engine.config import ModelConfig, PreprocessConfig, TrainConfig
from tui.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny finished run on synthetic reviews (no real data needed)."""
    from engine.preprocess import run_preprocess
    from engine.sentiment.trainer import DistEnv, Trainer
    from engine.synth import generate

    base = tmp_path_factory.mktemp("edges")
    raw, data, run = base / "reviews.jsonl", base / "data", base / "run"
    generate(raw, 300_000, seed=3, distinct=0.9)
    run_preprocess(
        PreprocessConfig(inputs=[str(raw)], output=str(data), workers=1, vocab_size=500, seq_len=40)
    )
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=2,
        batch_size=32,
        lr=1e-2,
        warmup_steps=1,
        lr_schedule="constant",
        model=ModelConfig(preset="seed", hidden=8),
        checkpoint_every_min=0,
        pos_weight="none",
        events_file=False,
    )
    Trainer(cfg, env=DistEnv()).fit()
    return run


def _reviews(path: Path, rows: list[tuple[str, float]]) -> Path:
    path.write_text("".join(json.dumps({"reviewText": t, "overall": r}) + "\n" for t, r in rows))
    return path


def test_preview_is_one_short_line() -> None:
    from tui.cli.commands import PREVIEW_CHARS, preview

    assert preview("great guitar") == "great guitar"
    assert preview("a\tb\r\nc \x1b[31mred") == "a b c \\x1b[31mred"  # no raw escape sequence
    long = preview("word " * 200_000)
    assert len(long) <= PREVIEW_CHARS and long.endswith("… (1,000,000 chars)")


def test_predict_does_not_echo_a_megabyte_text(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed the whole 1 MB text back on the terminal; --json keeps the text (a machine
    format, joined back by its callers) beside the preview and where each text came from."""
    big = "works great, love it " * 50_000
    (tmp_path / "texts.txt").write_text(f"short one\n\n{big}\n")
    assert main(["predict", str(trained_run), "--input", str(tmp_path / "texts.txt")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].endswith("  short one")
    assert len(out[1]) < 100 and "(1,049,999 chars)" in out[1]
    assert main(["predict", str(trained_run), "first", "--input", str(tmp_path / "texts.txt"),
                 "--json"]) == 0  # fmt: skip
    raw = capsys.readouterr().out
    rows = json.loads(raw)
    assert rows[2]["text"] == big.strip() and rows[0]["text"] == "first"
    assert [(r["index"], r["line"], r["chars"]) for r in rows] == [
        (0, None, 5),
        (1, 1, 9),
        (2, 3, len(big.strip())),
    ]
    assert rows[1]["preview"] == "short one" and 0.0 <= rows[2]["p_positive"] <= 1.0


def test_predict_refuses_a_file_of_review_records(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It scored each JSON line, field names and all, as if it were a review's text."""
    path = _reviews(tmp_path / "r.jsonl", [("great guitar", 5.0), ("broke", 1.0)])
    assert main(["predict", str(trained_run), "--input", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{path}, line 1: a JSON record" in captured.err and "sentitop eval" in captured.err


def test_predict_reads_a_gzip_text_file_and_names_an_empty_one(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .gz text file was "line 1: not UTF-8 text"; an empty file was "no text to score"."""
    packed = tmp_path / "texts.txt.gz"
    packed.write_bytes(gzip.compress(b"great guitar\n\nbroke in a day\n"))
    assert main(["predict", str(trained_run), "--input", str(packed)]) == 0
    assert [line.split("  ", 1)[1] for line in capsys.readouterr().out.splitlines()] == [
        "great guitar",
        "broke in a day",
    ]
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["predict", str(trained_run), "--input", str(empty)]) == 2
    assert f"{empty}: no text to score (the file is empty" in capsys.readouterr().err


def test_eval_of_one_class_says_so_in_text_and_json(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It warned "the model is no better than the majority class" even at 100 % accuracy, and
    --json carried no warning at all."""
    path = _reviews(tmp_path / "pos.jsonl", [(f"great product number {i}", 5.0) for i in range(9)])
    assert main(["eval", str(trained_run), "--input", str(path)]) == 0
    captured = capsys.readouterr()
    assert "roc_auc n/a (one class)" in captured.out
    assert "all 9 reviews are positive (one class): ROC AUC is undefined" in captured.err
    assert "no better than the majority class" not in captured.err
    assert main(["eval", str(trained_run), "--input", str(path), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["auc"] is None and metrics["from_checkpoint"] is None
    assert any("one class" in w for w in metrics["warnings"])


def test_eval_json_names_checkpoint_weights(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed mid-training (checkpoints only): --json said nothing of where the weights
    came from."""
    killed = tmp_path / "killed"
    shutil.copytree(trained_run, killed)
    (killed / "model.pt").unlink()
    (killed / "summary.json").unlink()
    if not (killed / "checkpoints").is_dir():
        pytest.skip("the fixture run wrote no checkpoint")
    path = _reviews(tmp_path / "m.jsonl", [("great", 5.0), ("awful broke", 1.0)])
    assert main(["eval", str(killed), "--input", str(path), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert "model.pt is missing" in metrics["from_checkpoint"]
    assert metrics["from_checkpoint"] in metrics["warnings"]


def test_eval_says_a_file_is_empty_and_that_stdin_is_not_read(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert main(["eval", str(trained_run), "--input", str(empty)]) == 2
    assert f"no usable review in {empty} ({empty} is empty: 0 bytes)" in capsys.readouterr().err
    assert main(["eval", str(trained_run), "--input", "-"]) == 2  # was "- not found"
    assert "--input -: eval reads review files, not stdin" in capsys.readouterr().err
    fifo = tmp_path / "reviews.fifo"  # there, but not a file: not "not found"
    os.mkfifo(fifo)
    assert main(["eval", str(trained_run), "--input", str(fifo)]) == 2
    assert f"{fifo} is not a regular file" in capsys.readouterr().err
    assert main(["eval", str(trained_run), "--input", str(tmp_path / "gone.jsonl")]) == 2
    assert f"{tmp_path / 'gone.jsonl'} not found" in capsys.readouterr().err


def test_eval_takes_the_run_after_its_input_files(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval --input a.jsonl b.jsonl RUN` failed with "the following arguments are required:
    RUN" (--input took every path); the run after the files is used, the files scored alone."""
    rows = [("great", 5.0), ("awful broke", 1.0)]
    a, b = _reviews(tmp_path / "a.jsonl", rows), _reviews(tmp_path / "b.jsonl", rows)
    assert main(["eval", "--input", str(a), str(b), str(trained_run), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert main(["eval", str(trained_run), "--input", str(a), str(b), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert after["lines"] == before["lines"] == 4 and after["accuracy"] == before["accuracy"]
    assert main(["eval", "--input", str(a), str(b)]) == 2  # no run among them: said so
    err = capsys.readouterr().err
    assert "no RUN given" in err and "sentitop eval RUN --input" in err
    assert main(["eval", "--input", str(trained_run)]) == 2  # a lone path is the input
    assert "no RUN given" in capsys.readouterr().err


@pytest.fixture(scope="module")
def embeddings_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished `sentitop embed --mode svd` run (word vectors, no classifier)."""
    from engine.synth import generate

    base = tmp_path_factory.mktemp("embed")
    generate(base / "reviews.jsonl", 200_000, seed=4, distinct=0.9)
    rc = main(["embed", "--input", str(base / "reviews.jsonl"), "--run-dir", str(base / "emb"),
               "--mode", "svd", "--dim", "8"])  # fmt: skip
    assert rc == 0
    return base / "emb"


@pytest.mark.parametrize("command", ["eval", "predict"])
def test_an_embeddings_run_is_named_as_such(
    command: str, embeddings_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no run folder with model.json", as for a typo."""
    reviews = _reviews(tmp_path / "r.jsonl", [("great", 5.0), ("awful broke", 1.0)])
    capsys.readouterr()
    given = ["--input", str(reviews)] if command == "eval" else ["great"]
    assert main([command, str(embeddings_run), *given]) == 2
    err = capsys.readouterr().err
    assert f"{embeddings_run} is an embeddings run (`sentitop embed`)" in err
    assert "--model-init-embeddings" in err


def test_eval_reads_files_with_a_0_1_label(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file labelled 0/1 could not be evaluated: --rating-field label read 0 as out of the
    1..5 range and 1 as negative. `text` + `label` files are recognised; other names are
    given with --label-field; naming both a rating and a label field is refused."""
    rows = [("great product, love it", 1), ("terrible, it broke", 0), ("works well", 1)]
    plain = tmp_path / "binary.jsonl"
    plain.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    assert main(["eval", str(trained_run), "--input", str(plain), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 3 and metrics["majority_rate"] == pytest.approx(2 / 3)
    named = tmp_path / "named.jsonl"
    named.write_text(
        "".join(json.dumps({"review": t, "sentiment": y, "stars": 3}) + "\n" for t, y in rows)
    )
    argv = ["eval", str(trained_run), "--input", str(named), "--text-field", "review"]
    assert main([*argv, "--label-field", "sentiment", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["n"], again["majority_rate"]) == (3, metrics["majority_rate"])
    assert main([*argv, "--label-field", "sentiment", "--rating-field", "stars"]) == 2
    assert "both name the label" in capsys.readouterr().err


def test_eval_refuses_a_star_rating_read_as_a_0_1_label(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval --label-field overall` on 1-5 star reviews skipped 97 % of the lines, read the
    1★ ones as positive and printed "accuracy 0.8750" with exit 0. A label field that is not
    0/1 on many lines is an error naming the field, a line and its value; a few such lines
    among 0/1 labels stay skipped lines."""
    stars = _reviews(
        tmp_path / "stars.jsonl", [(f"review {i} works", 5.0 - i % 5) for i in range(20)]
    )
    argv = ["eval", str(trained_run), "--input", str(stars), "--label-field", "overall"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field `overall` holds values other than 0/1 on 16 of 20 lines" in err
    assert f"(e.g. {stars}:1 value 5.0): it looks like a rating" in err
    assert "--rating-field overall" in err
    rows = [(f"great review {i}", float(i % 2)) for i in range(20)] + [("odd one", 3.0)]
    mostly = _reviews(tmp_path / "mostly.jsonl", rows)
    argv = ["eval", str(trained_run), "--input", str(mostly), "--label-field", "overall"]
    assert main([*argv, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 20 and metrics["skipped"] == {"rating_out_of_range": 1}


def test_confident_misses_orders_wrong_decisions_by_confidence() -> None:
    """Only wrong decisions, the farthest from the threshold first, ties in input order,
    at most ``count``; where each came from travels with it."""
    import numpy as np

    from engine.sentiment.misses import confident_misses

    proba = np.array([0.9, 0.2, 0.6, 0.1, 0.4, 0.6])
    labels = np.array([1, 1, 0, 0, 0, 0])
    texts = ["right", "miss 0.2", "miss 0.6 a", "right", "right", "miss 0.6 b"]
    where = [("f", n) for n in range(1, 7)]
    listed = confident_misses(proba, labels, texts, where, 5)
    assert [m["text"] for m in listed] == ["miss 0.2", "miss 0.6 a", "miss 0.6 b"]
    assert [(m["line"], m["label"]) for m in listed] == [(2, 1), (3, 0), (6, 0)]
    assert [m["text"] for m in confident_misses(proba, labels, texts, where, 1)] == ["miss 0.2"]
    assert confident_misses(proba, labels, texts, where, 0) == []


def test_a_text_wrong_at_several_lines_is_listed_once() -> None:
    """`--misses 3` listed one duplicated review three times (lines 114, 2229 and 27)."""
    import numpy as np

    from engine.sentiment.misses import confident_misses

    proba = np.array([0.05, 0.05, 0.3, 0.05, 0.4])
    labels = np.array([1, 1, 1, 1, 1])
    texts = ["same", "same", "other", "same", "third"]
    where = [("f", n) for n in (114, 2229, 50, 27, 60)]
    listed = confident_misses(proba, labels, texts, where, 2)
    assert [(m["text"], m["line"], m["repeats"]) for m in listed] == [
        ("same", 114, 2),
        ("other", 50, 0),
    ]


def test_eval_misses_point_at_the_lines_that_were_decided_wrong(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval --misses N` lists the most confident mistakes with the file and line of each
    (a blank and a broken line before them do not shift the numbers), in text and JSON; a
    negative N is a usage error."""
    texts = ["great product, love it", "terrible, it broke", "works well", "awful, returned it"]
    lines = [json.dumps({"reviewText": t, "overall": r}) for t in texts for r in (5.0, 1.0)]
    lines[2:2] = ["", "{broken"]  # every text once with each label: one of each pair is wrong
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["eval", str(trained_run), "--input", str(path), "--misses", "3", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    (_, fp), (fn, _) = metrics["confusion"]
    assert (metrics["n"], fp + fn) == (8, 4) and len(metrics["misses"]) == 3
    file_lines = path.read_text().split("\n")
    for miss in metrics["misses"]:
        record = json.loads(file_lines[miss["line"] - 1])
        assert miss["file"] == str(path)
        assert miss["text"] == record["reviewText"].replace(",", "")
        assert miss["label"] == int(record["overall"] > 3)
        assert (miss["p_positive"] > 0.5) != bool(miss["label"])
    margins = [abs(m["p_positive"] - 0.5) for m in metrics["misses"]]
    assert margins == sorted(margins, reverse=True)
    assert main(["eval", str(trained_run), "--input", str(path), "--misses", "2"]) == 0
    out = capsys.readouterr().out
    assert "most confident mistakes (2 of 4; text as the model read it)" in out
    first = metrics["misses"][0]
    assert f"{first['p_positive']:.4f}  {path}:{first['line']}  {first['text']}" in out
    with pytest.raises(SystemExit) as exited:
        main(["eval", str(trained_run), "--input", str(path), "--misses", "-1"])
    assert exited.value.code == 2
    assert "--misses: '-1': expected an integer >= 0" in capsys.readouterr().err


def test_predict_refuses_a_text_argument_that_is_not_utf8(
    trained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Latin-1 bytes on the command line reached the model as a lone surrogate ("caf\\udce9")
    and --json printed it; the same bytes in an --input file were refused."""
    assert main(["predict", str(trained_run), "fine", "caf\udce9 great"]) == 2
    err = capsys.readouterr().err
    assert "TEXT 2 is not UTF-8 text (a byte that is not UTF-8 at character 4)" in err


def test_predict_and_eval_say_when_a_text_is_longer_than_the_model_reads(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial's 983-character review scored exactly as its neutral first half: the model reads
    the run's seq_len words (40 here), as in training, and nothing said so. Now predict names
    the texts cut (and --json gives words and words_read), eval counts them."""
    opening = " ".join(f"plain{i % 7} word{i}" for i in range(30))  # 60 words, all neutral
    long_bad = f"{opening} terrible broke awful returned junk"
    argv = ["predict", str(trained_run), "broke junk", long_bad, opening]
    assert main(argv) == 0
    shown = capsys.readouterr()
    scores = [float(line.split()[0]) for line in shown.out.splitlines()]
    assert scores[1] == scores[2]  # the ending past word 40 is not read: the note is true
    assert "note: 2 of 3 texts are longer than the 40 words the model reads (texts 2, 3)" in (
        shown.err
    )
    assert main([*argv[:4], "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["words"], r["words_read"]) for r in rows] == [(2, 2), (65, 40)]
    assert main(argv[:4]) == 0
    assert "note: 1 of 2 texts is longer than the 40 words the model reads (text 2)" in (
        capsys.readouterr().err
    )
    assert main(["predict", str(trained_run), "broke junk"]) == 0
    assert "longer than" not in capsys.readouterr().err

    path = _reviews(tmp_path / "r.jsonl", [(long_bad, 1.0), ("great", 5.0), (opening, 5.0)])
    assert main(["eval", str(trained_run), "--input", str(path)]) == 0
    assert "note: 2 of 3 texts (66.7%) are longer than the 40 words" in capsys.readouterr().out
    assert main(["eval", str(trained_run), "--input", str(path), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert (metrics["longer_than_read"], metrics["seq_len"]) == (2, 40)


def test_eval_of_a_file_that_is_not_gzip_under_a_gz_name_says_so(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only "skipped: 2 invalid_utf8", with the hint to name the text fields."""
    import bz2

    packed = tmp_path / "reviews.jsonl.gz"
    packed.write_bytes(bz2.compress(_reviews(tmp_path / "m.jsonl", [("great", 5.0)]).read_bytes()))
    assert main(["eval", str(trained_run), "--input", str(packed)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"hint: {packed} is named .gz but is not gzip (no gzip header)" in err


def test_an_unreadable_input_is_bad_input_not_a_traceback(
    trained_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`eval` and `embed` on a file the user may not read ended in a PermissionError traceback
    (in is_gzip), exit 1; preprocess, predict and run said "cannot read input …"."""
    folder = tmp_path / "in"
    folder.mkdir()
    _reviews(folder / "a.jsonl", [("great", 5.0), ("awful", 1.0)] * 5)
    locked = _reviews(folder / "b.jsonl", [("fine", 4.0)] * 5)
    import engine.embeddings.sources
    import engine.preprocess.readers
    from tests.unreadable import refuse_reading

    refuse_reading(monkeypatch, locked, engine.preprocess.readers, engine.embeddings.sources)
    for argv in (
        ["eval", str(trained_run), "--input", str(folder)],
        ["eval", str(trained_run), "--input", str(locked)],
        ["embed", "--input", str(locked), "--run-dir", str(tmp_path / "emb"), "--mode", "svd"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"cannot read input {locked}: Permission denied" in err and "Traceback" not in err


def test_lines_longer_than_the_runs_limit_name_the_option_that_reads_them(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of reviews over 1 MB a line: "no usable review (skipped: 2 too_long)" with the hint
    to name fields, and eval had no way to read them."""
    long = _reviews(tmp_path / "long.jsonl", [("great " * 200_000, 5.0), ("bad " * 300_000, 1.0)])
    argv = ["eval", str(trained_run), "--input", str(long)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "2 too_long" in err and "--max-line-bytes" in err and "--text-field" not in err
    assert main([*argv, "--max-line-bytes", "4000000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 2
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--max-line-bytes", "0"])
    assert exited.value.code == 2 and "--max-line-bytes" in capsys.readouterr().err
