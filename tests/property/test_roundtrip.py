"""Round trips of random records through every magic, codec and timestamp type.

Records built by kafkalog are decoded by kafkalog and by kafka-python (an independent decoder),
and both must give back exactly what was written, with the offsets, timestamps and sequences Kafka
assigns. The reverse direction (kafka-python writes, kafkalog reads) is checked the same way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.format import CompressionType, MemoryRecords, MemoryRecordsBuilder, TimestampType

CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
LEGACY_CODECS = [c for c in CompressionType if c != CompressionType.ZSTD]
V2_CODECS = list(CompressionType)
INT_MAX = 2**31 - 1

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Case:
    magic: int
    codec: CompressionType
    timestamp_type: TimestampType
    log_append_time: int
    base_offset: int
    offsets: tuple[int, ...]  # absolute, increasing
    records: tuple[tuple[int, bytes | None, bytes | None, tuple], ...]  # ts, key, value, headers
    producer: dict


keys = st.none() | st.binary(max_size=64)
values = (
    st.none()
    | st.binary(max_size=400)
    | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8), st.integers(1, 3000))
)
header_lists = st.lists(
    st.tuples(st.text(max_size=16), st.none() | st.binary(max_size=32)), max_size=4
).map(tuple)
timestamps = st.just(-1) | st.integers(0, 2**45)


@st.composite
def cases(draw) -> Case:
    magic = draw(st.sampled_from([0, 1, 2]))
    codec = draw(st.sampled_from(V2_CODECS if magic == 2 else LEGACY_CODECS))
    timestamp_type = CREATE if magic == 0 else draw(st.sampled_from([CREATE, APPEND]))
    n = draw(st.integers(1, 8))
    records = tuple(
        (
            -1 if magic == 0 else draw(timestamps),
            draw(keys),
            draw(values),
            draw(header_lists) if magic == 2 else (),
        )
        for _ in range(n)
    )
    base_offset = draw(st.integers(0, 2**40))
    if magic == 2 or codec == CompressionType.NONE:
        # Offsets may have gaps (as after compaction) where the format allows it.
        gaps = draw(st.lists(st.integers(1, 1000), min_size=n - 1, max_size=n - 1))
    else:
        gaps = [1] * (n - 1)
    offsets = [base_offset]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    producer: dict = {}
    if magic == 2 and draw(st.booleans()):
        producer = {
            "producer_id": draw(st.integers(0, 2**63 - 1)),
            "producer_epoch": draw(st.integers(0, 2**15 - 1)),
            "base_sequence": draw(st.integers(0, INT_MAX) | st.just(INT_MAX - 2)),
            "is_transactional": draw(st.booleans()),
        }
    return Case(
        magic=magic,
        codec=codec,
        timestamp_type=timestamp_type,
        log_append_time=draw(st.integers(0, 2**45)),
        base_offset=base_offset,
        offsets=tuple(offsets),
        records=records,
        producer=producer,
    )


def expected(case: Case) -> list[tuple]:
    """(offset, timestamp, timestamp type, key, value, headers) as Kafka reports them."""
    out = []
    for offset, (ts, key, value, headers) in zip(case.offsets, case.records):
        if case.magic == 0:
            ts, ts_type = -1, TimestampType.NO_TIMESTAMP_TYPE
        elif case.timestamp_type == APPEND:
            ts, ts_type = case.log_append_time, APPEND
        else:
            ts_type = CREATE
        out.append((offset, ts, int(ts_type), key, value, list(headers)))
    return out


def expected_sequences(case: Case) -> list[int]:
    base = case.producer.get("base_sequence", -1)
    if base == -1:
        return [-1] * len(case.records)
    deltas = [o - case.base_offset for o in case.offsets]
    return [(base + d) if base + d <= INT_MAX else base + d - INT_MAX - 1 for d in deltas]


def kl_decoded(buf: bytes) -> list[tuple]:
    return [
        (
            r.offset,
            r.timestamp,
            int(r.timestamp_type),
            r.key,
            r.value,
            [(h.key, h.value) for h in r.headers],
        )
        for batch in MemoryRecords(buf)
        for r in batch.records()
    ]


def kp_decoded(buf: bytes) -> list[tuple]:
    out = []
    for batch in KpMemoryRecords(buf):
        assert batch.validate_crc()
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            ts_type = -1 if r.timestamp_type is None else r.timestamp_type
            out.append((r.offset, ts, ts_type, r.key, r.value, list(r.headers)))
    return out


@SETTINGS
@given(cases())
def test_kafkalog_built_records_decode_to_the_input_in_kafkalog_and_kafka_python(case):
    builder = MemoryRecordsBuilder(
        magic=case.magic,
        compression=case.codec,
        timestamp_type=case.timestamp_type,
        base_offset=case.base_offset,
        log_append_time=case.log_append_time if case.timestamp_type == APPEND else -1,
        **case.producer,
    )
    for offset, (ts, key, value, headers) in zip(case.offsets, case.records):
        assert (
            builder.append(timestamp=ts, key=key, value=value, headers=headers, offset=offset)
            == offset
        )
    buf = builder.build()
    want = expected(case)
    assert kl_decoded(buf) == want
    assert kp_decoded(buf) == want
    batches = list(MemoryRecords(buf))
    assert all(b.is_valid for b in batches)
    assert batches[-1].last_offset == case.offsets[-1]
    if case.magic == 2:
        [batch] = batches
        assert batch.base_offset == case.base_offset
        assert batch.count == len(case.records)
        assert batch.compression == case.codec
        assert [r.sequence for r in batch.records()] == expected_sequences(case)
        assert batch.producer_id == case.producer.get("producer_id", -1)
        assert batch.is_transactional == case.producer.get("is_transactional", False)
        stamps = [ts for ts, *_ in case.records]
        want_max = case.log_append_time if case.timestamp_type == APPEND else max(stamps)
        assert batch.max_timestamp == want_max
    elif case.codec != CompressionType.NONE:
        [batch] = batches
        assert batch.compression == case.codec
        assert (batch.base_offset, batch.count) == (case.base_offset, len(case.records))
    else:
        assert len(batches) == len(case.records)


@SETTINGS
@given(cases())
def test_kafka_python_built_records_decode_to_the_input_in_kafkalog(case):
    if case.magic == 2:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=int(case.codec),
            is_transactional=case.producer.get("is_transactional", False),
            producer_id=case.producer.get("producer_id", -1),
            producer_epoch=case.producer.get("producer_epoch", -1),
            base_sequence=case.producer.get("base_sequence", -1),
            batch_size=1 << 30,
        )
        for offset, (ts, key, value, headers) in zip(case.offsets, case.records):
            builder.append(offset - case.base_offset, ts, key, value, list(headers))
        buf = bytearray(builder.build())
        struct.pack_into(">q", buf, 0, case.base_offset)  # outside the CRC, as a broker does
        buf = bytes(buf)
    else:
        parts = []
        if case.codec == CompressionType.NONE:
            for offset, (ts, key, value, _) in zip(case.offsets, case.records):
                builder = LegacyRecordBatchBuilder(case.magic, 0, batch_size=1 << 30)
                builder.append(offset, ts, key, value)
                parts.append(bytes(builder.build()))
        else:
            builder = LegacyRecordBatchBuilder(case.magic, int(case.codec), batch_size=1 << 30)
            for i, (ts, key, value, _) in enumerate(case.records):
                # kafka-python's wrapper offset is 0: magic 1 inner offsets then read as absolute.
                builder.append(i if case.magic == 1 else case.offsets[i], ts, key, value)
            parts.append(bytes(builder.build()))
        buf = b"".join(parts)
    # kafka-python writes CreateTime only; its compressed magic 1 wrapper is at offset 0.
    want = expected(Case(**{**case.__dict__, "timestamp_type": CREATE}))
    if case.magic == 1 and case.codec != CompressionType.NONE:
        want = [(i, *rest) for i, (_, *rest) in enumerate(want)]
    assert kl_decoded(buf) == kp_decoded(buf) == want
