"""The validator's array path (kafkalog.format.validate.in_place) against its general path.

The fast path only accepts: for every input it must either give exactly what the general
(record-at-a-time) path gives, or step aside (None) so that the general path answers, errors
included. Inputs are written by kafka-python and, for damaged ones, patched with kafka-python's
CRC function; outputs are decoded by kafka-python.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder
from kafka.record.util import calc_crc32c

from kafkalog.errors import KafkalogError
from kafkalog.format import CompressionType, TimestampType
from kafkalog.format.columnar.record_columns import v2_record_columns
from kafkalog.format.validate import log_validator as validator_module
from kafkalog.format.validate.in_place import validate_v2_in_place
from kafkalog.format.validate.log_validator import (
    AppendOrigin,
    LogValidatorConfig,
    validate_records,
)

LONG_MAX = (1 << 63) - 1
NOW = 1_700_000_000_000


def kp_batch(records, *, producer_id=-1, producer_epoch=-1, base_sequence=-1, txn=False):
    """One uncompressed v2 batch of ``(timestamp, key, value, headers)`` by kafka-python."""
    builder = KpBuilder(
        2,
        0,
        1 << 22,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=txn,
    )
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    builder.close()
    return bytes(builder.buffer())


def with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def general(data, config, **kw):
    """The general path alone: its result, or the exception it raises."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(validator_module, "_fast_path", lambda *a: None)
        try:
            return validate_records(data, config, **kw)
        except (KafkalogError, ValueError) as e:
            return e


def fast(data, config, **kw):
    kw = {k: v for k, v in kw.items() if k != "topic_partition"}
    kw.setdefault("origin", AppendOrigin.CLIENT)
    return validate_v2_in_place(memoryview(data), config, CompressionType.NONE, **kw)


def fields(result) -> tuple:
    return (
        result.validated_records,
        result.first_offset,
        result.last_offset,
        result.max_timestamp,
        result.shallow_offset_of_max_timestamp,
        result.log_append_time_ms,
        result.message_size_maybe_changed,
        result.record_validation_stats,
    )


def check_agree(data, config, **kw) -> bool:
    """Fast and general agree; True when the fast path answered."""
    expected = general(data, config, **kw)
    got = fast(data, config, **kw)
    if isinstance(expected, Exception):
        assert got is None, f"fast path accepted what the general path rejects: {expected}"
        return False
    if got is None:
        return False
    assert fields(got) == fields(expected)
    return True


KW = dict(next_offset=100, partition_leader_epoch=7, now_ms=NOW, topic_partition="t-0")


def test_plain_client_batch_takes_the_fast_path_and_kafka_python_reads_it():
    records = [(NOW - 5 + i, b"k%d" % i, b"v" * 50, [("h", b"x")]) for i in range(5)]
    data = kp_batch(records, producer_id=3, producer_epoch=0, base_sequence=0)
    result = fast(data, LogValidatorConfig(), **KW)
    assert result is not None and check_agree(data, LogValidatorConfig(), **KW)
    assert len(result.validated_parts) == 2  # header patched apart, records not copied
    out = result.validated_records
    kp = KpMemoryRecords(out).next_batch()
    assert kp.validate_crc()
    assert (kp.base_offset, kp.leader_epoch, kp.max_timestamp) == (100, 7, NOW - 1)
    assert [(r.offset, r.timestamp, r.key) for r in kp] == [
        (100 + i, NOW - 5 + i, b"k%d" % i) for i in range(5)
    ]
    assert out[61:] == data[61:]


def test_log_append_time_topic_rewrites_the_crc():
    data = kp_batch([(NOW - 10, b"k", b"v", []), (NOW - 20, b"k", b"v", [])])
    config = LogValidatorConfig(timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert check_agree(data, config, **KW)
    kp = KpMemoryRecords(fast(data, config, **KW).validated_records).next_batch()
    assert kp.validate_crc() and kp.timestamp_type == 1 and kp.max_timestamp == NOW


@pytest.mark.parametrize(
    "case",
    [
        "no key in a compacted topic",
        "timestamp too old",
        "client sets LogAppendTime",
        "base offset not 0",
        "control batch",
        "bad crc",
        "too large",
        "two batches",
        "partial tail",
    ],
)
def test_the_fast_path_steps_aside_where_the_general_path_decides(case):
    data = kp_batch([(NOW, None, b"v", []), (NOW - 10**9, b"k", b"v", [])])
    config = LogValidatorConfig(compacted=case == "no key in a compacted topic")
    if case == "timestamp too old":
        config = LogValidatorConfig(timestamp_before_max_ms=1000)
    elif case == "client sets LogAppendTime":
        data = with_crc(bytearray(data[:22]) + bytes([data[22] | 0x08]) + data[23:])
    elif case == "base offset not 0":
        data = struct.pack(">q", 5) + data[8:]
    elif case == "control batch":
        data = with_crc(bytearray(data[:22]) + bytes([data[22] | 0x20]) + data[23:])
    elif case == "bad crc":
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif case == "too large":
        config = LogValidatorConfig(max_message_bytes=len(data) - 1)
    elif case == "two batches":
        data = data + data
    elif case == "partial tail":
        data = data + data[:20]
    assert fast(data, config, **KW) is None
    check_agree(data, config, **KW)


record = st.tuples(
    st.one_of(
        st.integers(0, 1 << 45),
        st.sampled_from([-1, 0, NOW, (1 << 63) - 1, -(1 << 62)]),
    ),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(
        st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2
    ),
)
bound = st.one_of(
    st.just(LONG_MAX), st.integers(0, 1 << 62), st.sampled_from([0, 1, LONG_MAX - 1, -5])
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record, min_size=1, max_size=20),
    producer=st.sampled_from([(-1, -1, -1), (7, 0, 0), (7, 1, -1), (8, 2, 2_147_483_640)]),
    compacted=st.booleans(),
    log_append=st.booleans(),
    before=bound,
    after=bound,
    now=st.one_of(st.just(NOW), st.integers(-(1 << 63), (1 << 63) - 1)),
    origin=st.sampled_from(list(AppendOrigin)),
    damage=st.one_of(st.none(), st.tuples(st.integers(61, 10_000), st.integers(1, 255))),
)
def test_fast_and_general_paths_agree(
    records, producer, compacted, log_append, before, after, now, origin, damage
):
    pid, epoch, seq = producer
    try:
        data = kp_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=max(seq, 0))
    except (ValueError, struct.error, OverflowError):
        return  # kafka-python cannot write these timestamps
    buf = bytearray(data)
    struct.pack_into(">i", buf, 53, seq)  # a negative sequence with a producer id: rejected
    data = with_crc(buf)
    if damage is not None:  # a byte of the records changed, the CRC made valid again
        pos = damage[0] % len(buf) if len(buf) > 61 else 0
        if pos >= 61:
            buf[pos] ^= damage[1]
        data = with_crc(buf)
    config = LogValidatorConfig(
        compacted=compacted,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        timestamp_before_max_ms=before,
        timestamp_after_max_ms=after,
    )
    kw = dict(next_offset=10, partition_leader_epoch=3, now_ms=now, origin=origin)
    check_agree(data, config, topic_partition="t-0", **kw)


def test_record_columns_are_kept_while_a_caller_holds_them():
    one = kp_batch([(NOW + i, b"a", b"b", []) for i in range(3)])
    two = kp_batch([(NOW - i, None, b"b", []) for i in range(3)])
    first = v2_record_columns(memoryview(one), 3)
    second = v2_record_columns(memoryview(two), 3)
    assert first.timestamps.tolist() == [NOW, NOW + 1, NOW + 2]
    assert first.key_present.tolist() == [1, 1, 1]
    assert second.timestamps.tolist() == [NOW, NOW - 1, NOW - 2]
    assert second.key_present.tolist() == [0, 0, 0]
