"""The validator's compressed array path (kafkalog.format.validate.compressed) against its
general path.

For every input the array path must either give exactly what the general (record-at-a-time)
path gives, bytes of a rebuilt batch included, or step aside (None) so that the general path
answers, errors included. Inputs are written by kafka-python in every codec and, for damaged ones,
patched and given a valid CRC with kafka-python's CRC function; outputs are decoded by kafka-python.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.errors import KafkalogError
from kafkalog.format import CompressionType, MemoryRecords, TimestampType
from kafkalog.format.validate.compressed import validate_v2_compressed
from kafkalog.format.validate.log_validator import (
    AppendOrigin,
    LogValidatorConfig,
    validate_records,
)
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .test_validator_fast import bound, fields, general, record, with_crc

NOW = 1_700_000_000_000
LONG_MAX = (1 << 63) - 1
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC_CODECS = ["producer", "uncompressed", *CODECS]
KW = dict(next_offset=100, partition_leader_epoch=7, now_ms=NOW, topic_partition="t-0")


def kp_batch(records, codec: int, *, producer=(-1, -1, -1), txn=False, base_offset=0) -> bytes:
    """One v2 batch of ``(timestamp, key, value, headers)`` by kafka-python, in ``codec``."""
    pid, epoch, seq = producer
    builder = KpBuilder(
        2, codec, 1 << 24, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        transactional=txn,
    )  # fmt: skip
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    builder.close()
    data = bytearray(builder.buffer())
    if base_offset:
        struct.pack_into(">q", data, 0, base_offset)  # outside the CRC
    return bytes(data)


def topic_codec(compression: str) -> CompressionType:
    if compression == "producer":
        return CompressionType.NONE  # the function takes the batch's own
    return CompressionType.NONE if compression == "uncompressed" else CODECS[compression]


def array_path(data, config, **kw):
    kw = {k: v for k, v in kw.items() if k != "topic_partition"}
    kw.setdefault("origin", AppendOrigin.CLIENT)
    target = topic_codec(config.compression)
    return validate_v2_compressed(memoryview(data), config, target, **kw)


def full(data, config, **kw):
    """validate_records as the log calls it: its result, or the exception it raises."""
    try:
        return validate_records(data, config, **kw)
    except (KafkalogError, ValueError) as e:
        return e


def check_agree(data, config, **kw) -> bool:
    """Array and general paths agree, errors included; True when the array path answered."""
    expected = general(data, config, **kw)
    got = array_path(data, config, **kw)
    if isinstance(expected, Exception):
        assert got is None, f"the array path accepted what the general path rejects: {expected}"
        raised = full(data, config, **kw)
        assert type(raised) is type(expected) and str(raised) == str(expected)
        return False
    if got is None:
        return False
    assert fields(got) == fields(expected)
    return True


RECORDS = [(NOW - 50 + i, b"k%d" % i, b"v" * 60 + bytes([i]), [("h", b"x"), ("n", None)])
           for i in range(40)]  # fmt: skip


@pytest.mark.parametrize("source", list(CODECS))
@pytest.mark.parametrize("compression", TOPIC_CODECS)
@pytest.mark.parametrize("log_append", [False, True])
def test_every_codec_pair_agrees_and_kafka_python_reads_the_result(source, compression, log_append):
    data = kp_batch(RECORDS, CODECS[source], producer=(9, 2, 40), txn=True)
    config = LogValidatorConfig(
        compression=compression,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
    )
    assert check_agree(data, config, **KW)
    result = array_path(data, config, **KW)
    in_place = compression in ("producer", source)
    assert result.message_size_maybe_changed is not in_place
    if in_place:  # the compressed records are kept as they came
        assert len(result.validated_parts) == 2 and result.validated_records[61:] == data[61:]
    batch = KpMemoryRecords(result.validated_records).next_batch()
    assert batch.validate_crc()
    assert (batch.base_offset, batch.leader_epoch, batch.producer_id) == (100, 7, 9)
    assert (batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (2, 40, True)
    assert batch.compression_type == CODECS.get(compression if not in_place else source, 0)
    assert batch.timestamp_type == int(log_append)
    assert batch.max_timestamp == (NOW if log_append else NOW - 11)
    rows = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert rows == [
        (100 + i, NOW if log_append else ts, key, value, headers)
        for i, (ts, key, value, headers) in enumerate(RECORDS)
    ]


def test_uncompressed_batch_for_a_compressing_topic_is_rebuilt_by_the_encoder():
    data = kp_batch(RECORDS, 0)
    config = LogValidatorConfig(compression="zstd", compression_level=7)
    assert check_agree(data, config, **KW)
    batch = KpMemoryRecords(array_path(data, config, **KW).validated_records).next_batch()
    assert batch.compression_type == 4 and [r.key for r in batch][-1] == b"k39"


def test_replicated_batch_with_other_inner_offsets_is_rebuilt():
    data = kp_batch(RECORDS, CODECS["lz4"], base_offset=5000)
    kw = dict(KW, origin=AppendOrigin.REPLICATION)
    assert check_agree(data, LogValidatorConfig(), **kw)
    result = array_path(data, LogValidatorConfig(), **kw)
    assert result.message_size_maybe_changed  # Kafka rewrites, as for old clients' v1 offsets
    assert [r.offset for r in KpMemoryRecords(result.validated_records).next_batch()][:2] == [
        100,
        101,
    ]


def _damaged(data: bytes, how: str) -> bytes:
    buf = bytearray(data)
    if how == "truncated payload":
        buf = buf[: 61 + (len(buf) - 61) // 2]
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    elif how == "flipped payload byte":
        buf[61 + (len(buf) - 61) // 2] ^= 0x5A
    elif how == "garbage payload":
        buf[61:] = bytes(range(256)) * ((len(buf) - 61) // 256) + b"\0" * ((len(buf) - 61) % 256)
    elif how == "count too high":
        struct.pack_into(">i", buf, 57, 41)
        struct.pack_into(">i", buf, 23, 40)  # lastOffsetDelta to match
    elif how == "count too low":
        struct.pack_into(">i", buf, 57, 39)
        struct.pack_into(">i", buf, 23, 38)
    return with_crc(buf)


@pytest.mark.parametrize("source", list(CODECS))
@pytest.mark.parametrize(
    "how",
    ["truncated payload", "flipped payload byte", "garbage payload", "count too high",
     "count too low"],
)  # fmt: skip
def test_damaged_compressed_batches_get_the_general_paths_error(source, how):
    data = _damaged(kp_batch(RECORDS, CODECS[source]), how)
    config = LogValidatorConfig()
    expected = general(data, config, **KW)
    if how != "flipped payload byte":  # a flip may leave the records decodable
        assert isinstance(expected, KafkalogError)
    check_agree(data, config, **KW)


@pytest.mark.parametrize(
    "case",
    ["no key in a compacted topic", "timestamp too new", "client sets LogAppendTime",
     "base offset not 0", "control batch", "bad crc", "too large", "two batches", "partial tail",
     "rebuilt too large", "unknown codec", "legacy topic"],
)  # fmt: skip
def test_the_array_path_steps_aside_where_the_general_path_decides(case):
    records = [(NOW, None, b"v", []), (NOW + 10**9, b"k", b"v" * 500, [])]
    data = kp_batch(records, CODECS["gzip"])
    config = LogValidatorConfig(compacted=case == "no key in a compacted topic")
    patch = None
    if case == "timestamp too new":
        config = LogValidatorConfig(timestamp_after_max_ms=1000)
    elif case == "client sets LogAppendTime":
        patch = (22, 0x08)
    elif case == "base offset not 0":
        data = struct.pack(">q", 5) + data[8:]
    elif case == "control batch":
        patch = (22, 0x20)
    elif case == "unknown codec":
        patch = (22, 0x07)
    elif case == "bad crc":
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif case == "too large":
        config = LogValidatorConfig(max_message_bytes=len(data) - 1)
    elif case == "rebuilt too large":  # gzip -> uncompressed grows the batch past the limit
        config = LogValidatorConfig(compression="uncompressed", max_message_bytes=len(data) + 1)
    elif case == "two batches":
        data = data + data
    elif case == "partial tail":
        data = data + data[:20]
    elif case == "legacy topic":
        config = LogValidatorConfig(magic=1)
    if patch is not None:
        buf = bytearray(data)
        buf[patch[0]] |= patch[1]
        data = with_crc(buf)
    assert array_path(data, config, **KW) is None
    check_agree(data, config, **KW)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record, min_size=1, max_size=15),
    source=st.sampled_from([0, *CODECS.values()]),
    compression=st.sampled_from(TOPIC_CODECS),
    producer=st.sampled_from([(-1, -1, -1, False), (7, 0, 0, False), (8, 2, 2_147_483_640, True)]),
    compacted=st.sampled_from([False, False, True]),
    log_append=st.booleans(),
    before=st.one_of(st.just(LONG_MAX), bound),
    after=st.one_of(st.just(LONG_MAX), bound),
    now=st.one_of(st.just(NOW), st.integers(-(1 << 63), (1 << 63) - 1)),
    origin=st.sampled_from([AppendOrigin.CLIENT, *AppendOrigin]),
    base_offset=st.sampled_from([0, 0, 3]),
    damage=st.one_of(st.none(), st.none(), st.tuples(st.integers(61, 10_000), st.integers(1, 255))),
)
def test_array_and_general_paths_agree(
    records, source, compression, producer, compacted, log_append, before, after, now, origin,
    base_offset, damage,
):  # fmt: skip
    pid, epoch, seq, txn = producer
    try:
        data = kp_batch(records, source, producer=(pid, epoch, seq), txn=txn,
                        base_offset=base_offset)  # fmt: skip
    except (ValueError, struct.error, OverflowError):
        return  # kafka-python cannot write these timestamps
    if damage is not None:  # a byte of the (compressed) records changed, the CRC made valid
        buf = bytearray(data)
        buf[61 + damage[0] % (len(buf) - 61)] ^= damage[1]
        data = with_crc(buf)
    config = LogValidatorConfig(
        compression=compression,
        compacted=compacted,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        timestamp_before_max_ms=before,
        timestamp_after_max_ms=after,
    )
    kw = dict(next_offset=10, partition_leader_epoch=3, now_ms=now, origin=origin)
    if check_agree(data, config, topic_partition="t-0", **kw):
        out = array_path(data, config, **kw).validated_records
        batch = KpMemoryRecords(out).next_batch()
        assert batch.validate_crc()
        if kp_reads(data):
            assert len(list(batch)) == len(records)
        else:  # a damaged record attributes byte >= 0x80: Kafka reads one byte, kafka-python a
            # varint, so only kafkalog's reader (Kafka's rule) can say the records were kept
            assert records_of(out) == records_of(data)
    elif not isinstance(general(data, config, topic_partition="t-0", **kw), Exception):
        # every valid batch is the array path's, but for validator_fast's own case (kafka-python
        # leaves a batch uncompressed when compressing would not make it smaller)
        assert data[22] & 0x07 == 0 and compression in ("producer", "uncompressed")


def kp_reads(data: bytes) -> bool:
    """Whether kafka-python decodes every record of the batch ``data``."""
    try:
        list(KpMemoryRecords(data).next_batch())
    except Exception:
        return False
    return True


def records_of(data) -> list[tuple]:
    """(offset delta, key, value, headers) of each record, by kafkalog's decoder (timestamps
    change with LogAppendTime)."""
    return [
        (r.offset - b.base_offset, r.key, r.value, r.headers)
        for b in MemoryRecords(bytes(data))
        for r in b.records()
    ]


def fixture_batches(per_codec: int) -> dict[int, list[bytes]]:
    """Compressed v2 batches that real clients wrote (from the real-broker fixtures), made into
    client batches again: base offset 0, LogAppendTime cleared (the CRC made valid)."""
    found: dict[int, list[bytes]] = {}
    for path in sorted(KAFKA_DATA.rglob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            size = struct.unpack_from(">i", data, pos + 8)[0] + 12
            if size < 61 or pos + size > len(data):
                break
            attributes = data[pos + 22]
            codec = attributes & 0x07
            if data[pos + 16] == 2 and codec and not attributes & 0x20:
                batches = found.setdefault(codec, [])
                if len(batches) < per_codec:
                    buf = bytearray(8) + data[pos + 8 : pos + size]
                    buf[22] &= ~0x08
                    batches.append(with_crc(buf))
            pos += size
    return found


@requires_shared_fixtures
def test_batches_real_clients_wrote_agree():
    found = fixture_batches(per_codec=40)
    assert set(found) >= {1, 2, 3}  # gzip, snappy (xerial), lz4 frames
    configs = [
        LogValidatorConfig(),
        LogValidatorConfig(timestamp_type=TimestampType.LOG_APPEND_TIME),
        LogValidatorConfig(compression="lz4"),
        LogValidatorConfig(compression="uncompressed"),
    ]
    for codec, batches in found.items():
        for data in batches:
            for config in configs:
                assert check_agree(data, config, **KW), (codec, config)
