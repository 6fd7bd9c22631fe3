"""`sentitop eval/predict` on reviews whose positive rate differs from the training data's:
the model's own estimate of the rate, the warning, and --adapt-prior, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

GOOD = ["great", "love", "superb", "perfect", "happy"]
BAD = ["awful", "broke", "junk", "returned", "useless"]


def _reviews(path: Path, n: int, positive: float, seed: int) -> float:
    """n reviews, ``positive`` of them 5★ with good words, the rest 1★; returns the share."""
    rng = np.random.default_rng(seed)
    pos_n = 0
    with open(path, "w") as fh:
        for i in range(n):
            pos = bool(rng.random() < positive)
            pos_n += pos
            words = rng.choice(GOOD if pos else BAD, 2)
            text = f"{words[0]} cable {i} {words[1]} item number {i % 41}"
            fh.write(json.dumps({"text": text, "rating": 5 if pos else 1}) + "\n")
    return pos_n / n


def _cli(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == code, out.stderr
    return out


def _score_with(monkeypatch: pytest.MonkeyPatch, proba: Callable[..., np.ndarray]) -> None:
    """eval and predict score with ``proba(run, texts)`` instead of the model (the rest of
    what they read of each text, its words, stays the real encoder's)."""
    import engine.sentiment.evaluate as evaluate

    real = evaluate.score_texts

    def scored(run: Any, texts: list[str], batch_size: int = 1024) -> Any:
        return real(run, texts, batch_size)._replace(proba=proba(run, texts))

    monkeypatch.setattr(evaluate, "score_texts", scored)


@pytest.fixture(scope="module")
def shift_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small run trained on reviews 80 % positive (its folder holds the run in run/)."""
    from engine.config import ModelConfig, PreprocessConfig, TrainConfig
    from engine.preprocess import run_preprocess
    from engine.sentiment.trainer import DistEnv, Trainer

    tmp_path = tmp_path_factory.mktemp("shift")
    train = tmp_path / "train.jsonl"
    _reviews(train, 600, 0.8, seed=0)
    run_preprocess(PreprocessConfig(inputs=[str(train)], output=str(tmp_path / "d"), workers=1))
    cfg = TrainConfig(
        data_dir=str(tmp_path / "d"),
        run_dir=str(tmp_path / "run"),
        epochs=8,
        batch_size=32,
        lr=2e-2,
        warmup_steps=1,
        lr_schedule="constant",
        model=ModelConfig(hidden=8, embedding_dim=8, ngram_buckets=4096),
        checkpoint_every_min=0,
        pos_weight="none",
        events_file=False,
        seed=1,
    )
    Trainer(cfg, env=DistEnv()).fit()
    return tmp_path


def test_eval_sees_a_shifted_batch_and_adapts_to_it(shift_run: Path, tmp_path: Path) -> None:
    run = str(shift_run / "run")
    summary = json.loads((shift_run / "run" / "summary.json").read_text())
    assert summary["train_positive_rate"] == pytest.approx(0.8, abs=0.05)

    shifted = tmp_path / "shifted.jsonl"
    truth = _reviews(shifted, 400, 0.3, seed=5)
    out = _cli("eval", run, "--input", str(shifted), "--json")
    plain = json.loads(out.stdout)
    assert plain["prior"]["source_rate"] == pytest.approx(summary["train_positive_rate"])
    assert plain["prior"]["target_rate"] == pytest.approx(truth, abs=0.1)
    assert "look" in out.stderr and "--adapt-prior" in out.stderr
    adapted = json.loads(
        _cli("eval", run, "--input", str(shifted), "--json", "--adapt-prior").stdout
    )
    assert (
        adapted["prior_adapted"]
        and "look" not in _cli("eval", run, "--input", str(shifted), "--adapt-prior").stderr
    )
    assert adapted["unadapted_accuracy"] == pytest.approx(plain["accuracy"])
    assert adapted["accuracy"] >= plain["accuracy"]

    same = tmp_path / "same.jsonl"
    _reviews(same, 400, 0.8, seed=6)
    quiet = _cli("eval", run, "--input", str(same), "--json")
    assert abs(json.loads(quiet.stdout)["prior"]["target_rate"] - 0.8) < 0.1
    assert "look" not in quiet.stderr

    texts = tmp_path / "texts.txt"
    texts.write_text(
        "".join(json.loads(line)["text"] + "\n\n" for line in shifted.read_text().splitlines())
    )
    scored = _cli("predict", run, "--input", str(texts), "--adapt-prior", "--json")
    rows = json.loads(scored.stdout)
    assert len(rows) == 400 and "re-weighted" in scored.stderr
    assert np.mean([r["p_positive"] > 0.5 for r in rows]) == pytest.approx(truth, abs=0.1)

    few = tmp_path / "few.txt"
    few.write_text("great item\nbroke after a week\n")
    refused = _cli("predict", run, "--input", str(few), "--adapt-prior", code=2)
    assert "at least 50 texts" in refused.stderr


def test_an_estimate_that_cannot_be_trusted_is_not_acted_on(
    shift_run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A one-epoch run's eval on reviews as positive as its training data said they "look 62 %
    positive" and advised --adapt-prior, which cost 13 points of accuracy: probabilities that
    barely separate the classes, a little low on average, as that run's were. Now no shift is
    claimed, and eval/predict --adapt-prior keep the plain probabilities and say why (exit 0)."""
    from tui.cli import main

    same = tmp_path / "same.jsonl"
    _reviews(same, 400, 0.8, seed=8)

    def weak(run: object, texts: list[str]) -> np.ndarray:
        good = np.array([any(word in text for word in GOOD) for text in texts])
        x = np.random.default_rng(0).normal(np.where(good, 0.5, -0.5), 1.0)
        return 1.0 / (1.0 + np.exp(-(x + np.log(0.8 / 0.2) - 0.4)))

    _score_with(monkeypatch, weak)
    argv = ["eval", str(shift_run / "run"), "--input", str(same)]
    assert main([*argv, "--json"]) == 0
    plain = capsys.readouterr()
    metrics = json.loads(plain.out)
    assert metrics["prior"]["doubt"] and not metrics["prior_adapted"]
    assert metrics["prior"]["target_rate"] < 0.65  # EM ran away: what would have been claimed
    assert "look" not in plain.err and "--adapt-prior" not in plain.err
    assert main(argv) == 0
    assert "not trusted, no shift claimed" in capsys.readouterr().out
    assert main([*argv, "--adapt-prior", "--json"]) == 0
    refused = capsys.readouterr()
    kept = json.loads(refused.out)
    assert not kept["prior_adapted"] and kept["prior_refused"] and "unadapted_accuracy" not in kept
    assert "kept the plain probabilities" in refused.err and "look" not in refused.err
    assert any("kept the plain probabilities" in w for w in kept["warnings"])
    assert kept["accuracy"] == metrics["accuracy"]

    texts = tmp_path / "texts.txt"
    texts.write_text("".join(json.loads(line)["text"] + "\n" for line in same.open()))

    assert main(["predict", str(shift_run / "run"), "--input", str(texts), "--adapt-prior"]) == 0
    said = capsys.readouterr().err
    assert "kept the plain probabilities" in said and "re-weighted to it" not in said


def test_an_estimate_run_to_zero_is_reported_not_an_error(
    shift_run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A trial's `eval --adapt-prior` on 8998 Office reviews exited 2 ("the estimated positive
    rate ... ran to 0.00 %") and printed no metrics, while on a file whose estimate was merely
    untrusted it printed them and kept the plain probabilities. A model that says ~0.49 for
    everything runs EM to 0: the same behaviour now, in eval and predict alike (exit 0)."""
    from tui.cli import main

    same = tmp_path / "same.jsonl"
    _reviews(same, 300, 0.8, seed=9)

    def flat(run: object, texts: list[str]) -> np.ndarray:
        return np.random.default_rng(0).uniform(0.486, 0.5004, len(texts))

    _score_with(monkeypatch, flat)
    argv = ["eval", str(shift_run / "run"), "--input", str(same), "--adapt-prior"]
    assert main(argv) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("n 300  accuracy ") and "confusion" in shown.out
    assert "not trusted, no shift claimed: EM ran to 0.00 %" in shown.out
    assert "kept the plain probabilities" in shown.err and "not calibrated enough" in shown.err
    assert main([*argv, "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert kept["prior_refused"] and not kept["prior_adapted"] and kept["prior"]["doubt"]
    assert kept["prior"]["target_rate"] < 1e-3 and "unadapted_accuracy" not in kept
    assert kept["accuracy"] == pytest.approx(0.2, abs=0.1)  # every review called negative
    assert any("kept the plain probabilities" in w for w in kept["warnings"])
    assert main(argv[:-1]) == 0  # without the flag: no shift claimed, no warning
    plain = capsys.readouterr()
    assert "not trusted, no shift claimed" in plain.out and "look" not in plain.err

    texts = tmp_path / "texts.txt"
    texts.write_text("".join(json.loads(line)["text"] + "\n" for line in same.open()))
    assert main(["predict", str(shift_run / "run"), "--input", str(texts), "--adapt-prior"]) == 0
    said = capsys.readouterr()
    assert "kept the plain probabilities" in said.err and "not trusted" in said.err
    assert len(said.out.splitlines()) == 300


def test_a_pos_weight_prior_is_not_called_the_training_rate(
    shift_run: Path, tmp_path: Path
) -> None:
    """A trial's eval of the default profile's run said "positive rate: training 0.5000" while
    its training data were 80 % positive: 0.5 is the prior pos_weight made (the probabilities'
    calibration), not the data's rate. Both are now said, each as what it is."""
    from engine.config import ModelConfig, TrainConfig
    from engine.sentiment.trainer import DistEnv, Trainer

    cfg = TrainConfig(
        data_dir=str(shift_run / "d"), run_dir=str(tmp_path / "weighted"), epochs=4,
        batch_size=32, lr=2e-2, warmup_steps=1, lr_schedule="constant",
        model=ModelConfig(hidden=8, embedding_dim=8, ngram_buckets=4096),
        checkpoint_every_min=0, pos_weight="auto", events_file=False, seed=1,
    )  # fmt: skip
    Trainer(cfg, env=DistEnv()).fit()
    shifted = tmp_path / "shifted.jsonl"
    _reviews(shifted, 200, 0.3, seed=5)
    data = json.loads((tmp_path / "weighted" / "summary.json").read_text())["train_positive_rate"]
    assert data == pytest.approx(0.8, abs=0.05)
    out = _cli("eval", str(tmp_path / "weighted"), "--input", str(shifted))
    said = f"positive rate: model's prior 0.5000 (pos_weight; training data {data:.4f}), these"
    assert said in out.stdout
    assert f"against the 50 % its probabilities are calibrated to (pos_weight re-weighted its " \
        f"training data's {100 * data:.0f} %)" in out.stderr  # fmt: skip
    prior = json.loads(_cli("eval", str(tmp_path / "weighted"), "--input", str(shifted),
                            "--json").stdout)["prior"]  # fmt: skip
    assert prior["source_rate"] == pytest.approx(0.5) and prior["data_rate"] == pytest.approx(data)
    unweighted = _cli("eval", str(shift_run / "run"), "--input", str(shifted))
    assert f"positive rate: training {data:.4f}, these" in unweighted.stdout  # one rate, as before
    assert f"against {100 * data:.0f} % in its training data" in unweighted.stderr
    assert json.loads(_cli("eval", str(shift_run / "run"), "--input", str(shifted),
                           "--json").stdout)["prior"]["data_rate"] is None  # fmt: skip
