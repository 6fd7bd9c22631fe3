"""How a user's stop ends a live run: a checkpoint first, within a bounded wait."""

from __future__ import annotations

STOP_CHECKPOINT_S = 30.0
"""How long a user's stop waits for rank 0's checkpoint at its next step (and, on remote nodes,
its copy here) before the nodes are stopped anyway."""
