#!/usr/bin/env bash
# Set up .venv with the test extras, lint, and run the whole test suite twice: on the compiled
# kernels of the fast path, then on their pure-Python twins (KAFKALOG_PUREPYTHON=1), as msgpack does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
.venv/bin/python -m pytest --durations=15 "$@"
# The second pass runs the layers that decode and encode (format, fast path, log, Arrow reader) on
# the twins, skipping tests marked slow (e.g. the sanitizer fuzz of the C kernels); the edges above
# them (command line, server, Spark) reach the kernels only through these layers.
KAFKALOG_PUREPYTHON=1 .venv/bin/python -m pytest -m "not slow" \
  tests/format tests/fast tests/property tests/interop tests/log tests/arrow "$@"
