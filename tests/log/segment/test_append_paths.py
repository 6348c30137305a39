"""The log's fast append and lookup paths: index entries written with pwrite, read-only index
searches in native arrays, follower appends trimmed like Kafka's, timestamp lookups in big batches.

Expected values come from what the test wrote (index files packed here with ``struct``) or from
kafka-python's decoder (``kafka.record.MemoryRecords``), never from kafkalog's own output.
"""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.log import Log
from kafkalog.log.segment.offset_index import OffsetIndex
from kafkalog.log.segment.time_index import TimeIndex

T0 = 1_700_000_000_000
FAR = 1 << 50
BASE = 1000
HYPOTHESIS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def cfg(overrides: dict | None = None) -> LogConfig:
    base = {"message.timestamp.after.max.ms": FAR, "message.timestamp.before.max.ms": FAR}
    return LogConfig({**base, **(overrides or {})})


def open_log(path: Path, overrides: dict | None = None) -> Log:
    return Log.open(
        path, config=cfg(overrides), clock=MockClock(now_ms=T0), writable=True, create=True
    )


def kp_batch(stamps: list[int], *, offset: int = 0, value: bytes = b"v" * 20) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30)
    for i, ts in enumerate(stamps):
        builder.append(ts, b"k%d" % i, value, [])
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, offset)  # baseOffset is outside the CRC
    return bytes(data)


def kp_records(data: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, by kafka-python, CRCs checked."""
    out, records = [], KpRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp) for r in batch]
    assert records.valid_bytes() == len(data)
    return out


# -- read-only index searches ---------------------------------------------------------------------
def linear(keys: list[int], target: int) -> int | None:
    found = None
    for i, key in enumerate(keys):
        if key <= target:
            found = i
    return found


@given(
    relatives=st.lists(st.integers(0, 2**31 - 1), unique=True, max_size=3000).map(sorted),
    targets=st.lists(st.integers(-(2**33), 2**33), max_size=30),
)
@HYPOTHESIS
def test_read_only_offset_index_lookups_agree_with_a_linear_scan(tmp_path, relatives, targets):
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(b"".join(struct.pack(">ii", r, i * 7) for i, r in enumerate(relatives)))
    index = OffsetIndex(path, BASE)
    picks = [BASE + r + d for r in relatives[::97] for d in (-1, 0, 1)]
    for target in [*targets, *picks, BASE - 1, 2**63 + 5, -(2**63) - 5]:
        slot = linear([BASE + r for r in relatives], target)
        got = index.lookup(target)
        if slot is None:
            assert (got.offset, got.position) == (BASE, 0), target
        else:
            assert (got.offset, got.position) == (BASE + relatives[slot], slot * 7), target
    index.close()


@given(
    stamps=st.lists(st.integers(-(2**62), 2**62), unique=True, max_size=2000).map(sorted),
    targets=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30),
)
@HYPOTHESIS
def test_read_only_time_index_lookups_agree_with_a_linear_scan(tmp_path, stamps, targets):
    path = tmp_path / f"{BASE:020d}.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", ts, i) for i, ts in enumerate(stamps)))
    index = TimeIndex(path, BASE)
    for target in [*targets, *(ts + d for ts in stamps[::50] for d in (-1, 0, 1))]:
        slot = linear(stamps, target)
        got = index.lookup(target)
        if slot is None:
            assert got.offset == BASE, target
        else:
            assert (got.timestamp, got.offset) == (stamps[slot], BASE + slot), target
    index.close()


# -- appends --------------------------------------------------------------------------------------
def test_index_entries_are_in_the_files_while_the_segment_is_still_open(tmp_path):
    """Entries go to the files as they are appended (not only at roll or close), so another
    process reading the active segment finds them."""
    log = open_log(tmp_path / "t-0", {"index.interval.bytes": 100, "segment.index.bytes": 4096})
    batches = [kp_batch([T0 + 10 * i + j for j in range(5)], offset=5 * i) for i in range(20)]
    for data in batches:
        log.append_as_follower(data)
    positions, pos = {}, 0
    for i, data in enumerate(batches):
        positions[5 * i + 4] = pos
        pos += len(data)
    raw = (tmp_path / "t-0" / f"{0:020d}.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    entries = [e for e in entries if e != (0, 0)]  # the preallocated, unwritten slots
    assert entries and all(positions[offset] == position for offset, position in entries)
    stamps = (tmp_path / "t-0" / f"{0:020d}.timeindex").read_bytes()
    ts_entries = [struct.unpack_from(">qi", stamps, i) for i in range(0, len(stamps), 12)]
    ts_entries = [e for e in ts_entries if e != (0, 0)]
    assert [offset for _, offset in ts_entries] == [offset for offset, _ in entries]
    assert all(ts == T0 + 10 * (offset // 5) + 4 for ts, offset in ts_entries)
    log.close()


def test_a_follower_append_leaves_out_a_partial_last_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    first, second = kp_batch([T0, T0 + 1]), kp_batch([T0 + 2], offset=2)
    info = log.append_as_follower(first + second[:30])
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 1, len(first))
    assert log.log_end_offset == 2
    log.append_as_follower(second)
    log.close()
    segment = (tmp_path / "t-0" / f"{0:020d}.log").read_bytes()
    assert kp_records(segment) == [(0, T0), (1, T0 + 1), (2, T0 + 2)]


def test_leader_appends_of_big_batches_keep_the_bytes_and_assign_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    stamps = [T0 + (i * 7919) % 5000 for i in range(4000)]  # not in order
    data = kp_batch(stamps, value=b"x" * 200)
    for n in range(3):
        info = log.append_as_leader(data, leader_epoch=4)
        assert (info.first_offset, info.last_offset) == (4000 * n, 4000 * n + 3999)
        assert info.max_timestamp == max(stamps)
    log.close()
    segment = (tmp_path / "t-0" / f"{0:020d}.log").read_bytes()
    assert kp_records(segment) == [(i, stamps[i % 4000]) for i in range(12000)]
    for n in range(3):  # each copy: its offsets and epoch in the header, the records untouched
        at = n * len(data)
        assert struct.unpack_from(">qii", segment, at)[::2] == (4000 * n, 4)
        assert segment[at + 61 : at + len(data)] == data[61:]


# -- timestamp lookups ----------------------------------------------------------------------------
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(1, 2000), min_size=1, max_size=3),
    seed=st.integers(0, 1000),
    reopen=st.booleans(),
    data=st.data(),
)
def test_timestamp_lookups_in_big_batches_agree_with_a_linear_scan(
    tmp_path_factory, counts, seed, reopen, data
):
    directory = tmp_path_factory.mktemp("ts") / "t-0"
    log = open_log(directory, {"index.interval.bytes": 4096})
    offset = 0
    for count in counts:
        stamps = [T0 + (seed + i * 7919) % (3 * count) for i in range(count)]
        log.append_as_follower(kp_batch(stamps, offset=offset))
        offset += count
    if reopen:
        log.close()
        log = Log.open(directory, config=cfg(), clock=MockClock(now_ms=T0))
    records = kp_records((directory / f"{0:020d}.log").read_bytes())
    stamps = sorted({ts for _, ts in records})
    targets = data.draw(st.lists(st.sampled_from(stamps), min_size=1, max_size=20))
    for target in [*targets, stamps[0] - 1, stamps[-1], stamps[-1] + 1]:
        for start in (0, offset // 2):
            found = log.active_segment.find_offset_by_timestamp(target, start)
            want = next(((ts, o) for o, ts in records if ts >= target and o >= start), None)
            assert (None if found is None else (found.timestamp, found.offset)) == want
    log.close()


def test_a_log_append_time_topic_finds_records_by_the_append_time(tmp_path):
    log = open_log(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"})
    log.append_as_leader(kp_batch([5, 3, 9]))
    log.clock.advance(1000)
    log.append_as_leader(kp_batch([1, 2]))
    found = log.fetch_offset_by_timestamp(T0 + 1)
    assert found is not None and found.offset == 3 and found.timestamp >= T0 + 1000
    log.close()
