#!/usr/bin/env bash
# Set up .venv with the test extras, lint, and run the whole test suite twice: on the compiled
# kernels of the fast path, then on their pure-Python twins (KAFKALOG_PUREPYTHON=1), as msgpack does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
.venv/bin/python -m pytest "$@"
# The second pass skips only tests marked slow (e.g. the sanitizer fuzz of the C kernels).
KAFKALOG_PUREPYTHON=1 .venv/bin/python -m pytest -m "not slow" "$@"
