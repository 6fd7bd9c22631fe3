#!/usr/bin/env bash
# The test command: set up the venv (dev extras), OS packages the tests need, then lint + type checks + pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v sshd >/dev/null 2>&1 || [[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v rsvg-convert >/dev/null 2>&1 || need+=(librsvg2-bin)
if (( ${#need[@]} )) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/setup.sh dev
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy engine remote tui
.venv/bin/lint-imports
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [[ $rc == 5 ]]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit $rc
