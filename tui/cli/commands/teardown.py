"""`sentitop teardown RUN_ID`: terminate every EC2 instance and EMR cluster tagged with a run id."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from engine.errors import SentitopError
from remote.teardown import teardown_run
from tui.cli.commands import region_arg

DESCRIPTION = """\
Terminate every EC2 instance (pending, running, stopping or stopped) and every EMR cluster
(starting, bootstrapping, running or waiting) tagged sentitop:run-id=RUN_ID, and say what was
terminated. A last resort after a crash: runs already tear down what they start on every exit
path. Looks in one region: --region, else the region of the run's profile (when its folder is
here), else the AWS configuration's region (us-east-1 if none); another run's machines are
never touched. Credentials come from the standard AWS chain."""


def register(subparsers: Any) -> None:
    """Add the `teardown` subcommand."""
    parser = subparsers.add_parser(
        "teardown",
        help="terminate every EC2 instance and EMR cluster of a run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_id",
        metavar="RUN_ID",
        type=_run_ref,
        help="run id (the run folder's name), or the run folder runs/<id> (or its train/)",
    )
    parser.add_argument(
        "--region",
        default=None,
        type=region_arg,
        help="AWS region (default: the run's, else the AWS configuration's)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be terminated; terminate nothing"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def _run_ref(value: str) -> str:
    """A RUN_ID argument (argparse ``type``): an empty or blank one, or a path that names no
    run (such as ``/``), is a usage error (exit 2) — never the current folder's name."""
    from remote.run_folder import run_id_of

    if not value.strip():
        raise argparse.ArgumentTypeError("empty; give a run id or a run folder")
    if not run_id_of(value).strip():
        raise argparse.ArgumentTypeError(f"{value!r} names no run; give a run id or a run folder")
    return value


def run(args: argparse.Namespace) -> int:
    """Tear the run down and print what was terminated (exit 0, also when nothing was found)."""
    from remote.run_folder import run_id_of
    from remote.shell import check_name

    ref = args.run_id
    _refuse_other_folder(ref)
    cloud, recorded_region, provider = _recorded(ref)
    args.run_id = run_id_of(args.run_id)
    check_name(args.run_id, "run id")  # no AWS search for a name no run of sentitop has
    if not cloud:  # nothing in any cloud: no AWS call, no credentials needed
        message = f"run {args.run_id} ran on {provider} machines: nothing in the cloud to tear down"
        print(json.dumps({"run_id": args.run_id, "provider": provider}) if args.json else message)
        return 0
    region = args.region or recorded_region  # the region the run's profile launched in
    show = None if args.json else (lambda r: print(r.line(args.dry_run), flush=True))
    try:
        report = teardown_run(args.run_id, region=region, dry_run=args.dry_run, on_resource=show)
    except SentitopError as exc:
        if provider != "unknown":
            raise
        # no folder here: say so too, not only why AWS could not be searched
        exc.message = (
            f"{_not_found(ref)}; AWS was searched for the run's tag instead and that failed: "
            f"{exc.message}"
        )
        exc.args = (exc.message,)
        raise
    if not args.dry_run:  # `sentitop runs` stops warning that its machines may still bill
        _record(ref, report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif not (report.clusters or report.instances):
        elsewhere = (
            f"; its profile ran it in {recorded_region}: `sentitop teardown {args.run_id} "
            f"--region {recorded_region}` looks there"
            if recorded_region and args.region and args.region != recorded_region
            else ""
        )
        print(
            f"nothing of run {args.run_id} is running in {report.region} "
            f"(no EC2 instance or EMR cluster with its tag){elsewhere}"
        )
    return 0


def _record(ref: str, report: Any) -> None:
    """Note the teardown in the run's folder here, when there is one."""
    from remote.run_folder import resolve_run_dir
    from remote.teardown import record_teardown

    try:
        folder = resolve_run_dir(ref, want="profile.yaml")
    except SentitopError:
        return
    record_teardown(folder, report)


RUN_ID_TIME = re.compile(r"\d{8}-\d{6}")
"""The start time every run id sentitop makes holds (YYYYmmdd-HHMMSS-<profile>, preprocess-…)."""


def _refuse_other_folder(ref: str) -> None:
    """InputError (exit 2) for a path to a folder that is no run's (`teardown ../../etc`
    searched AWS for a run "etc"): no run file in it and no run id as its name. A run folder
    that is gone is still searched for by its name, the last resort this command is."""
    from engine.errors import InputError

    folder = Path(ref).expanduser()
    if not folder.is_dir() or RUN_ID_TIME.search(folder.resolve().name):
        return
    if any((d / n).exists() for d in (folder, folder.parent) for n in RUN_FILES):
        return  # a run folder, or its train/ folder
    raise InputError(
        f"{ref} is a folder but no run's: it holds none of {', '.join(RUN_FILES)}",
        hint="give a run id (the run folder's name, e.g. 20261130-213000-local) or its folder "
        "runs/<id>; `sentitop runs` lists them",
    )


RUN_FILES = ("profile.yaml", "summary.json", "events.jsonl")
"""Files a run folder holds from its start (one of them at least)."""


def _not_found(ref: str) -> str:
    """What resolving ``ref`` to a run folder here says (the folders it tried)."""
    from remote.run_folder import resolve_run_dir

    try:
        return f"{resolve_run_dir(ref, want='profile.yaml')} has no record of its machines"
    except SentitopError as exc:
        return exc.message


def _recorded(ref: str) -> tuple[bool, str | None, str]:
    """(may have cloud machines, region, provider) as the run's folder here records them: its
    profile.yaml (EC2 nodes or EMR preprocessing, and the region they ran in; written when the
    run starts, so a crashed run has it), else its summary.json's provider. With no record the
    run is searched for in the AWS configuration's region."""
    from remote.run_folder import SUMMARY_FILE, resolve_run_dir
    from remote.teardown import cloud_region

    try:
        return cloud_region(resolve_run_dir(ref, want="profile.yaml"))
    except SentitopError:
        pass
    try:
        folder = resolve_run_dir(ref, want=SUMMARY_FILE)
        summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, SentitopError):
        return True, None, "unknown"
    provider = summary.get("provider") if isinstance(summary, dict) else None
    if provider in ("local", "ssh"):
        return False, None, provider
    return True, None, str(provider or "unknown")
