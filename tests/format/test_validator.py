"""The broker's append validation (kafkalog.format.validate.log_validator) against Kafka's rules.

Inputs are written by kafka-python 3.0.12 (an independent client) and patched, where a test needs
what no client writes (a bad CRC, LogAppendTime, a control flag), with kafka-python's own CRC
functions. Expected values come from Kafka's source (LogValidator.java, UnifiedLog
.analyzeAndValidateRecords, MemoryRecordsBuilder.info; messages quoted from there) and every output
is decoded by kafka-python, never by kafkalog.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.codec import gzip_encode
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32, calc_crc32c

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)
from kafkalog.format import CompressionType, MemoryRecords, TimestampType
from kafkalog.format.validate.log_validator import (
    AppendOrigin,
    InvalidTimestampError,
    LogValidatorConfig,
    RecordValidationError,
    UnsupportedForMessageFormatError,
    validate_records,
)

CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NOW = 1_700_000_000_000
TP = "orders-3"
VALUE = b"value-" * 20  # compressible, so kafka-python keeps the codec for v2
HEADERS = [("trace", b"abc"), ("null", None)]


def kp_records(magic, codec=NONE, n=5, *, key=b"k", headers=True, ts=None, **producer):
    """``n`` records written by kafka-python, offsets 0..n-1, timestamps NOW-n+1..NOW."""
    builder = KpBuilder(magic, codec, 1 << 20, **producer)
    for i in range(n):
        builder.append(
            NOW - n + 1 + i if ts is None else ts[i],
            None if key is None else key + str(i).encode(),
            VALUE + str(i).encode(),
            HEADERS if magic == 2 and headers else None,
        )
    builder.close()
    return bytes(builder.buffer())


def patch_v2(
    data: bytes,
    *,
    attributes=None,
    last_offset_delta=None,
    base_offset=None,
    count=None,
    base_sequence=None,
) -> bytes:
    """Change v2 header fields and recompute the CRC-32C with kafka-python's function."""
    buf = bytearray(data)
    for value, fmt, pos in (
        (base_offset, ">q", 0),
        (attributes, ">h", 21),
        (last_offset_delta, ">i", 23),
        (base_sequence, ">i", 53),
        (count, ">i", 57),
    ):
        if value is not None:
            struct.pack_into(fmt, buf, pos, value)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def validate(data, *, next_offset=100, epoch=7, now=NOW, origin=AppendOrigin.CLIENT, **config):
    return validate_records(
        data,
        LogValidatorConfig(**config),
        next_offset=next_offset,
        partition_leader_epoch=epoch,
        now_ms=now,
        origin=origin,
        topic_partition=TP,
    )


def kp_decode(data: bytes) -> list[dict]:
    """Every top-level entry as kafka-python reads it (CRCs checked)."""
    records = KpMemoryRecords(bytes(data))
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        entry = {
            "magic": batch.magic,
            "codec": batch.compression_type,
            "timestamp_type": batch.timestamp_type,
            "records": [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch],
        }
        if batch.magic == 2:
            entry.update(
                leader_epoch=batch.leader_epoch,
                base_offset=batch.base_offset,
                max_timestamp=batch.max_timestamp,
                producer_id=batch.producer_id,
                base_sequence=batch.base_sequence,
            )
        else:
            entry["offset"] = batch.base_offset
        out.append(entry)
    return out


def offsets(entries):
    return [r[0] for e in entries for r in e["records"]]


# -- in-place offset assignment ---------------------------------------------------------------


def test_v2_uncompressed_in_place_sets_offsets_epoch_and_keeps_bytes():
    data = kp_records(2)
    result = validate(data)
    [batch] = kp_decode(result.validated_records)
    assert offsets([batch]) == [100, 101, 102, 103, 104]
    assert batch["base_offset"] == 100 and batch["leader_epoch"] == 7
    assert batch["max_timestamp"] == NOW and batch["timestamp_type"] == 0
    assert [r[4] for r in batch["records"]] == [tuple(HEADERS)] * 5
    # In place: only baseOffset and the leader epoch (outside the CRC) differ.
    out = result.validated_records
    assert out[:8] == struct.pack(">q", 100) and out[12:16] == struct.pack(">i", 7)
    assert out[16:] == data[16:] and out[8:12] == data[8:12]
    assert (result.first_offset, result.last_offset) == (100, 104)
    assert result.max_timestamp == NOW and result.shallow_offset_of_max_timestamp == 104
    assert not result.message_size_maybe_changed
    assert result.log_append_time_ms == -1


def test_v2_log_append_time_topic_sets_max_timestamp_and_type():
    result = validate(kp_records(2), timestamp_type=APPEND, now=NOW + 5)
    [batch] = kp_decode(result.validated_records)
    assert batch["timestamp_type"] == 1 and batch["max_timestamp"] == NOW + 5
    assert [r[1] for r in batch["records"]] == [NOW + 5] * 5
    assert result.max_timestamp == NOW + 5 and result.log_append_time_ms == NOW + 5
    assert result.shallow_offset_of_max_timestamp == 104


def test_v1_uncompressed_in_place_per_message_offsets_and_timestamps():
    data = kp_records(1, ts=[5, 9, 7, 9, 1])
    result = validate(data, magic=1)
    entries = kp_decode(result.validated_records)
    assert [e["offset"] for e in entries] == [100, 101, 102, 103, 104]
    assert [r[1] for e in entries for r in e["records"]] == [5, 9, 7, 9, 1]
    # Max timestamp 9: the last offset of the first batch holding it (strictly greater wins).
    assert result.max_timestamp == 9 and result.shallow_offset_of_max_timestamp == 101
    assert len(result.validated_records) == len(data)

    result = validate(data, magic=1, timestamp_type=APPEND)
    entries = kp_decode(result.validated_records)
    assert {e["timestamp_type"] for e in entries} == {1}
    assert [r[1] for e in entries for r in e["records"]] == [NOW] * 5
    assert result.max_timestamp == NOW and result.shallow_offset_of_max_timestamp == 100


def test_v0_in_place_has_no_timestamps():
    result = validate(kp_records(0), magic=0)
    assert [e["offset"] for e in kp_decode(result.validated_records)] == [100, 101, 102, 103, 104]
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (-1, -1)
    result = validate(kp_records(0), magic=0, timestamp_type=APPEND)
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (-1, -1)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_v2_compressed_same_codec_is_kept_in_place(codec):
    data = kp_records(2, codec)
    for compression in ("producer", CompressionType(codec).label):
        result = validate(data, compression=compression)
        assert result.validated_records[61:] == data[61:]  # compressed payload untouched
        [batch] = kp_decode(result.validated_records)
        assert batch["codec"] == codec and offsets([batch]) == list(range(100, 105))
        assert not result.message_size_maybe_changed
        assert result.shallow_offset_of_max_timestamp == 104 and result.max_timestamp == NOW


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_v1_compressed_wrapper_kept_in_place_when_inner_offsets_are_relative(codec):
    data = kp_records(1, codec)  # kafka-python: wrapper offset 0, inner offsets 0..4
    result = validate(data, magic=1)
    assert not result.message_size_maybe_changed
    [wrapper] = kp_decode(result.validated_records)
    assert wrapper["offset"] == 104 and wrapper["codec"] == codec
    assert offsets([wrapper]) == list(range(100, 105))
    assert result.shallow_offset_of_max_timestamp == 104


def test_v1_compressed_with_other_inner_offsets_is_rebuilt():
    inner = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i, offset in enumerate([3, 4, 8]):
        inner.append(offset, NOW + i, b"k", VALUE)
    wrapper = legacy_wrapper(1, GZIP, gzip_encode(bytes(inner.build())), offset=0)
    result = validate(wrapper, magic=1)
    assert result.message_size_maybe_changed
    assert offsets(kp_decode(result.validated_records)) == [100, 101, 102]


def test_v0_compressed_is_always_rebuilt():
    result = validate(kp_records(0, GZIP), magic=0)
    assert result.message_size_maybe_changed
    [wrapper] = kp_decode(result.validated_records)
    assert wrapper["codec"] == GZIP and offsets([wrapper]) == list(range(100, 105))


# -- rebuilds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), [(NONE, GZIP), (GZIP, NONE), (SNAPPY, ZSTD)])
def test_topic_codec_other_than_producers_recompresses(source, target):
    result = validate(kp_records(2, source), compression=CompressionType(target).label)
    [batch] = kp_decode(result.validated_records)
    assert batch["codec"] == target and batch["leader_epoch"] == 7
    assert offsets([batch]) == list(range(100, 105))
    assert [r[2:] for r in batch["records"]] == [
        (b"k%d" % i, VALUE + b"%d" % i, tuple(HEADERS)) for i in range(5)
    ]
    assert (
        result.message_size_maybe_changed
        and result.record_validation_stats.num_converted_records == 5
    )


def test_uncompressed_topic_name_means_no_codec():
    [batch] = kp_decode(validate(kp_records(2, GZIP), compression="uncompressed").validated_records)
    assert batch["codec"] == NONE


def test_rebuild_keeps_producer_fields():
    data = kp_records(2, GZIP, producer_id=4000, producer_epoch=3, base_sequence=17)
    [batch] = kp_decode(validate(data, compression="lz4").validated_records)
    assert (batch["producer_id"], batch["base_sequence"]) == (4000, 17)


@pytest.mark.parametrize("source_magic", [0, 1])
def test_up_conversion_to_v2(source_magic):
    result = validate(kp_records(source_magic, headers=False), magic=2)
    [batch] = kp_decode(result.validated_records)
    assert batch["magic"] == 2 and offsets([batch]) == list(range(100, 105))
    expected_ts = [-1] * 5 if source_magic == 0 else [NOW - 4 + i for i in range(5)]
    assert [r[1] for r in batch["records"]] == expected_ts
    assert result.message_size_maybe_changed


def test_down_conversion_to_v1_drops_headers():
    result = validate(kp_records(2), magic=1)
    entries = kp_decode(result.validated_records)
    assert [e["magic"] for e in entries] == [1] * 5
    assert [r[2:4] for e in entries for r in e["records"]] == [
        (b"k%d" % i, VALUE + b"%d" % i) for i in range(5)
    ]
    # Uncompressed v1: one message per record, so the max timestamp's own offset.
    assert result.max_timestamp == NOW and result.shallow_offset_of_max_timestamp == 104


def test_zstd_cannot_go_below_magic_2():
    with pytest.raises(UnsupportedCompressionTypeError) as e:
        validate(kp_records(2, ZSTD), magic=1)
    assert e.value.code == 76


def test_rebuilt_batch_over_max_message_bytes_is_rejected():
    data = kp_records(2, GZIP, n=20)
    size = len(validate(data, compression="uncompressed").validated_records)
    with pytest.raises(RecordTooLargeError) as e:
        validate(data, compression="uncompressed", max_message_bytes=size - 1)
    assert e.value.message == (
        f"Message batch size is {size} bytes in append to partition {TP} which exceeds the "
        f"maximum configured size of {size - 1}."
    )


# -- whole-batch errors ---------------------------------------------------------------------


def test_client_v2_batch_must_have_base_offset_zero():
    data = patch_v2(kp_records(2), base_offset=5)
    with pytest.raises(InvalidRecordError) as e:
        validate(data)
    assert e.value.code == 87
    assert e.value.message == (
        f"The baseOffset of the record batch in the append to {TP} should be 0, but it is 5"
    )
    assert offsets(
        kp_decode(validate(data, origin=AppendOrigin.REPLICATION).validated_records)
    ) == [100, 101, 102, 103, 104]


def test_batch_over_max_message_bytes():
    data = kp_records(2)
    with pytest.raises(RecordTooLargeError) as e:
        validate(data, max_message_bytes=len(data) - 1)
    assert e.value.code == 10
    assert e.value.message == (
        f"The record batch size in the append to {TP} is {len(data)} bytes which exceeds the "
        f"maximum configured value of {len(data) - 1}."
    )


def test_bad_crc_is_corrupt():
    data = bytearray(kp_records(2))
    data[-1] ^= 0xFF
    stored = struct.unpack_from(">I", data, 17)[0]
    with pytest.raises(CorruptRecordError) as e:
        validate(bytes(data))
    assert e.value.code == 2
    assert e.value.message == (
        f"Record is corrupt (stored crc = {stored}, computed crc = "
        f"{calc_crc32c(bytes(data[21:]))}) in topic partition {TP}."
    )


def test_no_batches_at_all():
    for data in (b"", kp_records(2)[:40]):
        with pytest.raises(InvalidRecordError, match="Record batch has no batches at all"):
            validate(data)


def test_partial_trailing_entry_is_trimmed():
    data = kp_records(2)
    result = validate(data + data[:30])
    assert offsets(kp_decode(result.validated_records)) == list(range(100, 105))
    assert len(result.validated_records) == len(data)


@pytest.mark.parametrize(("magic", "codec"), [(2, NONE), (2, GZIP), (1, GZIP)])
def test_more_than_one_batch_rejected_for_v2_or_compressed(magic, codec):
    data = kp_records(magic, codec)
    with pytest.raises(InvalidRecordError, match="Compressed outer record has more than one batch"):
        validate(data + data, magic=magic)


def test_several_uncompressed_legacy_messages_are_fine():
    assert offsets(kp_decode(validate(kp_records(1) * 2, magic=1).validated_records)) == list(
        range(100, 110)
    )


def test_mixed_magic_batches_rejected():
    with pytest.raises(InvalidRecordError) as e:
        validate(kp_records(1, n=1) + kp_records(0, n=1), magic=1)
    assert e.value.message == (
        f"Batch magic 0 is not the same as the first batch's magic byte 1 in topic partition {TP}"
    )


def test_v2_offset_delta_must_match_count():
    with pytest.raises(InvalidRecordError) as e:
        validate(patch_v2(kp_records(2), last_offset_delta=9))
    assert e.value.message == (
        f"Inconsistent batch offset range [0, 9] and count of records 5 in topic partition {TP}"
    )
    with pytest.raises(InvalidRecordError) as e:
        validate(patch_v2(kp_records(2), last_offset_delta=-1))
    assert e.value.message == f"Batch has an invalid offset range: [0, -1] in topic partition {TP}"
    with pytest.raises(InvalidRecordError) as e:
        validate(patch_v2(kp_records(2), count=0))
    assert e.value.message == f"Invalid reported count for record batch: 0 in topic partition {TP}"


def marker_batch() -> bytes:
    """A COMMIT marker (key version 0, type 1; value version 0, coordinator epoch 5)."""
    builder = KpBuilder(2, NONE, 1 << 20, producer_id=9, producer_epoch=0, base_sequence=0)
    builder.append(NOW, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    builder.close()
    return patch_v2(bytes(builder.buffer()), attributes=0x30, base_sequence=-1)


def test_clients_cannot_write_control_batches():
    with pytest.raises(InvalidRecordError) as e:
        validate(marker_batch())
    assert e.value.message == (
        f"Clients are not allowed to write control records in topic partition {TP}"
    )
    # The coordinator writes markers; even into a compressed topic they stay uncompressed.
    result = validate(marker_batch(), origin=AppendOrigin.COORDINATOR, compression="gzip")
    [batch] = kp_decode(result.validated_records)
    assert batch["codec"] == NONE and offsets([batch]) == [100]
    assert not result.message_size_maybe_changed


def test_down_conversion_drops_non_transactional_control_batches():
    builder = KpBuilder(2, NONE, 1 << 20)
    builder.append(NOW, b"\x00\x00\x00\x02", b"leader-change")  # key: version 0, type 2
    builder.close()
    data = patch_v2(bytes(builder.buffer()), attributes=0x20)
    result = validate(data, magic=1, origin=AppendOrigin.COORDINATOR)
    assert result.validated_records == b"" and result.last_offset == 99
    with pytest.raises(UnsupportedForMessageFormatError):  # markers are transactional
        validate(marker_batch(), magic=1, origin=AppendOrigin.COORDINATOR)


def test_producer_id_needs_a_sequence():
    data = patch_v2(
        kp_records(2, producer_id=1000, producer_epoch=0, base_sequence=0), base_sequence=-1
    )
    with pytest.raises(InvalidRecordError) as e:
        validate(data)
    assert e.value.message == (
        f"Invalid sequence number -1 in record batch with producerId 1000 in topic partition {TP}"
    )


def test_idempotent_and_transactional_need_magic_2():
    idempotent = kp_records(2, producer_id=1000, producer_epoch=0, base_sequence=0)
    with pytest.raises(UnsupportedForMessageFormatError) as e:
        validate(idempotent, magic=1)
    assert e.value.code == 43
    assert e.value.message == "Idempotent records cannot be used with magic version 1"
    transactional = kp_records(
        2, producer_id=1000, producer_epoch=0, base_sequence=0, transactional=True
    )
    with pytest.raises(UnsupportedForMessageFormatError) as e:
        validate(transactional, magic=0)
    assert e.value.message == "Transactional records cannot be used with magic version 0"


# -- per-record errors --------------------------------------------------------------------------


@pytest.mark.parametrize(("magic", "codec"), [(2, NONE), (2, LZ4), (1, NONE), (0, GZIP)])
def test_compacted_topic_needs_keys(magic, codec):
    builder = KpBuilder(magic, codec, 1 << 20)
    for key in (b"a", None, b"c", None):
        builder.append(NOW, key, VALUE)
    builder.close()
    with pytest.raises(RecordValidationError) as e:
        validate(bytes(builder.buffer()), magic=magic, compacted=True)
    assert type(e.value) is RecordValidationError and e.value.code == 87
    message = f"Compacted topic cannot accept message without key in topic partition {TP}"
    if magic == 1 and codec == NONE:  # one message per batch: the first bad batch fails alone
        assert e.value.errors == [(0, message)]
    else:
        assert e.value.errors == [(1, message), (3, message)]
        assert e.value.message == (
            "One or more records have been rejected due to 2 record errors in total, and only "
            f"showing the first three errors at most: [RecordError(batchIndex=1, message='"
            f"{message}'), RecordError(batchIndex=3, message='{message}')]"
        )


def test_create_time_bounds_from_before_and_after_max_ms():
    now = 10_000
    ok = kp_records(2, ts=[9_000, 10_000, 10_500], n=3)
    validate(ok, now=now, timestamp_before_max_ms=1000, timestamp_after_max_ms=500)
    bad = kp_records(2, ts=[8_999, 10_000, 10_501], n=3)
    with pytest.raises(InvalidTimestampError) as e:
        validate(bad, now=now, timestamp_before_max_ms=1000, timestamp_after_max_ms=500)
    assert e.value.code == 32
    assert e.value.message == "One or more records have been rejected due to invalid timestamp"
    assert e.value.errors == [
        (
            0,
            "Timestamp 8999 of message with offset 0 is out of range. The timestamp should be "
            "within [9000, 10500]",
        ),
        (
            2,
            "Timestamp 10501 of message with offset 2 is out of range. The timestamp should be "
            "within [9000, 10500]",
        ),
    ]
    # Defaults (Long.MAX_VALUE both ways) accept anything; a LogAppendTime topic checks nothing.
    validate(bad, now=now)
    validate(bad, now=now, timestamp_type=APPEND, timestamp_before_max_ms=0)


def test_legacy_message_without_timestamp_is_not_range_checked():
    data = kp_records(1, ts=[-1, -1], n=2)
    result = validate(data, magic=1, timestamp_before_max_ms=0, timestamp_after_max_ms=0)
    assert result.max_timestamp == -1


def test_producer_may_not_set_log_append_time():
    data = patch_v2(kp_records(2, n=2, headers=False), attributes=0x08)
    with pytest.raises(InvalidTimestampError) as e:
        validate(data, timestamp_type=APPEND)
    size = len(VALUE) + 1
    # In a LogAppendTime batch every record reads the batch's maxTimestamp (DefaultRecordBatch).
    assert e.value.errors == [
        (
            i,
            f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp={NOW}, "
            f"key=2 bytes, value={size} bytes). Producer should not set timestamp type to "
            "LogAppendTime.",
        )
        for i in range(2)
    ]


def legacy_wrapper(magic: int, codec: int, value: bytes, *, offset: int, attributes=None) -> bytes:
    """A compressed legacy wrapper message around ``value``, CRC by kafka-python's function."""
    attrs = codec if attributes is None else attributes
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", NOW)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", calc_crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_corrupt_inner_message_of_legacy_wrapper():
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i in range(3):
        builder.append(i, NOW, b"k", VALUE)
    inner = bytearray(builder.build())
    second = 12 + struct.unpack_from(">i", inner, 8)[0]
    size = struct.unpack_from(">i", inner, second + 8)[0]
    inner[second + 12 + size - 1] ^= 0x01  # last byte of the second message's value
    stored = struct.unpack_from(">I", inner, second + 12)[0]
    computed = zlib.crc32(bytes(inner[second + 16 : second + 12 + size]))
    data = legacy_wrapper(1, GZIP, gzip_encode(bytes(inner)), offset=2)
    with pytest.raises(CorruptRecordError) as e:
        validate(data, magic=1)
    assert e.value.code == 2
    assert (
        e.value.message == f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"
    )


# -- any input, any topic -----------------------------------------------------------------------

MAGIC_CODECS = [(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)] + [
    (2, c) for c in (NONE, GZIP, SNAPPY, LZ4, ZSTD)
]
record_st = st.tuples(
    st.integers(0, 2**41),
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(
        st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(MAGIC_CODECS),
    records=st.lists(record_st, min_size=1, max_size=8),
    to_magic=st.sampled_from([0, 1, 2]),
    compression=st.sampled_from(["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
    timestamp_type=st.sampled_from([CREATE, APPEND]),
    next_offset=st.integers(0, 2**40),
)
def test_any_client_batch_validates_to_contiguous_offsets(
    source, records, to_magic, compression, timestamp_type, next_offset
):
    magic, codec = source
    builder = KpBuilder(magic, codec, 1 << 20)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers if magic == 2 else None)
    builder.close()
    data = bytes(builder.buffer())
    source_codec = MemoryRecords(data).batches().__next__().compression
    target = (
        source_codec
        if compression == "producer"
        else (NONE if compression == "uncompressed" else CompressionType.from_label(compression))
    )
    try:
        result = validate(
            data,
            magic=to_magic,
            compression=compression,
            timestamp_type=timestamp_type,
            next_offset=next_offset,
            now=NOW,
        )
    except UnsupportedCompressionTypeError:
        assert target == ZSTD and to_magic < 2
        return
    entries = kp_decode(result.validated_records)
    n = len(records)
    assert offsets(entries) == list(range(next_offset, next_offset + n))
    assert (result.first_offset, result.last_offset) == (next_offset, next_offset + n - 1)
    assert {e["magic"] for e in entries} == {to_magic}
    decoded = [r for e in entries for r in e["records"]]
    assert [(r[2], r[3]) for r in decoded] == [(k, v) for _, k, v, _ in records]
    for (_, ts, _, _, headers), (sent_ts, _, _, sent_headers) in zip(decoded, records):
        if to_magic == 2:
            assert headers == (tuple(sent_headers) if magic == 2 else ())
        if to_magic == 0:
            assert ts is None  # kafka-python reads magic 0 timestamps as None
        elif timestamp_type == APPEND:
            assert ts == NOW
        else:
            assert ts == (sent_ts if magic > 0 else -1)
    if to_magic == 2 or target != NONE:
        assert len(entries) == 1 and entries[0]["codec"] == target
    if to_magic == 2:
        assert entries[0]["leader_epoch"] == 7 and entries[0]["base_offset"] == next_offset
