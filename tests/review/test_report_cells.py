"""report.md tables keep their columns whatever text a CSV or a folder name brings."""

from __future__ import annotations

import re
from pathlib import Path

from remote.review.metrics import series_metrics
from remote.review.report import render_markdown
from remote.runs_store import import_csv

CSV = """run,instance_type,count,gpus,gpu_model,usd_per_hour,epochs,seconds,profile
r|1,my|box,1,1,GPU|X,1.5,2,100,p
r2,my|box,2,2,GPU|X,1.5,2,60,p
"""


def _columns(line: str) -> int:
    """Cells of a Markdown table row (an escaped `\\|` is text, not a border)."""
    return len(re.split(r"(?<!\\)\|", line)) - 2


def test_every_table_row_has_its_header_columns(tmp_path: Path) -> None:
    path = tmp_path / "published.csv"
    path.write_text(CSV)
    text = render_markdown(series_metrics(import_csv(path)), None, None)
    tables: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert len(tables) == 2  # the $/hours table and the runs table
    for table in tables:
        assert len(table) == 4  # header, rule, two rows
        assert {_columns(row) for row in table} == {_columns(table[0])}
    assert "1×my\\|box" in text and "GPU\\|X" in text
