"""When copying rank 0's checkpoint home fails, the summary says where the newest one is, and a
resume says so instead of "stopped before its first checkpoint" (a fake cluster's fetch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError, LaunchError
from engine.events import Emitter
from remote.checkpoint_keeper import NODE_CHECKPOINT, CheckpointKeeper
from remote.resume import resumable_run


class BrokenFetch:
    """A remote cluster whose SFTP dropped: every fetch fails."""

    def node_dir(self, node: str) -> str:
        return f"/home/ubuntu/sentitop/runs/r1/{node}"

    async def fetch(self, node: str, path: str, local: Any) -> Path:
        raise LaunchError("copying by SFTP failed: Connection closed")


class Sink:
    def write(self, event: Any) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_failed_copy_is_said_with_the_nodes_path(tmp_path: Path) -> None:
    keeper = CheckpointKeeper(BrokenFetch(), tmp_path, Emitter(Sink()), lambda stored: None)  # type: ignore[arg-type]
    assert "fetched from rank 0's node" in keeper.where() and "copy(ies)" not in keeper.where()
    keeper.observe("node0", {"type": "checkpoint", "rank": 0, "epoch": 1, "step": 0})
    await keeper.settle()
    said = keeper.where()
    assert "1 copy(ies) failed: none was copied here" in said
    assert f"node node0, /home/ubuntu/sentitop/runs/r1/node0/{NODE_CHECKPOINT}" in said

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "profile.yaml").write_text("name: x\nprovider: ssh\n")
    summary = {"status": "failed", "checkpoints": said}
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(InputError) as caught:
        resumable_run(run)
    assert (
        "copy(ies) failed" in caught.value.message
        and "before its first" not in caught.value.message
    )
    assert caught.value.hint is not None and "copy that file to" in caught.value.hint


def test_the_summary_says_when_no_checkpoint_was_written_yet(tmp_path: Path) -> None:
    """A local run killed in its first epoch showed "latest.pt (written here)" for a file that
    did not exist; it says "none yet" until the file is there."""
    from remote.clusters import LocalCluster

    cluster = LocalCluster.__new__(LocalCluster)  # only its type matters: rank 0 writes here
    keeper = CheckpointKeeper(cluster, tmp_path, Emitter(Sink()), lambda stored: None)
    assert keeper.where() == f"{tmp_path / NODE_CHECKPOINT} (none yet; written here)"
    (tmp_path / NODE_CHECKPOINT).parent.mkdir(parents=True)
    (tmp_path / NODE_CHECKPOINT).write_bytes(b"checkpoint")
    assert keeper.where() == f"{tmp_path / NODE_CHECKPOINT} (written here)"
    remote = CheckpointKeeper(BrokenFetch(), tmp_path / "r", Emitter(Sink()), lambda s: None)  # type: ignore[arg-type]
    assert "(none yet; fetched from rank 0's node" in remote.where()


class WorkingFetch(BrokenFetch):
    """A remote cluster whose copies arrive."""

    async def fetch(self, node: str, path: str, local: Any) -> Path:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        Path(local).write_bytes(b"checkpoint")
        return Path(local)


class Collect(Sink):
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: Any) -> None:
        self.events.append(dict(event))


async def test_a_stored_copy_says_how_much_of_its_epoch_it_holds(tmp_path: Path) -> None:
    """A stop's reason reads "in epoch 2 at step 38" next to "epochs done: 1": the stored copy
    keeps the epoch's samples trained, so the words say whether the epoch had run to its end."""
    stored: list[Any] = []
    sink = Collect()
    keeper = CheckpointKeeper(WorkingFetch(), tmp_path, Emitter(sink), stored.append)  # type: ignore[arg-type]
    fields = {"epoch": 1, "step": 38, "global_step": 76, "epoch_samples": 4864}
    keeper.observe("node0", {"type": "checkpoint", "rank": 0, "position": 4864, **fields})
    await keeper.settle()
    keeper.observe("node0", {"type": "checkpoint", "rank": 0, "position": 2432, **fields})
    await keeper.settle()
    assert [s.place() for s in stored] == [
        "in epoch 2 at step 38 (all its samples trained, its evaluation not yet run)",
        "in epoch 2 at step 38 (2,432 of its 4,864 samples)",
    ]
    copies = [e for e in sink.events if e["type"] == "checkpoint_stored"]
    assert [(e["position"], e["epoch_samples"]) for e in copies] == [(4864, 4864), (2432, 4864)]
