"""The offset rule of a log entry: its offsets fit int64, and they increase through a log.

Kafka's offsets are int64 and increase strictly through a log; a v2 batch's last offset is
``baseOffset + lastOffsetDelta`` and a log's next offset is that plus one, so it must fit int64
too: an entry's last offset is at most 2^63 - 2. The baseOffset field is not covered by the
batch's CRC (the broker writes it after the producer computed the CRC), so a damaged one is only
ever caught by this rule. Four errors, worded the same by every reader of entries (the
record-at-a-time views :mod:`.batch` and :mod:`.legacy` and :mod:`.record`'s decoder, the
columnar fast path's driver and both of its kernel twins, the header walk of
:mod:`kafkalog.log.segment.entry_walk`, which reads no record):

- *overflow*: the entry's offsets pass a 64-bit offset (a v2 batch's baseOffset +
  lastOffsetDelta, a legacy wrapper's absolute inner offsets);
- *negative*: its first offset is below 0;
- *decrease* (log reads only: client produce requests may all carry baseOffset 0): its first
  offset is not above the previous entry's last offset;
- *record offset* (:func:`record_offset_message`): a v2 batch's record offset deltas increase
  within ``[0, lastOffsetDelta]``. The CRC covers them, so only a writer's bug breaks this; Kafka's
  consumer would silently drop a record whose offset goes back, and one past the batch's last
  offset would be read again at the next fetch position.

Legacy (magic 0/1) entries take their offset field as both first and last offset (a compressed
wrapper's is its last inner one), as Kafka's shallow iteration does.

A v2 batch's header must also agree with itself (:func:`check_batch_header`, Kafka's
DefaultRecordBatch): rules on lastOffsetDelta, recordsCount and the batch's size that need no
record decoded, so that a walker of headers (``kafkalog stats``, the planner's header walk,
``verify``) refuses a count no consumer could read.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, InvalidRecordError
from .constants import MIN_V2_RECORD_SIZE, RECORD_BATCH_OVERHEAD

__all__ = [
    "MAX_LAST_OFFSET",
    "check_batch_header",
    "check_entry_offsets",
    "decrease_error",
    "range_error",
    "record_offset_message",
]

INT64_MAX = (1 << 63) - 1
MAX_LAST_OFFSET = INT64_MAX - 1
"""The largest last offset an entry may have: the log's next offset (last + 1) must fit int64."""

_DAMAGED = "the baseOffset field, which the CRC does not cover, is damaged"


def range_error(base: int, last: int, *, position: int | None, offset: int | None = None):
    """The error for offsets ``base``..``last`` (exact integers) outside a log's range, or None
    when they are inside it. ``offset`` (the error's offset) defaults to ``base``."""
    where = base if offset is None else offset
    if last > MAX_LAST_OFFSET or base > MAX_LAST_OFFSET:
        return CorruptRecordError(
            f"Batch offsets {base} to {last} overflow a 64-bit offset ({_DAMAGED})",
            position=position,
            offset=where,
        )
    if base < 0:
        return CorruptRecordError(
            f"Batch offsets {base} to {last} are negative: a log's offsets start at 0 ({_DAMAGED})",
            position=position,
            offset=where,
        )
    return None


def decrease_error(
    base: int, previous_last: int, *, position: int | None, offset: int | None = None
) -> CorruptRecordError:
    """The error for an entry starting at ``base`` after one that ended at ``previous_last``."""
    return CorruptRecordError(
        f"Batch baseOffset {base} is not above the previous batch's last offset {previous_last}: "
        f"offsets must increase through a log",
        position=position,
        offset=base if offset is None else offset,
    )


def record_offset_message(delta: int, previous: int, last_offset_delta: int, position: int) -> str:
    """The message for a record at ``position`` whose offset delta ``delta`` does not follow the
    previous record's ``previous`` (-1 for a batch's first) within ``[0, last_offset_delta]``."""
    if delta > last_offset_delta and delta > previous:
        return (
            f"Record offset delta {delta} at position {position} is past the batch's "
            f"lastOffsetDelta {last_offset_delta}: a batch's records lie within its offsets"
        )
    if previous < 0:
        return (
            f"Record offset delta {delta} at position {position} is negative: a record's offset "
            f"is at or above its batch's baseOffset"
        )
    return (
        f"Record offset delta {delta} at position {position} is not above the previous "
        f"record's {previous}: record offsets increase within a batch"
    )


def check_entry_offsets(
    base: int,
    last: int,
    previous_last: int | None,
    *,
    position: int | None,
    offset: int | None = None,
) -> None:
    """Raise CorruptRecordError unless an entry with offsets ``base``..``last`` (exact integers:
    a v2 batch's baseOffset and baseOffset + lastOffsetDelta, a legacy entry's offset twice) may
    follow an entry whose last offset was ``previous_last`` (None: the first entry, or the
    decrease check not wanted). ``position`` is the entry's; ``offset`` the error's offset
    (default: ``base``)."""
    error = range_error(base, last, position=position, offset=offset)
    if error is not None:
        raise error
    if previous_last is not None and base <= previous_last:
        raise decrease_error(base, previous_last, position=position, offset=offset)


def check_batch_header(
    base: int,
    last_offset_delta: int,
    records_count: int,
    size: int,
    compressed: bool,
    *,
    position: int | None,
    offset: int | None = None,
) -> None:
    """Raise unless a magic 2 batch's header agrees with itself (Kafka's DefaultRecordBatch):

    - ``lastOffsetDelta >= 0`` (a batch's last offset is at or above its base offset);
    - ``0 <= recordsCount`` (InvalidRecordError, Kafka's "Found invalid record count");
    - ``recordsCount <= lastOffsetDelta + 1``: records have distinct offset deltas in
      ``[0, lastOffsetDelta]`` (compaction may leave fewer records, never more);
    - uncompressed, ``recordsCount <= (size - 61) / 7``: the smallest record takes 7 bytes
      (length, attributes, timestampDelta, offsetDelta, keyLength, valueLength and headerCount
      varints of one byte each).

    ``size`` is the whole batch (its 12-byte log overhead included), ``base`` its baseOffset;
    ``position`` the batch's, ``offset`` the error's offset (default: ``base``). No record is
    decoded: these rules are for walkers of headers as much as for decoders.
    """
    where = base if offset is None else offset
    if last_offset_delta < 0:
        raise CorruptRecordError(
            f"Batch lastOffsetDelta {last_offset_delta} is negative: a batch's last offset is "
            f"at or above its base offset {base}",
            position=position,
            offset=where,
        )
    if records_count < 0:
        raise InvalidRecordError(
            f"Found invalid record count {records_count} in magic v2 batch",
            position=position,
            offset=where,
        )
    if records_count > last_offset_delta + 1:
        raise CorruptRecordError(
            f"Batch records count {records_count} is more than the {last_offset_delta + 1} "
            f"offsets {base}..{base + last_offset_delta} it spans (lastOffsetDelta "
            f"{last_offset_delta}): records have distinct offsets",
            position=position,
            offset=where,
        )
    if not compressed:
        room = max(size - RECORD_BATCH_OVERHEAD, 0) // MIN_V2_RECORD_SIZE
        if records_count > room:
            raise CorruptRecordError(
                f"Batch records count {records_count} does not fit the batch's {size} bytes: "
                f"uncompressed, they hold at most {room} records of at least "
                f"{MIN_V2_RECORD_SIZE} bytes each",
                position=position,
                offset=where,
            )
