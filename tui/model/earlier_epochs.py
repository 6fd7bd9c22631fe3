"""The epochs a resumed run's earlier runs trained, for the top of its epochs table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.events import read_events
from remote.resume_chain import read_leg, resume_chain
from remote.run_folder import EVENTS_FILE
from tui.model.records import EpochRow, epoch_row


@dataclass(frozen=True)
class EarlierEpochs:
    """Epoch rows the runs a resumed run continues trained before its checkpoint."""

    rows: list[EpochRow]
    """Oldest first, each epoch once (as the newest run that finished it said)."""
    runs: list[str]
    """Names of the runs they come from, oldest first."""


def earlier_epochs(folder: Path, resumed_epoch: int) -> EarlierEpochs:
    """The epochs before ``resumed_epoch`` that the runs the run in ``folder`` resumed (one or
    a chain of them) finished; an epoch a later run trained again replaces the earlier one's."""
    leg = read_leg(folder)
    chain = resume_chain(leg) if leg is not None else None
    by_epoch: dict[int, tuple[EpochRow, str]] = {}
    for earlier in chain.legs[:-1] if chain is not None else ():
        events = earlier.folder / EVENTS_FILE
        for event in read_events(events) if events.is_file() else ():
            if event.get("type") == "epoch" and (row := epoch_row(event)) is not None:
                by_epoch[row.epoch] = (row, earlier.folder.name)
    kept = [by_epoch[e] for e in sorted(by_epoch) if e < resumed_epoch]
    runs = list(dict.fromkeys(name for _, name in kept))
    return EarlierEpochs([row for row, _ in kept], runs)
