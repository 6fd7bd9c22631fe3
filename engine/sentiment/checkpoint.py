"""Run-folder files: atomic checkpoints, summary.json, and what eval/predict need (rank 0 only).

RUN_DIR layout::

    events.jsonl          every event of the run (rank 0)
    train_config.json     the resolved TrainConfig
    model.json            the resolved ModelShape (shape + vocabulary size)
    vocab.json            copy of the dataset's vocabulary and preprocessing settings
    checkpoints/latest.pt model, optimizer, progress, sampler plan, metrics so far
    checkpoints/REQUEST   present: a launcher asks rank 0 to checkpoint now (spot notice)
    model.pt              final weights (state_dict of SentimentLSTM)
    summary.json          final numbers
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from engine.errors import StorageError, TrainError

CHECKPOINT = Path("checkpoints") / "latest.pt"
REQUEST = Path("checkpoints") / "REQUEST"
"""A launcher creates this file to ask rank 0 for a checkpoint at the next step."""
MODEL_WEIGHTS = "model.pt"
MODEL_SPEC = "model.json"
VOCAB = "vocab.json"
TRAIN_CONFIG = "train_config.json"
SUMMARY = "summary.json"
FULL_BELOW_BYTES = 1 << 20
"""A write that failed with less than this free on its disk ran out of space."""
UNREADABLE = (OSError, RuntimeError, EOFError, ValueError, KeyError, pickle.UnpicklingError)
"""What torch.load raises on a file that is not a torch save (text, truncated, another
pickle): a garbage file raises KeyError or ValueError from the unpickler, not OSError."""


def unreadable_reason(exc: BaseException) -> str:
    """One line of why torch.load refused a file: the weights-only unpickler's own error
    rather than torch's paragraph around it (which suggests loading the file unsafely)."""
    text = str(exc)
    match = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\n\s*\n|$)", text, re.S)
    line = " ".join((match.group(1) if match else text).split())
    if len(line) > 200:  # whole sentences, else whole words: never "…your checkpoint file is"
        end = line.rfind(". ", 0, 200)
        line = line[: end + 1] if end > 0 else line[:200].rsplit(" ", 1)[0] + " …"
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _atomic_replace(path: Path, write: Any) -> None:
    """Write via ``write(fh)`` to a temp file beside ``path``, fsync, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch's zip writer says a full disk its own way
        full = _disk_full(path.parent, exc)
        Path(tmp).unlink(missing_ok=True)
        if not full:
            raise
        raise StorageError(
            f"no space left on the device of {path.parent} while writing {path.name} "
            f"({exc.strerror if isinstance(exc, OSError) else 'torch: ' + str(exc)[:80]})",
            hint=f"free space there (the {path.name} already there, if any, is kept as it was)",
        ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _disk_full(folder: Path, exc: BaseException) -> bool:
    """Whether a failed write ran out of disk: ENOSPC/EDQUOT, or nothing left free while the
    partial file is still there."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        return shutil.disk_usage(folder).free < FULL_BELOW_BYTES
    except OSError:
        return False


def write_json(path: str | Path, data: Any) -> None:
    """Atomically write ``data`` as indented JSON."""
    blob = (json.dumps(data, indent=2, sort_keys=False) + "\n").encode()
    _atomic_replace(Path(path), lambda fh: fh.write(blob))


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Atomically write ``state`` to RUN_DIR/checkpoints/latest.pt; return the path."""
    path = Path(run_dir) / CHECKPOINT
    _atomic_replace(path, lambda fh: torch.save(state, fh))
    return path


def checkpoint_requested(run_dir: str | Path) -> bool:
    """True when a launcher asked for a checkpoint now (RUN_DIR/checkpoints/REQUEST exists)."""
    return (Path(run_dir) / REQUEST).exists()


def clear_request(run_dir: str | Path) -> None:
    """Forget a checkpoint request (after the checkpoint was written)."""
    (Path(run_dir) / REQUEST).unlink(missing_ok=True)


def load_checkpoint(run_dir: str | Path) -> dict[str, Any] | None:
    """The latest checkpoint of ``run_dir``, or None when there is none."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return None
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    except UNREADABLE as exc:
        raise TrainError(
            f"{path} cannot be read (not a checkpoint, or truncated): {unreadable_reason(exc)}",
            hint="delete it to start over, or restore a copy",
        ) from None
    if not isinstance(state, dict) or "model" not in state:
        raise TrainError(
            f"{path} is not a training checkpoint (no model state in it)",
            hint="delete it to start over, or restore a copy",
        )
    return state


def save_weights(run_dir: str | Path, model_state: dict[str, Any]) -> Path:
    """Atomically write the final weights to RUN_DIR/model.pt."""
    path = Path(run_dir) / MODEL_WEIGHTS
    _atomic_replace(path, lambda fh: torch.save(model_state, fh))
    return path


def prepare_run_dir(
    run_dir: str | Path, data_dir: str | Path, *, spec: dict[str, Any], config: dict[str, Any]
) -> None:
    """Copy the vocabulary and write model.json / train_config.json so eval/predict stand alone."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    vocab = Path(data_dir) / VOCAB
    if vocab.is_file():
        shutil.copyfile(vocab, run / VOCAB)
    write_json(run / MODEL_SPEC, spec)
    write_json(run / TRAIN_CONFIG, config)


def resumed_spec(run_dir: str | Path) -> dict[str, Any] | None:
    """The model spec (model.json) of the checkpoint in ``run_dir`` a --resume continues; None
    without a checkpoint or a readable spec (the model is then built as for a new run, and the
    checkpoint's own spec is checked against it)."""
    run = Path(run_dir)
    if not (run / CHECKPOINT).is_file():
        return None
    try:
        spec = json.loads((run / MODEL_SPEC).read_text())
    except (OSError, ValueError):
        return None
    return spec if isinstance(spec, dict) and "embedding_dim" in spec else None
