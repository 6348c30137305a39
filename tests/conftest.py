"""Suite-wide: the one rule for the real-broker fixtures (tests/shared_fixtures.py). In CI
(KAFKALOG_REQUIRE_FIXTURES=1, set by .ci/run) the run stops before any test when they are absent,
instead of letting the tests that read them skip."""

from __future__ import annotations

import os

import pytest

from shared_fixtures import FIXTURES, PRESENT, REASON, SharedFixtures


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KAFKALOG_REQUIRE_FIXTURES") == "1" and not PRESENT:
        pytest.exit(
            f"KAFKALOG_REQUIRE_FIXTURES=1 but the real-broker fixtures are not at {FIXTURES} "
            "(kafka-data/ and EXPECTED.json expected)",
            returncode=4,
        )


@pytest.fixture(scope="session")
def shared_fixtures() -> SharedFixtures:
    """The real-broker fixtures (paths, EXPECTED.json, MISSING.json); skips without them."""
    if not PRESENT:
        pytest.skip(REASON)
    return SharedFixtures()
