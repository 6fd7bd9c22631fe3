"""A training rank that records its sample ids (``python -m tests.train.recording_rank CFG OUT K``).

It runs the real trainer (gloo DDP when WORLD_SIZE > 1) and appends ``epoch step id...`` per
step to ``OUT/rank{R}.txt``; with ``KILL >= 0`` it raises inside global step ``KILL`` (a lost
node, after the step checkpoint before it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from engine.balance.hooks import make_train_hooks
from engine.config import TrainConfig, config_from_dict
from engine.events import Emitter, StreamSink
from engine.rank_main import exit_rank, run_as_rank
from engine.sentiment.data import Batch
from engine.sentiment.hooks import StepTiming
from engine.sentiment.trainer import DistEnv, Trainer


class RecordingTrainer(Trainer):
    """Writes each step's sample ids before training on them; dies at global step ``kill``."""

    out: Path
    kill: int

    def _train_step(self, epoch: int, step: int, batch: Batch, data_s: float) -> StepTiming:
        ids = self.sampler.indices(step).tolist()
        with open(self.out / f"rank{self.env.rank}.txt", "a", encoding="utf-8") as fh:
            fh.write(" ".join(map(str, [epoch, step, *ids])) + "\n")
        if self.global_step == self.kill:
            raise RuntimeError(f"killed at global step {self.kill}")
        return super()._train_step(epoch, step, batch, data_s)


def main() -> None:
    """Train one rank of the config given on the command line, recording its samples."""
    import json

    cfg = config_from_dict(TrainConfig, json.loads(Path(sys.argv[1]).read_text()))
    env = DistEnv.from_environ("cpu")
    torch.set_num_threads(1)
    emitter = Emitter(StreamSink(), rank=env.rank)

    def work() -> None:
        if env.world > 1:
            dist.init_process_group("gloo")
        trainer = RecordingTrainer(cfg, emitter=emitter, hooks=make_train_hooks(cfg), env=env)
        trainer.out, trainer.kill = Path(sys.argv[2]), int(sys.argv[3])
        trainer.fit()

    exit_rank(run_as_rank(work, emitter))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
