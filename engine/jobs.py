"""Config-file entry points for launchers: ``python -m engine.jobs preprocess CONFIG.json``.

A launcher (local or SSH) writes the engine config as JSON and starts this module on a node;
the job's events go to stdout as JSON lines, where the launcher splits them from log lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from engine.config import PreprocessConfig, config_from_dict
from engine.errors import SentitopError
from engine.events import Emitter, StreamSink, encode_event, make_event


def _run_preprocess(path: str) -> int:
    from engine.preprocess import run_preprocess

    with open(path, encoding="utf-8") as fh:
        cfg = config_from_dict(PreprocessConfig, json.load(fh), "preprocess config")
    emitter = Emitter(StreamSink())
    try:
        run_preprocess(cfg, emitter)
    finally:
        emitter.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job from its config file; exit code 0 ok, 2 bad input, 1 failure."""
    parser = argparse.ArgumentParser(prog="python -m engine.jobs", description=__doc__)
    parser.add_argument("job", choices=["preprocess"])
    parser.add_argument("config", help="the job's config as JSON")
    args = parser.parse_args(argv)
    try:
        return _run_preprocess(args.config)
    except SentitopError as exc:
        print(encode_event(make_event("error", stage=args.job, message=exc.message)), flush=True)
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    except (OSError, ValueError) as exc:
        print(f"{args.job}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
