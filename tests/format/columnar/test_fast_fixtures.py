"""Real broker data: every log file of ../shared/fixtures decodes to the reference decoder's rows.

The fixtures (data directories written by Kafka 0.10.1 to 4.x brokers, every magic and codec,
transactions, compaction, KRaft metadata) live beside the repository only in CI; without them the
module skips. Files are only read.
"""

from __future__ import annotations

from kafkalog.format import columnar as fast
from shared_fixtures import KAFKA_DATA, PRESENT, requires_shared_fixtures

from .fastcheck import columnar_outcome, reference_outcome

FILES = (
    sorted(
        p
        for p in KAFKA_DATA.rglob("*")
        if p.is_file()
        and (p.name.endswith((".log", ".log.swap", ".checkpoint")))
        and not p.name.endswith("-checkpoint")
    )
    if PRESENT
    else []
)


@requires_shared_fixtures
def test_every_fixture_file_decodes_like_the_reference():
    mismatches = []
    rows = 0
    for path in FILES:
        data = path.read_bytes()
        expected = reference_outcome(data)
        got = columnar_outcome(data, fast.kernels)
        if got != expected:
            mismatches.append(str(path.relative_to(KAFKA_DATA)))
        elif got[0] == "ok":
            rows += len(got[1])
    assert not mismatches, mismatches[:10]
    assert rows > 10_000
