"""The read contract of the dataset layer (docs/reading.md): the records of the valid prefix, a
torn tail as the end of the log with a warning, other damage as a typed error after the records
before it (or skipped with a warning when failOnDataLoss is off), and indexes as hints only.

Expected records and batch extents come from kafka-python's decoder and from the entries' own
size fields, never from kafkalog's reading."""

from __future__ import annotations

import os
import shutil
import struct
import warnings
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kafkalog.arrow import open_data_dir
from kafkalog.errors import KafkalogError
from kafkalog.format.entries import Tail
from kafkalog.log.segment.entry_walk import SegmentWalk
from kafkalog.log.segment.offset_index import OffsetIndex

from .written_logs import SEGMENT, extents, kafka_python_records, write_log


def _rows(path: Path, **options) -> list[tuple[int, bytes, bytes]]:
    table = open_data_dir(path, **options).read_all()
    return list(
        zip(
            table.column("offset").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def _log(path: Path) -> Path:
    return path / "t-0" / f"{SEGMENT}.log"


def test_segment_walk_agrees_with_the_entries_sizes_andkafka_python_records(tmp_path: Path) -> None:
    data = write_log(tmp_path)
    walk = SegmentWalk(_log(tmp_path))
    headers = list(walk)
    assert [(h.position, h.size) for h in headers] == extents(data)
    batches, records = [], KpMemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        batches.append((batch.base_offset, batch.last_offset))
    assert [(h.base_offset, h.last_offset) for h in headers] == batches
    assert (walk.valid_end, walk.tail, walk.error) == (len(data), Tail.NONE, None)


@pytest.mark.parametrize(
    ("damage", "tail"),
    [("cut", Tail.PARTIAL), ("zeros", Tail.ZEROS), ("duplicate", Tail.CORRUPT)],
)
def test_segment_walk_says_how_the_log_ends(tmp_path: Path, damage: str, tail: str) -> None:
    data = write_log(tmp_path)
    last_pos, last_size = extents(data)[-1]
    damaged = {
        "cut": data[: last_pos + last_size - 7],
        "zeros": data + bytes(4096),
        "duplicate": data + data[last_pos:],
    }[damage]
    _log(tmp_path).write_bytes(damaged)
    walk = SegmentWalk(_log(tmp_path)).run()
    assert walk.tail == tail
    assert walk.valid_end == (last_pos if damage == "cut" else len(data))
    if damage == "duplicate":
        assert "not above the previous batch's last offset" in str(walk.error)
        assert walk.error.position == len(data) and str(_log(tmp_path)) in str(walk.error)


@pytest.mark.parametrize("kind", ["garbage", "decreasing", "negative", "past-end", "shifted"])
def test_a_damaged_index_never_changes_what_is_read(tmp_path: Path, kind: str) -> None:
    data = write_log(tmp_path)
    index_file = tmp_path / "t-0" / f"{SEGMENT}.index"
    good = index_file.read_bytes()
    entries = [struct.unpack_from(">ii", good, i) for i in range(0, len(good), 8)]
    if kind == "garbage":
        bad = bytes((i * 151 + 7) % 256 for i in range(len(good)))
    elif kind == "decreasing":
        bad = b"".join(struct.pack(">ii", *e) for e in reversed(entries))
    elif kind == "negative":
        bad = b"\xff" * 16
    elif kind == "past-end":
        bad = good + struct.pack(">ii", entries[-1][0] + 50, len(data) + 1000)
    else:  # plausible entries whose positions land inside batches
        bad = b"".join(struct.pack(">ii", rel, pos + 5) for rel, pos in entries)
    index_file.write_bytes(bad)
    expected = kafka_python_records(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: the log is whole
        assert _rows(tmp_path) == expected
        middle = expected[len(expected) // 2][0]
        assert _rows(tmp_path, starting_offsets=middle) == [r for r in expected if r[0] >= middle]


def test_an_index_lookup_starts_at_the_indexed_batch(tmp_path: Path) -> None:
    data = write_log(tmp_path)
    from kafkalog.dataset.planner import open_partition

    log = open_partition(None, tmp_path / "t-0", fail_on_data_loss=True)  # type: ignore[arg-type]
    try:
        spans = extents(data)
        assert log.position_for(0, 20) == spans[6][0]  # offsets 18-20 start batch 6
        with OffsetIndex(tmp_path / "t-0" / f"{SEGMENT}.index", 0) as index:
            assert index.lookup(20).position == spans[6][0]
    finally:
        log.close()


def test_torn_tail_is_the_end_of_the_log_with_a_warning(tmp_path: Path) -> None:
    data = write_log(tmp_path)
    last_pos, _ = extents(data)[-1]
    _log(tmp_path).write_bytes(data[:-30])
    with pytest.warns(UserWarning, match=rf"00000000000000000000\.log, position {last_pos}: an "):
        rows = _rows(tmp_path)
    assert rows == kafka_python_records(data[:last_pos])


def test_damage_inside_the_log_stops_after_the_records_before_it(tmp_path: Path) -> None:
    data = bytearray(write_log(tmp_path))
    pos, _size = extents(bytes(data))[5]
    data[pos + 70] ^= 0xFF  # a record byte: the CRC no longer matches
    _log(tmp_path).write_bytes(bytes(data))
    expected = kafka_python_records(bytes(data))
    assert len(expected) == 15
    reader = open_data_dir(tmp_path)
    got = []
    with pytest.raises(KafkalogError) as raised:
        for batch in reader:
            got.extend(batch.column("offset").to_pylist())
    assert got == [r[0] for r in expected]
    text = str(raised.value)
    assert str(_log(tmp_path)) in text and f"position {pos}" in text and "crc" in text


def test_skipped_damage_is_warned_and_the_rest_is_read(tmp_path: Path) -> None:
    clean = write_log(tmp_path)
    data = bytearray(clean)
    pos, size = extents(clean)[5]
    data[pos + 70] ^= 0xFF
    _log(tmp_path).write_bytes(bytes(data))
    skipped = {r[0] for r in kafka_python_records(clean[pos : pos + size])}
    expected = [r for r in kafka_python_records(clean) if r[0] not in skipped]
    with pytest.warns(UserWarning, match=rf"position {pos}.*skipped"):
        rows = _rows(tmp_path, fail_on_data_loss=False)
    assert rows == expected


@pytest.mark.parametrize("where", ["first", "last"])
def test_offsets_that_go_back_are_damage_not_the_end(tmp_path: Path, where: str) -> None:
    data = write_log(tmp_path)
    spans = extents(data)
    pos, size = spans[-1]
    if where == "last":  # the last batch again: its offsets do not increase
        damaged = data + data[pos : pos + size]
        bad_at = len(data)
    else:  # the first batch's baseOffset overflows int64 (the CRC does not cover it)
        damaged = struct.pack(">q", 2**63 - 1) + data[8:]
        bad_at = 0
    _log(tmp_path).write_bytes(damaged)
    with pytest.raises(KafkalogError) as raised:
        _rows(tmp_path)
    assert f"position {bad_at}" in str(raised.value)
    assert str(_log(tmp_path)) in str(raised.value)


def test_missing_index_and_empty_log(tmp_path: Path) -> None:
    data = write_log(tmp_path)
    os.remove(tmp_path / "t-0" / f"{SEGMENT}.index")
    assert _rows(tmp_path) == kafka_python_records(data)
    shutil.rmtree(tmp_path / "t-0")
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / f"{SEGMENT}.log").write_bytes(b"")
    assert _rows(tmp_path) == []


@pytest.mark.parametrize("kind", ["whole", "garbage", "decreasing", "missing"])
def test_timestamps_are_found_from_the_batches(tmp_path: Path, kind: str) -> None:
    data = write_log(tmp_path)
    timeindex = tmp_path / "t-0" / f"{SEGMENT}.timeindex"
    # A time index as LogSegment writes it: (max timestamp so far, its offset) per batch.
    entries = []
    records = KpMemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        last = list(batch)[-1]
        entries.append(struct.pack(">qi", last.timestamp, last.offset))
    whole = b"".join(entries[1:])
    timeindex.write_bytes(
        {
            "whole": whole,
            "garbage": bytes((i * 89 + 3) % 256 for i in range(len(whole))),
            "decreasing": b"".join(reversed(entries)),
            "missing": b"",
        }[kind]
    )
    expected = [(r.offset, r.timestamp) for r in _records_with_timestamps(data)]
    for target in (expected[0][1] - 5, expected[7][1], expected[20][1] + 1, expected[-1][1]):
        first = next(o for o, ts in expected if ts >= target)
        table = open_data_dir(tmp_path, starting_timestamp=target).read_all()
        assert table.column("offset").to_pylist() == [o for o, _ in expected if o >= first]
    with pytest.raises(ValueError, match="No offset matched"):
        open_data_dir(tmp_path, starting_timestamp=expected[-1][1] + 1)


def _records_with_timestamps(data: bytes):
    records = KpMemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        yield from batch


@pytest.mark.parametrize("size", [2**31 - 1, 40_000])
def test_a_damaged_size_field_is_damage_not_a_torn_tail(tmp_path: Path, size: int) -> None:
    """An entry claiming more bytes than are left is a torn tail only when it could be the last
    append: not when it claims more than a broker accepts (max.message.bytes, 1048588 by
    default) nor when whole batches lie inside the bytes it claims (verify's rule)."""
    data = bytearray(write_log(tmp_path))
    pos, _ = extents(bytes(data))[4]
    struct.pack_into(">i", data, pos + 8, size - 12)
    _log(tmp_path).write_bytes(bytes(data))
    reader = open_data_dir(tmp_path)
    got = []
    with pytest.raises(KafkalogError) as raised:
        for batch in reader:
            got.extend(batch.column("offset").to_pylist())
    assert got == [r[0] for r in kafka_python_records(bytes(data[:pos]))]
    assert f"position {pos}" in str(raised.value) and "size field is damaged" in str(raised.value)


@pytest.mark.parametrize("kind", ["fifo", "symlink loop"])
def test_a_segment_that_is_not_a_regular_file_is_refused_by_name(tmp_path: Path, kind) -> None:
    write_log(tmp_path)
    odd = tmp_path / "t-0" / "00000000000000000100.log"
    if kind == "fifo":
        os.mkfifo(odd)  # opening it would block
    else:
        odd.symlink_to(odd.name)
    with pytest.raises(OSError, match="not a regular file") as raised:
        open_data_dir(tmp_path).read_all()
    assert str(odd) in str(raised.value)


@pytest.mark.parametrize("limit", [None, 4 << 20])
def test_a_torn_append_within_the_topic_s_max_message_bytes_is_a_torn_tail(
    tmp_path: Path, limit: int | None
) -> None:
    """A 2 MiB last batch cut short: a torn append when the topic accepts batches that large
    (its max.message.bytes, from kafkalog's topics file), damage under Kafka's default limit
    (1048588), to the readers and to verify alike."""
    import json

    from kafkalog.log.verify.data_dir import verify

    data = write_log(tmp_path)
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(
        0, timestamp=1_700_000_000_100, key=b"big", value=os.urandom(2 << 20), headers=[]
    )
    big = bytearray(builder.build())
    struct.pack_into(">q", big, 0, 36)
    _log(tmp_path).write_bytes(data + bytes(big[:-1000]))
    if limit is not None:
        topics = {"version": 1, "topics": {"t": {"configs": {"max.message.bytes": str(limit)}}}}
        (tmp_path / "kafkalog-topics.json").write_text(json.dumps(topics))
    report = verify(tmp_path)
    codes = {(f.code, f.severity) for f in report.findings if f.path.endswith(".log")}
    expected = kafka_python_records(data)
    if limit is None:
        with pytest.raises(KafkalogError, match=f"position {len(data)}.*size field is damaged"):
            _rows(tmp_path)
        assert ("corrupt-framing", "error") in codes
    else:
        with pytest.warns(UserWarning, match=rf"\.log, position {len(data)}: an incomplete last"):
            assert _rows(tmp_path) == expected
        assert ("torn-tail", "warning") in codes and not any(s == "error" for _, s in codes)
