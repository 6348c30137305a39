"""Where the real-broker fixtures live: ../shared/fixtures beside the repository, present in CI.

``kafka-data/`` holds data directories written by real Kafka brokers, ``EXPECTED.json`` what an
independent decoder found in them and ``MISSING.json`` the files that could not be obtained.
Tests that read them skip on a clone without them; CI sets KAFKALOG_REQUIRE_FIXTURES=1, and then
the run stops before any test when they are absent (tests/conftest.py), so that they cannot skip
there unnoticed. The files are only read.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
KAFKA_DATA = FIXTURES / "kafka-data"
PRESENT = (FIXTURES / "EXPECTED.json").is_file() and KAFKA_DATA.is_dir()
