"""The validation-only kernel: both twins agree with each other and with the decoding kernel.

Records sections come from kafka-python's batch builder (valid) and from damaging them (bit
flips, truncation, spliced bytes, hostile counts); ``validate_records_v2`` must give the same
tuple in both twins, and the same error (rule, position, values) as ``decode_records_v2``, or on
success the facts of the decoded columns: timestamp range without -1, null keys, offset deltas.
Both refuse record offset deltas that do not increase within ``[0, lastOffsetDelta]``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.format.columnar import _kernel_abi as A
from kafkalog.format.columnar.decode import _Buffers
from kafkalog.format.constants import RECORDS_OFFSET

from .fastcheck import twin

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_BASE_OFFSET = 1000
_MIN, _MAX = -(1 << 63), (1 << 63) - 1

_timestamps = st.one_of(
    st.integers(0, 2_000_000_000_000),
    st.just(-1),
    st.integers(-(1 << 40), 1 << 40),
)
_bytes = st.one_of(st.none(), st.binary(max_size=40))
_records = st.lists(
    st.tuples(
        _timestamps,
        _bytes,
        _bytes,
        st.lists(st.tuples(st.text(max_size=6), _bytes), max_size=3),
    ),
    max_size=25,
)


@st.composite
def sections(draw) -> tuple[bytes, int, int, int, int]:
    """``(records section, count, base timestamp, max timestamp, lastOffsetDelta)`` of a
    kafka-python batch."""
    records = draw(_records)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )  # fmt: skip
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, ts, key, value, [(k, v) for k, v in headers])
    batch = bytes(builder.build())
    base_ts = int.from_bytes(batch[27:35], "big", signed=True)
    max_ts = int.from_bytes(batch[35:43], "big", signed=True)
    last_delta = int.from_bytes(batch[23:27], "big", signed=True)
    return batch[RECORDS_OFFSET:], len(records), base_ts, max_ts, last_delta


@st.composite
def damaged(draw) -> tuple[bytes, int, int, int, int]:
    data, count, base_ts, max_ts, last_delta = draw(sections())
    buf = bytearray(data)
    kind = draw(st.sampled_from(["flip", "truncate", "splice", "count", "last_delta"]))
    if kind == "flip" and buf:
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "truncate":
        del buf[draw(st.integers(0, len(buf))) :]
    elif kind == "splice":
        at = draw(st.integers(0, len(buf)))
        buf[at:at] = draw(st.binary(min_size=1, max_size=12))
    elif kind == "count":
        count = draw(st.integers(0, count + 3))
    else:
        last_delta = draw(st.integers(-1, count + 2))
    return bytes(buf), count, base_ts, max_ts, last_delta


def _decoded(
    kernels, data: bytes, count: int, base_ts: int, max_ts: int, last_delta: int, log_append: bool
):
    """What the decoding kernel says of the section: its error, or the validation facts."""
    b = _Buffers(kernels, max(64, count), 1024, 64)
    attributes = 0x08 if log_append else 0
    while True:
        r = kernels.decode_records_v2(
            b.sink, data, count, _BASE_OFFSET, base_ts, max_ts, attributes, -1, -1, -1, 0,
            _MIN, _MAX, last_delta,
        )  # fmt: skip
        if r[0] != A.NEED_SPACE:
            break
        b.grow(r[2], r[3])
    if r[0] != A.END:
        return r[:6]
    a = b.arrays
    stamps = a[A.TIMESTAMP][:count]
    stamps = stamps[stamps != -1]
    lo, hi = (int(stamps.min()), int(stamps.max())) if len(stamps) else (-1, -1)
    nulls = int(b.state[A.ST_KEY_NULLS])
    if nulls:
        assert nulls == int((a[A.KEY_VALID][:count] == 0).sum())
    deltas = a[A.OFFSET][:count] - _BASE_OFFSET
    return (A.END, len(data), lo, hi, nulls, int(np.array_equal(deltas, np.arange(count))))


def _validated(
    kernels, data: bytes, count: int, base_ts: int, max_ts: int, last_delta: int, log_append: bool
):
    r = kernels.validate_records_v2(
        data, 0, len(data), count, base_ts, max_ts, log_append, last_delta
    )
    return r[:6] if r[0] != A.END else (r[0], r[1], *r[6:])


def _check(section, log_append: bool) -> None:
    data, count, base_ts, max_ts, last_delta = section
    args = (data, 0, len(data), count, base_ts, max_ts, log_append, last_delta)
    pure = twin("pure").validate_records_v2(*args)
    compiled = twin("compiled").validate_records_v2(*args)
    assert compiled == pure
    expected = _decoded(twin("compiled"), data, count, base_ts, max_ts, last_delta, log_append)
    assert _validated(twin("compiled"), *section, log_append) == expected


@given(section=sections(), log_append=st.booleans())
@SETTINGS
def test_valid_sections_give_the_decoders_facts_in_both_twins(section, log_append):
    _check(section, log_append)
    assert _validated(twin("pure"), *section, log_append)[:2] == (A.END, len(section[0]))


@given(section=damaged(), log_append=st.booleans())
@SETTINGS
def test_damaged_sections_fail_as_the_decoder_does_in_both_twins(section, log_append):
    _check(section, log_append)


def _two_records() -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, 5, None, b"v", [])
    builder.append(1, 7, b"k", b"v", [("h", b"x")])
    return bytes(builder.build())[RECORDS_OFFSET:]


def test_walk_stays_inside_the_given_range_and_reports_absolute_positions():
    data, count, base_ts, max_ts = _two_records(), 2, 5, 7
    padded = b"\xff" * 7 + data + b"\xff" * 5
    for name in ("pure", "compiled"):
        k = twin(name)
        r = k.validate_records_v2(padded, 7, 7 + len(data), count, base_ts, max_ts, False, 1)
        assert r[:2] == (A.END, 7 + len(data))
        bad = k.validate_records_v2(padded, 7, 8 + len(data), count, base_ts, max_ts, False, 1)
        assert bad[0] == A.ERROR
        assert bad[1] >= 7


def test_timestamps_wrap_as_java_longs_and_log_append_time_uses_the_batch_max():
    data = _two_records()
    for name in ("pure", "compiled"):
        k = twin(name)
        # base + delta (2) one past Long.MAX_VALUE wraps to Long.MIN_VALUE
        r = k.validate_records_v2(data, 0, len(data), 2, _MAX - 1, 0, False, 1)
        assert r == (A.END, len(data), 0, 0, 0, 0, _MIN, _MAX - 1, 1, 1)
        r = k.validate_records_v2(data, 0, len(data), 2, 5, 42, True, 1)
        assert r[6:] == (42, 42, 1, 1)
        r = k.validate_records_v2(data, 0, len(data), 2, 5, -1, True, 1)
        assert r[6:] == (-1, -1, 1, 1)


@pytest.mark.parametrize("name", ["pure", "compiled"])
def test_out_of_range_arguments_are_refused(name):
    k = twin(name)
    with pytest.raises(ValueError):
        k.validate_records_v2(b"abc", 2, 1, 0, 0, 0, False, 0)
    with pytest.raises(ValueError):
        k.validate_records_v2(b"abc", 0, 4, 0, 0, 0, False, 0)
    with pytest.raises(ValueError):
        k.validate_records_v2(b"abc", 0, 3, -1, 0, 0, False, 0)
