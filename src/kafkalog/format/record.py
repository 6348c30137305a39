"""Records as values, and the magic 2 record codec (DefaultRecord).

A v2 record inside a batch's (decompressed) records section::

    length: varint               bytes after this field
    attributes: int8             unused, always 0
    timestampDelta: varlong      from the batch's baseTimestamp
    offsetDelta: varint          from the batch's baseOffset
    keyLength: varint            -1 = null key
    key: bytes
    valueLength: varint          -1 = null value
    value: bytes
    headerCount: varint
    headers: [keyLength varint, key UTF-8 (never null), valueLength varint (-1 = null), value]

Reads check every length against the bytes left in the record and the record against the bytes left
in the batch, so a hostile length or count raises before anything is allocated for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import CorruptRecordError, InvalidRecordError, RecordOffsetError
from .constants import MIN_V2_RECORD_SIZE, NO_SEQUENCE, TimestampType
from .offsets_rule import record_offset_message
from .varint import encode_varint, encode_varlong, wrap_int64

__all__ = [
    "Header",
    "Record",
    "decode_records_v2",
    "encode_record_v2",
    "increment_sequence",
]

_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: the key is a UTF-8 string, the value any bytes or null."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One record of any magic, with its absolute offset and effective timestamp.

    ``timestamp`` is -1 (NO_TIMESTAMP) for magic 0; with LogAppendTime it is the batch's (or the
    wrapper's) timestamp, as Kafka reports it. ``crc`` and ``is_valid`` are the stored CRC-32 of a
    legacy message and whether it matches; v2 records carry no CRC of their own (``crc`` is None).
    """

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE
    is_control: bool = False
    crc: int | None = None
    is_valid: bool = True
    size_in_bytes: int = 0

    @property
    def key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        return -1 if self.value is None else len(self.value)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap to 0 past Integer.MAX_VALUE."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _varint(buf, pos: int, end: int, max_bytes: int, what: str, base: int) -> tuple[int, int]:
    """Zigzag varint/varlong read bounded by ``end``; ``base`` maps positions into the file."""
    raw = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(
                f"{what} at position {base + start} runs past the end of its record",
                position=base + start,
            )
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError(
                f"{what} at position {base + start} is longer than {max_bytes} bytes",
                position=base + start,
            )
    if max_bytes == 5:
        raw &= 0xFFFFFFFF
    else:
        raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def decode_records_v2(
    buf,
    *,
    count: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    timestamp_type: TimestampType,
    base_sequence: int,
    is_control: bool,
    start: int = 0,
    end: int | None = None,
    position_base: int = 0,
) -> Iterator[Record]:
    """Yield the ``count`` records encoded in ``buf[start:end]``.

    ``position_base`` is added to positions in error messages: for an uncompressed batch it maps
    ``buf`` offsets to file positions; for a compressed batch errors name the batch and the byte
    offset within the decompressed records. Offset deltas must increase within
    ``[0, last_offset_delta]`` (:func:`.offsets_rule.record_offset_message`).
    """
    if end is None:
        end = len(buf)
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count}", position=position_base)
    if count * MIN_V2_RECORD_SIZE > end - start:
        raise InvalidRecordError(
            f"Found invalid record count {count}: {end - start} bytes of records can hold at most "
            f"{(end - start) // MIN_V2_RECORD_SIZE}",
            position=position_base,
        )
    log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
    previous_delta = -1
    pos = start
    for _ in range(count):
        record_start = pos
        b = buf[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = _varint(buf, pos, end, 5, "record length", position_base)
        body_end = pos + length
        if length < 0 or body_end > end:
            raise InvalidRecordError(
                f"Invalid record size {length} at position {position_base + record_start}: "
                f"{end - pos} bytes left in the batch",
                position=position_base + record_start,
            )
        if length < MIN_V2_RECORD_SIZE - 1:
            raise InvalidRecordError(
                f"Invalid record size {length} at position {position_base + record_start}: "
                f"a record body needs at least {MIN_V2_RECORD_SIZE - 1} bytes",
                position=position_base + record_start,
            )
        pos += 1  # attributes: unused
        b = buf[pos]  # the body holds at least 6 bytes (checked above)
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = _varint(buf, pos, body_end, 10, "timestamp delta", position_base)
        b = buf[pos] if pos < body_end else 0x80
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            offset_delta, pos = _varint(buf, pos, body_end, 5, "offset delta", position_base)
        b = buf[pos] if pos < body_end else 0x80
        if b < 0x80:
            key_len, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            key_len, pos = _varint(buf, pos, body_end, 5, "key length", position_base)
        if key_len < 0:  # Kafka reads any negative size as null (DefaultRecord.readFrom)
            key = None
        else:
            if pos + key_len > body_end:
                raise InvalidRecordError(
                    f"Key of {key_len} bytes at position {position_base + pos} overruns its "
                    f"record ({body_end - pos} bytes left)",
                    position=position_base + pos,
                )
            key = bytes(buf[pos : pos + key_len])
            pos += key_len
        b = buf[pos] if pos < body_end else 0x80
        if b < 0x80:
            value_len, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            value_len, pos = _varint(buf, pos, body_end, 5, "value length", position_base)
        if value_len < 0:
            value = None
        else:
            if pos + value_len > body_end:
                raise InvalidRecordError(
                    f"Value of {value_len} bytes at position {position_base + pos} overruns its "
                    f"record ({body_end - pos} bytes left)",
                    position=position_base + pos,
                )
            value = bytes(buf[pos : pos + value_len])
            pos += value_len
        b = buf[pos] if pos < body_end else 0x80
        if b < 0x80:
            header_count, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            header_count, pos = _varint(buf, pos, body_end, 5, "header count", position_base)
        if header_count < 0:
            raise InvalidRecordError(
                f"Found invalid number of record headers {header_count}",
                position=position_base + pos,
            )
        if header_count:
            if header_count * 2 > body_end - pos:
                raise InvalidRecordError(
                    f"Found invalid number of record headers {header_count}: only "
                    f"{body_end - pos} bytes left in the record",
                    position=position_base + pos,
                )
            headers = []
            for _ in range(header_count):
                hk_len, pos = _varint(buf, pos, body_end, 5, "header key length", position_base)
                if hk_len < 0 or pos + hk_len > body_end:
                    raise InvalidRecordError(
                        f"Invalid header key size {hk_len} at position {position_base + pos}",
                        position=position_base + pos,
                    )
                # Kafka decodes header keys with new String(bytes, UTF_8): never fails.
                hkey = str(buf[pos : pos + hk_len], "utf-8", "replace")
                pos += hk_len
                hv_len, pos = _varint(buf, pos, body_end, 5, "header value length", position_base)
                if hv_len < 0:
                    hvalue = None
                else:
                    if pos + hv_len > body_end:
                        raise InvalidRecordError(
                            f"Header value of {hv_len} bytes at position {position_base + pos} "
                            f"overruns its record",
                            position=position_base + pos,
                        )
                    hvalue = bytes(buf[pos : pos + hv_len])
                    pos += hv_len
                headers.append(Header(hkey, hvalue))
            header_tuple = tuple(headers)
        else:
            header_tuple = ()
        if pos != body_end:
            raise InvalidRecordError(
                f"Invalid record size: expected to read {length} bytes in record payload at "
                f"position {position_base + record_start}, but instead read "
                f"{pos - (body_end - length)}",
                position=position_base + record_start,
            )
        if offset_delta <= previous_delta or offset_delta > last_offset_delta:
            raise RecordOffsetError(
                record_offset_message(
                    offset_delta, previous_delta, last_offset_delta, position_base + record_start
                ),
                position=position_base + record_start,
            )
        previous_delta = offset_delta
        yield Record(
            offset=wrap_int64(base_offset + offset_delta),
            timestamp=max_timestamp if log_append else wrap_int64(base_timestamp + ts_delta),
            timestamp_type=timestamp_type,
            key=key,
            value=value,
            headers=header_tuple,
            sequence=(
                increment_sequence(base_sequence, offset_delta)
                if base_sequence >= 0
                else NO_SEQUENCE
            ),
            is_control=is_control,
            size_in_bytes=body_end - record_start,
        )
    if pos != end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining: {end - pos} bytes after "
            f"{count} records",
            position=position_base + pos,
        )


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        out += b"\x01"  # zigzag(-1)
    else:
        out += encode_varint(len(data))
        out += data


def encode_record_v2(
    *,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header | tuple[str, bytes | None]] = (),
) -> bytes:
    """One v2 record, length prefix included."""
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    body += encode_varint(len(headers))
    for header in headers:
        hkey, hvalue = (header.key, header.value) if isinstance(header, Header) else header
        if hkey is None:
            raise ValueError("header keys cannot be null")
        encoded_key = hkey.encode("utf-8")
        body += encode_varint(len(encoded_key))
        body += encoded_key
        _encode_bytes(hvalue, body)
    return encode_varint(len(body)) + bytes(body)
