"""Log (kafkalog.log.partition.log): appends, rolls, indexes, reads, truncation, retention,
producer state.

Every expectation comes from what the test appended, and every segment the log writes is read
back by an independent decoder, kafka-python 3.0.12's ``kafka.record.MemoryRecords`` (CRCs checked,
decoded to the last byte). Index files are parsed here with ``struct`` from their on-disk bytes and
compared with a model of Kafka 4.x's rule (LogSegment.append): an entry ``(batch lastOffset, batch
position)`` when more than ``index.interval.bytes`` were written since the last entry, so never for
a segment's first batch; a time-index entry ``(max timestamp so far, its batch's last offset)``
with it when the timestamp grew, and one more on roll and close. Client batches are built with
kafka-python too; only transaction markers come from kafkalog's builder (kafka-python has none).
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.errors import KafkalogError
from kafkalog.format import ControlRecordType, build_end_txn_marker_batch
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Log,
    OffsetOutOfRangeError,
)
from kafkalog.log.producer.state import OutOfOrderSequenceError

T0 = 1_700_000_000_000
FAR = 1 << 50  # message.timestamp.*.max.ms: synthetic timestamps are never out of range
CODECS = {"none": 0, "gzip": 1}


# -- building input -------------------------------------------------------------------------------
def cfg(overrides: dict | None = None) -> LogConfig:
    base = {"message.timestamp.after.max.ms": FAR, "message.timestamp.before.max.ms": FAR}
    return LogConfig({**base, **(overrides or {})})


def client_batch(
    values: list[bytes],
    *,
    ts: int | list[int] = T0,
    keys: list[bytes] | None = None,
    codec: int = 0,
    offset: int = 0,
    producer_id: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    """One v2 batch as kafka-python's producer builds it; ``offset`` moves it there as a leader
    does for follower data (baseOffset is outside the CRC)."""
    builder = KpBuilder(
        2,
        codec,
        1 << 30,
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    stamps = ts if isinstance(ts, list) else [ts + i for i in range(len(values))]
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else b"k%d" % i
        assert builder.append(stamps[i], key, value, []) is not None
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


def marker(control: ControlRecordType, pid: int, epoch: int, *, ts: int = T0) -> bytes:
    return build_end_txn_marker_batch(
        control, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=ts
    )


def open_log(path: Path, overrides: dict | None = None, **kw) -> Log:
    kw.setdefault("clock", MockClock(now_ms=T0))
    return Log.open(path, config=cfg(overrides), writable=True, create=True, **kw)


# -- reading back independently ------------------------------------------------------------------
@dataclass(frozen=True)
class KpBatch:
    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    leader_epoch: int
    producer_id: int
    is_control: bool
    records: tuple[tuple[int, int, bytes | None, bytes | None], ...]  # offset, ts, key, value


def kp_batches(data: bytes) -> list[KpBatch]:
    """Every batch of ``data`` by kafka-python, CRC-checked; the bytes must end with a batch."""
    out, pos = [], 0
    records = KpRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), f"bad CRC in batch at position {pos}"
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        recs = tuple((r.offset, r.timestamp, r.key, r.value) for r in batch)
        out.append(
            KpBatch(pos, size, batch.base_offset, batch.last_offset, batch.max_timestamp,
                    batch.leader_epoch, batch.producer_id, batch.is_control_batch, recs)
        )  # fmt: skip
        pos += size
    assert pos == len(data) == records.valid_bytes(), "torn or undecodable bytes at the end"
    return out


def segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(suffix))


def log_batches(directory: Path) -> dict[int, list[KpBatch]]:
    """Base offset -> batches of every ``.log`` file of the directory, decoded by kafka-python."""
    return {int(p.name[:20]): kp_batches(p.read_bytes()) for p in segment_files(directory)}


def all_records(directory: Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [r for batches in log_batches(directory).values() for b in batches for r in b.records]


def index_entries(path: Path) -> list[tuple[int, int]]:
    """(absolute offset, position) of an ``.index`` file, up to Kafka's zero-tail rule."""
    base, data = int(path.name[:20]), path.read_bytes()
    out = []
    for i in range(len(data) // 8):
        relative, position = struct.unpack_from(">ii", data, i * 8)
        if (i > 0 and relative == 0) or (relative, position) == (0, 0):
            break  # an unwritten slot: no entry has relative offset 0 after slot 0 nor is (0, 0)
        out.append((base + relative, position))
    return out


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) of a ``.timeindex`` file, up to Kafka's zero-tail rule."""
    base, data = int(path.name[:20]), path.read_bytes()
    out = []
    for i in range(len(data) // 12):
        ts, relative = struct.unpack_from(">qi", data, i * 12)
        if (i > 0 and relative == 0) or (ts, relative) == (0, 0):
            break
        out.append((ts, base + relative))
    return out


def expected_indexes(batches: list[KpBatch], interval: int, *, closed: bool):
    """Kafka 4.x's offset and time index of a segment appended batch by batch in one session."""
    offsets, times = [], []
    since, max_ts, max_off = 0, -1, -1
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, max_off = b.max_timestamp, b.last_offset
        if since > interval:
            offsets.append((b.last_offset, b.position))
            if max_ts > (times[-1][0] if times else -1):
                times.append((max_ts, max_off))
            since = 0
        since += b.size
    if closed and max_off >= 0 and max_ts > (times[-1][0] if times else -1):
        times.append((max_ts, max_off))
    return offsets, times


def digest(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def read_snapshot_file(path: Path) -> dict[int, tuple[int, int, int]]:
    """producerId -> (epoch, last sequence, last offset) of a ``.snapshot`` (version 1 layout)."""
    data = path.read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and len(data) == 10 + 46 * count
    out = {}
    for i in range(count):
        pid, epoch, last_seq, last_offset, *_ = struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)
        out[pid] = (epoch, last_seq, last_offset)
    return out


# -- appends --------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_leader_appends_assign_consecutive_offsets_that_kafka_python_reads_back(
    tmp_path: Path, codec: str
) -> None:
    log = open_log(tmp_path / "t-0", {"internal.segment.bytes": 3000})
    sent, infos = [], []
    for i in range(40):
        values = [b"value-%d-%d-" % (i, j) + b"x" * (i * 7 % 90) for j in range(1 + i % 4)]
        keys = [b"key-%d-%d" % (i, j) for j in range(len(values))]
        infos.append(
            log.append_as_leader(
                client_batch(values, keys=keys, ts=T0 + i * 10, codec=CODECS[codec]),
                leader_epoch=3,
            )
        )
        sent += list(zip(keys, values))
    assert [(i.first_offset, i.last_offset) for i in infos] == [
        (sum(1 + k % 4 for k in range(i)), sum(1 + k % 4 for k in range(i + 1)) - 1)
        for i in range(40)
    ]
    assert log.log_end_offset == len(sent)
    log.close()
    batches = [b for bs in log_batches(tmp_path / "t-0").values() for b in bs]
    assert len(log_batches(tmp_path / "t-0")) > 1  # it rolled
    assert all(b.leader_epoch == 3 for b in batches)
    records = [r for b in batches for r in b.records]
    assert [r[0] for r in records] == list(range(len(sent)))
    assert [(r[2], r[3]) for r in records] == sent


def test_follower_appends_keep_the_leaders_offsets_and_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sent = [
        client_batch([b"a", b"b"], offset=0),
        client_batch([b"c"], offset=2),
        client_batch([b"d", b"e", b"f"], offset=6, codec=1),  # a gap, as compaction leaves
    ]
    info = log.append_as_follower(b"".join(sent[:2]))
    assert (info.first_offset, info.last_offset) == (0, 2)
    info = log.append_as_follower(sent[2])
    assert (info.first_offset, info.last_offset) == (6, 8)
    assert log.log_end_offset == 9
    log.close()
    (segment,) = segment_files(tmp_path / "t-0")
    assert segment.read_bytes() == b"".join(sent)
    assert [r[0] for r in all_records(tmp_path / "t-0")] == [0, 1, 2, 6, 7, 8]


def test_follower_refuses_offsets_below_the_log_end_and_bad_crcs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(client_batch([b"a", b"b"], offset=0))
    with pytest.raises(KafkalogError, match="Out of order offsets"):
        log.append_as_follower(client_batch([b"c"], offset=1))
    broken = bytearray(client_batch([b"c"], offset=2))
    broken[-1] ^= 0xFF
    with pytest.raises(KafkalogError):
        log.append_as_follower(bytes(broken))
    assert log.log_end_offset == 2
    log.close()
    assert [r[0] for r in all_records(tmp_path / "t-0")] == [0, 1]


# -- rolling --------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 700), min_size=1, max_size=40),
    segment_bytes=st.integers(300, 3000),
)
def test_segments_roll_when_the_next_batch_would_not_fit(
    tmp_path_factory, sizes: list[int], segment_bytes: int
) -> None:
    directory = tmp_path_factory.mktemp("roll") / "t-0"
    log = open_log(directory, {"internal.segment.bytes": segment_bytes})
    batches = [client_batch([b"v" * n]) for n in sizes]
    expected_bases, current, offset = [0], 0, 0
    for data in batches:
        if current > segment_bytes - len(data) and current > 0:  # Kafka's shouldRoll
            expected_bases.append(offset)
            current = 0
        log.append_as_leader(data)
        current += len(data)
        offset += 1
    log.close()
    assert sorted(log_batches(directory)) == expected_bases
    for base, got in log_batches(directory).items():
        assert got[0].base_offset == base


def test_segments_roll_by_record_time_after_segment_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", {"segment.ms": 1000})
    stamps = [T0, T0 + 500, T0 + 1000, T0 + 1001, T0 + 1500, T0 + 2002, T0 + 100]
    for ts in stamps:
        log.append_as_leader(client_batch([b"v"], ts=ts))
    log.close()
    # A segment rolls once a batch is more than segment.ms past the segment's first batch.
    assert sorted(log_batches(tmp_path / "t-0")) == [0, 3, 5]


def test_segments_roll_by_creation_time_when_batches_have_no_timestamp(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", {"segment.ms": 1000}, clock=clock)
    log.append_as_leader(client_batch([b"v"], ts=-1))
    clock.advance(1000)
    log.append_as_leader(client_batch([b"v"], ts=-1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append_as_leader(client_batch([b"v"], ts=-1))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_log_append_time_segments_roll_as_the_clock_moves(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(
        tmp_path / "t-0",
        {"segment.ms": 1000, "message.timestamp.type": "LogAppendTime"},
        clock=clock,
    )
    for step in (0, 600, 400, 1, 999, 2):
        clock.advance(step)
        log.append_as_leader(client_batch([b"v"], ts=1))
    log.close()
    assert sorted(log_batches(tmp_path / "t-0")) == [0, 3, 5]
    stamps = [b.max_timestamp for bs in log_batches(tmp_path / "t-0").values() for b in bs]
    assert stamps == [T0, T0 + 600, T0 + 1000, T0 + 1001, T0 + 2000, T0 + 2002]


def test_a_full_offset_index_rolls_the_segment(tmp_path: Path) -> None:
    # 48 bytes: 6 offset-index slots; constant timestamps keep the time index at one entry.
    log = open_log(tmp_path / "t-0", {"segment.index.bytes": 48, "index.interval.bytes": 0})
    for _ in range(20):
        log.append_as_leader(client_batch([b"v"], ts=T0))
    log.close()
    # Each batch after a segment's first gets an entry: 7 batches fill 6 slots.
    assert sorted(log_batches(tmp_path / "t-0")) == [0, 7, 14]
    for index in segment_files(tmp_path / "t-0", ".index")[:2]:
        assert len(index_entries(index)) == 6


def test_a_full_time_index_rolls_the_segment(tmp_path: Path) -> None:
    # 120 bytes: 15 offset slots, 10 time slots of which the last is kept for the roll entry.
    log = open_log(tmp_path / "t-0", {"segment.index.bytes": 120, "index.interval.bytes": 0})
    for i in range(30):
        log.append_as_leader(client_batch([b"v"], ts=T0 + i))
    log.close()
    assert sorted(log_batches(tmp_path / "t-0")) == [0, 10, 20]
    for index in segment_files(tmp_path / "t-0", ".timeindex")[:2]:
        # 9 appended; the roll entry would repeat the last timestamp, so none is added
        assert len(time_index_entries(index)) == 9


def test_reopening_does_not_roll_a_segment_with_room_left(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    for i in range(3):
        log = open_log(directory, {"index.interval.bytes": 50})
        for j in range(5):
            log.append_as_leader(client_batch([b"v" * 100], ts=T0 + i * 10 + j))
        log.close()
    assert sorted(log_batches(directory)) == [0]
    assert len(index_entries(directory / "00000000000000000000.index")) == 12  # 4 per session


# -- index entries --------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(st.integers(1, 4), st.integers(0, 400), st.integers(0, 5000)),
        min_size=1,
        max_size=50,
    ),
    interval=st.integers(0, 2000),
    segment_bytes=st.integers(2000, 20000),
)
def test_index_entries_follow_kafkas_rule_for_every_segment(
    tmp_path_factory, batches, interval: int, segment_bytes: int
) -> None:
    directory = tmp_path_factory.mktemp("idx") / "t-0"
    log = open_log(
        directory, {"index.interval.bytes": interval, "internal.segment.bytes": segment_bytes}
    )
    for n, size, ts in batches:
        log.append_as_leader(client_batch([b"v" * size] * n, ts=T0 + ts))
    # The active segment's preallocated files, read with Kafka's zero-tail rule, ...
    active = log.active_segment
    got_live = (index_entries(active.offset_index.file), time_index_entries(active.time_index.file))
    log.close()
    on_disk = log_batches(directory)
    live_batches = on_disk[active.base_offset]
    assert got_live == expected_indexes(live_batches, interval, closed=False)
    # ... and every segment once trimmed by roll or close.
    for base, segment in on_disk.items():
        offsets = directory / f"{base:020d}.index"
        times = directory / f"{base:020d}.timeindex"
        want = expected_indexes(segment, interval, closed=True)
        assert (index_entries(offsets), time_index_entries(times)) == want
        assert offsets.stat().st_size == 8 * len(want[0])
        assert times.stat().st_size == 12 * len(want[1])


# -- lookups --------------------------------------------------------------------------------------
def first_at_or_after(records, target_ts: int, start_offset: int = 0):
    return next(((ts, o) for o, ts, _, _ in records if ts >= target_ts and o >= start_offset), None)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(st.lists(st.integers(0, 3000), min_size=1, max_size=5), st.integers(0, 300)),
        min_size=1,
        max_size=40,
    ),
    interval=st.integers(0, 1500),
    segment_bytes=st.integers(600, 6000),
    codec=st.sampled_from(sorted(CODECS.values())),
    data=st.data(),
)
def test_lookups_by_offset_and_timestamp_agree_with_a_linear_scan(
    tmp_path_factory, batches, interval, segment_bytes, codec, data
) -> None:
    directory = tmp_path_factory.mktemp("lookup") / "t-0"
    log = open_log(
        directory,
        {"index.interval.bytes": interval, "internal.segment.bytes": segment_bytes},
    )
    for stamps, size in batches:
        log.append_as_leader(
            client_batch([b"v" * size] * len(stamps), ts=[T0 + t for t in stamps], codec=codec)
        )
    if data.draw(st.booleans()):  # lookups on a reopened log use the trimmed indexes
        log.close()
        log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0))
    scan = log_batches(directory)
    records = [r for bs in scan.values() for b in bs for r in b.records]
    for target in range(log.log_end_offset):
        info = log.read(target, 1)
        base = info.fetch_offset_metadata.segment_base_offset
        (first, *_) = kp_batches(info.records.read(info.records.start, info.records.end))
        want = next(b for b in scan[base] if b.last_offset >= target)
        assert (first.base_offset, first.last_offset, info.records.start) == (
            want.base_offset, want.last_offset, want.position,
        )  # fmt: skip
    for target in sorted({ts + d for _, ts, _, _ in records for d in (-1, 0, 1)}):
        found = log.fetch_offset_by_timestamp(target)
        want = first_at_or_after(records, target)
        assert (None if found is None else (found.timestamp, found.offset)) == want
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == len(records)
    log.close()


# -- reads ----------------------------------------------------------------------------------------
def test_a_read_is_the_file_from_the_batch_holding_the_offset_up_to_max_bytes(
    tmp_path: Path,
) -> None:
    # As Kafka's: the window may end inside a batch (consumers drop the partial one), and with
    # min_one_message it holds at least the whole first batch.
    log = open_log(tmp_path / "t-0")
    for i in range(10):
        log.append_as_leader(client_batch([b"v" * (10 * i)] * 2, ts=T0 + i))
    (scan,) = log_batches(tmp_path / "t-0").values()
    for target in range(20):
        start = next(b for b in scan if b.last_offset >= target)
        for max_bytes in (0, 1, start.size, start.size + 1, 300, 10_000):
            info = log.read(target, max_bytes, min_one_message=True)
            window = info.records
            length = min(
                max(max_bytes, start.size), scan[-1].position + scan[-1].size - start.position
            )
            assert (window.start, window.end) == (start.position, start.position + length)
            assert not info.first_entry_incomplete
            first = kp_batches(window.read(window.start, start.size))[0]
            assert first.base_offset <= target <= first.last_offset
            info = log.read(target, max_bytes, min_one_message=False)
            if max_bytes == 0:
                assert info.records is None
            else:
                assert info.records.size_in_bytes() == min(
                    max_bytes, scan[-1].position + scan[-1].size - start.position
                )
                assert info.first_entry_incomplete == (max_bytes < start.size)
    assert log.read(20, 100).records is None  # at the log end: nothing, no error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", {"internal.segment.bytes": 900})
    seq = {7: 0, 8: 0}

    def txn_data(pid: int, n: int = 2) -> int:
        info = log.append_as_leader(
            client_batch([b"t%d" % pid] * n, producer_id=pid, epoch=0, seq=seq[pid],
                         transactional=True)
        )  # fmt: skip
        seq[pid] += n
        return info.first_offset

    def end(pid: int, control: ControlRecordType) -> int:
        return log.append_as_leader(
            marker(control, pid, 0), origin=AppendOrigin.COORDINATOR
        ).first_offset

    log.append_as_leader(client_batch([b"plain"] * 3))  # 0-2
    first7 = txn_data(7)  # 3-4
    assert log.last_stable_offset == first7
    first8 = txn_data(8)  # 5-6
    txn_data(7)  # 7-8
    log.append_as_leader(client_batch([b"plain"]))  # 9
    abort7 = end(7, ControlRecordType.ABORT)  # 10
    assert log.last_stable_offset == first8
    commit8 = end(8, ControlRecordType.COMMIT)  # 11
    assert log.last_stable_offset == log.log_end_offset == commit8 + 1
    first7b = txn_data(7)  # 12-13: open
    log.append_as_leader(client_batch([b"plain"]))  # 14
    assert log.last_stable_offset == first7b

    scan = log_batches(tmp_path / "t-0")
    batches = [(base, b) for base, bs in scan.items() for b in bs]
    for start in range(log.log_end_offset + 1):
        info = log.read(start, 1 << 20, isolation="read_committed")
        if start >= first7b:
            assert info.records is None or info.records.size_in_bytes() == 0
            continue
        got = kp_batches(info.records.read(info.records.start, info.records.end))
        # The window never reaches the first batch of the open transaction.
        assert got[-1].last_offset < first7b
        assert got[0].base_offset <= start <= got[0].last_offset
        aborted = [
            (t.producer_id, t.first_offset, t.last_offset) for t in info.aborted_transactions
        ]
        want = [(7, first7, abort7)] if start <= abort7 else []
        assert aborted == want
    # read_uncommitted reads past the LSO
    info = log.read(first7b, 1 << 20)
    assert kp_batches(info.records.read(info.records.start, info.records.end))[0].producer_id == 7
    log.close()
    # The abort is recorded in the .txnindex of the segment holding the ABORT marker.
    marker_base = next(base for base, b in batches if b.base_offset == abort7)
    entries = []
    for path in segment_files(tmp_path / "t-0", ".txnindex"):
        data = path.read_bytes()
        assert path.name == f"{marker_base:020d}.txnindex" and len(data) == 34
        entries.append(struct.unpack(">hqqqq", data))
    assert entries == [(0, 7, first7, abort7, first8)]
    # Reopened, the log serves the same: LSO from the producer snapshot, aborts from the file.
    reopened = Log.open(tmp_path / "t-0", config=cfg(), clock=MockClock(now_ms=T0))
    assert reopened.last_stable_offset == first7b
    info = reopened.read(0, 1 << 20, isolation="read_committed")
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(7, first7)]
    assert reopened.read(first7b, 1 << 20, isolation="read_committed").records is None
    reopened.close()


# -- truncation -----------------------------------------------------------------------------------
@pytest.mark.parametrize("target", [0, 1, 5, 6, 7, 12, 19, 29, 30])
def test_truncate_to_removes_the_batch_holding_the_offset_and_everything_after(
    tmp_path: Path, target: int
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, {"internal.segment.bytes": 600, "index.interval.bytes": 100})
    for i in range(10):  # batches of 3: 0-2, 3-5, ...
        log.append_as_leader(client_batch([b"v" * 40] * 3, ts=T0 + i), leader_epoch=i // 3)
    log.truncate_to(target)
    kept_end = min(30, target - target % 3)
    assert log.log_end_offset == kept_end
    assert all(s.base_offset <= kept_end for s in log.segments)
    assert log.active_segment.read_next_offset() == kept_end
    kept_epochs = sorted({i // 3 for i in range(kept_end // 3)})
    assert [e.epoch for e in log.leader_epoch_cache.entries] == kept_epochs
    # appending continues at the new end
    info = log.append_as_leader(client_batch([b"new"]), leader_epoch=9)
    assert info.first_offset == kept_end
    log.close()
    records = all_records(directory)
    assert [r[0] for r in records] == list(range(kept_end + 1))
    assert records[-1][3] == b"new"
    for index in segment_files(directory, ".index"):
        base = int(index.name[:20])
        batches = log_batches(directory)[base]
        positions = {b.last_offset: b.position for b in batches}
        assert all(positions.get(o) == p for o, p in index_entries(index))


def test_increment_log_start_offset_hides_records_and_deletes_whole_segments(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, {"internal.segment.bytes": 500})
    for i in range(12):
        log.append_as_leader(client_batch([b"v" * 50] * 2, ts=T0 + i))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    new_start = bases[2] + 1
    assert log.increment_log_start_offset(new_start) == new_start
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert sorted(int(p.name[:20]) for p in segment_files(directory)) == bases[2:]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(new_start - 1, 100)
    info = log.read(new_start, 100)
    assert info.fetch_offset_metadata.segment_base_offset == bases[2]
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == new_start
    assert log.fetch_offset_by_timestamp(0).offset == new_start
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(log.log_end_offset + 1)
    assert log.increment_log_start_offset(1) == new_start  # never moves back
    log.close()


# -- retention ------------------------------------------------------------------------------------
@pytest.fixture
def renames(monkeypatch) -> list[tuple[str, str]]:
    """Every os.replace, as (source name, target name)."""
    seen: list[tuple[str, str]] = []
    real = os.replace

    def spy(src, dst, *a, **kw):
        seen.append((os.path.basename(src), os.path.basename(dst)))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", spy)
    return seen


def retention_log(directory: Path, overrides: dict, clock: MockClock) -> tuple[Log, list[int]]:
    log = open_log(directory, {"internal.segment.bytes": 400, **overrides}, clock=clock)
    for i in range(12):  # two batches per segment, 100 ms apart
        log.append_as_leader(client_batch([b"v" * 100], ts=T0 + 100 * i))
    return log, [s.base_offset for s in log.segments]


def assert_deleted_via_rename(renames, directory: Path, bases: list[int]) -> None:
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            name = f"{base:020d}{suffix}"
            assert (name, name + ".deleted") in renames
            assert (
                not (directory / name).exists() and not (directory / (name + ".deleted")).exists()
            )


def test_time_retention_deletes_segments_whose_newest_record_is_too_old(
    tmp_path: Path, renames
) -> None:
    clock = MockClock(now_ms=T0)
    log, bases = retention_log(tmp_path / "t-0", {"retention.ms": 1000}, clock)
    assert bases == [0, 2, 4, 6, 8, 10]
    clock.set_milliseconds(T0 + 100 * 5 + 1001)  # segments [0, 2, 4] end at T0+100..500
    deleted = log.delete_old_segments()
    assert len(deleted) == 3
    assert [s.base_offset for s in log.segments] == [6, 8, 10]
    assert log.log_start_offset == 6
    assert_deleted_via_rename(renames, tmp_path / "t-0", [0, 2, 4])
    clock.advance(10**9)  # everything is old: the log rolls and keeps its end offset
    log.delete_old_segments()
    assert [s.base_offset for s in log.segments] == [12]
    assert log.log_end_offset == log.log_start_offset == 12
    assert log.append_as_leader(client_batch([b"v"])).first_offset == 12
    log.close()


def test_size_retention_deletes_the_oldest_segments_beyond_retention_bytes(
    tmp_path: Path, renames
) -> None:
    clock = MockClock(now_ms=T0)
    log, bases = retention_log(tmp_path / "t-0", {}, clock)
    sizes = [s.size() for s in log.segments]
    limit = sum(sizes) - sizes[0] - sizes[1] - 1  # two whole segments over, not three
    log.config = log.config.with_overrides({"retention.bytes": limit})
    log.delete_old_segments()
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert_deleted_via_rename(renames, tmp_path / "t-0", bases[:2])
    log.close()


def test_log_start_retention_deletes_segments_below_the_start(tmp_path: Path, renames) -> None:
    clock = MockClock(now_ms=T0)
    log, bases = retention_log(tmp_path / "t-0", {}, clock)
    assert bases == [0, 2, 4, 6, 8, 10]
    log.log_start_offset = 5  # as checkpointed by an earlier DeleteRecords
    log.delete_old_segments()
    assert [s.base_offset for s in log.segments] == [4, 6, 8, 10]
    assert_deleted_via_rename(renames, tmp_path / "t-0", [0, 2])
    log.close()


# -- producer state -------------------------------------------------------------------------------
def test_a_retried_batch_is_answered_with_its_original_offsets(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    first = client_batch([b"a", b"b"], producer_id=42, epoch=1, seq=0)
    second = client_batch([b"c"], producer_id=42, epoch=1, seq=2)
    assert log.append_as_leader(first).first_offset == 0
    assert log.append_as_leader(second).first_offset == 2
    size = log.size_in_bytes()
    retry = log.append_as_leader(first)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert log.size_in_bytes() == size and log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(client_batch([b"gap"], producer_id=42, epoch=1, seq=5))
    log.close()
    # The state survives a reopen (read back from the snapshot written on close).
    assert read_snapshot_file(directory / f"{3:020d}.snapshot") == {42: (1, 2, 2)}
    log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0), writable=True)
    again = log.append_as_leader(second)
    assert (again.first_offset, again.duplicate) == (2, True)
    assert (
        log.append_as_leader(client_batch([b"d"], producer_id=42, epoch=1, seq=3)).first_offset == 3
    )
    log.close()
    assert [r[3] for r in all_records(directory)] == [b"a", b"b", b"c", b"d"]


def test_producer_snapshots_are_written_on_roll_and_close(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, {"internal.segment.bytes": 300})
    seqs = {1: 0, 2: 0}
    for i in range(8):
        pid = 1 + i % 2
        log.append_as_leader(client_batch([b"v" * 60], producer_id=pid, epoch=0, seq=seqs[pid]))
        seqs[pid] += 1
    rolled = [s.base_offset for s in log.segments][1:]
    assert rolled
    log.close()
    snapshots = sorted(int(p.name[:20]) for p in segment_files(directory, ".snapshot"))
    assert snapshots == sorted({*rolled, 8})
    for offset in snapshots:
        # What each snapshot says: every producer's last batch below its offset.
        want = {}
        for o in range(offset):
            want[1 + o % 2] = (0, o // 2, o)
        assert read_snapshot_file(directory / f"{offset:020d}.snapshot") == want


# -- reopening ------------------------------------------------------------------------------------
def test_reopening_a_closed_log_gives_the_same_log_and_changes_no_file(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, {"internal.segment.bytes": 700, "index.interval.bytes": 150})
    for i in range(30):
        log.append_as_leader(
            client_batch([b"v" * (i * 13 % 120)] * (1 + i % 3), ts=T0 + (i * 37) % 400,
                         producer_id=5, epoch=0, seq=sum(1 + k % 3 for k in range(i)))
        )  # fmt: skip
    log.increment_log_start_offset(4)

    def facts(log: Log):
        return (
            log.log_end_offset,
            [s.base_offset for s in log.segments],
            [log.read(o, 1).records.start for o in range(log.log_start_offset, log.log_end_offset)],
            [log.fetch_offset_by_timestamp(T0 + t) for t in range(0, 420, 7)],
            log.producer_state.last_entry(5).last_seq,
        )

    before = facts(log)
    log.close()
    files = digest(directory)
    reopened = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0), log_start_offset=4)
    assert facts(reopened) == before
    reopened.close()
    assert digest(directory) == files  # read-only opening writes nothing
    writable = Log.open(
        directory, config=cfg(), clock=MockClock(now_ms=T0), writable=True, log_start_offset=4
    )
    assert facts(writable) == before
    writable.close()
    assert digest(directory) == files  # nor does a writable open and close without appends


def test_unclean_reopen_rebuilds_the_same_indexes_and_producer_state(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, {"internal.segment.bytes": 2000, "index.interval.bytes": 200})
    for i in range(25):
        log.append_as_leader(
            client_batch([b"v" * 70] * 2, ts=T0 + i, producer_id=9, epoch=0, seq=2 * i)
        )
    log.close()
    files = digest(directory)
    for path in directory.iterdir():
        if path.suffix in (".index", ".timeindex", ".snapshot"):
            path.unlink()
    log = Log.open(
        directory, config=cfg({"index.interval.bytes": 200}), clock=MockClock(now_ms=T0),
        writable=True, had_clean_shutdown=False,
    )  # fmt: skip
    assert log.producer_state.last_entry(9).last_seq == 49
    log.close()
    rebuilt = digest(directory)
    for name, sha in files.items():
        if not name.endswith(".snapshot"):
            assert rebuilt[name] == sha, name


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_log_dropped_unclosed_gives_its_descriptors_back(tmp_path: Path) -> None:
    """A log abandoned without close (its writer died mid-append, a caller forgot): once it is
    garbage, its segments', indexes' and transaction index's descriptors are closed, as a file
    object's are; a window sliced from a segment keeps that segment's descriptor while it lives."""
    import gc

    gc.collect()
    before = _open_descriptors()
    log = open_log(tmp_path / "t-0", {"internal.segment.bytes": 2048, "index.interval.bytes": 100})
    for i in range(12):
        values = [b"v" * 100] * 4
        log.append_as_leader(
            client_batch(values, producer_id=7, epoch=0, seq=4 * i, transactional=True)
        )
        if i % 4 == 3:
            log.append_as_leader(
                marker(ControlRecordType.ABORT, 7, 0), origin=AppendOrigin.COORDINATOR
            )
    assert len(segment_files(log.dir)) > 2
    assert segment_files(log.dir, ".txnindex")
    window = log.segment_for(0).log.slice(0, 200)
    del log
    gc.collect()
    assert len(window.read(0, 200)) == 200  # its segment's descriptor is still open
    del window
    gc.collect()
    assert _open_descriptors() == before


# -- damaged indexes: hints, never trusted unverified ---------------------------------------------
def _pack_index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", relative, position) for relative, position in entries)


def _index_damage(kind: str, batches: list[KpBatch], base: int, size: int) -> bytes:
    """A damaged ``.index`` for a segment of ``batches`` (``size`` bytes of log)."""
    rel = [(b.last_offset - base, b.position) for b in batches]
    if kind == "garbage":
        return bytes(random.Random(7).randrange(256) for _ in range(64))
    if kind == "decreasing":
        return _pack_index([(9, 0), (5, 0), (1, 0)])
    if kind == "later batches":  # plausible, increasing, but each position two batches late
        return _pack_index([(r[0], rel[i + 2][1]) for i, r in enumerate(rel[1:-2], 1)])
    if kind == "inside batches":  # positions inside the batches they name
        return _pack_index([(o, p + 30) for o, p in rel[1:]])
    if kind == "negative positions":
        return _pack_index([(1, -70), (3, -1)])
    if kind == "past the end":
        return _pack_index([(1, size + 100), (2, size + 4096)])
    raise AssertionError(kind)


INDEX_DAMAGES = [
    "garbage", "decreasing", "later batches", "inside batches", "negative positions",
    "past the end",
]  # fmt: skip


def _written_log(directory: Path) -> Log:
    log = open_log(directory, {"internal.segment.bytes": 1500, "index.interval.bytes": 100})
    for i in range(60):
        log.append_as_leader(client_batch([b"v%02d" % i * 8] * (1 + i % 3), ts=T0 + 10 * i))
    return log


def _check_reads(log: Log, directory: Path) -> None:
    """Every offset read through Log.read, Log.batches and by timestamp agrees with kafka-python's
    decoding of the .log files."""
    scan = log_batches(directory)
    records = [r for bs in scan.values() for b in bs for r in b.records]
    assert log.log_end_offset == len(records)
    for target in range(log.log_end_offset):
        info = log.read(target, 1)
        base = info.fetch_offset_metadata.segment_base_offset
        want = next(b for b in scan[base] if b.last_offset >= target)
        (first,) = kp_batches(info.records.read(info.records.start, want.size))
        assert (first.base_offset, info.records.start) == (want.base_offset, want.position)
        got = [(r.offset, r.value) for b in log.batches(target) for r in b.records()]
        assert got[0][0] <= target  # from the batch holding it
        want = [(r[0], r[3]) for r in records if r[0] >= target]
        assert [g for g in got if g[0] >= target] == want
    for target in (T0 - 1, T0, T0 + 55, T0 + 300, T0 + 591, T0 + 1000):
        found = log.fetch_offset_by_timestamp(target)
        assert (None if found is None else (found.timestamp, found.offset)) == first_at_or_after(
            records, target
        )


@pytest.mark.parametrize("segment", ["first", "active"])
@pytest.mark.parametrize("damage", INDEX_DAMAGES)
def test_a_damaged_index_never_changes_what_is_read(tmp_path: Path, damage: str, segment: str):
    directory = tmp_path / "t-0"
    log = _written_log(directory)
    log.close()
    logs = segment_files(directory)
    target = logs[0] if segment == "first" else logs[-1]
    base = int(target.name[:20])
    index = target.with_suffix(".index")
    index.write_bytes(
        _index_damage(damage, kp_batches(target.read_bytes()), base, target.stat().st_size)
    )
    files = digest(directory)

    read_only = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0))
    _check_reads(read_only, directory)
    read_only.close()
    assert digest(directory) == files  # a read-only log changes nothing, even a bad index

    writable = Log.open(directory, config=cfg({"index.interval.bytes": 100}),
                        clock=MockClock(now_ms=T0), writable=True)  # fmt: skip
    _check_reads(writable, directory)
    writable.append_as_leader(client_batch([b"after"] * 3, ts=T0 + 5000))
    _check_reads(writable, directory)
    writable.close()
    # Rebuilt as Kafka writes it, at load (entries out of order or range) or at the first lookup
    # that found a position no batch starts at; the .log files are untouched.
    for path in segment_files(directory)[:-1]:
        want = expected_indexes(kp_batches(path.read_bytes()), 100, closed=True)[0]
        assert index_entries(path.with_suffix(".index")) == want, path.name
    changed = {n for n, sha in digest(directory).items() if files.get(n) != sha}
    assert not {n for n in changed if n.endswith(".log")} - {segment_files(directory)[-1].name}


def test_a_verified_index_position_is_read_once(tmp_path: Path, monkeypatch) -> None:
    directory = tmp_path / "t-0"
    _written_log(directory).close()
    log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0))
    segment = log.segments[0]
    assert segment.offset_index.entries > 2
    checks = []
    check = type(segment)._check_position
    monkeypatch.setattr(
        type(segment), "_check_position", lambda s, *a: checks.append(a) or check(s, *a)
    )
    last = segment.offset_index.last_offset
    for _ in range(3):
        log.read(last, 1)
    assert len(checks) == 1 and segment.index_trusted


# -- a zero-filled tail behind a clean-shutdown marker --------------------------------------------
def _zero_tail_dir(root: Path) -> tuple[Path, int]:
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as logs:
        logs.create_topic("t", 1, {"internal.segment.bytes": "1500",
                                   "message.timestamp.after.max.ms": str(FAR),
                                   "message.timestamp.before.max.ms": str(FAR)})  # fmt: skip
        log = logs.get_log(TopicPartition("t", 0))
        for i in range(30):
            log.append_as_leader(client_batch([b"v%02d" % i * 8] * 2, ts=T0 + i))
    assert (root / ".kafka_cleanshutdown").exists()
    active = segment_files(root / "t-0")[-1]
    size = active.stat().st_size
    with active.open("ab") as f:
        f.write(bytes(4096))  # preallocated, never written: a crash, whatever the marker says
    return active, size


def test_a_zero_tail_behind_a_clean_marker_is_recovered_by_a_writable_open(
    tmp_path: Path, caplog
) -> None:
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition
    from kafkalog.log.partition.recovery_plan import plan_recovery

    root = tmp_path / "data"
    active, size = _zero_tail_dir(root)
    plan = plan_recovery(root / "t-0", recovery_point=60, config=cfg())  # the dry run agrees
    assert [(a.action, a.position, a.bytes) for a in plan.actions if a.path == str(active)] == [
        ("unreadable-end", size, None), ("rebuild-indexes", None, None), ("truncate", size, 4096)
    ]  # fmt: skip
    assert plan.log_end_offset == 60
    with caplog.at_level("WARNING", logger="kafkalog.log"):
        logs = LogManager(root, writable=True, clock=MockClock(now_ms=T0))
    log = logs.get_log(TopicPartition("t", 0))
    assert f"{active}, position {size}: the end of the log cannot be read" in caplog.text
    assert active.stat().st_size == size
    kept = list((root / "t-0" / "kafkalog-quarantine").rglob(f"{active.name}.cut-at-{size}"))
    assert [p.read_bytes() for p in kept] == [bytes(4096)]
    assert log.log_end_offset == 60 and log.recovery_point == 60
    _check_reads_simple(log, root / "t-0")
    log.append_as_leader(client_batch([b"next"], ts=T0 + 99))
    logs.close()
    assert all_records(root / "t-0")[-1][0] == 60  # appended right after the prefix


def _check_reads_simple(log: Log, directory: Path) -> None:
    records = all_records(directory)
    for target in range(0, log.log_end_offset, 7):
        got = [(r.offset, r.value) for b in log.batches(target) for r in b.records()]
        assert got[0][0] <= target  # from the batch holding it
        want = [(r[0], r[3]) for r in records if r[0] >= target]
        assert [g for g in got if g[0] >= target] == want


def test_a_zero_tail_read_only_changes_nothing_and_ends_the_log_before_it(tmp_path: Path):
    root = tmp_path / "data"
    active, size = _zero_tail_dir(root)
    files = digest(root)
    log = Log.open(root / "t-0", config=cfg(), clock=MockClock(now_ms=T0))
    assert log.log_end_offset == 60
    assert any(f"(position {size})" in note for note in log.load_notes)
    info = log.read(59, 1 << 20)
    assert info.records.end == size  # the window stops where the zeros start
    assert log.last_stable_offset == 60
    data = active.read_bytes()[:size]
    assert [r[0] for b in kp_batches(data) for r in b.records][-1] == 59
    _check_reads_simple_ro(log, root / "t-0", size)
    log.close()
    assert digest(root) == files


def _check_reads_simple_ro(log: Log, directory: Path, size: int) -> None:
    records = [
        r
        for p in segment_files(directory)
        for b in kp_batches(p.read_bytes()[: size if p == segment_files(directory)[-1] else None])
        for r in b.records
    ]
    for target in range(0, log.log_end_offset, 7):
        got = [(r.offset, r.value) for b in log.batches(target) for r in b.records()]
        assert got[0][0] <= target  # from the batch holding it
        want = [(r[0], r[3]) for r in records if r[0] >= target]
        assert [g for g in got if g[0] >= target] == want


@pytest.mark.parametrize(
    ("suffix", "entries", "problem"),
    [
        (".index", [(9, 0), (5, 0), (1, 0)], "offsets do not increase"),
        (".index", [(1, 100), (2, 1 << 20)], "outside the log"),
        (".index", [(1, 300), (2, 100)], "positions do not increase"),
        # Kafka's own sanityCheck: the last timestamp below the first.
        (".timeindex", [(T0 + 9000, 9), (T0, 1), (T0 - 5, 0)], "less than the first timestamp"),
        (".timeindex", [(T0, 1), (T0 + 9000, 2), (T0 + 10, 3)], "timestamps decrease"),
        (".timeindex", [(T0, 1), (T0 + 5, 500)], "not below the next segment's base offset"),
    ],
)
def test_a_writable_open_rebuilds_an_index_out_of_order_or_range(
    tmp_path: Path, suffix: str, entries: list, problem: str
) -> None:
    directory = tmp_path / "t-0"
    _written_log(directory).close()
    first = segment_files(directory)[0]
    fmt = ">ii" if suffix == ".index" else ">qi"
    first.with_suffix(suffix).write_bytes(b"".join(struct.pack(fmt, *e) for e in entries))
    log = Log.open(directory, config=cfg({"index.interval.bytes": 100}),
                   clock=MockClock(now_ms=T0), writable=True)  # fmt: skip
    assert any(
        n.startswith(f"{first.name}: indexes rebuilt") and problem in n for n in log.load_notes
    ), log.load_notes
    _check_reads(log, directory)
    log.close()
    want = expected_indexes(kp_batches(first.read_bytes()), 100, closed=True)
    got = (
        index_entries(first.with_suffix(".index")),
        time_index_entries(first.with_suffix(".timeindex")),
    )
    assert got == want
