"""Differential tests: the pure and compiled kernels, the reference decoders and kafka-python.

Random logs of every magic, codec, timestamp type, header shape and producer field, valid and
damaged (truncated, bit-flipped, hostile lengths and counts, runaway varints), must give the same
rows or the same exception (type, message, position, offset) through both kernel twins, and the
same as record.py/legacy.py through MemoryRecords.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords

from .fastcheck import (
    columnar_outcome,
    corrupted,
    logs,
    reference_outcome,
    twin,
)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@given(buf=logs())
@SETTINGS
def test_valid_logs_decode_the_same_in_both_twins_and_the_reference(buf):
    ref = reference_outcome(buf)
    assert ref[0] == "ok"
    for validate_crc in (False, True):
        pure = columnar_outcome(buf, twin("pure"), validate_crc=validate_crc)
        compiled = columnar_outcome(buf, twin("compiled"), validate_crc=validate_crc)
        assert pure == ref
        assert compiled == ref


@given(buf=corrupted())
@SETTINGS
def test_damaged_logs_give_identical_rows_or_errors(buf):
    pure = columnar_outcome(buf, twin("pure"))
    compiled = columnar_outcome(buf, twin("compiled"))
    assert compiled == pure
    assert pure == reference_outcome(buf)


@given(buf=corrupted())
@SETTINGS
def test_damaged_logs_with_crc_validation_fail_alike_in_both_twins(buf):
    pure = columnar_outcome(buf, twin("pure"), validate_crc=True)
    compiled = columnar_outcome(buf, twin("compiled"), validate_crc=True)
    assert compiled == pure


@given(buf=logs(), data=st.data())
@SETTINGS
def test_offset_range_and_control_filters_match_the_filtered_reference(buf, data):
    ref = reference_outcome(buf)[1]
    offsets = [r["offset"] for r in ref]
    lo = data.draw(st.sampled_from([None, *offsets]))
    hi = data.draw(st.sampled_from([None, *(o + 1 for o in offsets)]))
    keep_control = data.draw(st.booleans())
    expected = [
        r
        for r in ref
        if (lo is None or r["offset"] >= lo)
        and (hi is None or r["offset"] < hi)
        and (keep_control or not r["isControl"])
    ]
    options = {"start_offset": lo, "end_offset": hi, "keep_control": keep_control}
    for name in ("pure", "compiled"):
        assert columnar_outcome(buf, twin(name), **options) == ("ok", expected)


def _kafka_python_rows(buf: bytes) -> list[tuple]:
    rows = []
    records = KpMemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            headers = [(k, v) for k, v in getattr(r, "headers", None) or []]
            rows.append((r.offset, ts, r.key, r.value, headers))
    return rows


@given(buf=logs())
@SETTINGS
def test_columns_match_kafka_python(buf):
    batch = columnar_outcome(buf, twin("compiled"))[1]
    if any(r["isControl"] for r in batch):
        return  # kafka-python hands control batches to its consumer differently
    mine = [
        (
            r["offset"],
            r["timestamp"],
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in batch
    ]
    assert mine == _kafka_python_rows(buf)
