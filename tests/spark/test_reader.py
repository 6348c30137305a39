"""read() of one input partition: pieces of whole batches, Arrow batch sizes, buffer reuse, and
every record once in order, checked against kafka-python's decoding of the same segment."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.dataset import reader
from kafkalog.dataset.options import parse_read_options
from kafkalog.dataset.reader import KafkaInputPartition, read_partition
from kafkalog.dataset.schema import arrow_schema
from kafkalog.errors import CorruptRecordError
from kafkalog.format import MemoryRecordsBuilder
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

kafka_records = pytest.importorskip("kafka.record.memory_records")

T0 = 1_767_225_600_000


def _write(root: Path, batch_sizes: list[int], codec: str, value_size: int) -> None:
    with LogManager(root, writable=True, create=True) as manager:
        manager.create_topic("r", 1)
        log = manager.get_log(TopicPartition("r", 0))
        n = 0
        for size in batch_sizes:
            b = MemoryRecordsBuilder(compression=codec)
            for _ in range(size):
                key = None if n % 3 == 0 else n.to_bytes(4, "big")
                b.append(timestamp=T0 + n, key=key, value=bytes([n % 251]) * (value_size + n % 7))
                n += 1
            log.append_as_leader(b.build())


def _kafka_python(segment: Path) -> list[tuple]:
    """(offset, timestamp, key, value) of every record, as kafka-python decodes the file."""
    records = kafka_records.MemoryRecords(segment.read_bytes())
    out = []
    while (batch := records.next_batch()) is not None:
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


def _part(root: Path, start: int, end: int) -> KafkaInputPartition:
    segment = root / "r-0" / "00000000000000000000.log"
    return KafkaInputPartition("r", 0, str(segment), 0, segment.stat().st_size, start, end)


def _rows(batches) -> list[tuple]:
    out = []
    for b in batches:
        ts = [t // 1000 for t in b.column(5).cast("int64").to_pylist()]
        cols = zip(b.column(4).to_pylist(), ts, b.column(0).to_pylist(), b.column(1).to_pylist())
        out.extend(cols)
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batch_sizes=st.lists(st.integers(1, 60), min_size=1, max_size=40),
    codec=st.sampled_from(["none", "lz4", "gzip"]),
    value_size=st.integers(0, 300),
    bounds=st.tuples(st.integers(0, 2500), st.integers(0, 2500)),
    piece=st.sampled_from([256, 4096, 1 << 20]),
)
def test_every_record_of_the_range_once_in_order(monkeypatch, batch_sizes, codec, value_size,
                                                 bounds, piece):  # fmt: skip
    """Small pieces and chunks force cuts between most batches; the batches are all kept
    (list()), so a reused buffer overwriting an earlier batch would show."""
    monkeypatch.setattr(reader, "MIN_PIECE_BYTES", min(piece, reader.MIN_PIECE_BYTES))
    monkeypatch.setattr(reader, "PIECE_BYTES", piece)
    monkeypatch.setattr(reader, "CHUNK_BYTES", max(piece * 4, 1 << 14))
    monkeypatch.setattr(reader, "TARGET_ROWS", 50)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        _write(root, batch_sizes, codec, value_size)
        expected = _kafka_python(root / "r-0" / "00000000000000000000.log")
        start, end = min(bounds), max(bounds)
        batches = list(read_partition(_part(root, start, end)))
        assert all(b.schema.equals(arrow_schema(False)) for b in batches)
        assert all(b.num_rows for b in batches)
        assert _rows(batches) == [r for r in expected if start <= r[0] < end]


def test_batches_are_coalesced_to_about_target_rows(tmp_path):
    _write(tmp_path, [100] * 300, "none", 100)
    batches = list(read_partition(_part(tmp_path, 0, 1 << 40)))
    assert sum(b.num_rows for b in batches) == 30_000
    sizes = [b.num_rows for b in batches[1:-1]]  # the first piece has not adapted yet
    assert sizes
    assert all(reader.TARGET_ROWS // 2 <= n <= 2 * reader.TARGET_ROWS for n in sizes), sizes


def test_buffers_are_reused_while_spark_holds_the_previous_batch(tmp_path, monkeypatch):
    """Spark's worker keeps the previous batch (and a struct-wrapped view of it) while asking
    for the next: decoding must still reuse arrays instead of allocating per batch."""
    from kafkalog.format.columnar import decode as _columnar_decode

    allocations = []
    original = _columnar_decode._Buffers.__init__

    def counting(self, *args, **kwargs):
        allocations.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_columnar_decode._Buffers, "__init__", counting)
    monkeypatch.setattr(reader, "TARGET_ROWS", 200)
    monkeypatch.setattr(reader, "MIN_PIECE_BYTES", 4096)
    _write(tmp_path, [50] * 400, "none", 100)
    held = []
    count = 0
    for b in read_partition(_part(tmp_path, 0, 1 << 40)):
        held = [b, held[0] if held else None]  # the current batch and the previous one
        count += 1
    assert count >= 20
    assert len(allocations) <= _columnar_decode.POOL_SIZE


def test_read_options_reach_the_partition(tmp_path):
    """Headers and the offset range planned on the driver are what read() applies."""
    _write(tmp_path, [10] * 5, "none", 10)
    o = parse_read_options({"path": str(tmp_path), "includeHeaders": "true"})
    logs = reader.open_selected(o)
    try:
        parts = reader.plan_input_partitions(o, logs, reader.resolve_ranges(o, logs))
    finally:
        for log in logs.values():
            log.close()
    batches = [b for p in parts for b in read_partition(p)]
    assert batches[0].schema.equals(arrow_schema(True))
    assert sum(b.num_rows for b in batches) == 50


def test_highly_compressed_batches_are_cut_so_memory_stays_bounded(tmp_path, monkeypatch):
    """A piece is sized by the bytes read; batches that decompress to far more rows than that
    predicts come out in several Arrow batches of at most PIECE_MAX_ROWS (plus the rest of one
    Kafka batch), not in one."""
    monkeypatch.setattr(reader, "PIECE_MAX_ROWS", 500)
    _write(tmp_path, [200] * 40, "gzip", 1000)  # 8,000 records of one repeated byte: a few KB
    expected = _kafka_python(tmp_path / "r-0" / "00000000000000000000.log")
    batches = list(read_partition(_part(tmp_path, 0, 1 << 40)))
    assert len(batches) >= 8000 // (500 + 200)
    assert all(b.num_rows <= 500 + 200 for b in batches)
    assert _rows(batches) == expected


def _first_batch_size(segment: Path) -> int:
    return 12 + int.from_bytes(segment.read_bytes()[8:12], "big")


def test_a_flipped_byte_inside_a_batch_fails_its_crc_instead_of_being_returned(tmp_path):
    _write(tmp_path, [5, 5, 5], "none", 40)
    segment = tmp_path / "r-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    at = _first_batch_size(segment) + 70  # inside the second batch's records
    data[at] ^= 0x01
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as e:
        list(read_partition(_part(tmp_path, 0, 15)))
    assert e.value.position == _first_batch_size(segment)  # the damaged batch's start


def test_a_damaged_size_field_is_an_error_not_the_end_of_the_log(tmp_path):
    _write(tmp_path, [5, 5, 5], "none", 40)
    segment = tmp_path / "r-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = _first_batch_size(segment)
    data[second + 8 : second + 12] = (0x7FFFFF00).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as e:
        list(read_partition(_part(tmp_path, 0, 15)))
    assert e.value.position == second and str(segment) in str(e.value)
