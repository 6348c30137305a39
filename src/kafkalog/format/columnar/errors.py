"""Kernel error codes -> kafkalog's exceptions, with the reference decoders' messages.

Kernels (pure and compiled) only report a rule number, values and a byte position; the messages are
built here, once, so both twins raise identical exceptions, and they are worded exactly as
record.py, batch.py, legacy.py and records.py word them, so the columnar path and the
record-at-a-time path report the same problem the same way.

Three contexts: ``entries`` (positions are in the walked buffer, shifted by ``position_base``),
``v2`` (positions are inside a decompressed records section: the message names them, the
exception's position is the batch's) and ``legacy`` (inside a wrapper's decompressed message set).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkalogError,
    RecordOffsetError,
    UnsupportedCompressionTypeError,
)
from ..offsets_rule import check_batch_header, decrease_error, range_error, record_offset_message
from . import _kernel_abi as A

__all__ = ["Context", "kernel_error"]

_I64 = struct.Struct(">q")
_FIELDS = ("key", "value")


@dataclass(frozen=True, slots=True)
class Context:
    """Where a kernel's positions point: ``kind`` is "entries", "v2" or "legacy"."""

    kind: str
    data: object  # the buffer the kernel walked (memoryview or bytes)
    position_base: int = 0  # file position of data[0] ("entries")
    batch_position: int = 0  # file position of the batch or wrapper ("v2", "legacy")
    batch_offset: int = 0  # its base offset (v2) or wrapper offset (legacy)


def _offset_at(data, pos: int) -> int:
    return _I64.unpack_from(data, pos)[0]


def _record_message(code: int, a: int, b: int, p: int, c: int = 0) -> tuple[type, str]:
    """record.py's message for a v2 record rule; ``p`` is the position as the message shows it."""
    if code == A.E_RECORD_OFFSET:
        return RecordOffsetError, record_offset_message(a, b, c, p)
    if code == A.E_COUNT_TOO_LARGE:
        return InvalidRecordError, (
            f"Found invalid record count {a}: {b} bytes of records can hold at most {b // 7}"
        )
    if code == A.E_VARINT_EOF:
        return (
            CorruptRecordError,
            f"{A.VARINT_FIELDS[a]} at position {p} runs past the end of its record",
        )
    if code == A.E_VARINT_LONG:
        return CorruptRecordError, f"{A.VARINT_FIELDS[a]} at position {p} is longer than {b} bytes"
    if code == A.E_RECORD_SIZE_OVERRUN:
        return InvalidRecordError, (
            f"Invalid record size {a} at position {p}: {b} bytes left in the batch"
        )
    if code == A.E_RECORD_SIZE_SMALL:
        return InvalidRecordError, (
            f"Invalid record size {a} at position {p}: a record body needs at least 6 bytes"
        )
    if code == A.E_KEY_OVERRUN:
        return InvalidRecordError, (
            f"Key of {a} bytes at position {p} overruns its record ({b} bytes left)"
        )
    if code == A.E_VALUE_OVERRUN:
        return InvalidRecordError, (
            f"Value of {a} bytes at position {p} overruns its record ({b} bytes left)"
        )
    if code == A.E_HEADERS_NEGATIVE:
        return InvalidRecordError, f"Found invalid number of record headers {a}"
    if code == A.E_HEADERS_TOO_MANY:
        return InvalidRecordError, (
            f"Found invalid number of record headers {a}: only {b} bytes left in the record"
        )
    if code == A.E_HKEY_SIZE:
        return InvalidRecordError, f"Invalid header key size {a} at position {p}"
    if code == A.E_HVAL_OVERRUN:
        return InvalidRecordError, f"Header value of {a} bytes at position {p} overruns its record"
    if code == A.E_RECORD_PAYLOAD:
        return InvalidRecordError, (
            f"Invalid record size: expected to read {a} bytes in record payload at position {p}, "
            f"but instead read {b}"
        )
    if code == A.E_RECORDS_REMAINING:
        return InvalidRecordError, (
            f"Incorrect declared batch size, records still remaining: {a} bytes after {b} records"
        )
    raise AssertionError(f"unknown kernel error code {code}")


def _legacy_message(code: int, a: int, b: int, c: int, wrapper: int) -> tuple[type, str]:
    """legacy.py's message for a magic 0/1 rule; ``wrapper`` is the message's (or wrapper's)
    position as legacy.py names it."""
    if code == A.E_LEGACY_MSG_SIZE:
        return CorruptRecordError, (
            f"Message size {a} is less than the minimum magic {b} message overhead "
            f"({14 if b == 0 else 22})"
        )
    if code == A.E_LEGACY_OVERRUN:
        return CorruptRecordError, (
            f"Message {_FIELDS[a]} size {b} exceeds the {c} bytes left in the message"
        )
    if code == A.E_CRC:
        return CorruptRecordError, f"Record is corrupt (stored crc = {a}, computed crc = {b})"
    if code == A.E_LEGACY_CODEC:
        return UnsupportedCompressionTypeError, (
            f"Compression type id {a} is not allowed in magic {b} messages"
        )
    if code == A.E_LEGACY_NULL_WRAPPER:
        return InvalidRecordError, (
            f"Found invalid compressed record set with null value (magic = {a})"
        )
    if code == A.E_INNER_STRAY:
        return CorruptRecordError, (
            f"Compressed message set of the wrapper at position {wrapper} ends with {a} stray bytes"
        )
    if code == A.E_INNER_SIZE:
        return CorruptRecordError, (
            f"Inner message at byte {a} of the wrapper at position {wrapper} has invalid size "
            f"{b} ({c} bytes left)"
        )
    if code == A.E_INNER_MAGIC:
        return InvalidRecordError, (
            f"Compressed message magic {a} does not match wrapper magic {b}"
        )
    if code == A.E_INNER_NESTED:
        return InvalidRecordError, (
            "Compressed message set contains a compressed inner message (nested compression is "
            "not allowed)"
        )
    if code == A.E_INNER_EMPTY:
        return InvalidRecordError, "Found invalid compressed record set with no inner records"
    if code == A.E_WRAPPER_OFFSET:
        return InvalidRecordError, (
            f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{a}' is "
            f"less than the last inner message offset '{b}' and it is not zero."
        )
    raise AssertionError(f"unknown kernel error code {code}")


_LEGACY_CODES = frozenset(range(A.E_CRC, A.E_WRAPPER_OFFSET + 1))
_OFFSET_CODES = frozenset((A.E_OFFSETS, A.E_OFFSET_ORDER, A.E_INNER_OFFSETS))


def _offsets_error(code: int, a: int, b: int, c: int, position: int, offset: int):
    """offsets_rule's error for an E_OFFSETS, E_OFFSET_ORDER or E_INNER_OFFSETS result, or None
    for another code; ``offset`` is the wrapper's for E_INNER_OFFSETS (and then the error's)."""
    if code == A.E_OFFSETS:
        return range_error(a, a + b, position=position)
    if code == A.E_OFFSET_ORDER:
        return decrease_error(a, b, position=position)
    if code == A.E_INNER_OFFSETS:
        shift = offset - c  # absolute inner offset = inner + wrapper offset - c
        return range_error(a + shift, b + shift, position=position, offset=offset)
    return None


def kernel_error(result: tuple, ctx: Context) -> KafkalogError:
    """The exception for a kernel's ERROR result in context ``ctx``."""
    _, pos, code, a, b, c, entry_pos = result
    data = ctx.data
    if code in _OFFSET_CODES:  # the offset rule: the entry's (or batch's) position and offset
        if ctx.kind == "entries":
            where, offset = ctx.position_base + entry_pos, a
        else:
            where, offset = ctx.batch_position, ctx.batch_offset
        error = _offsets_error(code, a, b, c, where, offset)
        if error is None:
            raise AssertionError(f"kernel error {code} with offsets in range: {result}")
        return error
    if ctx.kind == "entries":
        p = ctx.position_base + pos
        if code == A.E_ENTRY_SIZE:
            return CorruptRecordError(
                f"Found record size {a} smaller than minimum record overhead (14)",
                position=p,
                offset=b,
            )
        if code == A.E_MAGIC:
            return CorruptRecordError(
                f"Invalid magic {a} (expected 0, 1 or 2)", position=p, offset=b
            )
        if code == A.E_BATCH_SIZE:
            return CorruptRecordError(
                f"Record batch size {a} is less than the record batch overhead (61)",
                position=p,
                offset=b,
            )
        entry = ctx.position_base + entry_pos
        entry_offset = _offset_at(data, entry_pos)
        if code == A.E_CODEC:  # as the driver and RecordBatch.compression word it
            return UnsupportedCompressionTypeError(
                f"Unknown compression type id {a} in batch attributes", position=entry, offset=b
            )
        if code == A.E_BATCH_HEADER:  # offsets_rule words it (compressed: no size rule here)
            try:
                check_batch_header(entry_offset, a, b, 0, True, position=entry)
            except KafkalogError as e:
                return e
            raise AssertionError(f"kernel error {code} for a consistent header: {result}")
        if code == A.E_COUNT_NEGATIVE:
            return InvalidRecordError(
                f"Found invalid record count {a} in batch at position {entry}",
                position=entry,
                offset=entry_offset,
            )
        if code == A.E_LEGACY_MSG_SIZE:
            cls, msg = _legacy_message(code, a, b, c, entry)
            return cls(msg, position=entry)
        if code in _LEGACY_CODES:
            cls, msg = _legacy_message(code, a, b, c, entry)
            return cls(msg, position=entry, offset=entry_offset)
        cls, msg = _record_message(code, a, b, p, c)
        return cls(msg, position=p, offset=entry_offset)
    if ctx.kind == "v2":
        cls, msg = _record_message(code, a, b, pos, c)
        msg = (
            f"{msg} (byte offset within the decompressed records of the batch at position "
            f"{ctx.batch_position})"
        )
        return cls(msg, position=ctx.batch_position, offset=ctx.batch_offset)
    # legacy: inside a wrapper's message set
    cls, msg = _legacy_message(code, a, b, c, ctx.batch_position)
    offset = ctx.batch_offset
    if code in (A.E_LEGACY_OVERRUN, A.E_CRC):
        offset = _offset_at(data, pos)  # the inner message's own (stored) offset, as legacy.py
    return cls(msg, position=ctx.batch_position, offset=offset)
