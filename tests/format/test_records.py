"""Targeted rules of Kafka's record formats, on bytes written here independently of kafkalog.

Legacy messages and v2 batches are encoded with a few lines of struct code below (CRCs from
kafka-python's functions), so that each test states the bytes Kafka would have on disk and the
values Kafka's readers (AbstractLegacyRecordBatch, DefaultRecordBatch, FileLogInputStream) report.
"""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.util import calc_crc32, calc_crc32c, encode_varint

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkalogError,
    UnsupportedCompressionTypeError,
)
from kafkalog.format import (
    CompressionType,
    Header,
    LegacyBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    MutableRecordBatch,
    RecordBatch,
    RecordsScan,
    TimestampType,
    empty_batch,
    iter_batches,
    murmur2,
    partition_for_key,
)
from kafkalog.format.record import increment_sequence

CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
INT_MAX = 2**31 - 1

# -- independent encoders ------------------------------------------------------------------------


def legacy_message(
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    attributes: int = 0,
    timestamp: int = -1,
) -> bytes:
    """A LegacyRecord: crc | magic | attributes | [timestamp] | key | value."""
    body = bytearray([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for data in (key, value):
        body += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    return struct.pack(">I", calc_crc32(bytes(body))) + bytes(body)


def entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def gzip_wrapper(
    magic: int,
    wrapper_offset: int,
    inner: list[tuple[int, bytes]],
    *,
    timestamp_type: TimestampType = CREATE,
    timestamp: int = -1,
) -> bytes:
    """A gzip wrapper entry around inner ``(offset, message)`` entries, offsets as given."""
    message_set = b"".join(entry(off, msg) for off, msg in inner)
    attributes = 1 | (0x08 if timestamp_type == APPEND else 0)
    wrapper = legacy_message(
        magic, None, gzip.compress(message_set), attributes=attributes, timestamp=timestamp
    )
    return entry(wrapper_offset, wrapper)


def varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def v2_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers=(),
) -> bytes:
    body = bytearray(b"\x00") + varint(timestamp_delta) + varint(offset_delta)
    for data in (key, value):
        body += varint(-1) if data is None else varint(len(data)) + data
    body += varint(len(headers))
    for hkey, hvalue in headers:
        body += varint(len(hkey)) + hkey
        body += varint(-1) if hvalue is None else varint(len(hvalue)) + hvalue
    return varint(len(body)) + bytes(body)


def v2_batch(
    records: list[bytes],
    *,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    count: int | None = None,
    leader_epoch: int = -1,
    records_section: bytes | None = None,
) -> bytes:
    """A DefaultRecordBatch with a correct CRC-32C; fields may contradict the records on purpose."""
    section = b"".join(records) if records_section is None else records_section
    header = struct.pack(
        ">qiibIhiqqqhii",
        base_offset,
        49 + len(section),
        leader_epoch,
        2,
        0,
        attributes,
        len(records) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records) if count is None else count,
    )
    buf = bytearray(header + section)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def only_batch(buf) -> RecordBatch | LegacyBatch:
    [batch] = list(MemoryRecords(buf))
    return batch


def decode(buf) -> list:
    return [r for batch in MemoryRecords(buf) for r in batch.records()]


# -- legacy wrapper offsets ------------------------------------------------------------------


def test_v0_wrapper_inner_offsets_are_absolute():
    inner = [(10 + i, legacy_message(0, b"k%d" % i, b"v%d" % i)) for i in range(3)]
    batch = only_batch(gzip_wrapper(0, 12, inner))
    records = list(batch.records())
    assert [r.offset for r in records] == [10, 11, 12]
    assert [r.value for r in records] == [b"v0", b"v1", b"v2"]
    assert (batch.base_offset, batch.last_offset, batch.count) == (10, 12, 3)
    assert all(r.timestamp == -1 for r in records)
    assert all(r.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE for r in records)
    assert batch.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE


def test_v0_wrapper_offset_does_not_shift_absolute_inner_offsets():
    # Kafka uses absoluteBaseOffset = -1 for magic 0: inner offsets are taken as they are.
    inner = [(10 + i, legacy_message(0, None, b"v")) for i in range(3)]
    assert [r.offset for r in decode(gzip_wrapper(0, 500, inner))] == [10, 11, 12]


def test_v1_wrapper_inner_offsets_are_relative_to_the_wrapper_offset():
    inner = [(i, legacy_message(1, None, b"v%d" % i, timestamp=100 + i)) for i in range(3)]
    batch = only_batch(gzip_wrapper(1, 52, inner, timestamp=102))
    records = list(batch.records())
    assert [r.offset for r in records] == [50, 51, 52]
    assert (batch.base_offset, batch.last_offset, batch.next_offset, batch.count) == (50, 52, 53, 3)
    assert [r.timestamp for r in records] == [100, 101, 102]
    assert all(r.timestamp_type == CREATE for r in records)


def test_v1_wrapper_offset_zero_means_base_zero():
    # Some librdkafka versions leave the wrapper offset at 0: inner offsets are then absolute.
    inner = [(i, legacy_message(1, None, b"v", timestamp=1)) for i in range(3)]
    assert [r.offset for r in decode(gzip_wrapper(1, 0, inner))] == [0, 1, 2]
    shifted = [(5 + i, legacy_message(1, None, b"v", timestamp=1)) for i in range(3)]
    assert [r.offset for r in decode(gzip_wrapper(1, 0, shifted))] == [5, 6, 7]


def test_v1_wrapper_offset_below_last_inner_offset_is_invalid():
    inner = [(i, legacy_message(1, None, b"v", timestamp=1)) for i in range(5)]
    buf = b"\x00" * 0 + gzip_wrapper(1, 3, inner)
    prefix = entry(0, legacy_message(1, None, b"first", timestamp=1))
    batches = list(MemoryRecords(prefix + buf))
    with pytest.raises(InvalidRecordError) as info:
        list(batches[1].records())
    assert info.value.position == len(prefix)
    assert info.value.offset == 3
    assert "wrapper offset" in str(info.value)


def test_v1_inner_messages_inherit_log_append_time_from_the_wrapper():
    inner = [(i, legacy_message(1, b"k", b"v", timestamp=1000 + i)) for i in range(3)]
    batch = only_batch(gzip_wrapper(1, 2, inner, timestamp_type=APPEND, timestamp=99_999))
    records = list(batch.records())
    assert [r.timestamp for r in records] == [99_999] * 3
    assert [r.timestamp_type for r in records] == [APPEND] * 3
    assert batch.timestamp_type == APPEND
    assert batch.max_timestamp == 99_999


def test_v1_create_time_wrapper_keeps_inner_timestamps():
    inner = [(i, legacy_message(1, b"k", b"v", timestamp=1000 + i)) for i in range(3)]
    records = decode(gzip_wrapper(1, 2, inner, timestamp=1002))
    assert [r.timestamp for r in records] == [1000, 1001, 1002]
    assert [r.timestamp_type for r in records] == [CREATE] * 3


def test_v1_inner_timestamp_type_is_the_wrappers_timestamp_type():
    # Inner messages flagged LogAppendTime inside a CreateTime wrapper: Kafka passes the wrapper's
    # type to every inner LegacyRecord, so they read as CreateTime with their own timestamps.
    inner = [(i, legacy_message(1, b"k", b"v", attributes=0x08, timestamp=7 + i)) for i in range(2)]
    buf = gzip_wrapper(1, 1, inner, timestamp=8)
    theirs = [(r.timestamp, r.timestamp_type) for b in KpMemoryRecords(buf) for r in b]
    assert theirs == [(7, 0), (8, 0)]
    assert [(r.timestamp, r.timestamp_type) for r in decode(buf)] == [(7, CREATE), (8, CREATE)]


def test_nested_compression_in_a_wrapper_is_invalid():
    nested = gzip_wrapper(1, 0, [(0, legacy_message(1, None, b"v", timestamp=1))])
    inner_message = nested[12:]
    with pytest.raises(InvalidRecordError) as info:
        decode(gzip_wrapper(1, 0, [(0, inner_message)]))
    assert info.value.position == 0


def test_wrapper_with_null_value_is_invalid():
    buf = entry(0, legacy_message(1, None, None, attributes=1, timestamp=1))
    with pytest.raises(InvalidRecordError, match="null value") as info:
        decode(buf)
    assert info.value.position == 0


def test_wrapper_with_no_inner_messages_is_invalid():
    buf = entry(0, legacy_message(1, None, gzip.compress(b""), attributes=1, timestamp=1))
    with pytest.raises(InvalidRecordError, match="no inner records"):
        decode(buf)


def test_zstd_wrapper_below_magic_2_is_unsupported():
    buf = entry(0, legacy_message(1, None, b"\x28\xb5\x2f\xfd", attributes=4, timestamp=1))
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        decode(buf)
    assert info.value.position == 0


def test_inner_message_of_another_magic_is_invalid():
    inner = [(0, legacy_message(0, None, b"v"))]
    with pytest.raises(InvalidRecordError, match="magic"):
        decode(gzip_wrapper(1, 0, inner))


def test_legacy_negative_key_size_other_than_minus_one_reads_as_null():
    # LegacyRecord.key() (Utils.sizeDelimited) returns null for any negative size, and the value
    # offset uses Math.max(0, keySize).
    message = bytearray(legacy_message(1, None, b"v", timestamp=1))
    struct.pack_into(">i", message, 14, -2)
    struct.pack_into(">I", message, 0, calc_crc32(bytes(message[4:])))
    assert [(r.key, r.value) for r in decode(entry(0, bytes(message)))] == [(None, b"v")]


# -- v2 batches -------------------------------------------------------------------------------


def test_empty_batch_has_no_records_and_keeps_offsets_and_producer_state():
    buf = empty_batch(
        base_offset=40,
        last_offset=49,
        max_timestamp=1234,
        attributes=0x10 | 0x08 | 0x03,  # transactional, LogAppendTime; a codec is dropped
        producer_id=5,
        producer_epoch=6,
        base_sequence=INT_MAX - 3,
        partition_leader_epoch=2,
    )
    assert len(buf) == 61
    batch = only_batch(buf)
    assert isinstance(batch, RecordBatch)
    assert list(batch.records()) == []
    assert batch.count == 0
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (40, 49, 50)
    assert (batch.base_timestamp, batch.max_timestamp) == (-1, 1234)
    assert (batch.producer_id, batch.producer_epoch) == (5, 6)
    assert (batch.base_sequence, batch.last_sequence) == (INT_MAX - 3, 5)
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == APPEND
    assert batch.compression == CompressionType.NONE
    assert batch.partition_leader_epoch == 2
    assert batch.delete_horizon_ms is None
    assert batch.is_valid
    batch.ensure_valid()


def test_empty_batch_with_delete_horizon_stores_it_in_base_timestamp():
    buf = empty_batch(
        base_offset=0,
        last_offset=0,
        max_timestamp=10,
        attributes=0,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        delete_horizon_ms=86_400_000,
    )
    batch = only_batch(buf)
    assert batch.has_delete_horizon
    assert batch.delete_horizon_ms == batch.base_timestamp == 86_400_000
    assert struct.unpack_from(">h", buf, 21)[0] & 0x40
    assert batch.is_valid


def test_delete_horizon_replaces_base_timestamp_and_record_timestamps_are_deltas_from_it():
    # What Kafka's cleaner writes: MemoryRecordsBuilder sets baseTimestamp = deleteHorizonMs and
    # writes every timestampDelta relative to it.
    horizon = 1_700_000_500_000
    records = [v2_record(i, ts - horizon, b"k", None) for i, ts in enumerate((1000, 1500))]
    buf = v2_batch(records, attributes=0x40, base_timestamp=horizon, max_timestamp=1500)
    batch = only_batch(buf)
    assert batch.delete_horizon_ms == horizon
    assert [r.timestamp for r in batch.records()] == [1000, 1500]
    assert [r.timestamp for b in KpMemoryRecords(buf) for r in b] == [1000, 1500]


def test_batch_without_delete_horizon_flag_reports_none():
    batch = only_batch(v2_batch([v2_record(0, 0, b"k", b"v")], base_timestamp=5, max_timestamp=5))
    assert batch.delete_horizon_ms is None
    assert not batch.has_delete_horizon


def test_builder_with_delete_horizon_keeps_record_timestamps():
    # Kafka's MemoryRecordsBuilder sets baseTimestamp = deleteHorizonMs before any append, so
    # timestamp deltas are relative to the horizon and records keep their timestamps.
    builder = MemoryRecordsBuilder(delete_horizon_ms=1_800_000_000_000)
    builder.append(timestamp=1000, key=b"k", value=None)
    builder.append(timestamp=1500, key=b"j", value=None)
    batch = only_batch(builder.build())
    assert batch.delete_horizon_ms == 1_800_000_000_000
    assert batch.max_timestamp == 1500
    assert [r.timestamp for r in batch.records()] == [1000, 1500]


def test_builder_with_delete_horizon_sets_the_flag_and_field():
    builder = MemoryRecordsBuilder(delete_horizon_ms=1_800_000_000_000)
    builder.append(timestamp=1000, key=b"k", value=None)
    batch = only_batch(builder.build())
    assert batch.has_delete_horizon
    assert batch.delete_horizon_ms == batch.base_timestamp == 1_800_000_000_000


@pytest.mark.parametrize(
    ("base", "delta", "expected"),
    [
        (0, 5, 5),
        (INT_MAX - 1, 1, INT_MAX),
        (INT_MAX - 1, 2, 0),
        (INT_MAX, 1, 0),
        (INT_MAX, 10, 9),
        (INT_MAX - 5, INT_MAX, INT_MAX - 6),
    ],
)
def test_increment_sequence_wraps_past_integer_max_value(base, delta, expected):
    assert increment_sequence(base, delta) == expected


def test_record_sequences_and_last_sequence_wrap_past_integer_max_value():
    builder = MemoryRecordsBuilder(producer_id=1, producer_epoch=0, base_sequence=INT_MAX - 1)
    for i in range(4):
        builder.append(timestamp=i, key=None, value=b"v")
    buf = builder.build()
    batch = only_batch(buf)
    assert [r.sequence for r in batch.records()] == [INT_MAX - 1, INT_MAX, 0, 1]
    assert batch.last_sequence == 1
    assert next(iter(KpMemoryRecords(buf))).last_sequence == 1


def test_negative_base_sequence_gives_no_record_sequences():
    # DefaultRecord.readFrom: sequence = baseSequence >= 0 ? incrementSequence(...) : NO_SEQUENCE.
    buf = v2_batch([v2_record(0, 0, None, b"v"), v2_record(1, 0, None, b"v")], base_sequence=-7)
    assert [r.sequence for r in decode(buf)] == [-1, -1]


def test_no_sequence_gives_no_record_sequences():
    builder = MemoryRecordsBuilder()
    builder.append(timestamp=1, value=b"v")
    batch = only_batch(builder.build())
    assert batch.base_sequence == batch.last_sequence == -1
    assert [r.sequence for r in batch.records()] == [-1]


def _three_record_batch(**kwargs) -> bytes:
    builder = MemoryRecordsBuilder(**kwargs)
    for i in range(3):
        builder.append(timestamp=1000 + i, key=b"k%d" % i, value=b"v")
    return builder.build()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_set_last_offset_moves_the_batch_and_keeps_the_crc_valid(codec):
    buf = bytearray(_three_record_batch(compression=codec))
    crc = struct.unpack_from(">I", buf, 17)[0]
    batch = MutableRecordBatch(buf)
    batch.set_last_offset(1_000_002)
    assert (batch.base_offset, batch.last_offset) == (1_000_000, 1_000_002)
    assert batch.crc == crc and batch.is_valid
    assert [r.offset for r in batch.records()] == [1_000_000, 1_000_001, 1_000_002]
    assert next(iter(KpMemoryRecords(bytes(buf)))).validate_crc()


def test_set_partition_leader_epoch_keeps_the_crc_valid():
    buf = bytearray(_three_record_batch())
    crc = struct.unpack_from(">I", buf, 17)[0]
    batch = MutableRecordBatch(buf)
    batch.set_partition_leader_epoch(77)
    assert batch.partition_leader_epoch == 77
    assert batch.crc == crc and batch.is_valid
    assert only_batch(bytes(buf)).partition_leader_epoch == 77


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_set_max_timestamp_recomputes_the_crc(codec):
    buf = bytearray(_three_record_batch(compression=codec))
    old_crc = struct.unpack_from(">I", buf, 17)[0]
    batch = MutableRecordBatch(buf)
    batch.set_max_timestamp(APPEND, 5_000)
    assert batch.crc != old_crc
    assert batch.is_valid
    batch.ensure_valid()
    assert (batch.timestamp_type, batch.max_timestamp) == (APPEND, 5_000)
    assert [(r.timestamp, r.timestamp_type) for r in batch.records()] == [(5_000, APPEND)] * 3
    assert batch.compression == codec
    [kp_batch] = list(KpMemoryRecords(bytes(buf)))
    assert kp_batch.validate_crc()
    assert [r.timestamp for r in kp_batch] == [5_000] * 3
    # And back to CreateTime: the records' own timestamps again.
    batch.set_max_timestamp(CREATE, 1002)
    assert batch.is_valid and batch.crc == old_crc
    assert [r.timestamp for r in batch.records()] == [1000, 1001, 1002]


def test_mutable_batch_refuses_a_read_only_buffer():
    with pytest.raises(TypeError):
        MutableRecordBatch(_three_record_batch())


def test_crc_mismatch_is_reported_with_position():
    good = _three_record_batch()
    bad = bytearray(good)
    bad[-1] ^= 0x01
    batches = list(MemoryRecords(good + bytes(bad)))
    assert batches[0].is_valid and not batches[1].is_valid
    with pytest.raises(CorruptRecordError, match="Record is corrupt") as info:
        batches[1].ensure_valid()
    assert info.value.position == len(good)


def test_legacy_crc_mismatch_is_reported():
    message = bytearray(legacy_message(1, b"k", b"v", timestamp=1))
    message[-1] ^= 0xFF
    batch = only_batch(entry(0, bytes(message)))
    assert not batch.is_valid
    assert [r.is_valid for r in batch.records()] == [False]
    with pytest.raises(CorruptRecordError):
        batch.ensure_valid()


def test_negative_record_count_is_invalid():
    buf = v2_batch([v2_record(0, 0, None, b"v")], count=-1)
    with pytest.raises(InvalidRecordError, match="count") as info:
        decode(buf)
    assert info.value.position is not None


def test_bytes_left_after_the_declared_records_are_invalid():
    records = [v2_record(0, 0, None, b"v"), v2_record(1, 0, None, b"w")]
    with pytest.raises(InvalidRecordError) as info:
        decode(v2_batch(records, count=1))
    assert info.value.position is not None


def test_fewer_records_than_declared_is_an_error():
    records = [v2_record(0, 0, None, b"v" * 20)]
    with pytest.raises(KafkalogError) as info:
        decode(v2_batch(records, count=2))
    assert info.value.position is not None


def test_record_error_in_a_later_batch_names_a_position_inside_that_batch():
    first = _three_record_batch()
    record = bytearray(v2_record(0, 0, b"key", b"value"))
    record[0] = 0x7E  # record length 63: runs past the batch
    second = v2_batch([bytes(record)], base_offset=3)
    with pytest.raises(InvalidRecordError) as info:
        decode(first + second)
    assert len(first) <= info.value.position < len(first) + len(second)
    assert info.value.offset == 3


def test_unknown_codec_id_is_unsupported_with_position():
    buf = v2_batch([v2_record(0, 0, None, b"v")], attributes=0x05)
    prefix = _three_record_batch()
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        decode(prefix + buf)
    assert info.value.position == len(prefix)


def test_header_key_that_is_not_utf8_decodes_with_replacement_characters():
    # Kafka reads header keys with new String(bytes, UTF_8) (Utils.utf8): malformed bytes become
    # U+FFFD, never an error.
    buf = v2_batch([v2_record(0, 0, b"k", b"v", headers=[(b"\xff\xfe", b"x")])])
    [record] = decode(buf)
    assert record.headers == (Header("\ufffd\ufffd", b"x"),)


def test_v2_negative_key_size_other_than_minus_one_reads_as_null():
    # DefaultRecord.readFrom reads a key only when keySize >= 0: any negative size is null.
    record = bytearray(v2_record(0, 0, None, b"v"))
    assert record[4] == 0x01  # zigzag(-1)
    record[4] = 0x03  # zigzag(-2), same length
    buf = v2_batch([bytes(record)])
    assert [r.key for b in KpMemoryRecords(buf) for r in b] == [None]
    assert [r.key for r in decode(buf)] == [None]


# -- walking a buffer -----------------------------------------------------------------------


def _log() -> tuple[bytes, list[int]]:
    """Three batches (v0 message, v1 wrapper, v2 batch); returns the buffer and batch starts."""
    parts = [
        entry(0, legacy_message(0, b"k", b"v0")),
        gzip_wrapper(1, 3, [(i, legacy_message(1, None, b"v", timestamp=i)) for i in range(3)]),
        _three_record_batch(base_offset=4),
    ]
    starts, pos = [], 0
    for part in parts:
        starts.append(pos)
        pos += len(part)
    return b"".join(parts), starts


def test_clean_buffer_scans_to_its_end():
    buf, starts = _log()
    scan = RecordsScan(buf)
    assert [b.position for b in scan] == starts
    assert (scan.valid_bytes, scan.tail, scan.error, scan.invalid_bytes) == (
        len(buf),
        "none",
        None,
        0,
    )
    assert [b.position for b in iter_batches(buf)] == starts
    assert MemoryRecords(buf).valid_bytes() == len(buf)


def test_partial_trailing_batch_ends_iteration_quietly():
    buf, starts = _log()
    for cut in range(starts[2] + 1, len(buf)):
        data = buf[:cut]
        assert [b.position for b in MemoryRecords(data)] == starts[:2]
        scan = RecordsScan(data)
        assert [b.position for b in scan] == starts[:2]
        assert scan.valid_bytes == starts[2]
        if not any(data[starts[2] :]):
            # The first bytes of a base offset are zeros: a partial tail that is all zeros is
            # indistinguishable from preallocated space.
            assert scan.tail == "zeros"
            continue
        assert scan.tail == "partial", cut
        assert scan.error is None


def test_a_17_byte_remainder_is_a_partial_tail_even_with_a_valid_size():
    buf, _ = _log()
    tail = struct.pack(">qi", 9, 14) + b"\x00\x00\x00\x00\x01"  # 17 bytes: size 14, magic 1
    scan = RecordsScan(buf + tail)
    assert len(list(scan)) == 3
    assert (scan.tail, scan.error, scan.valid_bytes) == ("partial", None, len(buf))


@pytest.mark.parametrize("zeros", [1, 16, 17, 18, 4096])
def test_zero_filled_tail_is_reported_as_zeros(zeros):
    buf, _ = _log()
    scan = RecordsScan(buf + bytes(zeros))
    assert len(list(scan)) == 3
    assert scan.tail == "zeros"
    assert scan.valid_bytes == len(buf)
    assert isinstance(scan.error, CorruptRecordError)
    assert scan.error.position == len(buf)


def test_zero_filled_tail_raises_when_iterated_as_memory_records():
    buf, _ = _log()
    with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead") as info:
        list(MemoryRecords(buf + bytes(100)))
    assert info.value.position == len(buf)


@pytest.mark.parametrize("size", [-1, 0, 5, 13])
def test_entry_size_below_14_is_corrupt_and_names_the_position(size):
    buf, _ = _log()
    bad = struct.pack(">qi", 7, size) + b"\x01" * 40
    with pytest.raises(CorruptRecordError, match=f"size {size} smaller") as info:
        list(MemoryRecords(buf + bad))
    assert info.value.position == len(buf)
    assert str(len(buf)) in str(info.value)
    scan = RecordsScan(buf + bad)
    assert len(list(scan)) == 3
    assert (scan.tail, scan.valid_bytes) == ("corrupt", len(buf))
    assert scan.error.position == len(buf)


def test_unknown_magic_is_corrupt_and_names_the_position():
    buf, _ = _log()
    bad = bytearray(_three_record_batch())
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="magic") as info:
        list(MemoryRecords(buf + bytes(bad)))
    assert info.value.position == len(buf)
    scan = RecordsScan(buf + bytes(bad))
    list(scan)
    assert scan.tail == "corrupt" and scan.error.position == len(buf)


def test_v2_entry_smaller_than_the_batch_header_is_corrupt():
    bad = struct.pack(">qi", 0, 30) + b"\x00\x00\x00\x00\x02" + bytes(25)
    with pytest.raises(CorruptRecordError, match="overhead") as info:
        list(MemoryRecords(bad))
    assert info.value.position == 0


def test_legacy_entry_smaller_than_its_magics_overhead_is_corrupt():
    # A magic 1 message needs 22 bytes; 14 is enough to pass the walk's generic check.
    bad = struct.pack(">qi", 0, 14) + b"\x00\x00\x00\x00\x01" + bytes(9) + bytes(20)
    with pytest.raises(CorruptRecordError) as info:
        list(MemoryRecords(bad))
    assert info.value.position == 0


def test_position_base_shifts_every_position():
    buf, starts = _log()
    assert [b.position for b in iter_batches(buf, position_base=1000)] == [s + 1000 for s in starts]
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(buf + bytes(40), position_base=1000))
    assert info.value.position == 1000 + len(buf)


# -- the partitioner ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_test_vectors(key, expected):
    assert murmur2(key) == expected


def test_partition_for_key_is_positive_murmur2_modulo_partitions():
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert partition_for_key(b"abc", 3) == 479470107 % 3
    with pytest.raises(ValueError):
        partition_for_key(b"abc", 0)


def test_record_timestamps_wrap_as_java_longs_and_offsets_must_fit_a_log():
    # Kafka computes baseTimestamp + timestampDelta in Java longs: a batch whose base timestamp
    # is near Long.MAX_VALUE yields wrapped (negative) timestamps, not big ints. Offsets are the
    # offset rule's (offsets_rule.py): up to 2^63 - 2 they decode; past it the batch is damaged.
    builder = MemoryRecordsBuilder()
    builder.append(timestamp=0, key=b"k", value=b"v")
    builder.append(timestamp=5, key=b"k", value=b"w")
    raw = bytearray(builder.build())
    long_max = (1 << 63) - 1
    struct.pack_into(">q", raw, 0, long_max - 2)  # baseOffset: the last offset is 2^63 - 2
    struct.pack_into(">q", raw, 27, long_max)  # baseTimestamp
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))  # the CRC covers attributes on
    batch = only_batch(bytes(raw))
    records = list(batch.records())
    assert [r.timestamp for r in records] == [long_max, -(1 << 63) + 4]
    assert [r.offset for r in records] == [long_max - 2, long_max - 1]
    struct.pack_into(">q", raw, 0, long_max)  # baseOffset (outside the CRC)
    with pytest.raises(CorruptRecordError, match="overflow a 64-bit offset") as e:
        list(only_batch(bytes(raw)).records())
    assert e.value.position == 0 and e.value.offset == long_max


def _frame_one_by_one(buf: bytes) -> tuple[list[int], list[int]]:
    from kafkalog.format.entries import frame_entry

    ends, offsets, pos = [], [], 0
    while True:
        try:
            framed = frame_entry(buf, pos, len(buf))
        except CorruptRecordError:
            break
        if framed is None:
            break
        offsets.append(struct.unpack_from(">q", buf, pos)[0])
        pos += 12 + framed[0]
        ends.append(pos)
    return ends, offsets


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=120), cut=st.integers(0, 400), flip=st.integers(0, 400))
def test_a_run_of_entries_is_framed_as_entry_by_entry(tail, cut, flip):
    from kafkalog.format.entries import framed_run

    buf, _ = _log()
    data = bytearray(buf[: max(0, len(buf) - cut)] + tail)
    if data:
        data[flip % len(data)] ^= 0x5A
    data = bytes(data)
    assert framed_run(data, 0, len(data)) == _frame_one_by_one(data)


@settings(max_examples=300, deadline=None)
@given(
    tail=st.binary(max_size=120),
    cut=st.integers(0, 400),
    flip=st.integers(0, 400),
    start=st.integers(0, 3),
    capacity=st.integers(0, 12),
)
def test_both_frame_run_twins_frame_what_framed_run_frames(tail, cut, flip, start, capacity):
    """``frame_run`` (the readers' framing of a window, C and pure) writes the ends and offset
    fields ``framed_run`` finds, from any start, up to the room it is given."""
    import numpy as np

    from kafkalog.format.columnar._pure import kernels as pure
    from kafkalog.format.entries import framed_run

    from .columnar.fastcheck import compiled_kernels

    buf, _ = _log()
    data = bytearray(buf[: max(0, len(buf) - cut)] + tail)
    if data:
        data[flip % len(data)] ^= 0x5A
    data = bytes(data)
    pos = 0
    for _ in range(start):  # start at a later entry now and then
        framed = framed_run(data, pos, len(data))[0]
        pos = framed[0] if framed else pos
    ends, offsets = framed_run(data, pos, len(data))
    n = min(len(ends), capacity)
    expected = (
        (ends[n - 1] if n else pos),
        n,
        [x for pair in zip(ends, offsets) for x in pair][: 2 * n],
    )
    for twin in (pure, compiled_kernels()):
        rows = np.full(2 * capacity, -7, np.int64)
        got_pos, got_n = twin.frame_run(data, pos, len(data), rows)
        assert (got_pos, got_n, rows[: 2 * got_n].tolist()) == expected
