"""LogValidator's hot path without a Python object per record: one uncompressed magic 2 batch
appended to a magic 2 topic that keeps it uncompressed (what producers send by default).

Kafka assigns offsets in place there (assignOffsetsNonCompressed): the batch's CRC, its header
checks, each record's key (compacted topics) and timestamp (the topic's bounds), then base offset,
leader epoch and max timestamp are written into the header. Here the header comes from one
unpack (:mod:`.validator_scan`), and the records from one call of the validation-only kernel
(``validate_records_v2``: the decoder's framing rules, but nothing copied per record), which
returns all the checks need: the timestamp range, null keys, and the bytes its walk consumed.

:func:`validate_v2_in_place` only *accepts*: whenever the batch would fail a check, or is not
this case, it returns None and :func:`kafkalog.format.validate.log_validator.validate_records`
takes the general path, which raises Kafka's error with Kafka's wording (or handles the other
cases). So the two paths cannot disagree on an error's text, only on speed.
"""

from __future__ import annotations

import struct

import numpy as np

from ..batch import MutableRecordBatch
from ..codecs import CompressionType
from ..columnar import kernel_abi as A
from ..columnar import kernels
from ..constants import (
    CRC_OFFSET,
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from ..crc import crc32c
from .scan import V2Header, scan_v2_batches
from .types import (
    LONG_MAX,
    AppendOrigin,
    LogValidatorConfig,
    RecordValidationStats,
    ValidationResult,
)

__all__ = [
    "client_header_ok",
    "out_of_bounds",
    "patched_batch",
    "range_within_bounds",
    "validate_v2_in_place",
    "validation_result",
]

_U32 = struct.Struct(">I")
_LONG_MIN = -LONG_MAX - 1
_CODEC_MASK = 0x07


def validate_v2_in_place(
    view: memoryview,
    config: LogValidatorConfig,
    target_codec: CompressionType,
    *,
    next_offset: int,
    partition_leader_epoch: int,
    now_ms: int,
    origin: AppendOrigin,
) -> ValidationResult | None:
    """The validated batch with offsets from ``next_offset``, or None for the general path."""
    if config.magic != MAGIC_VALUE_V2 or target_codec != CompressionType.NONE:
        return None
    if view.format != "B" or view.ndim != 1:
        return None
    if len(view) > 22 and view[22] & _CODEC_MASK:
        return None  # compressed: checked before the CRC pass, which the compressed path makes
    headers = scan_v2_batches(view)  # also: one whole batch, valid CRC
    if headers is None or len(headers) != 1:
        return None
    h = headers[0]
    if h.attributes & (_CODEC_MASK | TIMESTAMP_TYPE_MASK) or h.size > config.max_message_bytes:
        return None  # compressed, or typed LogAppendTime by the client: the general path
    if origin == AppendOrigin.CLIENT and not client_header_ok(h):
        return None
    if h.count < 0:
        return None  # the general path says what is wrong with it
    walk = kernels.validate_records_v2(
        view,
        RECORDS_OFFSET,
        h.size,
        h.count,
        h.base_timestamp,
        h.max_timestamp,
        False,
        h.last_offset_delta,
    )
    if walk[0] != A.END or walk[1] != h.size:
        return None
    lowest, highest, null_keys = walk[6], walk[7], walk[8]
    if config.compacted and null_keys:
        return None
    log_append = config.timestamp_type == TimestampType.LOG_APPEND_TIME
    if not log_append and not range_within_bounds(lowest, highest, config, now_ms):
        return None
    batch_max = max(NO_TIMESTAMP, highest)
    last_offset = next_offset + h.count - 1
    out = patched_batch(view, last_offset, partition_leader_epoch, config.timestamp_type,
                  now_ms if log_append else batch_max)  # fmt: skip
    if log_append:
        max_ts, shallow = now_ms, last_offset
    elif batch_max > NO_TIMESTAMP:
        max_ts, shallow = batch_max, last_offset
    else:
        max_ts, shallow = NO_TIMESTAMP, -1
    return validation_result(
        out, config, next_offset, last_offset, max_ts, shallow, now_ms, RecordValidationStats(),
        changed=False,
    )  # fmt: skip


def validation_result(
    parts: tuple, config: LogValidatorConfig, first: int, last: int, max_ts: int, shallow: int,
    now_ms: int, stats: RecordValidationStats, *, changed: bool,
) -> ValidationResult:  # fmt: skip
    """The result of an append at offsets ``first..last`` (LogAppendTime reported as ``now_ms``
    for a LogAppendTime topic)."""
    log_append = config.timestamp_type == TimestampType.LOG_APPEND_TIME
    return ValidationResult(
        validated_parts=parts,
        first_offset=first,
        last_offset=last,
        max_timestamp=max_ts,
        shallow_offset_of_max_timestamp=shallow,
        log_append_time_ms=now_ms if log_append else NO_TIMESTAMP,
        message_size_maybe_changed=changed,
        record_validation_stats=stats,
    )


def client_header_ok(h: V2Header) -> bool:
    """LogValidator.validateBatch's checks on a client's batch, all passing."""
    count_from_offsets = h.last_offset_delta + 1
    has_producer_id = h.producer_id > NO_PRODUCER_ID
    return (
        h.base_offset == 0  # UnifiedLog.analyzeAndValidateRecords
        and count_from_offsets > 0
        and h.count > 0
        and count_from_offsets == h.count
        and not h.is_control
        and not (has_producer_id and h.base_sequence < 0)
    )


def range_within_bounds(lowest: int, highest: int, config: LogValidatorConfig, now_ms: int) -> bool:
    """Whether every record timestamp in ``lowest..highest`` (both -1: none set) is within the
    topic's message.timestamp.before/after.max.ms; False also when a Java long difference
    could wrap, where the extremes alone do not decide (the general path then checks each)."""
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    if (before >= LONG_MAX and after >= LONG_MAX) or highest == NO_TIMESTAMP:
        return True  # Kafka's defaults (no long difference exceeds them), or nothing to check
    if now_ms - highest <= _LONG_MIN or now_ms - lowest >= LONG_MAX:
        return False
    return now_ms - lowest <= before and highest - now_ms <= after


def out_of_bounds(
    timestamps: np.ndarray, highest: int, config: LogValidatorConfig, now_ms: int
) -> bool:
    """Any record timestamp outside the topic's message.timestamp.before/after.max.ms, in Java
    long arithmetic as Kafka's (-1, no timestamp, is not checked). ``highest``: the largest."""
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    if before >= LONG_MAX and after >= LONG_MAX:
        return False  # Kafka's defaults: no long difference exceeds them
    if not len(timestamps):
        return False
    lowest = int(timestamps.min())
    if lowest == NO_TIMESTAMP:
        stamped = timestamps[timestamps != NO_TIMESTAMP]
        if not len(stamped):
            return False
        lowest, highest = int(stamped.min()), int(stamped.max())
    if now_ms - highest > _LONG_MIN and now_ms - lowest < LONG_MAX:
        # No difference wraps: the extremes decide (now - ts > before, ts - now > after).
        return now_ms - lowest > before or highest - now_ms > after
    stamped = timestamps[timestamps != NO_TIMESTAMP]
    with np.errstate(over="ignore"):
        diff = np.int64(now_ms) - stamped  # wraps, as Java's long subtraction
        return bool((diff > before).any() or ((-diff) > after).any())


def patched_batch(
    view: memoryview, last_offset: int, epoch: int, ts_type: TimestampType, max_ts: int
) -> tuple[bytes, memoryview]:
    """The batch after Kafka's in-place assignment (MutableRecordBatch calls on its header),
    without copying its records: a patched copy of the header, and a view of the records."""
    head = bytearray(view[:RECORDS_OFFSET])
    batch = MutableRecordBatch(head)
    batch.set_last_offset(last_offset)
    batch.set_partition_leader_epoch(epoch)
    records = view[RECORDS_OFFSET:]
    if batch.timestamp_type != ts_type or batch.max_timestamp != max_ts:
        batch.set_max_timestamp(ts_type, max_ts)  # its CRC covers the header alone: redone
        _U32.pack_into(head, CRC_OFFSET, crc32c(records, crc32c(memoryview(head)[21:])))
    return bytes(head), records
