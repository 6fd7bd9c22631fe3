"""Write docs/screenshots/<scene>.png for every scene: `python -m tests.tui.make_screenshots`.

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
    for name in names or list(SCENES):
        svg = pin_glyphs(asyncio.run(take(name)))
        svg_path = OUT / f"{name}.svg"
        svg_path.write_text(svg, encoding="utf-8")
        png = OUT / f"{name}.png"
        subprocess.run([converter, "-o", str(png), str(svg_path)], check=True)
        svg_path.unlink()
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
