"""Columnar encode: byte for byte MemoryRecordsBuilder's batches, from Arrow or plain columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords

from kafkalog.format import (
    CompressionType,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    TimestampType,
)
from kafkalog.format import columnar as fast

from .fastcheck import TWINS, header_lists, keys, timestamps, twin, values

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

rows_strategy = st.lists(st.tuples(timestamps, keys, values, header_lists), min_size=1, max_size=30)
producers = st.sampled_from(
    [
        {},
        {"producer_id": 12, "producer_epoch": 3, "base_sequence": 2**31 - 5},
        {"producer_id": 1, "producer_epoch": 0, "base_sequence": 0, "is_transactional": True},
    ]
)


def columns(rows):
    return (
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[0] for r in rows],
        [list(r[3]) for r in rows],
    )


def built(rows, **options) -> bytes:
    b = MemoryRecordsBuilder(**options)
    for ts, key, value, headers in rows:
        b.append(timestamp=ts, key=key, value=value, headers=headers)
    return b.build()


@given(
    rows=rows_strategy,
    codec=st.sampled_from(list(CompressionType)),
    append=st.booleans(),
    producer=producers,
    base_offset=st.integers(0, 2**40),
)
@SETTINGS
def test_one_batch_is_what_the_builder_writes(rows, codec, append, producer, base_offset):
    options = dict(
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if append else TimestampType.CREATE_TIME,
        log_append_time=2**41 + 1,
        base_offset=base_offset,
        partition_leader_epoch=4,
        **producer,
    )
    expected = built(rows, **options)
    for name in TWINS:
        got = fast.encode_columnar(
            *columns(rows), batch_bytes=1 << 30, kernels=twin(name), **options
        )
        assert bytes(got) == expected


@given(
    rows=rows_strategy,
    codec=st.sampled_from(list(CompressionType)),
    size=st.integers(1, 600),
    max_records=st.none() | st.integers(1, 5),
    producer=producers,
)
@SETTINGS
def test_rows_split_into_batches_that_round_trip(rows, codec, size, max_records, producer):
    outs = [
        fast.encode_columnar(
            *columns(rows),
            compression=codec,
            batch_bytes=size,
            max_records_per_batch=max_records,
            base_offset=10,
            kernels=twin(name),
            **producer,
        )
        for name in TWINS
    ]
    assert outs[0] == outs[1]
    data = bytes(outs[0])
    batches = list(MemoryRecords(data))
    start = 0
    for batch in batches:  # each batch is the builder's batch for its rows
        n = batch.count
        assert 1 <= n <= (max_records or n)
        seq = producer.get("base_sequence", -1)
        if seq >= 0:
            seq = (seq + start) % 2**31
        options = {**producer, "base_sequence": seq}
        expected = built(
            rows[start : start + n], compression=codec, base_offset=10 + start, **options
        )
        assert bytes(batch._buf) == expected
        if n > 1:
            assert len(batch.records_buffer()) <= size
        start += n
    assert start == len(rows)
    decoded = fast.decode_columnar(data).to_pylist()
    assert [(r["timestamp"], r["key"], r["value"]) for r in decoded] == [
        (ts, k, v) for ts, k, v, _ in rows
    ]
    kp = KpMemoryRecords(data)
    n = 0
    while kp.has_next():
        for r in kp.next_batch():
            assert (r.key, r.value) == rows[n][1:3]
            n += 1
    assert n == len(rows)


def test_arrow_inputs_of_every_binary_kind_encode_alike():
    rows = [
        (i, b"k%d" % i if i % 3 else None, b"v" * i, [("h", b"x")] if i % 2 else [])
        for i in range(50)
    ]
    k, v, ts, h = columns(rows)
    expected = bytes(fast.encode_columnar(k, v, ts, h))
    big = pa.array([None, b"zz", *k, b"tail"], pa.binary())
    variants = [
        (pa.array(k, pa.binary()), pa.array(v, pa.large_binary()), pa.array(ts, pa.int64())),
        (
            big.slice(2, 50),
            pa.chunked_array([pa.array(v[:10]), pa.array(v[10:])]),
            pa.array(ts, pa.timestamp("ms")),
        ),
        (
            pa.array([None if x is None else x.decode() for x in k], pa.string()),
            pa.array([x.decode() for x in v], pa.large_string()),
            ts,
        ),
    ]
    headers = pa.array([[{"key": a, "value": b} for a, b in hs] for hs in h], fast.HEADER_TYPE)
    for kk, vv, tt in variants:
        for hh in (h, headers, pa.concat_arrays([headers[:1], headers]).slice(1)):
            assert bytes(fast.encode_columnar(kk, vv, tt, hh)) == expected


def kafka_python_rows(data: bytes) -> list[tuple]:
    """(timestamp, key, value, headers) of every record, as kafka-python's decoder reads them."""
    kp = KpMemoryRecords(data)
    rows = []
    while kp.has_next():
        rows += [(r.timestamp, r.key, r.value, list(r.headers)) for r in kp.next_batch()]
    return rows


@pytest.mark.parametrize("name", TWINS)
def test_plain_columns_of_every_item_kind_encode_alike(name):
    """Lists and tuples of bytes and None (the compiled twin converts those itself), and items
    it leaves to pyarrow (bytearray, memoryview, str, a bytes subclass), encode the same bytes;
    so do timestamps as a list, a tuple, numpy ints or an array."""

    class Blob(bytes):
        pass

    k = [b"k%d" % i if i % 3 else None for i in range(40)]
    v = [b"v" * i for i in range(40)]
    ts = [1000 + i for i in range(40)]
    expected = bytes(fast.encode_columnar(pa.array(k), pa.array(v), pa.array(ts)))
    assert kafka_python_rows(expected) == [(t, a, b, []) for t, a, b in zip(ts, k, v, strict=True)]
    variants = [
        (k, v, ts),
        (tuple(k), tuple(v), tuple(ts)),
        ([None if x is None else bytearray(x) for x in k], [*v[:-1], memoryview(v[-1])], ts),
        (k, [x.decode() for x in v], [np.int64(t) for t in ts]),
        ([None if x is None else Blob(x) for x in k], v, np.array(ts)),
    ]
    for kk, vv, tt in variants:
        got = fast.encode_columnar(kk, vv, tt, kernels=twin(name))
        assert bytes(got) == expected


@pytest.mark.parametrize("name", TWINS)
def test_plain_headers_of_every_kind_encode_alike(name):
    """Lists or tuples of (str, bytes or None) tuples (the compiled twin converts those itself)
    and what it leaves to pyarrow (Header objects, [key, value] lists, a bytes value's subclass)
    encode the same bytes, records without headers (None, empty) included."""

    class Blob(bytes):
        pass

    rows = [
        None
        if i % 7 == 3
        else [(f"h{j}", None if (i + j) % 4 == 0 else b"v" * j) for j in range(i % 3)]
        for i in range(30)
    ]
    rows[5] = [("\u00e9t\u00e9", b"x"), ("", b"")]
    k = [b"k%d" % i for i in range(30)]
    ts = list(range(30))
    expected = bytes(
        fast.encode_columnar(k, k, ts, pa.array(rows, fast.HEADER_TYPE), kernels=twin(name))
    )
    assert kafka_python_rows(expected) == [
        (t, a, a, list(hs or [])) for t, a, hs in zip(ts, k, rows, strict=True)
    ]
    variants = [
        rows,
        tuple(None if hs is None else tuple(hs) for hs in rows),
        [None if hs is None else [Header(a, b) for a, b in hs] for hs in rows],
        [None if hs is None else [[a, b] for a, b in hs] for hs in rows],
        [
            None if hs is None else [(a, None if b is None else Blob(b)) for a, b in hs]
            for hs in rows
        ],
    ]
    for hh in variants:
        assert bytes(fast.encode_columnar(k, k, ts, hh, kernels=twin(name))) == expected


@pytest.mark.parametrize("name", TWINS)
def test_a_header_key_that_is_not_utf8_encodable_fails_alike(name):
    with pytest.raises((ValueError, UnicodeError)):
        fast.encode_columnar([b"k"], [b"v"], None, [[("\ud800", b"x")]], kernels=twin(name))


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"producer_epoch": 2**15}, "producer_epoch 32768 does not fit"),
        ({"partition_leader_epoch": -(2**31) - 1}, "partition_leader_epoch"),
        ({"base_sequence": 2**31}, "base_sequence"),
        ({"producer_id": 2**63}, "producer_id"),
        ({"base_offset": 2**63 - 1}, "the last offset"),
        ({"log_append_time": -(2**63) - 1}, "log_append_time"),
    ],
)
def test_batch_fields_out_of_range_are_refused(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fast.encode_columnar([b"a", b"b"], [b"x", b"y"], kernels=twin(name), **kwargs)


@pytest.mark.parametrize("name", TWINS)
def test_timestamps_past_64_bits_are_refused(name):
    with pytest.raises((ValueError, OverflowError)):
        fast.encode_columnar([b"a"], [b"x"], [2**64], kernels=twin(name))


def test_decode_of_encode_round_trips_arrow_columns():
    rb = fast.decode_columnar(
        fast.encode_columnar([b"a", None], [None, b"b"], [3, 4], [[("k", None)], []])
    )
    again = fast.encode_columnar(
        rb.column("key"), rb.column("value"), rb.column("timestamp"), rb.column("headers")
    )
    assert fast.decode_columnar(again).equals(rb)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"headers": [[(None, b"x")]]}, "header keys cannot be null"),
        ({"timestamps": [-5]}, "invalid negative timestamp"),
        ({"timestamp_type": TimestampType.LOG_APPEND_TIME}, "LogAppendTime needs"),
        ({"is_transactional": True}, "needs a producer id"),
        ({"compression": "brotli"}, "unknown compression name"),
        ({"values": [b"a", b"b"]}, "has 2 items"),
    ],
)
def test_bad_columns_are_refused(kwargs, match):
    args = {"keys": [b"k"], "values": [b"v"], **kwargs}
    with pytest.raises(ValueError, match=match):
        fast.encode_columnar(**args)
