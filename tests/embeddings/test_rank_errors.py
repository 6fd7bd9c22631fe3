"""An error the ranks report themselves (a setting they refuse, a diverged loss) is said once,
by the launcher, with its own exit code; --batch is checked against the sub-sampled pairs
before any rank starts (no shared data needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import Corpus, epoch_pair_count, max_pairs, pair_seed, shard_docs
from engine.embeddings.prepare import CORPUS_FILE, prepare
from engine.embeddings.rank_watch import TrainWatch
from engine.errors import ConfigError, TrainError
from engine.events import Emitter
from tests.embeddings.topics import write_topic_reviews

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "not one step would train"


def _prepared(tmp_path: Path) -> tuple[Path, Path, Corpus]:
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    prepare(EmbedConfig(run_dir=str(run), input=str(reviews), dim=8), Emitter())
    return reviews, run, Corpus.load(run / CORPUS_FILE)


def _embed(reviews: Path, run: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(reviews), "--run-dir",
           str(run), "--dim", "8", "--threads", "1", "--device", "cpu", *flags]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)


def _drawn(corpus: Corpus, epoch: int, seed: int, workers: int) -> int:
    """The fewest pairs a worker draws in ``epoch`` (as the ranks draw them on CPU)."""
    return min(
        epoch_pair_count(corpus, shard_docs(corpus, i, workers), window=5, subsample=1e-4,
                         seed=pair_seed(seed, epoch, i))
        for i in range(workers)
    )  # fmt: skip


def test_a_batch_over_the_sub_sampled_pairs_is_refused_before_ranks_start(
    tmp_path: Path,
) -> None:
    """Only the ranks found it: each printed it, the launcher again, exit 1."""
    reviews, run, corpus = _prepared(tmp_path)
    drawn = _drawn(corpus, 0, 0, 2)
    assert drawn + 1 <= min(max_pairs(corpus, shard_docs(corpus, i, 2), 5) for i in range(2))
    out = _embed(reviews, run, "--nproc", "2", "--batch", str(drawn + 1))
    assert out.returncode == 2, out.stderr
    assert out.stderr.count(MESSAGE) == 1 and "after epoch 1's sub-sampling" in out.stderr
    assert "launch:" not in out.stderr and "Traceback" not in out.stderr  # no rank started


def test_a_setting_the_ranks_refuse_is_said_once_with_exit_2(tmp_path: Path) -> None:
    """Epoch 2 draws fewer pairs than epoch 1 (checked by the ranks only): every rank printed
    the message, then the launcher's `launch failed: rank 0 ... exit code 2` did (exit 1)."""
    reviews, run, corpus = _prepared(tmp_path)
    seed = next(s for s in range(50) if _drawn(corpus, 1, s, 2) < _drawn(corpus, 0, s, 2))
    batch = _drawn(corpus, 0, seed, 2)
    out = _embed(reviews, run, "--nproc", "2", "--epochs", "2", "--seed", str(seed),
                 "--batch", str(batch), "--log-every", "100000")  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.count(MESSAGE) == 1, out.stderr
    assert "bad configuration: --batch" in out.stderr and "hint: use a --batch" in out.stderr
    assert "launch failed" not in out.stderr and "Traceback" not in out.stderr


def test_a_diverged_sync_run_stops_every_rank_with_one_message(tmp_path: Path) -> None:
    """Only rank 0 checked the step loss: rank 1, left in the next all-reduce, crashed with a
    gloo traceback under the message."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    out = _embed(reviews, tmp_path / "run", "--nproc", "2", "--epochs", "2", "--batch", "32",
                 "--lr", "1e30", "--log-every", "1")  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("training diverged") == 1, out.stderr
    assert "Traceback" not in out.stderr and "launch failed" not in out.stderr


def test_the_watch_keeps_a_ranks_own_error_and_its_peers_stopping_noise() -> None:
    shown: list[tuple[int, str, str]] = []
    watch = TrainWatch(lambda rank, stream, line: shown.append((rank, stream, line)))
    watch(0, "stderr", "launch: rank 0 pid 1")
    watch(1, "stderr", "some library warning: kept")
    assert watch.reported() is None
    watch(1, "stderr", "bad configuration: --batch 9 is too big")
    watch(1, "stderr", "  hint: use a smaller --batch")
    watch(0, "stderr", "Traceback (most recent call last):")  # rank 0 is being stopped
    watch(0, "stdout", '{"type":"step","t":1,"rank":0}')
    watch(1, "stderr", "training failed: later")  # a second error: the first one counts
    error = watch.reported()
    assert isinstance(error, ConfigError) and error.exit_code == 2
    assert (error.message, error.hint) == ("--batch 9 is too big", "use a smaller --batch")
    assert [line for _, _, line in shown] == [
        "launch: rank 0 pid 1", "some library warning: kept", '{"type":"step","t":1,"rank":0}',
    ]  # fmt: skip
    other = TrainWatch(lambda *_: None)
    other(0, "stderr", "training failed: the SGNS loss became nan")
    assert isinstance(other.reported(), TrainError)
