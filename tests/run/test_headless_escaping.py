"""Text from processes reaches the headless output verbatim, never read as Rich markup: a real
node failure whose error holds `[/x]`, `[bold]` and `[link=...]` (the gloo message that crashed
`sentitop run` with rich.errors.MarkupError)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tests.failing_node import MARKUP_PIECES, MARKUP_TEXT, fail_a_node
from tui.cli.headless import HeadlessProgress, summary_table


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=400, color_system=None, force_terminal=False), out


def test_a_node_failure_reaches_the_headless_output_verbatim(tmp_path: Path) -> None:
    failed = fail_a_node(tmp_path / "run")
    assert MARKUP_TEXT in failed.error.message  # the cluster carries the node's last lines
    console, out = _console()
    with HeadlessProgress(console, epochs=1) as display:
        for node, line, event in failed.lines:
            display.on_line(node, line, event)
        for event in failed.events:
            display.on_event(event)
    console.print(summary_table(failed.summary()))
    text = out.getvalue()
    assert text.count(MARKUP_TEXT) >= 3  # the node's error event, its stderr line, the reason
    for piece in MARKUP_PIECES:
        assert piece in text
    assert "— failed" in text


def test_summary_table_shows_foreign_text_verbatim() -> None:
    console, out = _console()
    console.print(
        summary_table(
            {
                "run": "r[bold]1",
                "profile": "[red]p",
                "status": "failed",
                "reason": MARKUP_TEXT,
                "advice": {"message": "drop [/x] rank 1"},
                "warnings": [{"code": "below_majority", "message": "acc [link=x]0.5[/link]"}],
            }
        )
    )
    text = out.getvalue()
    for expected in ("r[bold]1", "[red]p", *MARKUP_PIECES, "drop [/x] rank 1", "[link=x]0.5"):
        assert expected in text
    assert "— failed, 1 warning(s)" in text


def test_summary_table_says_what_became_of_the_companion() -> None:
    kept = {"applied": True, "features": 175_833, "rows": 29_034, "c": 16.0,
            "valid_accuracy": 0.89244, "reason": "kept"}  # fmt: skip
    left = {"applied": False, "reason": "left out: a path got a weight [bold]<= 0"}
    for facts, expected in (
        (kept, "kept: 175,833 features from 29,034 rows, C 16.0, its own validation accuracy "
               "0.8924"),
        (left, "left out: a path got a weight [bold]<= 0"),
    ):  # fmt: skip
        console, out = _console()
        console.print(summary_table({"run": "r", "status": "ok", "companion": facts}))
        assert "linear companion" in out.getvalue() and expected in out.getvalue()
    console, out = _console()
    console.print(summary_table({"run": "r", "status": "ok", "companion": None}))
    assert "companion" not in out.getvalue()


def test_headless_output_says_what_is_fitted_after_training() -> None:
    console, out = _console()
    with HeadlessProgress(console, epochs=1) as display:
        display.on_event({"type": "after_training", "fits": ["blend"], "valid_samples": 1200,
                          "companion_rows": 0})  # fmt: skip
        display.on_event({"type": "after_training", "fits": [], "valid_samples": 7})
    text = out.getvalue()
    assert "after training: fitting the paths' blend on 1,200 validation samples" in text
    assert "companion" not in text and "on 7 validation" not in text


def test_an_ok_run_with_warnings_is_not_titled_ok() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    warned = {"run": "r", "status": "ok", "warnings": [{"code": "below_majority", "message": "m"}]}
    console.print(summary_table(warned))
    assert "— finished, 1 warning(s)" in out.getvalue() and "— ok" not in out.getvalue()
    console.print(summary_table({"run": "r2", "status": "ok", "warnings": []}))
    assert "run r2 — ok" in out.getvalue()


def test_the_accuracy_says_how_many_test_reviews_back_it() -> None:
    import subprocess
    import sys

    from tui.cli.headless import accuracy_cell

    assert accuracy_cell({"accuracy": 0.8, "n_test": 20}) == (
        "0.8000 (95 % 0.5840-0.9193, 20 test reviews)"  # Wilson: 16 of 20
    )
    assert accuracy_cell({"accuracy": 0.8}) == "0.8000"  # an older summary without n_test
    blended = {"applied": True, "weights": [1.2, 0.6, -0.1]}  # fitted on the test split
    for summary in ({"blend": blended}, {"train": {"blend": blended}}):  # train's, or a run's
        assert accuracy_cell({"accuracy": 0.8, "n_test": 20, **summary}) == (
            "0.8000 (95 % 0.5840-0.9193, 20 test reviews; the blend of the model's paths "
            "(3 weights) was chosen on them too)"
        )
    kept = {"epochs": 3, "train": {"best_epoch": 1, "blend": blended}}  # a run's summary
    assert accuracy_cell({"accuracy": 0.8, "n_test": 20, **kept}) == (
        "0.8000 (95 % 0.5840-0.9193, 20 test reviews; the epoch kept (2 of 3) and the blend of "
        "the model's paths (3 weights) were chosen on them too)"
    )
    unapplied = {"blend": {"applied": False, "weights": [1.0, 1.0, 0.0]}}
    assert "blend" not in accuracy_cell({"accuracy": 0.8, "n_test": 20, **unapplied})
    assert accuracy_cell({"accuracy": None, "n_test": 0}) == "—"
    code = "import sys, tui.cli.headless as h; h.accuracy_cell({'accuracy': 0.5, 'n_test': 4}); "
    code += "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # the headless display stays torch-free


def test_a_stopped_runs_table_shows_its_last_evaluated_epoch() -> None:
    """Its accuracy read "—" though epoch 1 had measured 0.8175 (trial M); the Runs screen
    showed that epoch's figures already."""
    console, out = _console()
    epochs = [{"epoch": 0, "accuracy": 0.8175, "f1": 0.87}, {"epoch": 1, "accuracy": None}]
    train = {"partial": True, "per_epoch": epochs}
    console.print(summary_table({"run": "r", "status": "interrupted", "train": train}))
    text = out.getvalue()
    assert "— (epoch 1: 0.8175, before the stop)" in text
    assert "— (epoch 1: 0.8700, before the stop)" in text
    console.print(summary_table({"run": "r", "status": "ok", "accuracy": 0.9, "n_test": 10}))
    assert "before the stop" not in out.getvalue().split("r — ok")[-1]
