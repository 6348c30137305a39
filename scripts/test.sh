#!/usr/bin/env bash
# Set up .venv with the test extras, lint, and run the test suite twice, as msgpack does: on the
# compiled kernels of the fast path, then on their pure-Python twins (KAFKALOG_PUREPYTHON=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
scripts/kafka.sh >/dev/null # Apache Kafka for tests/apache_kafka (cached; skips unless CI=true)
# Kafka 3.9, the last release with ZooKeeper mode and the legacy message formats (magic 0 and 1),
# for tests/apache_kafka/test_kafka_legacy_formats.py (cached; skips unless CI=true, as above).
KAFKALOG_KAFKA_VERSION=${KAFKALOG_LEGACY_KAFKA_VERSION:-3.9.2} scripts/kafka.sh >/dev/null
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
.venv/bin/lint-imports --no-cache # the layering contracts in pyproject.toml
.venv/bin/python -m pytest --durations=15 "$@"
# The second pass runs every test again on the twins but those marked slow: the sanitizer fuzz of
# the C kernels, and the crash, durability and fixture sweeps whose subject is the log and the
# processes around it, which reach the kernels through code the first pass already covers.
KAFKALOG_PUREPYTHON=1 .venv/bin/python -m pytest -m "not slow" "$@"
