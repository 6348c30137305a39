"""Magic 0 and 1 messages (LegacyRecord) and the log entries that hold them.

A log entry is ``offset int64 | size int32 | message``; a message is::

    crc uint32          CRC-32 over magic .. end
    magic int8          0 or 1
    attributes int8     codec (0x07), timestamp type (0x08, magic 1 only)
    timestamp int64     magic 1 only
    keyLength int32     -1 = null
    key
    valueLength int32   -1 = null
    value

A compressed entry is a *wrapper*: its value is a compressed message set of inner entries. Inner
offsets are absolute for magic 0 and relative (0..n-1) for magic 1, where the absolute offset is
``wrapperOffset - lastInnerOffset + inner``; a wrapper offset of 0 (written by some librdkafka
versions) means the inner offsets are used as they are. The wrapper's offset is the last inner
offset. Inner magic 1 messages take the wrapper's timestamp when the wrapper is LogAppendTime.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ..errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from .batch import BatchChecks
from .codecs import CompressionType, compress, decompress
from .constants import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from .crc import crc32
from .offsets_rule import range_error
from .record import Record

__all__ = ["LegacyBatch", "encode_legacy_entry", "encode_legacy_message_set"]

_ENTRY_HEADER = struct.Struct(">qi")
_V0_HEADER = struct.Struct(">IbB")
_V1_HEADER = struct.Struct(">IbBq")
_I32 = struct.Struct(">i")


def _min_size(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == MAGIC_VALUE_V0 else RECORD_OVERHEAD_V1


class LegacyBatch(BatchChecks):
    """A view over one magic 0/1 log entry: a single message, or a compressed wrapper.

    It answers the same questions as :class:`~kafkalog.format.batch.RecordBatch` so that callers can
    treat every magic alike; producer fields and the leader epoch are Kafka's -1 sentinels.
    """

    __slots__ = ("_inner",)

    def _opened(self) -> None:
        self._inner: list[Record] | None = None
        size = len(self._buf) - LOG_OVERHEAD
        if size < _min_size(self.magic):
            raise CorruptRecordError(
                f"Message size {size} is less than the minimum magic {self.magic} message "
                f"overhead ({_min_size(self.magic)})",
                position=self.position,
            )

    # -- header fields ---------------------------------------------------------------------------
    @property
    def offset(self) -> int:
        """The entry's offset: the message's own, or for a wrapper the last inner offset."""
        return _ENTRY_HEADER.unpack_from(self._buf)[0]

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    @property
    def magic(self) -> int:
        return self._buf[LOG_OVERHEAD + 4]

    @property
    def attributes(self) -> int:
        return self._buf[LOG_OVERHEAD + 5]

    @property
    def crc(self) -> int:
        return _V0_HEADER.unpack_from(self._buf, LOG_OVERHEAD)[0]

    def compute_checksum(self) -> int:
        return crc32(self._buf[LOG_OVERHEAD + 4 :])

    _MAX_CODEC = CompressionType.LZ4

    def _codec_message(self, codec: int) -> str:
        return f"Compression type id {codec} is not allowed in magic {self.magic} messages"

    def _error_offset(self) -> int:
        return self.offset

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_VALUE_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def timestamp(self) -> int:
        if self.magic == MAGIC_VALUE_V0:
            return NO_TIMESTAMP
        return _V1_HEADER.unpack_from(self._buf, LOG_OVERHEAD)[3]

    max_timestamp = timestamp

    # Fields only magic 2 has, as Kafka's AbstractLegacyRecordBatch reports them.
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    is_transactional = False
    is_control = False
    delete_horizon_ms = None

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """First offset: the message's own, or a wrapper's first inner offset (decompresses)."""
        if not self.is_compressed:
            return self.offset
        return self.records()[0].offset

    @property
    def count(self) -> int:
        return len(self.records()) if self.is_compressed else 1

    records_count = count

    # -- key and value ---------------------------------------------------------------------------
    def _key_value(self) -> tuple[bytes | None, bytes | None]:
        buf, end = self._buf, len(self._buf)
        pos = LOG_OVERHEAD + _min_size(self.magic) - 8  # the key length field
        fields = []
        for what in ("key", "value"):
            (length,) = _I32.unpack_from(buf, pos)
            pos += 4
            if length < 0:  # any negative size is null, as LegacyRecord reads it
                fields.append(None)
            else:
                remaining = end - pos - (4 if what == "key" else 0)
                if length > remaining:
                    raise CorruptRecordError(
                        f"Message {what} size {length} exceeds the {remaining} bytes left in "
                        f"the message",
                        position=self.position,
                        offset=self.offset,
                    )
                fields.append(bytes(buf[pos : pos + length]))
                pos += length
        return fields[0], fields[1]

    @property
    def key(self) -> bytes | None:
        return self._key_value()[0]

    @property
    def value(self) -> bytes | None:
        return self._key_value()[1]

    # -- records ---------------------------------------------------------------------------------
    def check_offsets(self) -> None:
        """The offset rule (:mod:`.offsets_rule`) on this entry alone: its offset (a wrapper's
        is its last inner one) must fit a log's offsets, else CorruptRecordError. :meth:`records`
        checks it first, and a wrapper's absolute inner offsets too."""
        offset = self.offset
        error = range_error(offset, offset, position=self.position)
        if error is not None:
            raise error

    def records(self) -> list[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets (the offset
        rule checked first: :meth:`check_offsets`)."""
        if self._inner is None:
            self.check_offsets()
            self._inner = self._inner_records() if self.is_compressed else [self._as_record()]
        return self._inner

    def __iter__(self):
        return iter(self.records())

    def _as_record(self) -> Record:
        key, value = self._key_value()
        return Record(
            offset=self.offset,
            timestamp=self.timestamp,
            timestamp_type=self.timestamp_type,
            key=key,
            value=value,
            crc=self.crc,
            is_valid=self.is_valid,
            size_in_bytes=len(self._buf) - LOG_OVERHEAD,
        )

    def _inner_records(self) -> list[Record]:
        magic, codec = self.magic, self.compression
        wrapper_offset = self.offset
        _, value = self._key_value()
        if value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {magic})",
                position=self.position,
                offset=wrapper_offset,
            )
        try:
            data = decompress(codec, value, magic=magic, max_size=self._max_decompressed_size)
        except CorruptRecordError as e:
            raise CorruptRecordError(
                f"Compressed message set of the wrapper at position {self.position} cannot be "
                f"decompressed: {e.message}",
                position=self.position,
                offset=wrapper_offset,
            ) from None
        view = memoryview(data)
        inner: list[LegacyBatch] = []
        pos, end = 0, len(view)
        while pos < end:
            if end - pos < LOG_OVERHEAD:
                raise CorruptRecordError(
                    f"Compressed message set of the wrapper at position {self.position} ends "
                    f"with {end - pos} stray bytes",
                    position=self.position,
                    offset=wrapper_offset,
                )
            _, size = _ENTRY_HEADER.unpack_from(view, pos)
            if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > end:
                raise CorruptRecordError(
                    f"Inner message at byte {pos} of the wrapper at position {self.position} has "
                    f"invalid size {size} ({end - pos - LOG_OVERHEAD} bytes left)",
                    position=self.position,
                    offset=wrapper_offset,
                )
            entry_view = view[pos : pos + LOG_OVERHEAD + size]
            if entry_view[LOG_OVERHEAD + 4] != magic:
                raise InvalidRecordError(
                    f"Compressed message magic {entry_view[LOG_OVERHEAD + 4]} does not match "
                    f"wrapper magic {magic}",
                    position=self.position,
                    offset=wrapper_offset,
                )
            try:
                entry = LegacyBatch(entry_view, self.position)
            except CorruptRecordError as e:
                raise e.located(offset=wrapper_offset) from None
            if entry.is_compressed:
                raise InvalidRecordError(
                    "Compressed message set contains a compressed inner message (nested "
                    "compression is not allowed)",
                    position=self.position,
                    offset=wrapper_offset,
                )
            inner.append(entry)
            pos += LOG_OVERHEAD + size
        if not inner:
            raise InvalidRecordError(
                "Found invalid compressed record set with no inner records",
                position=self.position,
                offset=wrapper_offset,
            )
        if magic > MAGIC_VALUE_V0:
            last_inner = inner[-1].offset
            if wrapper_offset == 0:
                absolute_base = 0
            elif wrapper_offset < last_inner:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper_offset}' is less than the last inner message offset "
                    f"'{last_inner}' and it is not zero.",
                    position=self.position,
                    offset=wrapper_offset,
                )
            else:
                absolute_base = wrapper_offset - last_inner
        else:
            absolute_base = 0
        offsets = [entry.offset for entry in inner]
        error = range_error(
            absolute_base + min(offsets),
            absolute_base + max(offsets),
            position=self.position,
            offset=wrapper_offset,
        )
        if error is not None:  # the offset rule: the absolute inner offsets fit a log's
            raise error
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        wrapper_ts = self.timestamp
        records = []
        for entry in inner:
            key, value = entry._key_value()
            if magic == MAGIC_VALUE_V0:
                ts, ts_type = NO_TIMESTAMP, TimestampType.NO_TIMESTAMP_TYPE
            elif log_append:
                ts, ts_type = wrapper_ts, TimestampType.LOG_APPEND_TIME
            else:  # inner messages report the wrapper's timestamp type (LegacyRecord)
                ts, ts_type = entry.timestamp, self.timestamp_type
            records.append(
                Record(
                    offset=absolute_base + entry.offset,
                    timestamp=ts,
                    timestamp_type=ts_type,
                    key=key,
                    value=value,
                    crc=entry.crc,
                    is_valid=entry.is_valid,
                    size_in_bytes=entry.size_in_bytes - LOG_OVERHEAD,
                )
            )
        return records

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(position={self.position}, offset={self.offset}, magic={self.magic}, "
            f"size={self.size_in_bytes})"
        )


# -- writing ---------------------------------------------------------------------------------------


def _encode_message(
    magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytearray()
    body.append(magic)
    body.append(attributes)
    if magic == MAGIC_VALUE_V1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    return struct.pack(">I", crc32(body)) + bytes(body)


def encode_legacy_entry(
    *,
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    compression: int = CompressionType.NONE,
) -> bytes:
    """One log entry (offset, size, message) of magic 0 or 1."""
    if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        raise ValueError(f"legacy messages have magic 0 or 1, not {magic}")
    attributes = int(compression) & COMPRESSION_CODEC_MASK
    if magic == MAGIC_VALUE_V1 and timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    message = _encode_message(magic, attributes, timestamp, key, value)
    return _ENTRY_HEADER.pack(offset, len(message)) + message


def encode_legacy_message_set(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    magic: int,
    base_offset: int,
    compression: int = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
) -> bytes:
    """Entries for ``(timestamp, key, value)`` records at consecutive offsets from ``base_offset``.

    Uncompressed, each record is its own entry. Compressed, they become one wrapper whose offset is
    the last record's; inner offsets are absolute for magic 0, relative for magic 1, as Kafka
    writes them.
    """
    items = list(records)
    if not items:
        raise ValueError("a message set needs at least one record")
    if magic == MAGIC_VALUE_V0:
        timestamp_type = TimestampType.CREATE_TIME  # magic 0 has no timestamps to type
    log_append = magic == MAGIC_VALUE_V1 and timestamp_type == TimestampType.LOG_APPEND_TIME

    def entries(first_offset: int) -> bytes:
        """One entry per record, at consecutive offsets from ``first_offset``."""
        return b"".join(
            encode_legacy_entry(
                offset=first_offset + i,
                magic=magic,
                key=key,
                value=value,
                timestamp=log_append_time if log_append else ts,
                timestamp_type=timestamp_type,
            )
            for i, (ts, key, value) in enumerate(items)
        )

    if compression == CompressionType.NONE:
        return entries(base_offset)
    if compression == CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError(f"zstd is not allowed with magic {magic}")
    inner = entries(base_offset if magic == MAGIC_VALUE_V0 else 0)
    wrapper_ts = (
        log_append_time if log_append else max((ts for ts, _, _ in items), default=NO_TIMESTAMP)
    )
    return encode_legacy_entry(
        offset=base_offset + len(items) - 1,
        magic=magic,
        key=None,
        value=compress(compression, inner, level=compression_level, magic=magic),
        timestamp=wrapper_ts,
        timestamp_type=timestamp_type,
        compression=compression,
    )
