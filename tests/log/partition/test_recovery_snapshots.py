"""Producer snapshots after log recovery: rewritten as Kafka's LogLoader does.

Kafka's recoverSegment rebuilds the producer state of each segment it recovers in a fresh
ProducerStateManager (UnifiedLog.rebuildProducerState): the snapshots above the segment's base are
deleted, the newest one at or below it is reloaded without the producers idle for
producer.id.expiration.ms by the broker's clock, the segment is replayed and a snapshot is taken at
its end. So a recovered log's snapshots drop the producers that had expired when it was recovered.
kafkalog keeps the snapshots it replaces in the partition's quarantine.
"""

from __future__ import annotations

from pathlib import Path

from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.loader import rebuild_producer_state
from kafkalog.log.partition.log import Log
from kafkalog.log.partition.quarantine import QUARANTINE_DIR_NAME
from kafkalog.log.producer.snapshot import decode_snapshot, snapshot_file_path
from kafkalog.log.producer.state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager

T0 = 1_700_000_000_000
EXPIRED = T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS  # every producer of the load is idle that long
FRESH = T0 + 60_000


def cfg() -> LogConfig:
    far = 1 << 50  # message.timestamp.*.max.ms: the batches' timestamps are never out of range
    return LogConfig(
        {"message.timestamp.after.max.ms": far, "message.timestamp.before.max.ms": far}
    )


def idempotent_batch(pid: int) -> bytes:
    """One record from idempotent producer ``pid`` (epoch 0, sequence 0), as kafka-python's
    producer builds it, at T0."""
    builder = KpBuilder(2, 0, 1 << 30, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert builder.append(T0, b"k", b"v%d" % pid, []) is not None
    builder.close()
    return bytes(builder.buffer())


def _build(directory: Path) -> dict[int, bytes]:
    """Three segments: producers 1 and 2 (offsets 0, 1), 3 (offset 2), 4 (offset 3); snapshots at
    each roll (2, 3) and at the clean close (4). Returns the snapshot files' bytes by offset."""
    log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0), writable=True, create=True)
    for i, pids in enumerate(([1, 2], [3], [4])):
        if i:
            log.roll()
        for pid in pids:
            log.append_as_leader(idempotent_batch(pid))
    log.close()
    return _snapshots(directory)


def _snapshots(directory: Path) -> dict[int, bytes]:
    return {int(p.name.split(".")[0]): p.read_bytes() for p in directory.glob("*.snapshot")}


def _producers(data: bytes) -> list[tuple[int, int]]:
    """(producer id, last offset) of each entry."""
    return sorted((e.producer_id, e.last_data_offset) for e in decode_snapshot(data))


def _recover(directory: Path, now_ms: int, **kw) -> None:
    kw.setdefault("had_clean_shutdown", False)
    log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=now_ms), writable=True, **kw)
    log.close()


def _quarantined(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (directory / QUARANTINE_DIR_NAME).glob("*/*.snapshot")}


def test_full_recovery_rewrites_each_snapshot_without_expired_producers(tmp_path: Path) -> None:
    before = _build(tmp_path)
    assert {o: _producers(b) for o, b in before.items()} == {
        2: [(1, 0), (2, 1)],
        3: [(1, 0), (2, 1), (3, 2)],
        4: [(1, 0), (2, 1), (3, 2), (4, 3)],
    }
    _recover(tmp_path, EXPIRED, recovery_point=0)
    after = _snapshots(tmp_path)
    # Segment 0 is replayed from nothing; each later one from the previous snapshot, reloaded
    # without the producers expired by now: only the segment's own producers remain.
    assert {o: _producers(b) for o, b in after.items()} == {
        2: [(1, 0), (2, 1)],
        3: [(3, 2)],
        4: [(4, 3)],
    }
    assert after[2] == before[2]
    # Recovering segment 0 deleted every snapshot above offset 0: the old files are kept.
    assert _quarantined(tmp_path) == {snapshot_file_path("", o).name: before[o] for o in before}


def test_recovery_keeps_snapshots_whose_producers_are_not_expired(tmp_path: Path) -> None:
    before = _build(tmp_path)
    _recover(tmp_path, FRESH, recovery_point=0)
    assert _snapshots(tmp_path) == before


def test_recovery_rewrites_only_the_snapshots_above_the_recovered_segment(tmp_path: Path) -> None:
    before = _build(tmp_path)
    stray = snapshot_file_path(tmp_path, 9)  # above the log end: a broker's stale file
    stray.write_bytes(before[4])
    _recover(tmp_path, EXPIRED, recovery_point=3)
    after = _snapshots(tmp_path)
    assert sorted(after) == [2, 3, 4]
    assert after[2] == before[2] and after[3] == before[3]  # below the recovered segment (3)
    assert _producers(after[4]) == [(4, 3)]
    assert set(_quarantined(tmp_path)) == {stray.name, snapshot_file_path("", 4).name}


def test_index_rebuild_after_a_clean_shutdown_rewrites_the_snapshots_above(
    tmp_path: Path,
) -> None:
    # Kafka's loadSegmentFiles recovers a segment whose index is missing the same way
    # (recoverSegment), and the load's last rebuildProducerState replays up to the log end.
    before = _build(tmp_path)
    (tmp_path / "00000000000000000002.index").unlink()
    _recover(tmp_path, EXPIRED, had_clean_shutdown=True, recovery_point=4)
    after = _snapshots(tmp_path)
    assert {o: _producers(b) for o, b in after.items()} == {
        2: [(1, 0), (2, 1)],
        3: [(3, 2)],
        4: [(4, 3)],
    }
    assert after[2] == before[2]


def test_rebuild_without_snapshots_after_a_clean_shutdown_takes_empty_ones(
    tmp_path: Path,
) -> None:
    # rebuildProducerState's upgrade path: no snapshot and a clean shutdown, nothing replayed;
    # empty snapshots at the last two segments' bases and at the log end.
    _build(tmp_path)
    for path in tmp_path.glob("*.snapshot"):
        path.unlink()
    log = Log.open(tmp_path, config=cfg(), clock=MockClock(now_ms=FRESH))
    state = ProducerStateManager(tmp_path, clock=MockClock(now_ms=FRESH))
    rebuild_producer_state(state, log.segments, 0, 4, reload_from_clean_shutdown=True)
    log.close()
    assert {o: _producers(b) for o, b in _snapshots(tmp_path).items()} == {2: [], 3: [], 4: []}
