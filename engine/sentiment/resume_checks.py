"""Torch-free check of a resume, run by the launchers before any rank starts and by the trainer."""

from __future__ import annotations

from engine.errors import ConfigError


def refuse_fewer_epochs(done: int, step: int, epochs: int) -> None:
    """ConfigError when a checkpoint of ``done`` whole epochs and ``step`` steps into the next
    is resumed with train.epochs = ``epochs`` below what it already trained: nothing would be
    trained, the steps of the epoch under way dropped, and the run reported "ok". A checkpoint
    at the end of the last epoch (``done == epochs``, step 0) is allowed: resuming it finishes a
    run stopped during its after-training fits."""
    if done < epochs or (done == epochs and step == 0):
        return
    under_way = f" and {step} step(s) of epoch {done + 1}" if step else ""
    need = done + 1 if step else done
    raise ConfigError(
        f"the checkpoint holds {done} whole epoch(s){under_way}, more than the {epochs} "
        "epoch(s) asked for: nothing is left to train",
        hint=f"resume with epochs {need} or more (--epochs, or train.epochs in the profile)",
    )
