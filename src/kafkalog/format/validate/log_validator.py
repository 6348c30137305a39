"""The broker's checks and offset assignment for an append as leader (Kafka's LogValidator).

:func:`validate_records` is pure: client-sent entries, the topic's config, the next offset, the
leader epoch and the time in; a :class:`ValidationResult` (bytes ready to append) out, or an error
with Kafka's code. It also makes UnifiedLog's per-batch checks (v2 base offset 0 from clients,
max.message.bytes, CRC; a partial tail is trimmed), so nothing else stands between a produce
request and the log. Three paths, as in Kafka, to avoid re-compression whenever bytes can be kept:

- uncompressed in and out, magic already the topic's: offsets, leader epoch and max timestamp are
  written into a copy of the input (only maxTimestamp and the timestamp type need a new CRC);
- uncompressed in and out, another magic: every record is rebuilt (up- or down-conversion);
- compressed in or out: the single batch is patched if codec, magic and inner offsets (0..n-1)
  already fit and the magic is not 0 (absolute inner offsets); else rebuilt with the target codec.

The usual inputs (one magic 2 batch for a magic 2 topic, compressed or not) are first offered to
the array paths (:mod:`.validator_fast`, :mod:`.validator_compressed`), which decode records into
columns instead of objects and only ever accept: anything they would reject comes here.

Per-record problems (no key in a compacted topic, timestamps out of range) are collected for the
batch and raised once as a :class:`RecordValidationError` listing ``(record index, message)``.
Down-conversion below magic 2 drops headers and non-transactional control batches, which the old
formats cannot carry (Kafka's LogValidator would fail on headers instead).
"""

from __future__ import annotations

import struct

from ...errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)
from ..batch import MutableRecordBatch, RecordBatch
from ..builder import MemoryRecordsBuilder
from ..codecs import CompressionType, decompress
from ..constants import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from ..crc import crc32
from ..record import Record
from ..records import Batch, MemoryRecords, iter_batches
from ..varint import wrap_int64
from .compressed import validate_v2_compressed
from .in_place import validate_v2_in_place, validation_result
from .types import (
    PRODUCER,
    AppendOrigin,
    InvalidTimestampError,
    LogValidatorConfig,
    RecordValidationError,
    RecordValidationStats,
    UnsupportedForMessageFormatError,
    ValidationResult,
)

__all__ = [
    "AppendOrigin",
    "InvalidTimestampError",
    "LogValidatorConfig",
    "RecordValidationError",
    "RecordValidationStats",
    "UnsupportedForMessageFormatError",
    "ValidationResult",
    "validate_records",
]

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


def validate_records(
    records: MemoryRecords | bytes | bytearray | memoryview,
    config: LogValidatorConfig,
    *,
    next_offset: int,
    partition_leader_epoch: int,
    now_ms: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    topic_partition: str = "unknown-0",
) -> ValidationResult:
    """Validate ``records`` for an append at ``next_offset`` and return the bytes to write."""
    if config.magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1, MAGIC_VALUE_V2):
        raise ValueError(f"unknown message format magic {config.magic}")
    v = _Validation(config, next_offset, partition_leader_epoch, now_ms, origin, topic_partition)
    source_view = records.buffer if isinstance(records, MemoryRecords) else memoryview(records)
    fast = _fast_path(source_view, config, v)
    if fast is not None:
        return fast
    buf, source_codec = v.analyze(source_view)
    if config.compression == PRODUCER:  # BrokerCompressionType.targetCompression
        target_codec = source_codec
    else:
        target_codec = _topic_codec(config.compression)
        v.target_level = config.compression_level
    v.target_codec = target_codec
    batches = list(iter_batches(buf))
    first = batches[0]
    if first.magic >= MAGIC_VALUE_V2 or source_codec != CompressionType.NONE:
        if len(batches) > 1:
            raise InvalidRecordError("Compressed outer record has more than one batch")
    if source_codec == CompressionType.NONE and target_codec == CompressionType.NONE:
        if all(b.magic == config.magic for b in batches):
            result = v.assign_offsets_non_compressed(buf, batches)
        else:
            result = v.rebuild(batches, [], target_codec, convert_only=True)
    else:
        result = v.validate_compressed(buf, batches, source_codec)
    if result.message_size_maybe_changed:
        for batch in iter_batches(result.validated_records):
            if batch.size_in_bytes > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"Message batch size is {batch.size_in_bytes} bytes in append to partition "
                    f"{topic_partition} which exceeds the maximum configured size of "
                    f"{config.max_message_bytes}."
                )
    return result


def _fast_path(view: memoryview, config: LogValidatorConfig, v) -> ValidationResult | None:
    """The usual appends (one v2 batch for a v2 topic, compressed or not) without a Python
    object per record; None when the input needs the general path below (or fails a check
    there). With compression.type=producer the target is the batch's own codec."""
    try:
        target = (
            CompressionType.NONE if config.compression == PRODUCER else
            _topic_codec(config.compression)
        )  # fmt: skip
    except ValueError:
        return None  # reported by the general path, in its order of checks
    where = dict(
        next_offset=v.next_offset, partition_leader_epoch=v.leader_epoch, now_ms=v.now,
        origin=v.origin,
    )  # fmt: skip
    result = validate_v2_in_place(view, config, target, **where)
    if result is None:
        result = validate_v2_compressed(view, config, target, **where)
    return result


class _Validation:
    """One call's state; methods follow LogValidator's, in the same order of checks."""

    def __init__(self, config, next_offset, leader_epoch, now_ms, origin, tp) -> None:
        self.config, self.next_offset, self.leader_epoch = config, next_offset, leader_epoch
        self.now, self.origin, self.tp = now_ms, origin, tp
        self.target_codec = CompressionType.NONE
        self.target_level: int | None = None

    @property
    def log_append(self) -> bool:
        return self.config.timestamp_type == TimestampType.LOG_APPEND_TIME

    # -- UnifiedLog.analyzeAndValidateRecords --------------------------------------------------
    def analyze(self, view: memoryview) -> tuple[bytearray, CompressionType]:
        """Whole-batch checks on the input; returns a writable copy without any partial tail."""
        valid_bytes = 0
        source_codec = CompressionType.NONE
        for batch in iter_batches(view):
            if (
                batch.magic >= MAGIC_VALUE_V2
                and self.origin == AppendOrigin.CLIENT
                and batch.base_offset != 0
            ):
                raise InvalidRecordError(
                    f"The baseOffset of the record batch in the append to {self.tp} should be 0, "
                    f"but it is {batch.base_offset}"
                )
            if batch.size_in_bytes > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {self.tp} is {batch.size_in_bytes} "
                    f"bytes which exceeds the maximum configured value of "
                    f"{self.config.max_message_bytes}."
                )
            stored, computed = batch.crc, batch.compute_checksum()
            if stored != computed:
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {stored}, computed crc = {computed}) in "
                    f"topic partition {self.tp}.",
                    position=batch.position,
                )
            valid_bytes = batch.position + batch.size_in_bytes
            if batch.compression != CompressionType.NONE:
                source_codec = batch.compression
        if valid_bytes == 0:
            raise InvalidRecordError("Record batch has no batches at all")
        return bytearray(view[:valid_bytes]), source_codec

    # -- LogValidator.validateBatch -------------------------------------------------------------
    def validate_batch(self, first: Batch, batch: Batch) -> None:
        tp, to_magic = self.tp, self.config.magic
        if first.magic != batch.magic:
            raise InvalidRecordError(
                f"Batch magic {batch.magic} is not the same as the first batch's magic byte "
                f"{first.magic} in topic partition {tp}"
            )
        has_producer_id = batch.producer_id > NO_PRODUCER_ID
        if self.origin == AppendOrigin.CLIENT:
            if batch.magic >= MAGIC_VALUE_V2:
                base, last, count = batch.base_offset, batch.last_offset, batch.count
                if last - base + 1 <= 0:
                    raise InvalidRecordError(
                        f"Batch has an invalid offset range: [{base}, {last}] in topic partition "
                        f"{tp}"
                    )
                if count <= 0:
                    raise InvalidRecordError(
                        f"Invalid reported count for record batch: {count} in topic partition {tp}"
                    )
                if last - base + 1 != count:
                    raise InvalidRecordError(
                        f"Inconsistent batch offset range [{base}, {last}] and count of records "
                        f"{count} in topic partition {tp}"
                    )
            if batch.is_control:
                raise InvalidRecordError(
                    f"Clients are not allowed to write control records in topic partition {tp}"
                )
            if has_producer_id and batch.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {batch.base_sequence} in record batch with "
                    f"producerId {batch.producer_id} in topic partition {tp}"
                )
        if batch.is_transactional and to_magic < MAGIC_VALUE_V2:
            raise UnsupportedForMessageFormatError(
                f"Transactional records cannot be used with magic version {to_magic}"
            )
        if has_producer_id and to_magic < MAGIC_VALUE_V2:
            raise UnsupportedForMessageFormatError(
                f"Idempotent records cannot be used with magic version {to_magic}"
            )

    # -- LogValidator.validateRecord ------------------------------------------------------------
    def validate_record(self, batch: Batch, record: Record, index: int) -> tuple[bool, str] | None:
        """``(is_timestamp_error, message)`` for a rejected record; raises on a bad inner CRC."""
        if batch.magic <= MAGIC_VALUE_V1 and batch.is_compressed and not record.is_valid:
            inner = _legacy_inner_entries(batch)[index]
            stored, computed = inner.crc, inner.compute_checksum()
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed})",
                position=batch.position,
            )
        if self.config.compacted and record.key is None:
            return (
                False,
                f"Compacted topic cannot accept message without key in topic partition {self.tp}",
            )
        ts = record.timestamp
        if self.config.timestamp_type == TimestampType.CREATE_TIME and ts != NO_TIMESTAMP:
            before, after = self.config.timestamp_before_max_ms, self.config.timestamp_after_max_ms
            diff = wrap_int64(self.now - ts)  # Java long arithmetic, overflow included
            if diff > before or wrap_int64(-diff) > after:
                return True, (
                    f"Timestamp {ts} of message with offset {record.offset} is out of range. The "
                    f"timestamp should be within [{wrap_int64(self.now - before)}, "
                    f"{wrap_int64(self.now + after)}]"
                )
        elif batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return True, (
                f"Invalid timestamp type in message {_describe(batch, record, index)}. Producer "
                f"should not set timestamp type to LogAppendTime."
            )
        return None

    def records_of(self, batch: Batch, first: Batch) -> list[Record]:
        """Validate ``batch`` and its records, raising the batch's record errors together."""
        self.validate_batch(first, batch)
        records = list(batch.records())
        errors = [(i, e) for i, r in enumerate(records) if (e := self.validate_record(batch, r, i))]
        if errors:
            listed = [(i, message) for i, (_, message) in errors]
            if any(is_ts for _, (is_ts, _) in errors):
                raise InvalidTimestampError(
                    "One or more records have been rejected due to invalid timestamp", errors=listed
                )
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in listed[:3])
            raise RecordValidationError(
                f"One or more records have been rejected due to {len(listed)} record errors in "
                f"total, and only showing the first three errors at most: [{shown}]",
                errors=listed,
            )
        return records

    # -- LogValidator.assignOffsetsNonCompressed ------------------------------------------------
    def assign_offsets_non_compressed(
        self, buf: bytearray, batches: list[Batch]
    ) -> ValidationResult:
        counter = self.next_offset
        max_ts, shallow = NO_TIMESTAMP, -1
        view = memoryview(buf)
        for batch in batches:
            records = self.records_of(batch, batches[0])
            counter += len(records)
            batch_max = NO_TIMESTAMP
            if batch.magic > MAGIC_VALUE_V0:
                batch_max = max([NO_TIMESTAMP, *(r.timestamp for r in records)])
                if batch_max > max_ts:
                    max_ts, shallow = batch_max, counter - 1
            ts_type = self.config.timestamp_type
            batch_max = self.now if self.log_append else batch_max
            self._patch(view, batch, counter - 1, ts_type, batch_max)
        if self.log_append:
            max_ts = self.now
            if self.config.magic == MAGIC_VALUE_V0:
                max_ts, shallow = NO_TIMESTAMP, -1
            elif self.config.magic == MAGIC_VALUE_V1:
                shallow = self.next_offset  # single-record batches all share the time
            else:
                shallow = counter - 1
        return self._result(bytes(buf), counter, max_ts, shallow, False, RecordValidationStats())

    def _patch(self, view, batch: Batch, last_offset: int, ts_type, max_ts: int) -> None:
        """Kafka's MutableRecordBatch calls on the copy: last offset, epoch, max timestamp."""
        entry = view[batch.position : batch.position + batch.size_in_bytes]
        if batch.magic >= MAGIC_VALUE_V2:
            mutable = MutableRecordBatch(entry, batch.position)
            mutable.set_last_offset(last_offset)
            mutable.set_partition_leader_epoch(self.leader_epoch)
            if mutable.timestamp_type != ts_type or mutable.max_timestamp != max_ts:
                mutable.set_max_timestamp(ts_type, max_ts)
        else:
            _I64.pack_into(entry, 0, last_offset)  # outside the message and its CRC
            if batch.magic > MAGIC_VALUE_V0:
                _set_legacy_max_timestamp(entry, ts_type, max_ts)

    # -- LogValidator.validateMessagesAndAssignOffsetsCompressed --------------------------------
    def validate_compressed(
        self, buf: bytearray, batches: list[Batch], source_codec: CompressionType
    ) -> ValidationResult:
        to_magic = self.config.magic
        first = batches[0]
        in_place = source_codec == self.target_codec
        if first.magic != to_magic or to_magic == MAGIC_VALUE_V0:
            in_place = False
        if source_codec == CompressionType.NONE and first.is_control:
            in_place = True  # control records stay uncompressed unless written compressed
        max_ts, expected_offset, uncompressed_size = NO_TIMESTAMP, 0, 0
        validated: list[Record] = []
        for batch in batches:
            records = self.records_of(batch, first)
            uncompressed_size += _batch_header_size(to_magic, batch.compression)
            for record in records:
                if batch.magic > MAGIC_VALUE_V0 and to_magic > MAGIC_VALUE_V0:
                    max_ts = max(max_ts, record.timestamp)
                    # Older clients got v1 inner offsets wrong: rewrite rather than reject.
                    if record.offset != expected_offset:
                        in_place = False
                expected_offset += 1
                uncompressed_size += record.size_in_bytes
            validated += records
        if not in_place:
            return self.rebuild(
                batches, validated, self.target_codec, uncompressed=uncompressed_size
            )
        last_offset = self.next_offset + len(validated) - 1
        if self.log_append:
            max_ts = self.now
        view = memoryview(buf)
        if first.magic >= MAGIC_VALUE_V2:
            mutable = MutableRecordBatch(view[: first.size_in_bytes])
            mutable.set_last_offset(last_offset)
            if (
                mutable.timestamp_type != self.config.timestamp_type
                or mutable.max_timestamp != max_ts
            ):
                mutable.set_max_timestamp(self.config.timestamp_type, max_ts)
            if to_magic >= MAGIC_VALUE_V2:
                mutable.set_partition_leader_epoch(self.leader_epoch)
        else:
            entry = view[: first.size_in_bytes]
            _I64.pack_into(entry, 0, last_offset)  # outside the message and its CRC
            _set_legacy_max_timestamp(entry, self.config.timestamp_type, max_ts)
        stats = RecordValidationStats(uncompressed_size, 0)
        return self._result(bytes(buf), last_offset + 1, max_ts, last_offset, False, stats)

    # -- LogValidator.convertAndAssignOffsetsNonCompressed / buildRecordsAndAssignOffsets -------
    def rebuild(
        self,
        batches: list[Batch],
        validated: list[Record],
        codec: CompressionType,
        *,
        convert_only: bool = False,
        uncompressed: int = 0,
    ) -> ValidationResult:
        to_magic = self.config.magic
        first = batches[0]
        if convert_only:
            validated = []
            for batch in batches:
                records = self.records_of(batch, first)
                if not (batch.is_control and to_magic < MAGIC_VALUE_V2):
                    validated += records
        if codec == CompressionType.ZSTD and to_magic < MAGIC_VALUE_V2:
            raise UnsupportedCompressionTypeError(
                f"ZStandard compression is not supported for magic {to_magic}"
            )
        if not validated:
            return self._result(
                b"", self.next_offset, NO_TIMESTAMP, -1, True, RecordValidationStats()
            )
        legacy = to_magic < MAGIC_VALUE_V2
        builder = MemoryRecordsBuilder(
            magic=to_magic,
            compression=codec,
            compression_level=self.target_level,
            timestamp_type=self.config.timestamp_type,
            base_offset=self.next_offset,
            log_append_time=self.now,
            producer_id=NO_PRODUCER_ID if legacy else first.producer_id,
            producer_epoch=-1 if legacy else first.producer_epoch,
            base_sequence=-1 if legacy else first.base_sequence,
            is_transactional=False if legacy else first.is_transactional,
            is_control=False if legacy else first.is_control,
            partition_leader_epoch=self.leader_epoch,
        )
        max_ts, offset_of_max = NO_TIMESTAMP, -1
        for record in validated:
            try:
                offset = builder.append(
                    timestamp=record.timestamp,
                    key=record.key,
                    value=record.value,
                    headers=() if legacy else record.headers,
                )
            except ValueError as e:  # e.g. a negative timestamp other than -1
                raise InvalidRecordError(f"{e} in topic partition {self.tp}") from None
            if to_magic > MAGIC_VALUE_V0 and record.timestamp > max_ts:
                max_ts, offset_of_max = record.timestamp, offset
        out = builder.build()
        last_offset = self.next_offset + len(validated) - 1
        one_batch = codec != CompressionType.NONE or not legacy
        if self.log_append:  # MemoryRecordsBuilder.info()
            max_ts, shallow = self.now, last_offset if one_batch else self.next_offset
        elif max_ts == NO_TIMESTAMP:
            shallow = -1
        else:
            shallow = last_offset if one_batch else offset_of_max
        uncompressed_out = len(out)
        if codec != CompressionType.NONE:  # approximated by the records' sizes as received
            raw = sum(r.size_in_bytes for r in validated)
            uncompressed_out = _batch_header_size(to_magic, codec) + raw
        stats = RecordValidationStats(uncompressed + uncompressed_out, len(validated))
        return self._result(out, last_offset + 1, max_ts, shallow, True, stats)

    def _result(self, out, next_offset, max_ts, shallow, changed, stats) -> ValidationResult:
        first, last = self.next_offset, next_offset - 1
        return validation_result(
            (out,), self.config, first, last, max_ts, shallow, self.now, stats, changed=changed
        )


def _topic_codec(compression: CompressionType | str) -> CompressionType:
    """A topic's compression.type: Kafka's names ("uncompressed" is no codec) or an id."""
    if isinstance(compression, str):
        if compression.strip().lower() == "uncompressed":
            return CompressionType.NONE
        return CompressionType.from_label(compression)
    return CompressionType(compression)


def _batch_header_size(magic: int, codec: CompressionType) -> int:
    """AbstractRecords.recordBatchHeaderSizeInBytes."""
    if magic > MAGIC_VALUE_V1:
        return RECORD_BATCH_OVERHEAD
    if codec != CompressionType.NONE:
        return LOG_OVERHEAD + (
            RECORD_OVERHEAD_V0 if magic == MAGIC_VALUE_V0 else RECORD_OVERHEAD_V1
        )
    return 0


def _set_legacy_max_timestamp(entry: memoryview, ts_type: TimestampType, timestamp: int) -> None:
    """A magic 1 message's timestamp and type, CRC-32 recomputed only if they change."""
    attributes = entry[LOG_OVERHEAD + 5]
    current_type = bool(attributes & TIMESTAMP_TYPE_MASK)
    if current_type == (ts_type == TimestampType.LOG_APPEND_TIME):
        if _I64.unpack_from(entry, LOG_OVERHEAD + 6)[0] == timestamp:
            return
    attributes &= COMPRESSION_CODEC_MASK
    if ts_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    entry[LOG_OVERHEAD + 5] = attributes
    _I64.pack_into(entry, LOG_OVERHEAD + 6, timestamp)
    _U32.pack_into(entry, LOG_OVERHEAD, crc32(entry[LOG_OVERHEAD + 4 :]))


def _legacy_inner_entries(batch) -> list:
    """The inner messages of a legacy wrapper as views (only to describe a bad one)."""
    data = decompress(batch.compression, batch.value or b"", magic=batch.magic)
    return list(iter_batches(data))


def _describe(batch: Batch, record: Record, index: int) -> str:
    """The record as Kafka's toString prints it in error messages."""
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    if isinstance(batch, RecordBatch):
        return (
            f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, key={key} "
            f"bytes, value={value} bytes)"
        )
    message = _legacy_inner_entries(batch)[index] if batch.is_compressed else batch
    stamp = f", {record.timestamp_type}={record.timestamp}" if batch.magic > 0 else ""
    return (
        f"LegacyRecordBatch(offset={record.offset}, Record(magic={message.magic}, "
        f"attributes={message.attributes}, compression={message.compression.label}, "
        f"crc={message.crc}{stamp}, key={key} bytes, value={value} bytes))"
    )
