"""Import hygiene: light modules stay light, and the layers only import downwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "textual", "asyncssh", "boto3", "h5py")


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys\n{stmt}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return {name.split(".")[0] for name in out.stdout.split()}


@pytest.mark.parametrize("module", ["engine.config", "engine.events", "engine.errors"])
def test_engine_light_modules_load_no_heavy_packages(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert not loaded & set(HEAVY), f"{module} pulled in {sorted(loaded & set(HEAVY))}"


def test_cli_help_loads_no_torch_or_textual() -> None:
    loaded = _loaded_after("from tui.cli import build_parser; build_parser()")
    assert "torch" not in loaded
    assert "textual" not in loaded


def test_import_contract_holds() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), i.e. import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_lazy_imports_included() -> None:
    """grimp reads every import statement, also those inside functions."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("engine", "remote", "tui")
    modules = set(graph.modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(edges) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
