"""A checkpoint write that runs out of disk says so and keeps the checkpoint already there."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.errors import StorageError
from engine.sentiment import checkpoint
from engine.sentiment.checkpoint import CHECKPOINT, load_checkpoint, save_checkpoint


def _failing_save(error: BaseException) -> Any:
    def save(state: Any, fh: Any) -> None:
        fh.write(b"PK partial zip")
        raise error

    return save


@pytest.mark.parametrize(
    "error",
    [
        # torch's zip writer on a full tmpfs (trial L): no errno, no "space" in it
        RuntimeError(
            "[enforce fail at inline_container.cc:672] . unexpected pos 3936576 vs 3936468"
        ),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_a_full_disk_is_named_and_the_last_checkpoint_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    save_checkpoint(tmp_path, {"model": {"w": torch.ones(2)}, "step": 1})
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=4096))
    monkeypatch.setattr(torch, "save", _failing_save(error))
    with pytest.raises(StorageError) as caught:
        save_checkpoint(tmp_path, {"model": {"w": torch.zeros(2)}, "step": 2})
    assert caught.value.message.startswith(
        f"no space left on the device of {tmp_path / 'checkpoints'} while writing latest.pt"
    )
    monkeypatch.undo()
    assert load_checkpoint(tmp_path)["step"] == 1  # the one before, whole
    assert [p.name for p in (tmp_path / CHECKPOINT).parent.iterdir()] == ["latest.pt"]


def test_another_write_failure_is_not_called_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch, "save", _failing_save(RuntimeError("something else")))
    with pytest.raises(RuntimeError, match="something else"):
        save_checkpoint(tmp_path, {"model": {}})
    assert not list((tmp_path / CHECKPOINT).parent.iterdir())
    assert shutil.disk_usage(tmp_path).free > checkpoint.FULL_BELOW_BYTES
