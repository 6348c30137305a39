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
# pytest's exit status 5 ("no tests collected") is success here: arguments that pick a few
# tests may leave one of the passes below with none.
pytest() {
    local status=0
    .venv/bin/python -m pytest "$@" || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 5 ] || exit "$status"
}
# The tests not marked slow run on every core (pytest-xdist, a test module per worker, so that a
# module's server or broker starts once); the slow ones (Apache Kafka brokers, Spark, crash and
# durability runs by killing processes) one at a time, as their timeouts assume a quiet machine.
pytest -m "not slow" -n auto --dist loadfile "$@"
pytest -m slow --durations=15 "$@"
# The second pass runs the tests again on the twins but those marked slow (the sanitizer fuzz of
# the C kernels, and the crash, durability and fixture sweeps whose subject is the log and the
# processes around it) and those of the wire protocol, the broker and Spark's plumbing
# (tests/protocol, tests/server, tests/spark): they reach the kernels through the format, log,
# dataset and Arrow code whose own tests this pass runs.
KAFKALOG_PUREPYTHON=1 pytest -m "not slow" -n auto --dist loadfile \
    --ignore=tests/protocol --ignore=tests/server --ignore=tests/spark "$@"
