"""A segment's ``.timeindex`` file: sparse map from timestamps to offsets (TimeIndex.java).

Entry layout (12 bytes, big-endian)::

    0  i64  timestamp         the largest timestamp seen up to ...
    8  i32  relative offset   ... this offset (minus the segment base offset)

Invariants: timestamps strictly increase (an entry is only added when its timestamp exceeds the
last), offsets never decrease; an entry (T, O) means every record with timestamp > T comes after
offset O. The last slot is kept free for the entry written when the segment rolls, so the index
is full one entry early. Magic-0 logs have no timestamps, hence an empty time index.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ..format.constants import NO_TIMESTAMP
from .errors import InvalidOffsetError
from .file_cache import FileCache
from .index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex

__all__ = ["TimeIndex", "TimestampOffset"]

_ENTRY = struct.Struct(">qi")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimestampOffset:
    """A time index entry, offset absolute (Kafka's TimestampOffset)."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """The ``.timeindex`` of one segment; read-only unless ``writable=True``."""

    ENTRY_SIZE = 12
    KIND = "time index"
    _RELATIVE_OFFSET_AT = 8
    _KEY = struct.Struct(">q")

    def __init__(
        self,
        file: str | os.PathLike,
        base_offset: int,
        *,
        writable: bool = False,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        skip_zero_tail: bool = False,
        file_cache: FileCache | None = None,
    ) -> None:
        self._last_entry = TimestampOffset(timestamp=NO_TIMESTAMP, offset=base_offset)
        super().__init__(
            file,
            base_offset,
            writable=writable,
            max_index_size=max_index_size,
            skip_zero_tail=skip_zero_tail,
            file_cache=file_cache,
        )

    # -- reading --------------------------------------------------------------------------------

    def _load_last_entry(self) -> None:
        if self._entries == 0:
            self._last_entry = TimestampOffset(timestamp=NO_TIMESTAMP, offset=self._base_offset)
        else:
            self._last_entry = self._parse_entry(self._entries - 1)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry; (NO_TIMESTAMP, base offset) when empty."""
        return self._last_entry

    def is_full(self) -> bool:
        """Full one entry early: the last slot is reserved for the entry written at roll."""
        return self._entries >= self._max_entries - 1

    def _parse_entry(self, n: int) -> TimestampOffset:
        timestamp, relative = _ENTRY.unpack_from(self._buffer(), n * 12)
        return TimestampOffset(timestamp=timestamp, offset=self._base_offset + relative)

    def _timestamp_at(self, n: int) -> int:
        return _ENTRY.unpack_from(self._buffer(), n * 12)[0]

    def _offset_at(self, n: int) -> int:
        return self._base_offset + _ENTRY.unpack_from(self._buffer(), n * 12)[1]

    def entry(self, n: int) -> TimestampOffset:
        """The n-th entry; IndexError outside 0..entries-1."""
        with self._lock:
            self._check_entry_number(n)
            return self._parse_entry(n)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``; (NO_TIMESTAMP, base
        offset) when the index is empty or the target is below its first timestamp."""
        with self._lock:
            slot = self._key_slot(target_timestamp)
            if slot == -1:
                return TimestampOffset(timestamp=NO_TIMESTAMP, offset=self._base_offset)
            return self._parse_entry(slot)

    def sanity_check(self) -> None:
        """Kafka's rules: in a non-empty index the last timestamp may not be below the first,
        nor the last offset below the base offset; the length must be a multiple of 12."""
        with self._lock:
            last = self._last_entry
            if self._entries != 0:
                first_timestamp = self._timestamp_at(0)
                if last.timestamp < first_timestamp:
                    raise self._corrupt(
                        f"the index has non-zero size but the last timestamp is {last.timestamp}, "
                        f"which is less than the first timestamp {first_timestamp}",
                        entry=self._entries - 1,
                    )
                if last.offset < self._base_offset:
                    raise self._corrupt(
                        f"the index has non-zero size but the last offset is {last.offset}, "
                        f"which is less than the base offset {self._base_offset}",
                        entry=self._entries - 1,
                    )
            if self._length % self.ENTRY_SIZE != 0:
                raise self._corrupt(
                    f"found {self._length} bytes, which is not a multiple of {self.ENTRY_SIZE}"
                )

    def check_entries(self, end_offset: int | None = None) -> None:
        """kafkalog's rules beyond Kafka's sanity check (docs/reading.md: indexes are hints):
        timestamps and offsets never decrease, offsets are at least the base offset and below
        ``end_offset`` (the next segment's base offset), when given. Raises
        :class:`CorruptIndexError` naming the first entry that breaks one."""
        columns = self._columns(">i8,>i4")
        if len(columns) == 0:
            return
        timestamps, relative = columns["f0"], columns["f1"]
        checks = (
            (self._first_break(timestamps, strict=False), "timestamps decrease"),
            (self._first_break(relative, strict=False), "offsets decrease"),
        )
        for entry, rule in checks:
            if entry is not None:
                raise self._corrupt(rule, entry=entry)
        if relative[0] < 0:
            raise self._corrupt("an offset below the base offset", entry=0)
        last = len(columns) - 1
        if end_offset is not None and self._base_offset + int(relative[last]) >= end_offset:
            raise self._corrupt(
                f"offset {self._base_offset + int(relative[last])} is not below the next "
                f"segment's base offset {end_offset}",
                entry=last,
            )

    # -- changing -------------------------------------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if ``timestamp`` exceeds the last timestamp; otherwise nothing
        (re-appending the last entry, as roll and close do, is a no-op).

        ``skip_full_check`` is for the roll/close entry, which may take the reserved last slot.
        Raises ValueError when full, :class:`InvalidOffsetError` for an offset below the last,
        ValueError for a timestamp below the last (Kafka's IllegalStateException).
        """
        self.maybe_append_all(((timestamp, offset),), skip_full_check=skip_full_check)

    def maybe_append_all(
        self, entries: Iterable[tuple[int, int]], *, skip_full_check: bool = False
    ) -> None:
        """:meth:`maybe_append` each (timestamp, offset) in order, the added entries written with
        one call. On an invalid entry the ones before it are kept and the error raised."""
        with self._lock:
            self._check_writable("append to")
            packed, pack = bytearray(), _ENTRY.pack
            entries_before, last = self._entries, self._last_entry
            try:
                for timestamp, offset in entries:
                    n = entries_before + len(packed) // 12
                    if not skip_full_check and n >= self._max_entries - 1:
                        raise ValueError(f"Attempt to append to a full time index (size = {n}).")
                    if n != 0 and offset < last.offset:
                        raise InvalidOffsetError(
                            f"Attempt to append an offset ({offset}) to slot {n} no larger "
                            f"than the last offset appended ({last.offset})",
                            path=str(self._file),
                            offset=offset,
                        )
                    if n != 0 and timestamp < last.timestamp:
                        raise ValueError(
                            f"Attempt to append a timestamp ({timestamp}) to slot {n} no "
                            f"larger than the last timestamp appended ({last.timestamp}) to "
                            f"{self._file}"
                        )
                    if timestamp > last.timestamp:
                        if not _INT64[0] <= timestamp <= _INT64[1]:
                            raise ValueError(f"timestamp {timestamp} does not fit in a long")
                        relative = self.relative_offset(offset)
                        if n >= self._max_entries:
                            raise ValueError(f"no slot left in time index {self._file}")
                        packed += pack(timestamp, relative)
                        last = TimestampOffset(timestamp=timestamp, offset=offset)
            finally:
                if packed:
                    self._write_entries(packed)
                    self._last_entry = last

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        with self._lock:
            self._check_writable("truncate")
            slot = self._slot_for(offset, self._offset_at, largest_lower_bound=True)
            if slot < 0:
                new_entries = 0
            elif self._offset_at(slot) == offset:
                new_entries = slot
            else:
                new_entries = slot + 1
            self._truncate_to_entries(new_entries)
