"""`sentitop train`: train on a preprocessed dataset with N local processes."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from engine.errors import DivergedError, SentitopError, visible
from engine.events import parse_event_line
from tui.format import after_training_line, companion_line


def register(subparsers: Any) -> None:
    """Add the `train` parser."""
    from engine.sentiment.train import add_train_arguments

    parser = subparsers.add_parser(
        "train",
        help="train the LSTM classifier with N local processes (DDP over gloo/NCCL)",
        description="Train on DATA/dataset.h5: a line per epoch and, in a long epoch, a progress "
        "line every 30 s (--json: the summary only); every event goes to RUN_DIR/events.jsonl.",
    )
    add_train_arguments(parser, required=("run_dir",))  # --data: also the run's, with --resume
    data = next(a for a in parser._actions if "--data" in a.option_strings)
    data.help = f"{data.help} Required, except with --resume (the run's own dataset)"
    parser.add_argument(
        "--nproc",
        type=int,
        default=None,
        metavar="N",
        help="local processes (ranks) (default 1; with --resume, as many as the run last had)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print only the final summary as one JSON object"
    )
    parser.set_defaults(func=run)


DIVERGED = DivergedError.title
"""The `title` of a rank's `error` event when the run diverged."""


STDERR_KEPT = 10_000
"""How many rank stderr lines the printer remembers to match a refusal's event against."""


def refusal_line(event: dict[str, Any]) -> str | None:
    """The first line a rank writes to its stderr for a refusal (`error` event with a title),
    as SentitopError.user_message writes it; None for other errors."""
    if not event.get("title"):
        return None
    return visible(f"{event['title']}: {event.get('message')}").split("\n", 1)[0]


class _Printer:
    """Turns rank output into short progress lines (or keeps quiet for --json)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.summary: dict[str, Any] | None = None
        self.checkpoint: dict[str, Any] | None = None
        """The last `checkpoint` event: where a --resume after a failure continues."""
        self.failed: set[int] = set()
        """Ranks that sent an `error` event: their traceback after it is not shown (the event
        says what failed; the launch error carries the failed rank's last lines)."""
        self.diverged = False
        """A rank said the run diverged: its checkpoint would diverge again on --resume."""
        self.warned: set[str] = set()
        """Codes of the warnings said while the run went (the summary lists them again)."""
        self.refusal: dict[str, Any] | None = None
        """The first `error` event of a sentitop error (it has a title): what a rank refused."""
        self.said_errors: set[Any] = set()
        self.refusal_lines: set[str] = set()
        """First lines ("bad dataset: …") of the refusals said: a rank writes the same to its
        stderr, which may reach here before that rank's own event (two pipes, two readers)."""
        self.stderr_said: set[str] = set()
        """Rank stderr lines printed (the first STDERR_KEPT): a refusal one of them said first
        is not said again when its event arrives."""
        self.plan: dict[str, Any] = {}
        """The `train_start` event: epochs and steps per epoch for the progress lines."""
        self.last_progress = time.monotonic()

    def __call__(self, rank: int, stream: str, line: str) -> None:
        event = parse_event_line(line) if stream == "stdout" else None
        if event is not None and event["type"] == "summary":
            self.summary = event
        elif event is not None and event["type"] == "checkpoint":
            self.checkpoint = event
        elif event is not None and event["type"] == "error":
            self.failed.add(rank)
            self.diverged = self.diverged or event.get("title") == DIVERGED
            if event.get("title") and self.refusal is None:
                self.refusal = event
            first = refusal_line(event)
            seen = event.get("message") in self.said_errors or first in self.stderr_said
            self.said_errors.add(event.get("message"))  # every rank found the same fault:
            if first:  # said once
                self.refusal_lines.add(first)
            if seen:
                return
        if event is None and stream == "stderr":
            if rank in self.failed:
                return
            if line in self.refusal_lines:  # this rank's words of a fault said; its event follows
                self.failed.add(rank)
                return
            if len(self.stderr_said) < STDERR_KEPT:
                self.stderr_said.add(line)
        if self.quiet:
            if event is None and stream == "stderr":
                print(f"[rank {rank}] {line}", file=sys.stderr)
            return
        if event is None:
            print(f"[rank {rank}] {line}", file=sys.stderr if stream == "stderr" else sys.stdout)
        elif event["type"] == "epoch":
            acc = event.get("accuracy")
            test = f"  test acc {acc:.4f} f1 {event['f1']:.4f}" if acc is not None else ""
            print(
                f"epoch {event['epoch'] + 1}: train loss {event['train_loss']:.4f}{test}  "
                f"{event['seconds']:.1f} s  {event['samples_per_s']:.0f} samples/s"
            )
        elif event["type"] == "error":
            print(f"[rank {event.get('rank')}] error: {event.get('message')}", file=sys.stderr)
        elif event["type"] == "warning" and event.get("code") == "warmup_long":  # before it pays
            self.warned.add("warmup_long")
            print(visible(f"WARNING: {event.get('message')}"), file=sys.stderr)
        elif event["type"] == "balance":
            from engine.balance.balancer import describe_balance_event

            print(describe_balance_event(event))
        elif event["type"] == "after_training" and event.get("fits"):
            print(after_training_line(event))
        elif event["type"] == "train_start":
            self.plan = event
            if event.get("resumed_epoch") or event.get("resumed_step"):
                print(resumed_line(event))
        elif event["type"] == "step" and time.monotonic() - self.last_progress >= PROGRESS_EVERY_S:
            self.last_progress = time.monotonic()
            print(progress_line(event, self.plan), flush=True)
        elif event["type"] == "threshold":
            seconds, epoch = event["seconds"], event["epoch"] + 1  # events count epochs from 0
            print(f"loss threshold reached at {seconds:.1f} s (epoch {epoch})")


PROGRESS_EVERY_S = 30.0
"""Between epoch lines a progress line at most this often: an epoch of a large dataset takes
hours, and the terminal stayed silent through it."""


def progress_line(event: dict[str, Any], plan: dict[str, Any]) -> str:
    """'epoch 1/3  step 250/28,125  1,020 samples/s  loss 0.4312  read 2.1 MB/s  RSS ≤ 530 MB
    per rank' from a `step` event and the run's `train_start`."""
    epochs, per_epoch = plan.get("epochs"), plan.get("steps_per_epoch")
    parts = [
        f"epoch {int(event.get('epoch', 0)) + 1}" + (f"/{epochs}" if epochs else ""),
        f"step {int(event.get('step', 0)):,}" + (f"/{per_epoch:,}" if per_epoch else ""),
    ]
    if isinstance(rate := event.get("samples_per_s"), int | float):
        parts.append(f"{rate:,.0f} samples/s")
    if isinstance(loss := event.get("smoothed_loss", event.get("loss")), int | float):
        parts.append(f"loss {loss:.4f}")
    if isinstance(read := event.get("read_mb_s"), int | float):
        parts.append(f"read {read:,.1f} MB/s")
    rss = [v for v in event.get("rss_mb") or [] if isinstance(v, int | float)]
    if rss:
        parts.append(f"RSS ≤ {max(rss):,.0f} MB per rank")
    return "  ".join(parts)


FIXED_ON_RESUME = (
    "batch_size", "lr", "lr_schedule", "warmup_steps", "seed", "max_train_samples",
    "length_buckets",
)  # fmt: skip
"""Settings a resumed run keeps from its checkpoint's run: another value would not continue
the same optimisation (the learning-rate schedule and the sample order were planned with it).
Epochs may grow; the model's shape comes from the checkpoint."""


def resumed_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """With --resume, the run's own RUN_DIR/train_config.json as the base the flags override
    (so `--resume` alone continues the run as it was started); ConfigError when a flag changes
    one of FIXED_ON_RESUME. None without --resume or without a saved config."""
    from engine.config import TrainConfig
    from engine.config_flags import flag_values
    from engine.errors import ConfigError

    if not args.resume or not args.run_dir:
        return None
    run_dir = Path(args.run_dir)
    saved_path = run_dir / "train_config.json"
    if not saved_path.is_file():
        if (run_dir / "checkpoints" / "latest.pt").is_file():
            return None  # a checkpoint without its config: the flags say the rest
        inner = run_dir / "train" / "train_config.json"
        raise ConfigError(
            f"--resume: {run_dir} holds no checkpoint (checkpoints/latest.pt) to continue, "
            "nor a train_config.json: not a `sentitop train` run",
            hint=f"`sentitop run --resume {run_dir}` continues a `sentitop run` (its training "
            f"is in {run_dir / 'train'})"
            if inner.is_file()
            else "give the --run-dir a `sentitop train` wrote; without --resume a new run starts",
        )
    try:
        saved: dict[str, Any] = json.loads(saved_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"--resume: {saved_path} cannot be read ({exc})",
            hint="restore it from a copy, or train a new --run-dir",
        ) from None
    if not isinstance(saved, dict):
        raise ConfigError(
            f"--resume: {saved_path} is not a training configuration (a JSON object)",
            hint="restore it from a copy, or train a new --run-dir",
        )
    given = flag_values(args, TrainConfig)
    changed = [
        f"--{k.replace('_', '-')} {given[k]} (the run has {saved.get(k)})"
        for k in FIXED_ON_RESUME
        if k in given and given[k] != saved.get(k)
    ]
    if changed:
        raise ConfigError(
            f"--resume continues {args.run_dir} as it was started; these flags would change it: "
            + "; ".join(changed),
            hint="leave them out (the run's own settings are used), or train a new --run-dir",
        )
    saved.pop("resume", None)
    return saved


def rank_refusal(event: dict[str, Any]) -> SentitopError:
    """The error a rank refused its input or settings with (exit 2), from its `error` event:
    said once, as `train` says its own refusals, not under "launch failed" with the same
    lines again from every rank."""
    error = SentitopError(str(event.get("message")), hint=event.get("hint"))
    error.title = str(event.get("title"))
    error.exit_code = 2
    return error


def resumed_line(event: dict[str, Any]) -> str:
    """What a resumed run says at its start: where it continues, and on how many ranks."""
    epoch, step, steps = event["resumed_epoch"], event["resumed_step"], event["steps_per_epoch"]
    where = (
        f"epoch {epoch + 1}, step {step} of {steps}" if step else f"the start of epoch {epoch + 1}"
    )
    ranks = event.get("world_size")
    return (
        f"resumed from checkpoints/latest.pt at {where} on {ranks} rank(s); the epoch's sample "
        "order continues from the checkpoint's position (work after it is redone, none skipped)"
    )


def resume_hint(cfg: Any, checkpoint: dict[str, Any] | None, *, refused: bool = False) -> str:
    """After a failed launch with a checkpoint on disk: what it holds and how to continue
    (``refused``: a rank refused its input or settings, so the same command would fail again)."""
    where = ""
    if checkpoint is not None:
        where = f" (epoch {checkpoint['epoch'] + 1}, step {checkpoint['step']})"
    data = "DATA" if refused else cfg.data_dir
    command = f"`sentitop train --data {data} --run-dir {cfg.run_dir} --resume`"
    if refused:
        return (
            f"the run's progress is still in {cfg.run_dir}/checkpoints/latest.pt{where}: once "
            f"what the rank refused above is fixed, {command} continues it"
        )
    return (
        f"the run's progress is saved in {cfg.run_dir}/checkpoints/latest.pt{where}: "
        f"{command} continues it (with any --nproc; the sample order does not depend on it)"
    )


def check_run_dir(cfg: Any) -> None:
    """Without --resume, refuse a RUN_DIR that holds a run: training would overwrite its model,
    summary and checkpoint and append to its events; with it, one that holds no checkpoint
    (ConfigError, exit 2, nothing started)."""
    from engine.errors import ConfigError
    from remote.resume import looks_like_checkpoint

    run_dir = Path(cfg.run_dir)
    if cfg.resume:
        latest = run_dir / "checkpoints" / "latest.pt"
        if not latest.is_file():
            raise ConfigError(  # it would start a new run while the user expects a continuation
                f"--resume: {run_dir} holds no checkpoint (checkpoints/latest.pt) to continue",
                hint="check --run-dir, or leave out --resume to start a new run there",
            )
        if not looks_like_checkpoint(latest):  # else every rank fails
            raise ConfigError(
                f"--resume: {latest} is not a checkpoint (truncated, or not a torch save)",
                hint="restore it from a copy, or train a new --run-dir",
            )
        _check_something_left(cfg)
        from remote.resume import refuse_fewer_epochs_than_done

        refuse_fewer_epochs_than_done(run_dir, cfg.epochs)
        _check_same_dataset(cfg)
        return
    if (run_dir / "summary.json").is_file():
        raise ConfigError(
            f"--run-dir {run_dir} already holds a finished run (summary.json, model.pt); "
            "training into it would overwrite it",
            hint="choose a new --run-dir, delete that folder first, or --resume with more "
            "--epochs to continue it",
        )
    if (run_dir / "checkpoints" / "latest.pt").is_file():
        raise ConfigError(
            f"--run-dir {run_dir} holds an unfinished run (checkpoints/latest.pt); training "
            "into it would start over and overwrite its checkpoint",
            hint="add --resume to continue it, or choose a new --run-dir",
        )


def _check_something_left(cfg: Any) -> None:
    """--resume of a finished run without more --epochs: it retrained nothing, refitted the
    blend and overwrote the run's summary and model (ConfigError instead)."""
    from engine.errors import ConfigError

    run_dir = Path(cfg.run_dir)
    if not (run_dir / "summary.json").is_file():
        return
    try:
        planned = int(json.loads((run_dir / "train_config.json").read_text())["epochs"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if cfg.epochs <= planned:
        raise ConfigError(
            f"--resume: {run_dir} already finished its {planned} epoch(s) (summary.json); "
            "nothing is left to train",
            hint=f"give --epochs above {planned} to train on from its last checkpoint, or "
            "train a new --run-dir",
        )


def _check_same_dataset(cfg: Any) -> None:
    """--resume on another dataset than the run's (ConfigError): with the same vocabulary it
    went on mid-epoch on other rows without a word; with another, it failed late (exit 1)."""
    from remote.resume import refuse_other_dataset_than

    hint = "give the run's own dataset as --data, or train a new --run-dir on this one"
    refuse_other_dataset_than(Path(cfg.run_dir), Path(cfg.data_dir), cfg.max_train_samples,
                              hint=hint)  # fmt: skip


def ranks_to_launch(nproc: int | None, cfg: Any) -> int:
    """--nproc when given; with --resume, the ranks the run last trained on (its events say;
    any other count works too, the sample order does not depend on it); else 1."""
    if nproc is not None:
        return nproc
    if not cfg.resume:
        return 1
    from engine.events import read_events
    from remote.run_folder import events_of

    world = None
    try:
        for event in read_events(events_of(cfg.run_dir)):
            if event.get("type") == "train_start" and isinstance(event.get("world_size"), int):
                world = event["world_size"]
    except (OSError, ValueError):
        world = None
    if not world:
        return 1
    print(
        f"--resume: on {world} rank(s), as the run last trained (--nproc N to change it)",
        file=sys.stderr,
    )
    return int(world)


def check_straggle(args: argparse.Namespace) -> None:
    """A --straggle RANK given must name one of the --nproc ranks (else it slows nothing)."""
    from engine.errors import ConfigError

    given: dict[int, float] = {}
    for rank, factor in getattr(args, "straggle", None) or []:
        if rank in given and given[rank] != factor:  # one factor a rank: the last one won
            raise ConfigError(
                f"--straggle {rank}:{given[rank]:g} and --straggle {rank}:{factor:g}: rank "
                f"{rank} is given two factors",
                hint="give each rank once (--straggle R:F is repeatable for other ranks)",
            )
        given[rank] = factor
        if rank >= args.nproc:
            raise ConfigError(
                f"--straggle {rank}:{factor:g}: there is no rank {rank} with --nproc {args.nproc} "
                f"(ranks 0..{args.nproc - 1})",
                hint="name a rank below --nproc",
            )


def run(args: argparse.Namespace) -> int:
    """Launch the ranks and report the summary."""
    from engine.errors import InputError, LaunchError
    from engine.launch import check_rank_memory, oversubscription_warning
    from engine.run_lock import check_not_in_use
    from engine.sentiment.dist_env import uses_cuda
    from engine.sentiment.pretrained import check_init_embeddings
    from engine.sentiment.splits import check_batch_size, check_dataset
    from engine.sentiment.train import config_from_args, launch_local

    if args.run_dir:  # first: what the folder holds may be changing under another run
        check_not_in_use(args.run_dir)
    cfg = config_from_args(args, base=resumed_settings(args))
    check_run_dir(cfg)
    args.nproc = ranks_to_launch(args.nproc, cfg)
    check_straggle(args)
    check_rank_memory(args.nproc)  # before anything is written to the run folder
    crowded = oversubscription_warning(args.nproc) if not uses_cuda(cfg.device) else None
    if crowded:
        print(f"WARNING: {crowded}", file=sys.stderr)
    if Path(cfg.data_dir).is_file():  # a review file given where its preprocessed set goes
        raise InputError(
            f"{cfg.data_dir}: a file, not a dataset folder (dataset.h5, vocab.json, stats.json)",
            hint=f"preprocess it first: sentitop preprocess --input {cfg.data_dir} --output "
            "DIR, then --data DIR",
        )
    if not (Path(cfg.data_dir) / "dataset.h5").is_file():
        raise InputError(
            f"{cfg.data_dir}/dataset.h5 not found",
            hint="run `sentitop preprocess` first, or pass --data",
        )
    check_dataset(cfg.data_dir, cfg.max_train_samples)  # empty or one-class split: exit 2
    check_batch_size(cfg.data_dir, cfg)  # a batch above the split: a scaled lr that diverges
    saved = Path(cfg.run_dir) / "checkpoints" / "latest.pt"
    said: set[str] = set()  # warning codes already printed before the ranks started
    if not (cfg.resume and saved.is_file()):  # resumed: the checkpoint holds the table
        few = check_init_embeddings(cfg.model, cfg.data_dir)  # none known, no such run: exit 2
        if few:
            print(visible(f"WARNING: {few}"), file=sys.stderr)
            said.add("few_known_words")  # the summary carries it too: not printed twice
    printer = _Printer(quiet=args.json)
    try:
        launch_local(cfg, args.nproc, on_line=printer)
    except LaunchError as exc:
        failure: SentitopError = exc
        if exc.rank_exit == 2 and printer.refusal is not None:  # the rank's words, said once
            failure = rank_refusal(printer.refusal)
        if saved.is_file() and not printer.diverged:  # said last, after the tail
            way_on = resume_hint(cfg, printer.checkpoint, refused=exc.rank_exit == 2)
            failure.hint = "\n".join(filter(None, [failure.hint, way_on]))
        raise failure from None
    except KeyboardInterrupt:  # Ctrl-C: the ranks are stopped; say where the run can go on
        if saved.is_file():
            print(resume_hint(cfg, printer.checkpoint), file=sys.stderr)
        raise
    except SystemExit as exc:  # SIGTERM (the launcher's handler): said as Ctrl-C is
        if exc.code == 128 + signal.SIGTERM:
            print("terminated (SIGTERM): the ranks were stopped", file=sys.stderr)
            if saved.is_file():
                print(resume_hint(cfg, printer.checkpoint), file=sys.stderr)
            else:  # SIGTERM stops at once: no checkpoint is asked for, unlike one Ctrl-C
                print("no checkpoint had been written: nothing to resume, its training so far "
                      "is lost (one Ctrl-C, or SIGINT, stops after a checkpoint)",
                      file=sys.stderr)  # fmt: skip
        raise
    summary = printer.summary or json.loads((Path(cfg.run_dir) / "summary.json").read_text())
    summary = {k: v for k, v in summary.items() if k not in ("type", "t", "rank", "stage")}
    if args.json:
        print(json.dumps(summary))
    else:
        print("\n".join(summary_lines(summary, cfg.run_dir)))
    for warning in summary.get("warnings") or []:
        if warning.get("code") not in said | printer.warned:
            print(visible(f"WARNING: {warning['message']}"), file=sys.stderr)
    return 0


def summary_lines(summary: dict[str, Any], run_dir: str) -> list[str]:
    """What `sentitop train` prints at the end: the figures, the companion, the advice."""
    from tui.cli.headless import accuracy_cell, chosen_on_test

    tts = summary.get("time_to_threshold_s")
    lines = [
        f"accuracy {accuracy_cell(summary, blend_note=False)}  f1 {summary['f1']:.4f}  "
        f"epochs {summary['epochs']}  wall {summary['wall_s']:.1f} s  "
        f"{summary['samples_per_s']:.0f} samples/s  time-to-threshold "
        f"{f'{tts:.1f} s' if tts is not None else 'not reached'}  → {run_dir}"
    ]
    companion = summary.get("companion")
    if isinstance(companion, dict):
        lines.append(f"linear companion: {companion_line(companion)}")
    if chosen := chosen_on_test(summary):
        verb = "were" if len(chosen) > 1 else "was"
        lines.append(
            f"({' and '.join(chosen)} {verb} chosen on the held-out split this accuracy is "
            "measured on: slightly optimistic; `sentitop eval` on other reviews gives an "
            "out-of-sample figure)"
        )
    advice = (summary.get("balance") or {}).get("advice")
    if advice:
        lines.append(f"advice: {advice['message']}")
    return lines
