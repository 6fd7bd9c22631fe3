#!/usr/bin/env bash
# Create .venv with sentitop and its dependencies (CPU torch pinned: an unpinned torch pulls GBs of CUDA wheels).
# Usage: bash scripts/setup.sh [dev]   — "dev" adds test/lint tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extra=""
[[ "${1:-}" == "dev" ]] && extra="[dev]"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".${extra}"
