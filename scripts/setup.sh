#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install kafkalog into it.
# Usage: scripts/setup.sh [extra]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "kafkalog needs Python 3.10 or newer; $PY is $("$PY" -V 2>&1)" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
spec="."
if [ $# -gt 0 ] && [ -n "$1" ]; then spec=".[$1]"; fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
