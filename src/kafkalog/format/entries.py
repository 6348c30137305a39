"""The one entry walk over log bytes (Kafka's FileLogInputStream.nextBatch) and how a walk ends.

Every log entry starts ``baseOffset int64 | size int32 | ... | magic int8`` (magic at byte 16
whatever the version), so 17 bytes decide how to read it. Every walker of entries in kafkalog,
over a buffer or over a file's headers, frames entries with :func:`frame_entry`, so they agree
on what is an entry, what is a partial tail and what is corrupt:

- fewer than 17 bytes left, or an entry longer than what is left: a *partial tail*, which ends
  the walk quietly (normal while a broker appends to its active segment);
- a size below the smallest message (14 bytes after the 12-byte overhead), a magic above 2, or a
  magic 2 entry shorter than the 61-byte batch header: corruption (CorruptRecordError).

:class:`Tail` names how a walk over a region ended; :func:`classify_tail` tells a zero-filled
remainder (a preallocated file after an unclean shutdown) from a partial and a corrupt one. The
offset rule that completes the valid prefix (offsets fit int64 and increase) is
:mod:`.offsets_rule`; :mod:`kafkalog.log.segment.entry_walk` applies both to segment files.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError, KafkalogError
from .constants import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TRANSACTIONAL_FLAG_MASK,
)

__all__ = [
    "ENTRY_HEADER",
    "HEADER_PEEK",
    "EntryHeader",
    "Tail",
    "classify_tail",
    "entry_header",
    "frame_entry",
    "framed_run",
    "zeros_error",
]

ENTRY_HEADER = struct.Struct(">qi")  # baseOffset (a legacy message's own offset), size
_V2_FIELDS = struct.Struct(">hiqqqhii")  # attributes .. recordsCount, from byte 21
_I64 = struct.Struct(">q")
HEADER_PEEK = RECORD_BATCH_OVERHEAD  # bytes that hold the header of an entry of any magic


class Tail:
    """How a walk over a region ended (the ``tail`` of ``kafkalog dump --json``)."""

    NONE = "none"  # every byte belongs to a complete entry
    PARTIAL = "partial"  # an incomplete last entry: normal for an active segment
    ZEROS = "zeros"  # a zero-filled remainder, as a preallocated file leaves after a crash
    CORRUPT = "corrupt"  # bytes that cannot be an entry


def frame_entry(buf, pos: int, end: int, *, position_base: int = 0) -> tuple[int, int] | None:
    """``(size, magic)`` of the entry at ``buf[pos:]`` (size without the 12-byte overhead),
    None at a partial tail, or raise :class:`CorruptRecordError` (at position
    ``position_base + pos``) when the bytes cannot be an entry. ``end`` is where the region ends,
    in ``buf``'s positions: ``buf`` must hold at least 17 bytes from ``pos`` when ``end - pos``
    allows."""
    if end - pos <= HEADER_SIZE_UP_TO_MAGIC:  # as FileLogInputStream.nextBatch
        return None
    offset, size = ENTRY_HEADER.unpack_from(buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            position=position_base + pos,
            offset=offset,
        )
    if size > end - pos - LOG_OVERHEAD:
        return None
    magic = buf[pos + MAGIC_OFFSET]
    if magic > MAGIC_VALUE_V2:
        raise CorruptRecordError(
            f"Invalid magic {magic} (expected 0, 1 or 2)",
            position=position_base + pos,
            offset=offset,
        )
    if magic == MAGIC_VALUE_V2 and size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch size {size + LOG_OVERHEAD} is less than the record batch overhead "
            f"({RECORD_BATCH_OVERHEAD})",
            position=position_base + pos,
            offset=offset,
        )
    return size, magic


def framed_run(buf, pos: int, end: int) -> tuple[list[int], list[int]]:
    """The ends and offset fields of the entries :func:`frame_entry` frames one after another
    from ``buf[pos:]`` up to the first partial or corrupt one: its rules inlined for a run of
    entries (one call for a chunk, not one per entry; a test holds the two to each other)."""
    ends: list[int] = []
    offsets: list[int] = []
    unpack = ENTRY_HEADER.unpack_from
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        offset, size = unpack(buf, pos)
        if size < RECORD_OVERHEAD_V0 or size > end - pos - LOG_OVERHEAD:
            break
        magic = buf[pos + MAGIC_OFFSET]
        if magic > MAGIC_VALUE_V2 or (
            magic == MAGIC_VALUE_V2 and size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
        ):
            break
        pos += LOG_OVERHEAD + size
        ends.append(pos)
        offsets.append(offset)
    return ends, offsets


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """What an entry's header says, without its records: for planners and checkers that walk a
    file a header at a time. Legacy entries have Kafka's sentinels for the v2-only fields, and
    their ``last_offset`` is their own offset (a compressed wrapper's is its last inner one)."""

    position: int
    size: int  # the whole entry, overhead included
    base_offset: int
    last_offset: int
    magic: int
    attributes: int
    producer_id: int
    records_count: int  # -1 for legacy entries
    max_timestamp: int  # magic 2: maxTimestamp; magic 1: the message's timestamp; magic 0: -1

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def transactional(self) -> bool:
        return self.magic >= MAGIC_VALUE_V2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def control(self) -> bool:
        return self.magic >= MAGIC_VALUE_V2 and bool(self.attributes & CONTROL_FLAG_MASK)


def entry_header(buf, pos: int, end: int, *, position_base: int = 0) -> EntryHeader | None:
    """The header of the entry at ``buf[pos:]`` (framed by :func:`frame_entry`), None at a
    partial tail. ``buf`` must hold the entry's first 61 bytes (or all of a shorter one);
    positions in errors and in the header are ``position_base + pos``."""
    framed = frame_entry(buf, pos, end, position_base=position_base)
    if framed is None:
        return None
    size, magic = framed
    base = ENTRY_HEADER.unpack_from(buf, pos)[0]
    if magic == MAGIC_VALUE_V2:
        attributes, delta, _, max_ts, pid, _, _, count = _V2_FIELDS.unpack_from(
            buf, pos + ATTRIBUTES_OFFSET
        )
        last = base + delta
    else:
        attributes = buf[pos + LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET]
        last, pid, count, max_ts = base, NO_PRODUCER_ID, -1, NO_TIMESTAMP
        if magic == MAGIC_VALUE_V1 and size >= RECORD_OVERHEAD_V1:
            max_ts = _I64.unpack_from(buf, pos + LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET)[0]
    return EntryHeader(
        position_base + pos, LOG_OVERHEAD + size, base, last, magic, attributes, pid, count, max_ts
    )


def classify_tail(rest, error: KafkalogError | None) -> str:
    """How a walk ended, from the bytes ``rest`` it could not read as entries and the framing
    error met there (None for a partial tail)."""
    if len(rest) == 0:
        return Tail.NONE
    if _all_zero(rest):
        return Tail.ZEROS
    return Tail.PARTIAL if error is None else Tail.CORRUPT


def zeros_error(count: int, position: int) -> CorruptRecordError:
    """The finding for a zero-filled tail: only an unclean shutdown leaves one."""
    return CorruptRecordError(
        f"Found {count} zero bytes at the end (a preallocated file not trimmed after an unclean "
        f"shutdown)",
        position=position,
    )


def _all_zero(view) -> bool:
    # Compare in chunks of at most 1 MiB against a zero buffer no larger than the range.
    view = memoryview(view).cast("B") if not isinstance(view, memoryview) else view
    end = len(view)
    chunk = min(1 << 20, end)
    zeros = memoryview(bytes(chunk))
    pos = 0
    while pos < end:
        n = min(chunk, end - pos)
        if view[pos : pos + n] != zeros[:n]:
            return False
        pos += n
    return True
