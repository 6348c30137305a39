"""Helpers of the fast-path tests: both kernel twins, outcomes, the reference rows, generators.

An *outcome* is ``("ok", rows)`` or ``("error", type, message, position, offset)``, so that two
decoders can be compared in one ``==``: same rows, or the same exception word for word.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import strategies as st

from kafkalog.errors import KafkalogError
from kafkalog.format import CompressionType, MemoryRecords, MemoryRecordsBuilder, TimestampType
from kafkalog.format import columnar as fast
from kafkalog.format.columnar._pure import kernels as _pure_kernels
from kafkalog.format.constants import ControlRecordType
from kafkalog.format.control import encode_control_key, encode_end_txn_marker
from kafkalog.format.offsets_rule import check_entry_offsets

FORCED_PURE = os.environ.get("KAFKALOG_PUREPYTHON", "") not in ("", "0")


def compiled_kernels() -> ModuleType:
    """The C twin; a test that needs it fails without it, unless the pure path is forced (CI's
    second pass), where the differential tests are skipped as there is nothing to compare."""
    try:
        from kafkalog.format.columnar import _compiled as _speedups
    except ImportError as e:
        if FORCED_PURE:
            pytest.skip(f"compiled kernels not built ({e})")
        raise
    return _speedups


TWINS = ("pure", "compiled")


def twin(name: str) -> ModuleType:
    return _pure_kernels if name == "pure" else compiled_kernels()


def wrap64(x: int) -> int:
    return ((x + (1 << 63)) % (1 << 64)) - (1 << 63)


def wrap32(x: int) -> int:
    return ((x + (1 << 31)) % (1 << 32)) - (1 << 31)


def error_outcome(e: KafkalogError) -> tuple:
    return ("error", type(e).__name__, str(e), e.position, e.offset)


def columnar_outcome(buf, kernels: ModuleType, **options) -> tuple:
    try:
        rb = fast.ColumnarDecoder(kernels=kernels).decode(buf, **options)
    except KafkalogError as e:
        return error_outcome(e)
    assert rb.schema == fast.SCHEMA
    rb.validate(full=True)
    return ("ok", rb.to_pylist())


def reference_outcome(buf, *, check_offset_order: bool = True) -> tuple:
    """record.py/legacy.py through MemoryRecords, as rows shaped like the columnar ones; with
    ``check_offset_order``, the offset rule's sequence check applied between entries as a log
    reader does (offsets_rule.check_entry_offsets; a legacy entry's offsets are its own)."""
    rows = []
    previous_last = None
    try:
        for batch in MemoryRecords(buf):
            if check_offset_order:
                base = batch.base_offset if batch.magic == 2 else batch.offset
                last = batch.last_offset
                check_entry_offsets(base, last, previous_last, position=batch.position)
                previous_last = last
            for r in batch.records():
                rows.append(
                    {
                        "offset": wrap64(r.offset),
                        "timestamp": wrap64(r.timestamp),
                        "timestampType": int(r.timestamp_type),
                        "key": r.key,
                        "value": r.value,
                        "headers": [{"key": h.key, "value": h.value} for h in r.headers],
                        "producerId": batch.producer_id,
                        "producerEpoch": batch.producer_epoch,
                        "sequence": wrap32(r.sequence),
                        "isTransactional": batch.is_transactional,
                        "isControl": batch.is_control,
                        "partitionLeaderEpoch": batch.partition_leader_epoch,
                    }
                )
    except KafkalogError as e:
        return error_outcome(e)
    return ("ok", rows)


# -- generated logs -----------------------------------------------------------------------------

keys = st.none() | st.binary(max_size=24)
values = st.none() | st.binary(max_size=80) | st.just(b"v" * 700)
# keys and values on both sides of the walk's short-header shape (ASCII key <= 8 bytes, value
# <= 32 bytes, one-byte lengths)
header_keys = st.text(st.characters(codec="ascii"), max_size=10) | st.text(max_size=6)
header_values = st.none() | st.binary(max_size=40) | st.just(b"h" * 70)
header_lists = st.lists(st.tuples(header_keys, header_values), max_size=3)
timestamps = st.integers(0, 2**41)


@st.composite
def batch_specs(draw) -> dict:
    magic = draw(st.sampled_from([2, 2, 2, 1, 0]))
    codecs = list(CompressionType) if magic == 2 else list(CompressionType)[:4]
    spec = {
        "magic": magic,
        "codec": draw(st.sampled_from(codecs)),
        "timestamp_type": (
            TimestampType.CREATE_TIME
            if magic == 0
            else draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]))
        ),
        "records": draw(
            st.lists(
                st.tuples(timestamps, keys, values, header_lists if magic == 2 else st.just([])),
                min_size=1,
                max_size=12,
            )
        ),
        "control": False,
        "producer": {},
    }
    if magic == 2:
        if draw(st.booleans()):
            spec["producer"] = {
                "producer_id": draw(st.integers(0, 2**40)),
                "producer_epoch": draw(st.integers(0, 2**15 - 1)),
                "base_sequence": draw(st.sampled_from([0, 5, 2**31 - 3])),
                "is_transactional": draw(st.booleans()),
            }
        spec["partition_leader_epoch"] = draw(st.integers(-1, 2**20))
        spec["control"] = draw(st.integers(0, 9)) == 0
    return spec


def build_batch(spec: dict, base_offset: int) -> bytes:
    magic = spec["magic"]
    if spec["control"]:
        b = MemoryRecordsBuilder(
            base_offset=base_offset,
            producer_id=spec["producer"].get("producer_id", 7),
            producer_epoch=spec["producer"].get("producer_epoch", 0),
            is_transactional=True,
            is_control=True,
            compression=spec["codec"],
        )
        b.append_end_txn_marker(ControlRecordType.COMMIT, 3, timestamp=spec["records"][0][0])
        return b.build()
    b = MemoryRecordsBuilder(
        magic=magic,
        compression=spec["codec"],
        timestamp_type=spec["timestamp_type"],
        log_append_time=2**41 + 5,
        base_offset=base_offset,
        partition_leader_epoch=spec.get("partition_leader_epoch", -1),
        **spec["producer"],
    )
    for ts, key, value, headers in spec["records"]:
        b.append(timestamp=ts, key=key, value=value, headers=headers)
    return b.build()


@st.composite
def logs(draw, max_batches: int = 5) -> bytes:
    specs = draw(st.lists(batch_specs(), min_size=1, max_size=max_batches))
    out = bytearray()
    offset = draw(st.integers(0, 2**40))
    for spec in specs:
        out += build_batch(spec, offset)
        offset += 1 if spec["control"] else len(spec["records"])
    return bytes(out)


HOSTILE_INTS = [0, 1, 0x7F, 0xFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x0000_0100]


@st.composite
def corrupted(draw, buf_strategy=None) -> bytes:
    """A valid log with one kind of damage: truncation, bit flips, hostile ints, varint runs."""
    buf = bytearray(draw(buf_strategy if buf_strategy is not None else logs()))
    kind = draw(st.sampled_from(["truncate", "flip", "int", "varint", "insert"]))
    if kind == "truncate":
        return bytes(buf[: draw(st.integers(0, len(buf)))])
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(buf) - 1))
        if kind == "flip":
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "int":
            value = draw(st.sampled_from(HOSTILE_INTS))
            buf[pos : pos + 4] = value.to_bytes(4, "big")
        elif kind == "varint":
            n = draw(st.integers(1, 11))
            buf[pos : pos + n] = bytes([draw(st.sampled_from([0x80, 0xFF, 0xFE, 0x81]))] * n)
        else:
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
    return bytes(buf)


def control_batch(base_offset: int) -> bytes:
    b = MemoryRecordsBuilder(
        base_offset=base_offset,
        producer_id=9,
        producer_epoch=1,
        is_transactional=True,
        is_control=True,
    )
    b.append(
        timestamp=1, key=encode_control_key(ControlRecordType.ABORT), value=encode_end_txn_marker(4)
    )
    return b.build()
