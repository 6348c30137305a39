"""Magic 2 record batches (DefaultRecordBatch) as views over a buffer, and in-place mutation.

Header layout (big-endian; offsets from the start of the batch)::

     0 baseOffset int64          27 baseTimestamp int64 (deleteHorizonMs when attribute 0x40)
     8 length int32 (after this) 35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8 (2)            51 producerEpoch int16
    17 crc uint32                53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records (compressed as a whole when a codec is set)

The CRC-32C covers bytes 21..end, so the broker can set ``partitionLeaderEpoch`` (and
``baseOffset``) without recomputing it; changing ``maxTimestamp`` or the timestamp type does need a
new CRC (Kafka's MutableRecordBatch). A view never copies: records are decoded on demand.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ..errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType, decompress
from .constants import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_HEADER,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    MAX_TIMESTAMP_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
)
from .crc import crc32c
from .offsets_rule import check_batch_header, range_error
from .record import Record, decode_records_v2, increment_sequence

__all__ = ["MutableRecordBatch", "RecordBatch", "encode_batch_header"]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


def _field(fmt: struct.Struct, at: int, doc: str | None = None) -> property:
    """A header field read from the entry's bytes at ``at`` on each access."""
    unpack = fmt.unpack_from

    def read(entry: BatchChecks) -> int:
        return unpack(entry._buf, at)[0]

    return property(read, doc=doc)


class BatchChecks:
    """The rules every entry of a log applies alike to its ``attributes`` and stored CRC (Kafka's
    AbstractRecordBatch): a magic 2 :class:`RecordBatch` and a magic 0/1
    :class:`~kafkalog.format.legacy.LegacyBatch` supply ``attributes``, ``crc``,
    ``compute_checksum`` and the offset their errors name (:meth:`_error_offset`).

    A view over ``buf``, one entry's bytes; ``position`` is where the entry starts in its file or
    buffer, for error messages. Building a view checks only the size (:meth:`_opened`)."""

    __slots__ = ("_buf", "_max_decompressed_size", "position")

    def __init__(
        self,
        buf: memoryview,
        position: int = 0,
        *,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._buf = buf
        self.position = position
        self._max_decompressed_size = max_decompressed_size
        self._opened()

    def _opened(self) -> None:
        """Once the fields are set: the entry's size check (and what the view caches)."""
        raise NotImplementedError

    # The largest codec id the format allows.
    _MAX_CODEC: CompressionType = CompressionType.ZSTD

    def _codec_message(self, codec: int) -> str:
        return f"Unknown compression type id {codec} in batch attributes"

    def _error_offset(self) -> int:
        raise NotImplementedError

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_compressed(self) -> bool:
        return self.compression_id != CompressionType.NONE

    @property
    def compression(self) -> CompressionType:
        codec = self.compression_id
        if codec > self._MAX_CODEC:
            raise UnsupportedCompressionTypeError(
                self._codec_message(codec), position=self.position, offset=self._error_offset()
            )
        return CompressionType(codec)

    @property
    def is_valid(self) -> bool:
        return self.crc == self.compute_checksum()

    def ensure_valid(self) -> None:
        """Kafka's ensureValid: the stored CRC is the computed one."""
        stored, computed = self.crc, self.compute_checksum()
        if stored != computed:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed})",
                position=self.position,
                offset=self._error_offset(),
            )


class RecordBatch(BatchChecks):
    """A read-only view over one magic 2 batch: ``buf`` holds exactly the batch's bytes.

    ``position`` is where the batch starts in its file or buffer, for error messages. Building a
    view checks only the size; :meth:`ensure_valid` checks the CRC, and :meth:`records` the records.
    """

    __slots__ = ()

    def _opened(self) -> None:
        size = len(self._buf)
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch size {size} is less than the record batch overhead "
                f"({RECORD_BATCH_OVERHEAD})",
                position=self.position,
            )

    # -- header fields ---------------------------------------------------------------------------
    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (a view, not a copy)."""
        return self._buf

    base_offset = _field(_I64, 0)
    partition_leader_epoch = _field(_I32, PARTITION_LEADER_EPOCH_OFFSET)
    crc = _field(_U32, CRC_OFFSET)
    attributes = _field(_I16, ATTRIBUTES_OFFSET)
    last_offset_delta = _field(_I32, LAST_OFFSET_DELTA_OFFSET)
    base_timestamp = _field(_I64, BASE_TIMESTAMP_OFFSET)
    max_timestamp = _field(_I64, MAX_TIMESTAMP_OFFSET)
    producer_id = _field(_I64, PRODUCER_ID_OFFSET)
    producer_epoch = _field(_I16, PRODUCER_EPOCH_OFFSET)
    base_sequence = _field(_I32, BASE_SEQUENCE_OFFSET)
    count = _field(
        _I32,
        RECORDS_COUNT_OFFSET,
        "The stored records count (0 for a batch emptied by compaction).",
    )
    records_count = count

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    @property
    def magic(self) -> int:
        return self._buf[16]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base, self.last_offset_delta)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by the log cleaner on batches holding tombstones; then it replaces baseTimestamp."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    def header(self) -> tuple:
        """All header fields at once (cheaper than one property at a time)."""
        return BATCH_HEADER.unpack_from(self._buf, 0)

    # -- validity --------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        return crc32c(self._buf[ATTRIBUTES_OFFSET:])

    def _error_offset(self) -> int:
        return self.base_offset

    # -- records ---------------------------------------------------------------------------------
    def records_buffer(self) -> memoryview | bytes:
        """The records section, decompressed if the batch is compressed."""
        section = self._buf[RECORDS_OFFSET:]
        if not self.is_compressed:
            return section
        # Inflated even with a count of 0: records hidden behind the count are found (the fast
        # path's kernels do the same).
        try:
            return decompress(
                self.compression,
                section,
                magic=MAGIC_VALUE_V2,
                max_size=self._max_decompressed_size,
            )
        except CorruptRecordError as e:
            raise CorruptRecordError(
                f"Records of the batch at position {self.position} cannot be decompressed: "
                f"{e.message}",
                position=self.position,
                offset=self.base_offset,
            ) from None

    def check_offsets(self) -> None:
        """The offset rule (:mod:`.offsets_rule`) on this batch alone: baseOffset to
        baseOffset + lastOffsetDelta must fit a log's offsets (the baseOffset is outside the
        CRC), else CorruptRecordError. :meth:`records` checks it first, as the fast path does."""
        base = self.base_offset
        error = range_error(base, base + self.last_offset_delta, position=self.position)
        if error is not None:
            raise error

    def records(self) -> Iterator[Record]:
        """Decode the records on demand; errors name this batch's position and base offset.
        The offset rule comes first (:meth:`check_offsets`), and each record's offset must fit
        a log's too."""
        (
            base_offset,
            _,
            _,
            _,
            _,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            _,
            _,
            base_seq,
            count,
        ) = self.header()
        error = range_error(base_offset, base_offset + last_delta, position=self.position)
        if error is not None:
            raise error
        if count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {count} in batch at position {self.position}",
                position=self.position,
                offset=base_offset,
            )
        if last_delta < 0 or count > last_delta + 1:  # the header rule, as the fast path words it
            check_batch_header(base_offset, last_delta, count, 0, True, position=self.position)
        data = self.records_buffer()
        compressed = self.is_compressed
        try:
            records = decode_records_v2(
                data,
                count=count,
                base_offset=base_offset,
                last_offset_delta=last_delta,
                base_timestamp=base_ts,
                max_timestamp=max_ts,
                timestamp_type=(
                    TimestampType.LOG_APPEND_TIME
                    if attributes & TIMESTAMP_TYPE_MASK
                    else TimestampType.CREATE_TIME
                ),
                base_sequence=base_seq,
                is_control=bool(attributes & CONTROL_FLAG_MASK),
                # Positions inside compressed data mean nothing in the file: name the batch.
                position_base=0 if compressed else self.position + RECORDS_OFFSET,
            )
            # Record offsets lie within the batch's (record.py's rule), which fit a log's (above).
            yield from records
        except (CorruptRecordError, InvalidRecordError) as e:
            if compressed:
                e.message = (
                    f"{e.message} (byte offset within the decompressed records of the batch at "
                    f"position {self.position})"
                )
                e.position = self.position
            raise e.located(position=self.position, offset=base_offset) from None

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        return (
            f"RecordBatch(position={self.position}, baseOffset={self.base_offset}, "
            f"lastOffset={self.last_offset}, count={self.count}, size={self.size_in_bytes})"
        )


class MutableRecordBatch(RecordBatch):
    """A batch over a writable buffer, for the broker's in-place offset assignment."""

    __slots__ = ()

    def __init__(self, buf, position: int = 0, **kwargs) -> None:
        view = memoryview(buf)
        if view.readonly:
            raise TypeError("MutableRecordBatch needs a writable buffer (bytearray, mmap)")
        super().__init__(view, position, **kwargs)

    def set_last_offset(self, last_offset: int) -> None:
        """Move the batch to end at ``last_offset`` (baseOffset is outside the CRC)."""
        _I64.pack_into(self._buf, 0, last_offset - self.last_offset_delta)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I32.pack_into(self._buf, PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp_type: TimestampType, max_timestamp: int) -> None:
        """Set the timestamp type and max timestamp, recomputing the CRC (both are inside it)."""
        attributes = self.attributes & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        _I16.pack_into(self._buf, ATTRIBUTES_OFFSET, attributes)
        _I64.pack_into(self._buf, MAX_TIMESTAMP_OFFSET, max_timestamp)
        _U32.pack_into(self._buf, CRC_OFFSET, self.compute_checksum())


def encode_batch_header(
    *,
    base_offset: int,
    length: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    records_count: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    records: bytes = b"",
) -> bytes:
    """A whole v2 batch from its fields and (already compressed) records section, CRC computed.

    ``length`` is checked against the records so a caller cannot write an inconsistent batch.
    """
    if length != RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records):
        raise ValueError(f"batch length {length} does not match {len(records)} bytes of records")
    out = bytearray(
        BATCH_HEADER.pack(
            base_offset,
            length,
            partition_leader_epoch,
            MAGIC_VALUE_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
    )
    out += records
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    max_timestamp: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """An empty batch, as the log cleaner writes to keep a producer's state (writeEmptyHeader)."""
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    base_ts = NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
    return encode_batch_header(
        base_offset=base_offset,
        length=RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
        attributes=attributes & ~COMPRESSION_CODEC_MASK,
        last_offset_delta=last_offset - base_offset,
        base_timestamp=base_ts,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=0,
        partition_leader_epoch=partition_leader_epoch,
    )


__all__ += ["empty_batch"]
