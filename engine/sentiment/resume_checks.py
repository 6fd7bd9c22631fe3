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


def dataset_stamp(data_dir: str, n_train: int) -> dict[str, object]:
    """What a checkpoint records of the dataset it trains on: the training samples and a hash
    of the vocabulary (vocab.json: words, settings), so that a resume can tell another one."""
    import hashlib
    from pathlib import Path

    vocab = Path(data_dir) / "vocab.json"
    digest = hashlib.sha256(vocab.read_bytes()).hexdigest()[:16] if vocab.is_file() else None
    return {"n_train": n_train, "vocab_sha": digest}


def refuse_other_dataset(saved: dict[str, object] | None, now: dict[str, object]) -> None:
    """ConfigError when a checkpoint's dataset stamp (None: written before stamps) is not the
    dataset's it resumes on: its epoch order indexes samples that are not there or are other
    reviews, and another vocabulary reads every text as other words. (An input rewritten, or
    preprocessed again with other settings, between the stop and the resume.)"""
    if not saved:
        return
    for key, what in (("n_train", "training samples"), ("vocab_sha", "vocabulary")):
        if saved.get(key) is not None and now.get(key) is not None and saved[key] != now[key]:
            shown = f" ({saved[key]:,} then, {now[key]:,} now)" if key == "n_train" else ""
            raise ConfigError(
                f"the checkpoint was trained on another dataset: its {what} differ{shown}",
                hint="the inputs or the preprocessing settings changed since the run stopped; "
                "start a new run on this dataset, or restore the inputs it was trained on",
            )
