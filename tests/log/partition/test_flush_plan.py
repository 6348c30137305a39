"""Log.plan_flush / FlushPlan.run / Log.complete_flush: a flush in three steps (the broker runs
the middle one on a worker thread), and the flush that leaves the active segment's indexes out.

The marks: ``durable_offset`` moves over records whose ``.log`` is fsynced; the recovery point
only over segments whose ``.log`` and indexes are, so a power cut is recovered (indexes rebuilt)
from the active segment on. Checked against the simulated disk of tests/log/test_crash.py: after a
power cut at a random moment, every record a data-only flush covered is there after recovery.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.partition import Log
from kafkalog.log.partition.config import LogConfig

from .. import crash_writer
from ..test_crash import INDEX_BYTES, PARTITION_DIR, Checker, Crash, RecordingDisk, check_lookups


def open_log(path: Path) -> Log:
    config = LogConfig({"segment.index.bytes": "4096", "index.interval.bytes": "1"})
    return Log.open(path, config=config, clock=MockClock(now_ms=crash_writer.T0),
                    writable=True, create=True)  # fmt: skip


def append(log: Log, count: int = 2) -> None:
    end = log.log_end_offset
    log.append_as_leader(crash_writer.build_batch(end, count, 77, end))


def names(plan) -> list[str]:
    return sorted(os.path.basename(p.path) for p in plan.pins)


def test_data_only_flush_leaves_the_recovery_point_at_the_active_segment(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log)
    plan = log.plan_flush(indexes=False)
    assert names(plan) == ["00000000000000000000.log"] and plan.directory_fd is not None
    plan.run()
    log.complete_flush(plan)
    assert (log.durable_offset, log.recovery_point) == (2, 0)
    assert log.plan_flush(indexes=False).empty  # nothing new

    append(log)
    log.roll()
    append(log)
    plan = log.plan_flush(indexes=False)
    # The rolled segment whole (its .log, whose last records are not durable yet, and its
    # indexes), the new one's .log, and the directory (a new file in it).
    assert names(plan) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "00000000000000000004.log",
    ]  # fmt: skip
    assert plan.directory_fd is not None
    plan.run()
    log.complete_flush(plan)
    assert (log.durable_offset, log.recovery_point) == (6, 4)

    append(log)
    plan = log.plan_flush(indexes=False)
    assert names(plan) == ["00000000000000000004.log"] and plan.directory_fd is None
    plan.release()  # not run: nothing moves
    assert log.durable_offset == 6

    log.flush()  # the whole flush: indexes too, the recovery point to the end
    assert (log.durable_offset, log.recovery_point) == (8, 8)
    log.close()


def test_a_plan_survives_its_segment_being_deleted_and_a_truncation_voids_it(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log)
    log.roll()
    append(log)
    plan = log.plan_flush(indexes=False)
    # Meanwhile the first segment goes (as retention or DeleteRecords would): its descriptor,
    # pinned, stays valid, and the fsync succeeds.
    assert log.increment_log_start_offset(2) == 2
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    plan.run()
    log.complete_flush(plan)
    assert log.durable_offset == 4

    append(log)
    plan = log.plan_flush(indexes=False)
    log.truncate_to(5)
    append(log, 1)  # other bytes at offset 5 now
    plan.run()
    log.complete_flush(plan)  # void: planned before the truncation
    assert log.durable_offset == 4
    log.close()


def test_a_closed_segment_of_a_pending_plan_keeps_its_descriptor(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log)
    plan = log.plan_flush(indexes=True)
    fds = [p.fd for p in plan.pins]
    log.close()  # closing is deferred for the pinned descriptors
    for fd in fds:
        os.fstat(fd)
    plan.run()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def data_only_writer(root: Path, disk: RecordingDisk, rng: random.Random) -> None:
    manager = LogManager(root, writable=True, create=True, clock=MockClock(now_ms=crash_writer.T0))
    configs = {**crash_writer.TOPIC_CONFIGS, "internal.segment.bytes": "4096",
               "index.interval.bytes": "300", "segment.index.bytes": str(INDEX_BYTES)}  # fmt: skip
    (log,) = manager.create_topic(crash_writer.TOPIC, 1, configs)
    seq = 0
    for _ in range(150):
        count = rng.randint(1, 4)
        log.append_as_leader(crash_writer.build_batch(seq, count, 77, seq))
        seq += count
        if rng.random() < 0.35:
            plan = log.plan_flush(indexes=False)  # as the broker's acks=all flushes
            plan.run()
            log.complete_flush(plan)
            disk.acked = log.durable_offset  # what a produce would acknowledge now
        if rng.random() < 0.1:
            manager.checkpoint()  # the recovery point it writes is the one kept in memory
    disk.power_off()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_after_a_power_cut_every_record_of_a_data_only_flush_is_kept(tmp_path, monkeypatch, seed):
    rng = random.Random(1000 + seed)
    live, after = tmp_path / "live", tmp_path / "after"
    disk = RecordingDisk(live, budget=rng.randint(1, 700))
    with monkeypatch.context() as patched:
        disk.install(patched)
        with pytest.raises(Crash):
            data_only_writer(live, disk, rng)
    found = disk.after_power_cut(after, rng)
    if not any(p.startswith(f"{PARTITION_DIR}/") for p in found):
        assert disk.acked == 0
        return
    checker = Checker()
    with LogManager(after, writable=True, clock=MockClock(now_ms=crash_writer.T0)) as manager:
        log = manager.get_log(crash_writer.PARTITION)
        assert log.log_end_offset >= disk.acked, "a record a flush covered was lost"
        check_lookups(log, checker, rng)  # the rebuilt indexes find what a scan finds
    if disk.acked:
        checker.check(after / PARTITION_DIR, disk.acked - 1, trimmed=True)
