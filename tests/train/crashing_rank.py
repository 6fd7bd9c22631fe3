"""A rank for launcher tests: ``python -m tests.train.crashing_rank before|after|late|never``.

It runs the real rank life (:func:`engine.rank_main.run_as_rank`, gloo barrier included) and
aborts like a C++ ``std::terminate`` would: inside its work (``before``), after its ``rank_end``
while tearing down (``after``), inside its work a second after rank 0 exited 1 as a peer of a
lost rank does (``late``), or not at all (``never``). Only rank 1 aborts.
"""

from __future__ import annotations

import os
import sys
import time

import torch.distributed as dist

from engine.events import Emitter, StreamSink
from engine.rank_main import exit_rank, run_as_rank


def main() -> None:
    """Run one rank in the mode given on the command line."""
    mode = sys.argv[1]
    rank = int(os.environ["RANK"])
    crashes = rank == 1

    def work() -> None:
        dist.init_process_group("gloo")
        if crashes and mode == "before":
            os.abort()
        if mode == "late":
            dist.barrier()  # both past the rendezvous: rank 1 is not left waiting in it
            if not crashes:
                os._exit(1)  # the peer's exit is seen first
            time.sleep(1.0)
            os.abort()

    code = run_as_rank(work, Emitter(StreamSink(), rank=rank))
    if crashes and mode == "after":
        os.abort()
    exit_rank(code)


if __name__ == "__main__":
    main()
