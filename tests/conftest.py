"""Suite-wide: in CI (KAFKALOG_REQUIRE_FIXTURES=1, set by .ci/run) the run stops before any test
when the real-broker fixtures are absent, instead of letting the tests that read them skip."""

from __future__ import annotations

import os

import pytest

from shared_fixtures import FIXTURES, PRESENT


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KAFKALOG_REQUIRE_FIXTURES") == "1" and not PRESENT:
        pytest.exit(
            f"KAFKALOG_REQUIRE_FIXTURES=1 but the real-broker fixtures are not at {FIXTURES} "
            "(kafka-data/ and EXPECTED.json expected)",
            returncode=4,
        )
