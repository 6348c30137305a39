"""Where the real-broker fixtures live, and the one rule for the tests that read them.

``../shared/fixtures`` beside the repository (present in CI; ``KAFKALOG_SHARED_FIXTURES`` names
another directory): ``kafka-data/`` holds data directories written by real Kafka brokers,
``EXPECTED.json`` what an independent decoder found in them and ``MISSING.json`` the files that
could not be obtained. The files are only read.

The rule: the fixtures are there when ``PRESENT`` (``EXPECTED.json`` and ``kafka-data/`` both).
A test that reads them is marked ``@requires_shared_fixtures`` (a module whose every test does:
``pytestmark = requires_shared_fixtures``), or takes the ``shared_fixtures`` fixture of
tests/conftest.py; either skips it with ``REASON`` on a clone without them. Module-level data
derived from them (``EXPECTED``, ``MISSING``, ``DATA_DIRS``, e.g. to parametrize) is empty then, so
that collection still succeeds. CI sets KAFKALOG_REQUIRE_FIXTURES=1, and then the run stops before
any test when they are absent (tests/conftest.py), so that they cannot skip there unnoticed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(
    os.environ.get("KAFKALOG_SHARED_FIXTURES")
    or Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
)
KAFKA_DATA = FIXTURES / "kafka-data"
PRESENT = (FIXTURES / "EXPECTED.json").is_file() and KAFKA_DATA.is_dir()

REASON = (
    "../shared/fixtures (kafka-data/, EXPECTED.json) not found: the real-broker fixtures are only "
    "present beside the repository, in CI"
)
requires_shared_fixtures = pytest.mark.skipif(not PRESENT, reason=REASON)


@cache
def _read(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text()) if PRESENT else {}


def __getattr__(name: str) -> Any:
    """``EXPECTED`` and ``MISSING`` (the parsed JSON files, ``{}`` without the fixtures) and
    ``DATA_DIRS`` (the names of kafka-data's directories, sorted; ``[]`` without them), read on
    first use only: most runs never need the 2 MB of EXPECTED.json."""
    if name == "EXPECTED":
        return _read("EXPECTED.json")
    if name == "MISSING":
        return _read("MISSING.json")
    if name == "DATA_DIRS":
        return sorted(p.name for p in KAFKA_DATA.iterdir() if p.is_dir()) if PRESENT else []
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class SharedFixtures:
    """What the ``shared_fixtures`` fixture gives: the paths and the parsed JSON files."""

    root: Path = FIXTURES
    kafka_data: Path = KAFKA_DATA

    @property
    def expected(self) -> dict:
        return _read("EXPECTED.json")

    @property
    def missing(self) -> dict:
        return _read("MISSING.json")
