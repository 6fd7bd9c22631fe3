"""eval/predict on a real review file, through the preprocessing of the run's dataset."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.config import ModelConfig, PreprocessConfig, TrainConfig
from engine.sentiment.trainer import DistEnv, Trainer

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT.parent / "shared" / "data" / "amazon2018_Appliances_5.jsonl.gz"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not REAL.is_file(), reason="real data folder not mounted"),
]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.preprocess import run_preprocess

    base = tmp_path_factory.mktemp("real")
    data, run = base / "data", base / "run"
    run_preprocess(
        PreprocessConfig(
            inputs=[str(REAL)],
            output=str(data),
            workers=1,
            vocab_size=500,
            seq_len=40,
            preset="stopwords",  # 40 content words: the 12-step hidden-8 model learns from them
        )
    )
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=3,
        batch_size=32,
        lr=1e-2,
        warmup_steps=1,
        lr_schedule="constant",  # 12 steps: a decaying rate would barely move the tiny model
        model=ModelConfig(preset="seed", hidden=8),
        checkpoint_every_min=0,
        pos_weight="none",
        events_file=False,
    )
    Trainer(cfg, env=DistEnv()).fit()
    return run


def _cli(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_eval_scores_every_usable_review_of_a_real_file(trained_run: Path) -> None:
    metrics = json.loads(_cli("eval", str(trained_run), "--input", str(REAL), "--json"))
    with gzip.open(REAL, "rt") as fh:
        lines = sum(1 for line in fh if line.strip())
    assert 0.9 * lines <= metrics["n"] <= lines
    (tn, fp), (fn, tp) = metrics["confusion"]
    assert tn + fp + fn + tp == metrics["n"]
    assert metrics["accuracy"] == pytest.approx((tn + tp) / metrics["n"])
    # 1-2★ are rare in this file: a trained model beats guessing "negative" for everything
    assert metrics["accuracy"] > (tn + fp) / metrics["n"]


def test_predict_gives_probabilities_that_match_eval(trained_run: Path) -> None:
    from engine.sentiment.evaluate import load_run, predict_proba, read_labelled

    run = load_run(trained_run)
    texts, _ = read_labelled(run, [str(REAL)])
    proba = predict_proba(run, texts[:50], batch_size=7)  # batching does not change results
    assert np.allclose(proba, predict_proba(run, texts[:50]), atol=1e-6)
    assert ((proba >= 0) & (proba <= 1)).all()
    lines = _cli("predict", str(trained_run), texts[0], "works great, love it").splitlines()
    assert len(lines) == 2
    assert float(lines[0].split()[0]) == pytest.approx(proba[0], abs=1e-4)


def test_eval_names_a_missing_run_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "eval", str(tmp_path), "--input", str(REAL)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "model.json" in out.stderr


def test_adapting_a_model_that_learned_nothing_is_refused(trained_run: Path) -> None:
    """The module's tiny model does not beat its validation majority: eval still scores, names
    no prior, and --adapt-prior is a clear error rather than a batch called all-negative."""
    plain = json.loads(_cli("eval", str(trained_run), "--input", str(REAL), "--json"))
    assert plain["prior"] is None or abs(plain["prior"]["target_rate"] - 0.5) < 0.5
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "eval", str(trained_run), "--input", str(REAL),
         "--adapt-prior"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 2 and "does not beat the majority rate" in out.stderr


def test_predict_scores_a_file_and_names_bad_lines(trained_run: Path, tmp_path: Path) -> None:
    lines = tmp_path / "texts.txt"
    lines.write_text("".join(f"review {i}: works great, love it\n\n" for i in range(60)))
    scored = _cli("predict", str(trained_run), "one more", "--input", str(lines))
    rows = scored.splitlines()
    assert (
        len(rows) == 61
        and rows[0].endswith("one more")
        and rows[-1].endswith("review 59: works great, love it")
    )
    (tmp_path / "latin1.txt").write_bytes(b"ok\ncaf\xe9\n")
    garbled = subprocess.run(
        [sys.executable, "-m", "tui.cli", "predict", str(trained_run), "--input",
         str(tmp_path / "latin1.txt")],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert garbled.returncode == 2 and "latin1.txt, line 2: not UTF-8" in garbled.stderr
    empty = subprocess.run(
        [sys.executable, "-m", "tui.cli", "predict", str(trained_run)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert empty.returncode == 2 and "no text to score" in empty.stderr
    # texts may follow the options too; an unknown option is still an error
    after = json.loads(_cli("predict", str(trained_run), "--json", "one more", "and another"))
    assert [row["text"] for row in after] == ["one more", "and another"]
    unknown = subprocess.run(
        [sys.executable, "-m", "tui.cli", "predict", str(trained_run), "fine", "--bogus"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert unknown.returncode == 2 and "unrecognized arguments: --bogus" in unknown.stderr


def test_predict_warns_about_texts_with_no_word_the_model_knows(trained_run: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "predict", str(trained_run), "--json",
         "works great, love it", "qwxz zzvq", "!!!"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [row["known_words"] > 0 for row in rows] == [True, False, False]
    assert "2 of 3 texts have no word the model knows (texts 2, 3)" in out.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "tui.cli", "predict", str(trained_run), "works great, love it"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert quiet.returncode == 0 and "no word the model knows" not in quiet.stderr
