"""LogValidator's compressed path without a Python object per record: one magic 2 batch appended
to a magic 2 topic when it is compressed, or the topic compresses (validateMessagesAndAssign-
OffsetsCompressed).

When the topic keeps the producer's codec and the records' offsets run 0..n-1, Kafka only
decompresses the records to check them (each key on a compacted topic, each timestamp against the
topic's bounds, their count against the header's) and then patches the header in place: last
offset, max timestamp (or LogAppendTime), partition leader epoch and the CRC, never recompressing.
Here the records are decompressed and walked by the columnar kernels into arrays
(:mod:`.validator_records`), the checks are array operations, and the header patch is the
uncompressed fast path's (:func:`.validator_fast.patched_batch`).

Otherwise (another codec, or inner offsets to rewrite) Kafka rebuilds the batch with
MemoryRecordsBuilder: here the decoded columns go to the columnar encoder
(:func:`kafkalog.format.columnar.encode_columnar`), which writes byte for byte what the builder
writes (same record framing, same codec levels and framing, one batch), with the first batch's
producer id, epoch, base sequence and transactional flag, the topic's timestamp type and the
leader's epoch and offsets.

Like :mod:`.validator_fast`, :func:`validate_v2_compressed` only *accepts*: whenever a check
would fail, or the input is anything else (legacy, control batches, a codec the encoder would not
write as the builder does), it returns None and the general path answers, in Kafka's words.
"""

from __future__ import annotations

import numpy as np

from ..codecs import CompressionType
from ..columnar import current_records, encode_columnar, v2_compressed_columns, v2_record_columns
from ..constants import (
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
)
from .in_place import client_header_ok, out_of_bounds, patched_batch, validation_result
from .scan import V2Header, scan_v2_batches
from .types import (
    PRODUCER,
    AppendOrigin,
    LogValidatorConfig,
    RecordValidationStats,
    ValidationResult,
)

__all__ = ["validate_v2_compressed"]

_CODEC_MASK = 0x07
_LARGEST_BATCH = (1 << 31) - 1  # batch_bytes for the encoder: every record in one batch


def validate_v2_compressed(
    view: memoryview,
    config: LogValidatorConfig,
    target_codec: CompressionType,
    *,
    next_offset: int,
    partition_leader_epoch: int,
    now_ms: int,
    origin: AppendOrigin,
) -> ValidationResult | None:
    """The validated batch with offsets from ``next_offset``, or None for the general path.
    ``target_codec``: the topic's codec (the batch's own when the topic keeps the producer's)."""
    if config.magic != MAGIC_VALUE_V2 or view.format != "B" or view.ndim != 1:
        return None
    headers = scan_v2_batches(view)  # also: one whole batch, valid CRC
    if headers is None or len(headers) != 1:
        return None
    h = headers[0]
    source_codec = h.attributes & _CODEC_MASK
    if config.compression == PRODUCER:
        target_codec = CompressionType(source_codec) if source_codec <= 4 else target_codec
    if source_codec > 4 or (source_codec == target_codec == CompressionType.NONE):
        return None  # an unknown codec (the general path names it), or validator_fast's case
    if h.attributes & TIMESTAMP_TYPE_MASK or h.is_control or h.count <= 0:
        return None  # typed LogAppendTime by the client, a control batch, no records
    if h.size > config.max_message_bytes:
        return None
    if origin == AppendOrigin.CLIENT and not client_header_ok(h):
        return None
    if source_codec == CompressionType.NONE:
        columns = v2_record_columns(view, h.count, copy=False)
        records_size = h.size - RECORD_BATCH_OVERHEAD
    else:
        decoded = v2_compressed_columns(view, h)
        if decoded is None:
            return None
        columns, records_size = decoded
    if columns is None:
        return None
    timestamps = columns.timestamps
    if config.compacted and not columns.key_present.all():
        return None
    log_append = config.timestamp_type == TimestampType.LOG_APPEND_TIME
    highest = max(NO_TIMESTAMP, int(timestamps.max()))
    if not log_append and out_of_bounds(timestamps, highest, config, now_ms):
        return None
    last_offset = next_offset + h.count - 1
    uncompressed = RECORD_BATCH_OVERHEAD + records_size  # Kafka's uncompressedSizeInBytes
    in_place = source_codec == target_codec and _offsets_from_zero(columns.offsets)
    if in_place:
        max_ts = now_ms if log_append else highest
        parts = patched_batch(view, last_offset, partition_leader_epoch,
                              config.timestamp_type, max_ts)  # fmt: skip
        return validation_result(
            parts, config, next_offset, last_offset, max_ts, last_offset, now_ms,
            RecordValidationStats(uncompressed, 0), changed=False,
        )  # fmt: skip
    if int(timestamps.min()) < NO_TIMESTAMP:
        return None  # the builder refuses it: the general path words the error
    level = None if config.compression == PRODUCER else config.compression_level
    out = _rebuild(h, CompressionType(target_codec), level, config, next_offset,
                   partition_leader_epoch, now_ms)  # fmt: skip
    if out is None or len(out) > config.max_message_bytes:
        return None
    if log_append:
        max_ts, shallow = now_ms, last_offset
    else:
        max_ts, shallow = highest, (last_offset if highest > NO_TIMESTAMP else -1)
    written = uncompressed if target_codec != CompressionType.NONE else len(out)
    stats = RecordValidationStats(uncompressed + written, h.count)
    return validation_result(
        (bytes(out),), config, next_offset, last_offset, max_ts, shallow, now_ms, stats,
        changed=True,
    )  # fmt: skip


def _offsets_from_zero(offsets: np.ndarray) -> bool:
    """Inner offsets 0..n-1 (what in-place assignment needs; Kafka rebuilds otherwise)."""
    return bool(np.array_equal(offsets, np.arange(len(offsets), dtype=offsets.dtype)))


def _rebuild(
    h: V2Header,
    codec: CompressionType,
    level: int | None,
    config: LogValidatorConfig,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
) -> bytearray | None:
    """buildRecordsAndAssignOffsets: the records of this thread's last decode as one new batch,
    as MemoryRecordsBuilder writes it; None when the encoder refuses (the general path says why)."""
    transactional = bool(h.attributes & TRANSACTIONAL_FLAG_MASK)
    if transactional and h.producer_id == NO_PRODUCER_ID:
        return None
    records = current_records()
    try:
        out = encode_columnar(
            records.column(3),
            records.column(4),
            records.column(1),
            records.column(5),
            base_offset=next_offset,
            compression=codec,
            compression_level=level,
            timestamp_type=config.timestamp_type,
            log_append_time=now_ms,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=transactional,
            partition_leader_epoch=leader_epoch,
            batch_bytes=_LARGEST_BATCH,
        )
    except (ValueError, TypeError):
        return None
    return out if len(scan_v2_batches(memoryview(out), check_crc=False) or ()) == 1 else None
