"""Write docs/screenshots/<scene>.png for every scene: `python -m tests.tui.make_screenshots`.

`run.png` (mid-run) and `run-live-local.png` (finished) come from a live run of the embedded
default profile (profiles/local.yaml: real processes, about a minute); the other scenes from
the fakes. `--fixture` takes `run.png` from the replayed fixture instead.

The SVG comes from Textual's own export; before rsvg-convert turns it into PNG, each text run
is split into one text element per cell, because rsvg ignores `textLength` and fallback fonts
(braille) would otherwise drift out of their cells.
"""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.cells import cell_len

from tests.tui.scenes import SCENES, SIZE

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_TEXT = re.compile(
    r'<text([^>]*?) x="([0-9.]+)"([^>]*?)textLength="([0-9.]+)"([^>]*)>([^<]*)</text>'
)


def pin_glyphs(svg: str) -> str:
    """Give every character of each text run its own x (its terminal cell)."""

    def one(match: re.Match[str]) -> str:
        pre, x, mid, length, post, body = match.groups()
        chars = html.unescape(body)
        cells = cell_len(chars)
        if not chars or cells == 0:
            return match.group(0)
        width = float(length) / cells
        parts, pos = [], float(x)
        for ch in chars:
            if not ch.isspace():
                glyph = html.escape(ch)
                parts.append(f'<text{pre} x="{pos:.1f}"{mid}{post}>{glyph}</text>')
            pos += width * max(cell_len(ch), 1)
        return "".join(parts)

    svg = _TEXT.sub(one, svg)
    return svg.replace("Fira Code", "DejaVu Sans Mono")


LIVE = ("run", "run-live-local")
"""Scenes taken from a live run of profiles/local.yaml (mid-run, finished)."""


async def take_live() -> dict[str, str]:
    """SVGs of a live run of the default profile: two epochs in, and at the end."""
    from tests.tui.scenes import SIZE
    from tui.app import make_app

    root = Path(__file__).resolve().parents[2]
    shots: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        profiles = Path(tmp) / "profiles"
        profiles.mkdir()
        shutil.copy(root / "profiles" / "local.yaml", profiles / "local.yaml")
        app = make_app(profiles_dir=profiles, runs_dir=Path(tmp) / "runs")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(1.0)
            await app.workers.wait_for_complete()
            await pilot.press("r")
            screen, deadline = app.run_screen, time.monotonic() + 600
            await pilot.pause(1.0)
            while screen.live and time.monotonic() < deadline and "run" not in shots:
                await pilot.pause(0.2)
                if screen.state.epochs_seen >= 2:
                    await pilot.pause(2.5)  # a few steps into the last epoch
                    shots["run"] = app.export_screenshot(title="sentitop — run (live)")
            while screen.live and time.monotonic() < deadline:
                await pilot.pause(0.5)
            await pilot.pause(1.0)
            shots["run-live-local"] = app.export_screenshot(title="sentitop — run-live-local")
    return shots


async def take(name: str) -> str:
    """The SVG of one scene."""
    scene = SCENES[name]
    app = scene.make()
    async with app.run_test(size=SIZE) as pilot:
        await scene.run_before(pilot)
        return app.export_screenshot(title=f"sentitop — {name}")


def main(names: list[str]) -> int:
    """Write the PNGs; returns an exit code."""
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print("rsvg-convert not found: apt-get install -y librsvg2-bin", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    fixture = "--fixture" in names
    names = [n for n in names if n != "--fixture"] or [*SCENES, "run-live-local"]
    live = {} if fixture or not set(LIVE) & set(names) else asyncio.run(take_live())
    for name in names:
        svg = pin_glyphs(live[name] if name in live else asyncio.run(take(name)))
        svg_path = OUT / f"{name}.svg"
        svg_path.write_text(svg, encoding="utf-8")
        png = OUT / f"{name}.png"
        subprocess.run([converter, "-o", str(png), str(svg_path)], check=True)
        svg_path.unlink()
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
