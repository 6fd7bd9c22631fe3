"""The dashboard process never imports torch (nor h5py), through every screen."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tui.fakes import FIXTURE_RUN

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dashboard_process_never_imports_torch(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from tui.app import make_app

        async def main():
            app = make_app(replay={str(FIXTURE_RUN)!r}, profiles_dir={str(tmp_path)!r},
                           runs_dir={str(FIXTURE_RUN.parent)!r})
            async with app.run_test(size=(120, 40)) as pilot:
                for key in ("1", "2", "3", "4", "question_mark", "escape"):
                    await pilot.press(key)
                    await app.workers.wait_for_complete()
                    await pilot.pause(0.2)
                assert app.run_screen.state.status == "ok", app.run_screen.state.status

        asyncio.run(main())
        heavy = sorted(m for m in ("torch", "h5py", "mrjob") if m in sys.modules)
        print("HEAVY", heavy)
        sys.exit(1 if heavy else 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "HEAVY []" in result.stdout
