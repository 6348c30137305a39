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


# Each rule's exception and message, worded from its values: ``a``, ``b``, ``c`` (see
# _kernel_abi) and ``p``, the position as the message shows it; ``field`` names a varint (record
# rules) or the key or value (legacy rules), ``wrapper`` is the position legacy.py names.
_RECORD_RULES: dict[int, tuple[type[KafkalogError], str]] = {
    A.E_COUNT_TOO_LARGE: (
        InvalidRecordError,
        "Found invalid record count {a}: {b} bytes of records can hold at most {most}",
    ),
    A.E_VARINT_EOF: (CorruptRecordError, "{field} at position {p} runs past the end of its record"),
    A.E_VARINT_LONG: (CorruptRecordError, "{field} at position {p} is longer than {b} bytes"),
    A.E_RECORD_SIZE_OVERRUN: (
        InvalidRecordError,
        "Invalid record size {a} at position {p}: {b} bytes left in the batch",
    ),
    A.E_RECORD_SIZE_SMALL: (
        InvalidRecordError,
        "Invalid record size {a} at position {p}: a record body needs at least 6 bytes",
    ),
    A.E_KEY_OVERRUN: (
        InvalidRecordError,
        "Key of {a} bytes at position {p} overruns its record ({b} bytes left)",
    ),
    A.E_VALUE_OVERRUN: (
        InvalidRecordError,
        "Value of {a} bytes at position {p} overruns its record ({b} bytes left)",
    ),
    A.E_HEADERS_NEGATIVE: (InvalidRecordError, "Found invalid number of record headers {a}"),
    A.E_HEADERS_TOO_MANY: (
        InvalidRecordError,
        "Found invalid number of record headers {a}: only {b} bytes left in the record",
    ),
    A.E_HKEY_SIZE: (InvalidRecordError, "Invalid header key size {a} at position {p}"),
    A.E_HVAL_OVERRUN: (
        InvalidRecordError,
        "Header value of {a} bytes at position {p} overruns its record",
    ),
    A.E_RECORD_PAYLOAD: (
        InvalidRecordError,
        "Invalid record size: expected to read {a} bytes in record payload at position {p}, "
        "but instead read {b}",
    ),
    A.E_RECORDS_REMAINING: (
        InvalidRecordError,
        "Incorrect declared batch size, records still remaining: {a} bytes after {b} records",
    ),
}
_LEGACY_RULES: dict[int, tuple[type[KafkalogError], str]] = {
    A.E_LEGACY_MSG_SIZE: (
        CorruptRecordError,
        "Message size {a} is less than the minimum magic {b} message overhead ({overhead})",
    ),
    A.E_LEGACY_OVERRUN: (
        CorruptRecordError,
        "Message {field} size {b} exceeds the {c} bytes left in the message",
    ),
    A.E_CRC: (CorruptRecordError, "Record is corrupt (stored crc = {a}, computed crc = {b})"),
    A.E_LEGACY_CODEC: (
        UnsupportedCompressionTypeError,
        "Compression type id {a} is not allowed in magic {b} messages",
    ),
    A.E_LEGACY_NULL_WRAPPER: (
        InvalidRecordError,
        "Found invalid compressed record set with null value (magic = {a})",
    ),
    A.E_INNER_STRAY: (
        CorruptRecordError,
        "Compressed message set of the wrapper at position {wrapper} ends with {a} stray bytes",
    ),
    A.E_INNER_SIZE: (
        CorruptRecordError,
        "Inner message at byte {a} of the wrapper at position {wrapper} has invalid size {b} "
        "({c} bytes left)",
    ),
    A.E_INNER_MAGIC: (
        InvalidRecordError,
        "Compressed message magic {a} does not match wrapper magic {b}",
    ),
    A.E_INNER_NESTED: (
        InvalidRecordError,
        "Compressed message set contains a compressed inner message (nested compression is not "
        "allowed)",
    ),
    A.E_INNER_EMPTY: (
        InvalidRecordError,
        "Found invalid compressed record set with no inner records",
    ),
    A.E_WRAPPER_OFFSET: (
        InvalidRecordError,
        "Found invalid wrapper offset in compressed v1 message set, wrapper offset '{a}' is less "
        "than the last inner message offset '{b}' and it is not zero.",
    ),
}
# The entry walk's framing rules: CorruptRecordError at the entry, ``b`` its offset.
_ENTRY_RULES = {
    A.E_ENTRY_SIZE: "Found record size {a} smaller than minimum record overhead (14)",
    A.E_MAGIC: "Invalid magic {a} (expected 0, 1 or 2)",
    A.E_BATCH_SIZE: "Record batch size {a} is less than the record batch overhead (61)",
}


def _worded(rules: dict, code: int, **values: object) -> tuple[type[KafkalogError], str]:
    """Rule ``code``'s exception and its message with ``values`` filled in."""
    rule = rules.get(code)
    if rule is None:
        raise AssertionError(f"unknown kernel error code {code}")
    cls, template = rule
    return cls, template.format(**values)


def _record_message(code: int, a: int, b: int, p: int, c: int = 0) -> tuple[type, str]:
    """record.py's message for a v2 record rule; ``p`` is the position as the message shows it."""
    if code == A.E_RECORD_OFFSET:
        return RecordOffsetError, record_offset_message(a, b, c, p)
    field = A.VARINT_FIELDS[a] if code in (A.E_VARINT_EOF, A.E_VARINT_LONG) else ""
    return _worded(_RECORD_RULES, code, a=a, b=b, p=p, field=field, most=b // 7)


def _legacy_message(code: int, a: int, b: int, c: int, wrapper: int) -> tuple[type, str]:
    """legacy.py's message for a magic 0/1 rule; ``wrapper`` is the message's (or wrapper's)
    position as legacy.py names it."""
    field = _FIELDS[a] if code == A.E_LEGACY_OVERRUN else ""
    overhead = 14 if b == 0 else 22
    values = {"a": a, "b": b, "c": c, "wrapper": wrapper, "field": field, "overhead": overhead}
    return _worded(_LEGACY_RULES, code, **values)


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
        framing = _ENTRY_RULES.get(code)
        if framing is not None:
            return CorruptRecordError(framing.format(a=a), position=p, offset=b)
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
