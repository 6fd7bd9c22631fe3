"""`sentitop preprocess`: raw reviews → dataset.h5, vocab.json, stats.json."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from typing import Any

from engine.preprocess.cli import HELP, add_arguments
from tui.cli.arguments import take_negative_values


def register(subparsers: Any) -> None:
    """Add the `preprocess` subcommand."""
    parser = subparsers.add_parser("preprocess", help=HELP, description=HELP)
    add_arguments(parser)
    emr = parser.add_argument_group("EMR (with --runner emr)")
    emr.add_argument(
        "--profile",
        help="profile whose preprocess.emr section (s3, instance types, spot bid, release "
        "label, bootstrap) and region configure the EMR cluster",
    )
    emr.add_argument("--s3", help="writable s3://bucket/prefix (overrides the profile's)")
    take_negative_values(parser)  # --memory-budget -5MB: "must be positive", not "expected one"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run preprocessing with a progress bar and a summary table (or --json / --events)."""
    if args.runner == "emr":
        return _run_on_emr(args)
    from engine.preprocess.cli import config_from_args, run_cli

    if args.memory_budget is not None and config_from_args(args).runner == "local":
        from engine.preprocess.spill import plan_spill

        # the local runner's own check (InputError below 1MB), made now: the runner makes it
        # only once the progress bar is drawn; the plan of no input is thrown away
        plan_spill(args.memory_budget, workers=1, input_bytes=0, seq_len=1)
    return run_cli(args)


def _run_on_emr(args: argparse.Namespace) -> int:
    """Start a tagged EMR cluster through mrjob, combine its output here, always terminate it."""
    from engine.errors import ConfigError
    from engine.events import Emitter, StreamSink
    from engine.preprocess.cli import config_from_args, print_warnings, summary_table
    from remote import aws
    from remote.emr import EMRSettings, preprocess_on_emr, settings_from_profile
    from remote.profile import load_profile

    cfg = config_from_args(args)
    overrides = {"s3": args.s3} if args.s3 else {}
    try:
        if args.profile:
            settings = settings_from_profile(load_profile(args.profile), **overrides)
        elif args.s3:
            settings = EMRSettings(s3=args.s3)
        else:
            raise ConfigError(
                "--runner emr needs --profile (with preprocess.emr) or --s3 s3://bucket/prefix"
            )
    except ConfigError as exc:
        if args.s3 and "s3" in exc.message:
            raise ConfigError(
                f"--s3 {args.s3!r} is not allowed; expected s3://bucket/prefix in a bucket "
                "you can write"
            ) from None
        raise
    aws.require_credentials("start an EMR cluster", settings.region)  # before the run id line
    run_id = f"preprocess-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    print(
        f"EMR run id {run_id} (region {settings.region}); if sentitop is killed, "
        f"`sentitop teardown {run_id} --region {settings.region}` removes its cluster",
        file=sys.stderr,
    )
    emitter = Emitter(StreamSink()) if args.events else Emitter()
    stats = preprocess_on_emr(
        cfg,
        settings,
        run_id=run_id,
        emitter=emitter,
        mrjob_args=args.mrjob_arg or (),
        rating_max=args.rating_max,
        negative_max=args.negative_max,
    )
    if args.json:
        print(json.dumps(stats, indent=2))
    elif not args.events:
        from tui.cli.console import make_console

        make_console().print(summary_table(stats))
    print_warnings(stats)
    return 0
