"""kafkalog's record format against kafka-python 3.0.12's independent record code, both ways.

For every combination kafka-python supports (magic 0/1 with none, gzip, snappy, lz4; magic 2 with
none, gzip, snappy, lz4, zstd; CreateTime and LogAppendTime for magic 1 and 2), bytes written by
one library are decoded by both, and every field is compared: with the other decoder and with the
records that were written. kafka-python never sets LogAppendTime, control flags, base offsets or
leader epochs itself (a broker does), so those are patched into its output as a broker would,
recomputing CRCs with kafka-python's own CRC functions.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import lz4.frame
import pytest
from kafka.codec import (
    gzip_decode,
    gzip_encode,
    lz4_decode,
    lz4_decode_old_kafka,
    snappy_decode,
    snappy_encode,
    zstd_decode,
    zstd_encode,
)
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import (
    ControlRecord,
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32, calc_crc32c

from kafkalog.format import (
    CompressionType,
    ControlRecordType,
    Header,
    LegacyBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    build_end_txn_marker_batch,
    empty_batch,
)
from kafkalog.format.control import decode_control_type, decode_end_txn_marker

NONE, GZIP, SNAPPY, LZ4, ZSTD = (
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
)
CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
LEGACY_CODECS = (NONE, GZIP, SNAPPY, LZ4)
V2_CODECS = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
LOG_APPEND_TIME = 1_767_225_600_123

# (magic, codec, timestamp type) for everything kafka-python can write or read.
CASES = [
    *((0, codec, CREATE) for codec in LEGACY_CODECS),
    *((1, codec, ts_type) for codec in LEGACY_CODECS for ts_type in (CREATE, APPEND)),
    *((2, codec, ts_type) for codec in V2_CODECS for ts_type in (CREATE, APPEND)),
]
MAGIC_CODECS = (
    [(0, c) for c in LEGACY_CODECS] + [(1, c) for c in LEGACY_CODECS] + [(2, c) for c in V2_CODECS]
)


def case_id(case) -> str:
    magic, codec, *rest = case
    parts = [f"v{magic}", codec.label]
    if rest:
        parts.append("append" if rest[0] == APPEND else "create")
    return "-".join(parts)


@dataclass(frozen=True)
class Rec:
    """One record as written: what both decoders must give back."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def sample_records(magic: int) -> list[Rec]:
    """Null, empty and ordinary keys and values, timestamps out of order and far apart, and for
    magic 2 headers with null values, empty and non-ASCII keys. Values compress well, so that
    kafka-python (which falls back to no compression when it does not pay) really compresses."""
    headers: list[tuple[tuple[str, bytes | None], ...]] = [()] * 6
    if magic == 2:
        headers = [
            (),
            (("trace-id", b"abc123"), ("null-valued", None)),
            (("ключ", "значение".encode()), ("", b""), ("日本語キー", b"\x00\xff")),
            (("dup", b"1"), ("dup", b"2")),
            (("only-null", None),),
            (("emoji-🎉", b"v" * 300),),
        ]
    base = 1_700_000_000_000
    stamps = [base, base + 5, base - 1_000, base + 3_000_000_000, 0, base + 7]
    keys: list[bytes | None] = [None, b"", b"key-2", "ключ-3".encode(), b"\x00" * 4, b"k" * 200]
    values: list[bytes | None] = [
        b"value zero " * 30,
        None,
        b"",
        ("value three " * 40).encode(),
        bytes(range(256)) * 2,
        b"v" * 1000,
    ]
    return [Rec(stamps[i], keys[i], values[i], headers[i]) for i in range(6)]


def large_records(magic: int) -> list[Rec]:
    """300 KB keys and values: several snappy (32 KiB) and lz4 (64 KiB) blocks each; a third is
    random so that nothing compresses to almost nothing."""
    rng = random.Random(300)
    big_key = rng.randbytes(100_000) + b"K" * 200_000
    big_value = b"V" * 150_000 + rng.randbytes(100_000) + bytes(50_000)
    headers = (("big", b"h" * 70_000),) if magic == 2 else ()
    return [
        Rec(1_700_000_000_000, big_key, big_value, headers),
        Rec(1_700_000_000_001, None, b"small"),
        Rec(1_700_000_000_002, b"k", big_value[::-1]),
    ]


# -- kafka-python as the writer ----------------------------------------------------------------


def kp_build_v2(
    records: list[Rec],
    *,
    codec: int = NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = CREATE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    leader_epoch: int = 0,
) -> bytes:
    """A v2 batch written by kafka-python, then given its offsets, leader epoch, timestamp type
    and control flag in place as a broker would (the last two need a new CRC-32C)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, rec in enumerate(records):
        meta = builder.append(i, rec.timestamp, rec.key, rec.value, list(rec.headers))
        assert meta is not None
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    attributes = struct.unpack_from(">h", buf, 21)[0]
    if timestamp_type == APPEND:
        attributes |= 0x08
        struct.pack_into(">q", buf, 35, LOG_APPEND_TIME)
    if control:
        attributes |= 0x20
    struct.pack_into(">h", buf, 21, attributes)
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _patch_legacy_entry(
    buf: bytearray, pos: int, *, offset: int | None, timestamp_type: int, timestamp: int | None
) -> int:
    """Give the legacy entry at ``pos`` an offset (outside the CRC) and, for magic 1, a
    timestamp type and timestamp (inside it: the CRC-32 is recomputed). Returns the next entry."""
    size = struct.unpack_from(">i", buf, pos + 8)[0]
    if offset is not None:
        struct.pack_into(">q", buf, pos, offset)
    magic = buf[pos + 16]
    if magic == 1 and timestamp is not None:
        buf[pos + 17] = (buf[pos + 17] & ~0x08) | (0x08 if timestamp_type == APPEND else 0)
        struct.pack_into(">q", buf, pos + 18, timestamp)
        struct.pack_into(
            ">I", buf, pos + 12, calc_crc32(memoryview(buf)[pos + 16 : pos + 12 + size])
        )
    return pos + 12 + size


def kp_build_legacy(
    records: list[Rec],
    *,
    magic: int,
    codec: int = NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = CREATE,
    kafka_wrapper: bool = True,
) -> bytes:
    """Legacy entries written by kafka-python. Uncompressed, each message gets its absolute
    offset. Compressed, kafka-python writes inner offsets as given (absolute for magic 0,
    relative 0..n-1 for magic 1) and a wrapper with offset 0 and timestamp 0, as librdkafka does;
    with ``kafka_wrapper`` the wrapper gets what a Kafka broker writes instead: the last offset and
    the max timestamp (or the log append time)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30)
    for i, rec in enumerate(records):
        relative = codec != NONE and magic == 1
        meta = builder.append(i if relative else base_offset + i, rec.timestamp, rec.key, rec.value)
        assert meta is not None
    buf = bytearray(builder.build())
    if codec == NONE:
        pos = 0
        while pos < len(buf):
            ts = LOG_APPEND_TIME if timestamp_type == APPEND else None
            pos = _patch_legacy_entry(
                buf, pos, offset=None, timestamp_type=timestamp_type, timestamp=ts
            )
    elif kafka_wrapper or timestamp_type == APPEND:
        if timestamp_type == APPEND:
            ts = LOG_APPEND_TIME
        else:
            ts = max(rec.timestamp for rec in records) if kafka_wrapper else None
        offset = base_offset + len(records) - 1 if kafka_wrapper else None
        end = _patch_legacy_entry(
            buf, 0, offset=offset, timestamp_type=timestamp_type, timestamp=ts
        )
        assert end == len(buf)
    return bytes(buf)


def kp_build(records: list[Rec], magic: int, codec: int, ts_type=CREATE, base_offset=0, **kw):
    if magic == 2:
        return kp_build_v2(
            records, codec=codec, timestamp_type=ts_type, base_offset=base_offset, **kw
        )
    return kp_build_legacy(
        records, magic=magic, codec=codec, timestamp_type=ts_type, base_offset=base_offset, **kw
    )


# -- kafkalog as the writer --------------------------------------------------------------------


def kl_build(
    records: list[Rec],
    magic: int,
    codec: int,
    ts_type: TimestampType = CREATE,
    base_offset: int = 0,
    **kwargs,
) -> bytes:
    builder = MemoryRecordsBuilder(
        magic=magic,
        compression=codec,
        timestamp_type=ts_type,
        base_offset=base_offset,
        log_append_time=LOG_APPEND_TIME if ts_type == APPEND else -1,
        **kwargs,
    )
    for rec in records:
        builder.append(timestamp=rec.timestamp, key=rec.key, value=rec.value, headers=rec.headers)
    return builder.build()


# -- decoding with both, in one vocabulary -------------------------------------------------------


def _ts_type(value) -> int | None:
    """Both libraries' timestamp types as kafka-python's ints (None: magic 0 has none)."""
    if value is None or value == TimestampType.NO_TIMESTAMP_TYPE:
        return None
    return int(value)


def kl_decode(buf: bytes) -> list[tuple[dict, list[dict]]]:
    out = []
    for batch in MemoryRecords(buf):
        records = list(batch.records())
        if isinstance(batch, RecordBatch):
            assert batch.magic == 2
            fields = {
                "magic": 2,
                "offset": batch.base_offset,
                "last_offset": batch.last_offset,
                "count": batch.count,
                "compression": int(batch.compression),
                "crc": batch.crc,
                "valid": batch.is_valid,
                "timestamp_type": _ts_type(batch.timestamp_type),
                "first_timestamp": batch.base_timestamp,
                "max_timestamp": batch.max_timestamp,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "last_sequence": batch.last_sequence,
                "transactional": batch.is_transactional,
                "control": batch.is_control,
                "leader_epoch": batch.partition_leader_epoch,
                "size": batch.size_in_bytes,
            }
        else:
            assert isinstance(batch, LegacyBatch)
            fields = {
                "magic": batch.magic,
                "offset": batch.last_offset,  # the entry's own offset (a wrapper's last)
                "compression": int(batch.compression),
                "crc": batch.crc,
                "valid": batch.is_valid,
                "timestamp_type": _ts_type(batch.timestamp_type),
                "timestamp": None if batch.magic == 0 else batch.max_timestamp,
                "size": batch.size_in_bytes,
            }
            # What only kafkalog reports for legacy entries, checked against Kafka's rules here.
            assert batch.count == len(records)
            assert batch.base_offset == records[0].offset
            assert batch.next_offset == batch.last_offset + 1
            assert (batch.producer_id, batch.producer_epoch) == (-1, -1)
            assert (batch.base_sequence, batch.last_sequence) == (-1, -1)
            assert batch.partition_leader_epoch == -1
            assert not batch.is_transactional and not batch.is_control
            assert batch.delete_horizon_ms is None
        out.append((fields, [_kl_record(batch.magic, r) for r in records]))
    return out


def _kl_record(magic: int, r) -> dict:
    return {
        "offset": r.offset,
        "timestamp": None if magic == 0 and r.timestamp == -1 else r.timestamp,
        "timestamp_type": _ts_type(r.timestamp_type),
        "key": r.key,
        "value": r.value,
        "headers": [(h.key, h.value) for h in r.headers],
        "checksum": r.crc,
        "valid": r.is_valid,
    }


def kp_decode(buf: bytes) -> list[tuple[dict, list[dict]]]:
    out = []
    for batch in KpMemoryRecords(bytes(buf)):
        valid = batch.validate_crc()  # before iterating: kafka-python asserts so
        if isinstance(batch, DefaultRecordBatch):
            fields = {
                "magic": batch.magic,
                "offset": batch.base_offset,
                "last_offset": batch.last_offset,
                "count": batch.records_count,
                "compression": batch.compression_type,
                "crc": batch.crc,
                "valid": valid,
                "timestamp_type": batch.timestamp_type,
                "first_timestamp": batch.first_timestamp,
                "max_timestamp": batch.max_timestamp,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "last_sequence": batch.last_sequence,
                "transactional": batch.is_transactional,
                "control": batch.is_control_batch,
                "leader_epoch": batch.leader_epoch,
                "size": batch.size_in_bytes,
            }
        else:
            assert isinstance(batch, LegacyRecordBatch)
            fields = {
                "magic": batch.magic,
                "offset": batch.base_offset,  # kafka-python's name for the entry's offset
                "compression": batch.compression_type,
                "crc": batch._crc,
                "valid": valid,
                "timestamp_type": batch.timestamp_type,
                "timestamp": batch._timestamp,
                "size": batch.size_in_bytes,
            }
        records = [
            {
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestamp_type": r.timestamp_type,
                "key": r.key,
                "value": r.value,
                "headers": list(r.headers),
                "checksum": r.checksum,
                "valid": r.validate_crc(),
            }
            for r in batch
        ]
        out.append((fields, records))
    return out


def assert_same_decoding(buf: bytes) -> list[tuple[dict, list[dict]]]:
    """kafkalog and kafka-python agree on every batch field and every record field."""
    ours, theirs = kl_decode(buf), kp_decode(buf)
    assert len(ours) == len(theirs)
    for (kl_fields, kl_records), (kp_fields, kp_records) in zip(ours, theirs):
        assert kl_fields == kp_fields
        assert len(kl_records) == len(kp_records)
        for kl_rec, kp_rec in zip(kl_records, kp_records):
            assert kl_rec == kp_rec
    return ours


def expected_records(
    records: list[Rec], magic: int, ts_type: TimestampType, base_offset: int
) -> list[dict]:
    """What Kafka reports for ``records`` written at ``base_offset``."""
    out = []
    for i, rec in enumerate(records):
        if magic == 0:
            ts, tt = None, None
        elif ts_type == APPEND:
            ts, tt = LOG_APPEND_TIME, 1
        else:
            ts, tt = rec.timestamp, 0
        out.append(
            {
                "offset": base_offset + i,
                "timestamp": ts,
                "timestamp_type": tt,
                "key": rec.key,
                "value": rec.value,
                "headers": list(rec.headers),
            }
        )
    return out


def strip(decoded_records: list[dict]) -> list[dict]:
    """Decoded records without the fields the input does not determine (crc, validity)."""
    keep = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")
    return [{k: r[k] for k in keep} for r in decoded_records]


def all_records(decoded) -> list[dict]:
    return [r for _, records in decoded for r in records]


def check_batch_fields(
    fields: dict, records: list[Rec], *, magic, codec, ts_type, base_offset, **producer
) -> None:
    """Batch fields against what was written (beyond agreeing with the other decoder)."""
    n = len(records)
    assert fields["magic"] == magic
    assert fields["compression"] == codec
    assert fields["valid"] is True
    if magic == 2:
        assert fields["offset"] == base_offset
        assert fields["last_offset"] == base_offset + n - 1
        assert fields["count"] == n
        assert fields["timestamp_type"] == int(ts_type)
        assert fields["first_timestamp"] == records[0].timestamp
        expected_max = LOG_APPEND_TIME if ts_type == APPEND else max(r.timestamp for r in records)
        assert fields["max_timestamp"] == expected_max
        assert fields["producer_id"] == producer.get("producer_id", -1)
        assert fields["producer_epoch"] == producer.get("producer_epoch", -1)
        base_seq = producer.get("base_sequence", -1)
        assert fields["base_sequence"] == base_seq
        assert fields["last_sequence"] == (-1 if base_seq == -1 else base_seq + n - 1)
        assert fields["transactional"] == producer.get("is_transactional", False)
        assert fields["control"] is False
    else:
        assert fields["timestamp_type"] == (None if magic == 0 else int(ts_type))


# -- 1. kafka-python writes, kafkalog reads ------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafka_python_batches_decode_field_by_field_in_kafkalog(case):
    magic, codec, ts_type = case
    records = sample_records(magic)
    base = 4_000_000_123
    buf = kp_build(records, magic, codec, ts_type, base_offset=base)
    decoded = assert_same_decoding(buf)
    assert strip(all_records(decoded)) == expected_records(records, magic, ts_type, base)
    if codec == NONE and magic < 2:
        assert len(decoded) == len(records)  # one entry per message
        for (fields, recs), rec in zip(decoded, records):
            check_batch_fields(
                fields, [rec], magic=magic, codec=codec, ts_type=ts_type, base_offset=0
            )
            assert recs[0]["checksum"] == fields["crc"]
    else:
        assert len(decoded) == 1
        check_batch_fields(
            decoded[0][0], records, magic=magic, codec=codec, ts_type=ts_type, base_offset=base
        )
        if magic < 2:
            assert decoded[0][0]["offset"] == base + len(records) - 1
            expected_ts = (
                LOG_APPEND_TIME if ts_type == APPEND else max(r.timestamp for r in records)
            )
            assert decoded[0][0]["timestamp"] == (None if magic == 0 else expected_ts)
    # Legacy records carry their own CRC-32, and every one is valid.
    for record in all_records(decoded):
        assert record["valid"] is True
        assert (record["checksum"] is None) == (magic == 2)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafkalog_batches_decode_field_by_field_in_kafka_python(case):
    magic, codec, ts_type = case
    records = sample_records(magic)
    base = 77
    buf = kl_build(records, magic, codec, ts_type, base_offset=base)
    decoded = assert_same_decoding(buf)
    assert strip(all_records(decoded)) == expected_records(records, magic, ts_type, base)
    if codec == NONE and magic < 2:
        assert len(decoded) == len(records)
        assert [f["offset"] for f, _ in decoded] == [base + i for i in range(len(records))]
    else:
        assert len(decoded) == 1
        check_batch_fields(
            decoded[0][0], records, magic=magic, codec=codec, ts_type=ts_type, base_offset=base
        )
        if magic == 2:
            assert decoded[0][0]["leader_epoch"] == -1
        else:
            # Kafka's wrapper: offset of the last inner message, max (or append) timestamp.
            assert decoded[0][0]["offset"] == base + len(records) - 1
            expected_ts = (
                LOG_APPEND_TIME if ts_type == APPEND else max(r.timestamp for r in records)
            )
            assert decoded[0][0]["timestamp"] == (None if magic == 0 else expected_ts)


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=lambda v: getattr(v, "label", v))
def test_large_keys_and_values_cross_decode_both_ways(magic, codec):
    records = large_records(magic)
    for build in (kp_build, kl_build):
        buf = build(records, magic, codec, CREATE, base_offset=10)
        decoded = assert_same_decoding(buf)
        assert strip(all_records(decoded)) == expected_records(records, magic, CREATE, 10)
        if codec != NONE:
            assert decoded[0][0]["compression"] == codec
            assert decoded[0][0]["size"] < 600_000  # really compressed


PRODUCERS = [
    pytest.param({}, id="no-producer"),
    pytest.param(
        {"producer_id": 123456789012, "producer_epoch": 7, "base_sequence": 41}, id="idempotent"
    ),
    pytest.param(
        {
            "producer_id": 9,
            "producer_epoch": 32767,
            "base_sequence": 0,
            "is_transactional": True,
        },
        id="transactional",
    ),
]


@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: c.label)
def test_v2_producer_fields_cross_decode_both_ways(codec, producer):
    records = sample_records(2)
    kp_kwargs = {
        "producer_id": producer.get("producer_id", -1),
        "producer_epoch": producer.get("producer_epoch", -1),
        "base_sequence": producer.get("base_sequence", -1),
        "transactional": producer.get("is_transactional", False),
    }
    from_kp = kp_build_v2(records, codec=codec, base_offset=500, **kp_kwargs)
    from_kl = kl_build(records, 2, codec, base_offset=500, **producer)
    for buf in (from_kp, from_kl):
        [(fields, recs)] = assert_same_decoding(buf)
        check_batch_fields(
            fields, records, magic=2, codec=codec, ts_type=CREATE, base_offset=500, **producer
        )
        # Each record's sequence is baseSequence + offsetDelta (kafka-python has no such field).
        base_seq = producer.get("base_sequence", -1)
        sequences = [r.sequence for r in next(iter(MemoryRecords(buf))).records()]
        expected = [-1] * len(recs) if base_seq == -1 else [base_seq + i for i in range(len(recs))]
        assert sequences == expected


def test_uncompressed_v2_batch_is_byte_identical_to_kafka_pythons():
    records = sample_records(2)
    producer = {"producer_id": 5, "producer_epoch": 1, "base_sequence": 10}
    theirs = kp_build_v2(
        records, producer_id=5, producer_epoch=1, base_sequence=10, transactional=True
    )
    ours = kl_build(records, 2, NONE, partition_leader_epoch=0, is_transactional=True, **producer)
    assert ours == theirs


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_legacy_messages_are_byte_identical_to_kafka_pythons(magic):
    records = sample_records(magic)
    assert kl_build(records, magic, NONE, base_offset=3) == kp_build_legacy(
        records, magic=magic, base_offset=3
    )


def _kp_decompress(codec: int, data: bytes, magic: int) -> bytes:
    if codec == GZIP:
        return gzip_decode(data)
    if codec == SNAPPY:
        return snappy_decode(data)
    if codec == LZ4:
        return lz4_decode_old_kafka(data) if magic == 0 else lz4_decode(data)
    return zstd_decode(data)


@pytest.mark.parametrize("codec", V2_CODECS[1:], ids=lambda c: c.label)
def test_compressed_v2_records_section_decompresses_to_kafka_pythons_bytes(codec):
    records = sample_records(2) + large_records(2)
    ours = kl_build(records, 2, codec, partition_leader_epoch=0)
    plain = kp_build_v2(records)
    assert _kp_decompress(codec, ours[61:], 2) == plain[61:]


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in LEGACY_CODECS[1:]])
def test_compressed_legacy_inner_message_set_decompresses_to_kafka_pythons_bytes(magic, codec):
    records = sample_records(magic)
    ours = kl_build(records, magic, codec, base_offset=0)
    key_pos = 12 + (6 if magic == 0 else 14)  # the wrapper's key length field
    assert struct.unpack_from(">i", ours, key_pos)[0] == -1  # the wrapper key is null
    value_len = struct.unpack_from(">i", ours, key_pos + 4)[0]
    assert key_pos + 8 + value_len == len(ours)
    inner = _kp_decompress(codec, ours[key_pos + 8 :], magic)
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
    for i, rec in enumerate(records):
        builder.append(i, rec.timestamp, rec.key, rec.value)
    assert inner == bytes(builder.build())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS[1:], ids=lambda c: c.label)
def test_kafka_python_wrapper_offset_zero_decodes_as_kafka_python_does(magic, codec):
    # kafka-python (like some librdkafka versions) leaves the wrapper at offset 0 and timestamp 0.
    records = sample_records(magic)
    buf = kp_build_legacy(records, magic=magic, codec=codec, kafka_wrapper=False)
    decoded = assert_same_decoding(buf)
    assert strip(all_records(decoded)) == expected_records(records, magic, CREATE, 0)
    assert decoded[0][0]["offset"] == 0
    assert decoded[0][0]["timestamp"] == (None if magic == 0 else 0)


# -- many batches in one buffer --------------------------------------------------------------


def _mixed_log(build) -> tuple[bytes, list[dict]]:
    """A log whose message format was upgraded twice, with every codec: consecutive offsets."""
    plan = [
        (0, NONE, CREATE),
        (0, GZIP, CREATE),
        (0, LZ4, CREATE),
        (1, SNAPPY, CREATE),
        (1, NONE, APPEND),
        (1, LZ4, APPEND),
        (1, GZIP, CREATE),
        (2, NONE, CREATE),
        (2, ZSTD, APPEND),
        (2, SNAPPY, CREATE),
        (2, GZIP, APPEND),
        (2, LZ4, CREATE),
        (2, ZSTD, CREATE),
    ]
    buf = bytearray()
    expected: list[dict] = []
    offset = 1000
    for i, (magic, codec, ts_type) in enumerate(plan):
        records = sample_records(magic)[: 2 + i % 4]
        buf += build(records, magic, codec, ts_type, base_offset=offset)
        expected += expected_records(records, magic, ts_type, offset)
        offset += len(records)
    return bytes(buf), expected


@pytest.mark.parametrize("writer", ["kafka-python", "kafkalog"])
def test_many_concatenated_batches_of_every_magic_and_codec_cross_decode(writer):
    buf, expected = _mixed_log(kp_build if writer == "kafka-python" else kl_build)
    decoded = assert_same_decoding(buf)
    assert strip(all_records(decoded)) == expected
    assert MemoryRecords(buf).valid_bytes() == len(buf)
    # A partial last batch is left out by both, the same way.
    cut = buf[: len(buf) - 10]
    assert assert_same_decoding(cut) == decoded[:-1]


# -- control batches --------------------------------------------------------------------------


@pytest.mark.parametrize("marker", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_kafkalog_end_txn_marker_is_a_kafka_python_control_record(marker):
    buf = build_end_txn_marker_batch(
        marker,
        producer_id=4242,
        producer_epoch=3,
        coordinator_epoch=17,
        base_offset=900,
        timestamp=LOG_APPEND_TIME,
        partition_leader_epoch=5,
    )
    [batch] = list(KpMemoryRecords(buf))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch) == (4242, 3)
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (900, 900, 1)
    assert batch.leader_epoch == 5
    [record] = list(batch)
    assert isinstance(record, ControlRecord)
    assert (record.version, record.type) == (0, int(marker))
    assert record.commit == (marker == ControlRecordType.COMMIT)
    assert record.abort == (marker == ControlRecordType.ABORT)
    assert record.value == struct.pack(">hi", 0, 17)
    assert (record.offset, record.timestamp) == (900, LOG_APPEND_TIME)
    decoded = assert_same_decoding(buf)
    assert decoded[0][0]["control"] is True
    [ours] = list(next(iter(MemoryRecords(buf))).records())
    assert ours.is_control
    assert decode_control_type(ours.key) == marker
    assert decode_end_txn_marker(ours.value) == (0, 17)


@pytest.mark.parametrize("marker", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_kafka_python_control_batch_decodes_as_control_in_kafkalog(marker):
    records = [Rec(LOG_APPEND_TIME, struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 99))]
    buf = kp_build_v2(
        records,
        base_offset=31,
        producer_id=8,
        producer_epoch=2,
        base_sequence=-1,
        transactional=True,
        control=True,
    )
    decoded = assert_same_decoding(buf)
    [(fields, [record])] = decoded
    assert fields["control"] and fields["transactional"]
    assert (record["offset"], record["timestamp"]) == (31, LOG_APPEND_TIME)
    batch = next(iter(MemoryRecords(buf)))
    assert batch.is_control
    [ours] = list(batch.records())
    assert ours.is_control and ours.offset == 31
    assert decode_control_type(ours.key) == marker
    assert decode_end_txn_marker(ours.value) == (0, 99)


def test_control_batch_built_with_the_generic_builder_matches_the_marker_helper():
    builder = MemoryRecordsBuilder(
        base_offset=900,
        producer_id=4242,
        producer_epoch=3,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=5,
    )
    builder.append_end_txn_marker(ControlRecordType.ABORT, 17, timestamp=LOG_APPEND_TIME)
    assert builder.build() == build_end_txn_marker_batch(
        ControlRecordType.ABORT,
        producer_id=4242,
        producer_epoch=3,
        coordinator_epoch=17,
        base_offset=900,
        timestamp=LOG_APPEND_TIME,
        partition_leader_epoch=5,
    )


def test_empty_batch_reads_the_same_in_kafka_python():
    buf = empty_batch(
        base_offset=100,
        last_offset=104,
        max_timestamp=1_700_000_000_000,
        attributes=0x10,
        producer_id=77,
        producer_epoch=4,
        base_sequence=12,
        partition_leader_epoch=3,
    )
    [(fields, records)] = assert_same_decoding(buf)
    assert records == []
    assert fields["count"] == 0
    assert (fields["offset"], fields["last_offset"]) == (100, 104)
    assert fields["first_timestamp"] == -1
    assert fields["max_timestamp"] == 1_700_000_000_000
    assert (fields["base_sequence"], fields["last_sequence"]) == (12, 16)
    assert fields["transactional"] is True
    assert fields["size"] == 61


def test_headers_of_every_shape_round_trip_through_kafka_python():
    headers = (
        Header("", b""),
        Header("null", None),
        Header("ünïcödé-ключ-鍵", "値".encode()),
        Header("bin", bytes(range(256))),
    )
    builder = MemoryRecordsBuilder(compression="zstd")
    builder.append(timestamp=1, key=b"k", value=b"v", headers=headers)
    builder.append(timestamp=2, key=b"k", value=b"v", headers=[("t", None)] * 50)
    buf = builder.build()
    [(_, records)] = assert_same_decoding(buf)
    assert records[0]["headers"] == [(h.key, h.value) for h in headers]
    assert records[1]["headers"] == [("t", None)] * 50


# -- what other writers put in the codec streams ---------------------------------------------------


def _zstd_two_frames(data: bytes) -> bytes:
    half = len(data) // 2
    return zstd_encode(data[:half]) + zstd_encode(data[half:])


def _gzip_two_members(data: bytes) -> bytes:
    half = len(data) // 2
    return gzip_encode(data[:half]) + gzip_encode(data[half:])


OTHER_WRITERS = {
    # librdkafka's unframed snappy, as kafka-python writes it without xerial framing.
    "raw snappy": (SNAPPY, lambda d: snappy_encode(d, xerial_compatible=False)),
    # aiokafka-style lz4 frames: block and content checksums, content size.
    "lz4 with checksums": (
        LZ4,
        lambda d: lz4.frame.compress(
            d, block_linked=False, block_checksum=True, content_checksum=True, store_size=True
        ),
    ),
    "lz4 with 4 MiB blocks": (
        LZ4,
        lambda d: lz4.frame.compress(
            d, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB, store_size=False
        ),
    ),
    "zstd in two frames": (ZSTD, _zstd_two_frames),
    "gzip in two members": (GZIP, _gzip_two_members),
}


@pytest.mark.parametrize("name", sorted(OTHER_WRITERS))
def test_codec_streams_of_other_writers_decode_in_kafkalog_as_in_kafka_python(name):
    codec, compress = OTHER_WRITERS[name]
    records = sample_records(2) + large_records(2)
    plain = kp_build_v2(records, base_offset=5)
    buf = bytearray(plain[:61] + compress(plain[61:]))
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, int(codec))
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    decoded = assert_same_decoding(bytes(buf))
    assert decoded[0][0]["compression"] == codec
    assert strip(all_records(decoded)) == expected_records(records, 2, CREATE, 5)


def test_magic_0_lz4_header_has_kafkas_broken_checksum_byte_like_kafka_pythons():
    # KAFKA-1493: the header checksum of magic 0 lz4 frames was computed over magic, FLG and BD.
    records = sample_records(0)
    ours = kl_build(records, 0, LZ4)
    theirs = kp_build_legacy(records, magic=0, codec=LZ4)
    frame_at = 12 + 14  # the wrapper value: after the null key and the value length
    assert ours[frame_at : frame_at + 7] == theirs[frame_at : frame_at + 7]
    ours_v1 = kl_build(sample_records(1), 1, LZ4)
    frame_v1 = 12 + 22
    assert ours_v1[frame_v1 + 6] != ours[frame_at + 6]  # magic 1 has the correct byte
