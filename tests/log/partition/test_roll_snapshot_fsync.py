"""A roll fsyncs nothing (it runs on a broker's event loop): its producer snapshot is written
complete but unsynced, and the next flush fsyncs it before the recovery point passes it, as
Kafka's UnifiedLog.roll leaves it to the flush-log task."""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.log import Log
from kafkalog.log.producer.snapshot import read_snapshot

from ..cleaner.test_cleaner import T0, kp_batch


def test_roll_fsyncs_nothing_and_the_next_flush_makes_its_snapshot_durable_first(
    tmp_path: Path, monkeypatch
) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig({"segment.index.bytes": 1200}),
                   clock=MockClock(now_ms=T0), writable=True, create=True)  # fmt: skip
    log.append_as_leader(kp_batch([(b"k", b"v")], pid=7, epoch=0, seq=0, ts=T0))
    real = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    new_base = log.roll().base_offset
    assert synced == []  # nothing fsynced on the append path
    snapshot = log.dir / f"{new_base:020d}.snapshot"
    assert log.unsynced_snapshots == [snapshot]
    assert [e.producer_id for e in read_snapshot(snapshot)] == [7]  # complete, renamed in
    log.append_as_leader(kp_batch([(b"k", b"w")], pid=7, epoch=0, seq=1, ts=T0))

    plan = log.plan_flush(indexes=False)
    assert plan.snapshots == (snapshot,) and plan.directory_fd is not None
    assert log.recovery_point < new_base  # not before the snapshot is durable
    plan.run()
    assert synced[0] == str(snapshot)  # the snapshot first (Kafka's flush-log order)
    assert synced[-1] == str(log.dir)  # the directory last: the snapshot's rename too
    log.complete_flush(plan)
    assert log.recovery_point == new_base and log.unsynced_snapshots == []
    log.close()


def test_a_snapshot_deleted_before_the_flush_is_skipped(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", config=LogConfig({"segment.index.bytes": 1200}),
                   clock=MockClock(now_ms=T0), writable=True, create=True)  # fmt: skip
    log.append_as_leader(kp_batch([(b"k", b"v")], ts=T0))
    log.roll()
    (snapshot,) = log.unsynced_snapshots
    snapshot.unlink()
    log.flush()
    assert log.unsynced_snapshots == []
    log.close()
