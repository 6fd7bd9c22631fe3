"""A stop signal that lands inside a finaliser: Python drops the handler's exception there and
prints "Exception ignored in: … Traceback … Terminated" (or KeyboardInterrupt for Ctrl-C) on the
user's terminal, and a dropped Ctrl-C let preprocessing finish and publish its output, exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from engine.preprocess.termination import termination_raises

    class Finalised:
        def __del__(self):
            os.kill(os.getpid(), signal.{name})  # its handler runs here, inside __del__
            for _ in range(1000):
                pass

    with termination_raises() as guard:
        Finalised()  # dropped at once: __del__ runs, the handler's exception is lost
        print("went on", flush=True)
        try:
            guard.check()
        except BaseException as exc:
            print("check raised", type(exc).__name__, flush=True)
    """
)


@pytest.mark.parametrize(("name", "raised"), [("SIGINT", "KeyboardInterrupt"),
                                              ("SIGTERM", "Terminated")])  # fmt: skip
def test_a_signal_dropped_in_a_finaliser_is_quiet_and_still_stops(name: str, raised: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(name=name)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.getcwd(),
        check=False,
    )
    assert "went on" in done.stdout  # (the emulation holds: the exception was dropped)
    assert f"check raised {raised}" in done.stdout, done.stdout + done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_handlers_are_given_back() -> None:
    from engine.preprocess.termination import termination_raises

    before = signal.getsignal(signal.SIGINT), sys.unraisablehook
    with termination_raises():
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), sys.unraisablehook) == before


LATE = textwrap.dedent(
    """
    import json, os, signal, sys
    import engine.preprocess.pipeline as pipeline
    from engine.config import PreprocessConfig
    from engine.synth import generate

    real = pipeline.swap_in

    def swap_then_signal(*args, **kwargs):
        real(*args, **kwargs)  # the new set is in place: the output is complete
        os.kill(os.getpid(), signal.{name})

    pipeline.swap_in = swap_then_signal
    work = sys.argv[1]
    generate(os.path.join(work, "in.jsonl"), 200_000, seed=1)
    cfg = PreprocessConfig(inputs=[os.path.join(work, "in.jsonl")],
                           output=os.path.join(work, "out"), workers=1)
    try:
        stats = pipeline.run_preprocess(cfg)
    except BaseException as exc:
        print("raised", type(exc).__name__, flush=True)
        raise SystemExit(3)
    print("returned", json.dumps([w["code"] for w in stats["warnings"]]), flush=True)
    """
)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_stop_after_the_output_is_in_place_keeps_it_and_says_so(
    name: str, tmp_path: Path
) -> None:
    """Ctrl-C in the last moments, after the new set was put in place: "interrupted", exit 130,
    for an output that was complete (stats.json already replaced): the user could not tell."""
    done = subprocess.run(
        [sys.executable, "-c", LATE.format(name=name), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "returned" in done.stdout and "stopped_after_output" in done.stdout, (
        done.stdout + done.stderr
    )
    assert (tmp_path / "out" / "stats.json").is_file() and "Traceback" not in done.stderr
