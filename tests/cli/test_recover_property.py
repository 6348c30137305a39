"""Recovery's dry run predicts what it then does: for any bit flip, cut or zero-filled tail of a
partition's segments, the plan's truncation position and log end offset are those the loader
produces, the plan changes no byte, and the recovered partition verifies without error."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkalog.log.clock import MockClock
from kafkalog.log.partition.log import Log
from kafkalog.log.partition.recovery_plan import TRUNCATE, plan_recovery
from kafkalog.log.verify.data_dir import verify

from .operate_support import build, damaged, file_damage


@pytest.fixture(scope="module")
def partition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("prop") / "data", {"t": (1, {})}, batches=12) / "t-0"


def tree(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()
            if p.is_file()}  # fmt: skip


damage = file_damage(max_zeros=4096)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(segment=st.integers(0, 3), how=damage)
@example(segment=0, how=("flip", 7, 0))  # a base offset bit: kept by recovery, named by verify
def test_the_plan_is_what_recovery_does(partition: Path, tmp_path: Path, segment, how) -> None:
    work = Path(tempfile.mkdtemp(dir=tmp_path)) / "t-0"  # examples may repeat
    shutil.copytree(partition, work)
    logs = sorted(work.glob("*.log"))
    log = logs[segment % len(logs)]
    original = log.read_bytes()
    log.write_bytes(damaged(original, how))

    before = tree(work)
    plan = plan_recovery(work, recovery_point=0, had_clean_shutdown=False)
    assert tree(work) == before
    cuts = {Path(a.path).name: a.position for a in plan.actions if a.action == TRUNCATE}

    recovered = Log.open(work, clock=MockClock(now_ms=0), writable=True, recovery_point=0,
                         had_clean_shutdown=False)  # fmt: skip
    try:
        assert recovered.log_end_offset == plan.log_end_offset
    finally:
        recovered.close()
    for name, position in cuts.items():
        assert (work / name).stat().st_size == position
    errors = verify(work).errors
    if how[0] == "flip" and _in_base_offset(original, how[1] % max(len(original), 1)):
        # A batch's CRC does not cover its baseOffset, and Kafka's recovery keeps a batch whose
        # CRC holds: a flipped offset bit survives it, and verify rightly names the offsets.
        assert {e.code for e in errors} <= {"offset-order", "offset-gap", "index-mismatch"}
    else:
        assert errors == []


def _in_base_offset(data: bytes, at: int) -> bool:
    """Whether byte ``at`` lies in the baseOffset field (the first 8 bytes) of a batch."""
    pos = 0
    while pos + 12 <= len(data):
        if pos <= at < pos + 8:
            return True
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
    return False
