"""`sentitop embed` / `python -m engine.embeddings` argument handling (no training)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.embeddings.cli import config_from_args, main, parse_straggle
from engine.embeddings.config import EmbedConfig
from engine.errors import ConfigError
from tui.cli import build_parser
from tui.cli import main as sentitop

ROOT = Path(__file__).resolve().parents[2]


def test_flags_become_a_config_that_round_trips(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["embed", "--input", "x.jsonl", "--run-dir", str(tmp_path), "--mode", "async",
         "--nproc", "3", "--dim", "200", "--batch", "8192", "--encoder", "char",
         "--straggle", "2:4,1:1.5"]
    )  # fmt: skip
    cfg = config_from_args(args)
    assert (cfg.mode, cfg.dim, cfg.batch, cfg.encoder) == ("async", 200, 8192, "char")
    assert cfg.straggle == {2: 4.0, 1: 1.5}
    assert EmbedConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["embed", "--input", "x", "--run-dir", "r", "--dim", "0"], "embed.dim"),
        (["embed", "--run-dir", "r"], "--input FILE or --data DIR"),
        (["embed", "--input", "x"], "--run-dir"),
        (["embed", "--input", "x", "--run-dir", "r", "--mode", "async"], "--nproc >= 2"),
        (["embed", "--input", "missing.jsonl", "--run-dir", "R"], "missing.jsonl not found"),
        (["embed", "--input", "F", "--run-dir", "R", "--straggle", "abc"], "not RANK:FACTOR"),
        (["embed", "--input", "F", "--run-dir", "R", "--straggle", "5:2"], "ranks 0-0"),
        (["embed", "--input", "F", "--run-dir", "R", "--max-word-len", "0"], "max_word_len = 0"),
        (
            ["embed", "--input", "F", "--run-dir", "R", "--dim", "100000", "--min-count", "1"],
            "embed.dim = 100000 is not below the corpus's vocabulary of 25 words",
        ),
    ],
)
def test_user_errors_exit_2_with_a_message(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviews = tmp_path / "f.jsonl"  # 25 distinct words: word0..word23 and good
    reviews.write_text("".join(f'{{"reviewText": "word{i % 24} good"}}\n' for i in range(200)))
    named = {"R": str(tmp_path / "run"), "F": str(reviews)}
    argv = [named.get(a, a) for a in argv]
    assert sentitop(argv) == 2
    assert message in capsys.readouterr().err


def test_straggle_syntax_errors_name_the_bad_part() -> None:
    assert parse_straggle("1:2") == {1: 2.0}
    with pytest.raises(ConfigError, match="'x' is not RANK:FACTOR"):
        parse_straggle("1:2,x")
    for endless in ("1:inf", "1:nan", "1:1e9", "-1:2"):  # inf slept forever (an OverflowError)
        with pytest.raises(ConfigError, match="FACTOR from 1"):
            parse_straggle(endless)
    with pytest.raises(ConfigError, match="straggle"):
        EmbedConfig(run_dir="r", input="x", straggle={1: 0.5})


def test_engine_entry_point_rejects_both_sources(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--input", "a", "--data", "b", "--run-dir", "r"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys, tui.cli.commands.embed, engine.embeddings.cli; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("mode", ["svd", "sync"])
def test_text_with_nothing_to_learn_is_refused_not_scored(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same 8 stopwords in every review: every SPPMI entry is 0, and the run ended `ok`
    with `PIP loss 1.0000 against the reference` (a zero reference scores anything 1.0)."""
    reviews = tmp_path / "stop.jsonl"
    reviews.write_text('{"reviewText": "the and of to a in is it"}\n' * 50)
    run = tmp_path / "run"
    argv = ["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", mode]
    assert sentitop([*argv, "--dim", "4", "--epochs", "1", "--nproc", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bad input: {reviews}: no two of its 8 words occur together")
    assert not (run / "summary.json").exists() and not (run / "embeddings.npy").exists()
