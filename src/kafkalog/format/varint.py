"""Zigzag varints as Kafka writes them (ByteUtils): protobuf-style base-128 groups, low bits first.

A varint (int32) may take at most 5 bytes and a varlong (int64) at most 10; a longer run of
continuation bits is corruption, not a bigger number, exactly as in Kafka's readers. Readers take
any buffer and a position and return ``(value, next_position)``; running off the end of the buffer
raises, so callers that bound a record body never read past it.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, VarintRangeError

__all__ = [
    "decode_unsigned_varint",
    "decode_varint",
    "decode_varlong",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "wrap_int64",
]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT64_MASK = (1 << 64) - 1


def wrap_int64(value: int) -> int:
    """``value`` as a Java long: sums such as baseTimestamp + timestampDelta wrap, as in Kafka."""
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    return ((value - _INT64_MIN) & _UINT64_MASK) + _INT64_MIN


def _decode(buf, pos: int, max_bytes: int, what: str, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(
                f"{what} at position {start} runs past the end of its buffer (ends at {end})",
                position=start,
            )
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError(
                f"{what} at position {start} is longer than {max_bytes} bytes", position=start
            )


def decode_unsigned_varint(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes), as used by flexible message versions."""
    value, pos = _decode(buf, pos, 5, "unsigned varint", len(buf) if end is None else end)
    if value > 0xFFFFFFFF:
        raise CorruptRecordError(f"unsigned varint {value} does not fit in 32 bits", position=pos)
    return value, pos


def decode_varint(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag-encoded int32 (at most 5 bytes)."""
    raw, pos = _decode(buf, pos, 5, "varint", len(buf) if end is None else end)
    raw &= 0xFFFFFFFF  # Kafka keeps the low 32 bits of a 5-byte group
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag-encoded int64 (at most 10 bytes)."""
    raw, pos = _decode(buf, pos, 10, "varlong", len(buf) if end is None else end)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _encode(value: int) -> bytes:
    """The base-128 groups of a non-negative ``value``, low bits first."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= 0xFFFFFFFF:
        raise VarintRangeError(f"unsigned varint out of range: {value}", bits=32)
    return _encode(value)


def encode_varint(value: int) -> bytes:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise VarintRangeError(f"varint out of int32 range: {value}", bits=32)
    return _encode(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise VarintRangeError(f"varlong out of int64 range: {value}", bits=64)
    return _encode(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_unsigned_varint(value: int) -> int:
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
