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

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ...format.constants import NO_TIMESTAMP
from .index import AbstractIndex

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
    _last_entry: TimestampOffset

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

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``; (NO_TIMESTAMP, base
        offset) when the index is empty or the target is below its first timestamp."""
        with self._lock:
            slot = self._key_slot(target_timestamp)
            if slot == -1:
                return TimestampOffset(timestamp=NO_TIMESTAMP, offset=self._base_offset)
            return self._parse_entry(slot)

    def _known_last_offset(self) -> int:
        return self._last_entry.offset

    def _check_entry_order(self) -> None:
        """Kafka's rule: in a non-empty index the last timestamp may not be below the first."""
        last_timestamp, first_timestamp = self._last_entry.timestamp, self._timestamp_at(0)
        if last_timestamp < first_timestamp:
            raise self._corrupt(
                f"the index has non-zero size but the last timestamp is {last_timestamp}, "
                f"which is less than the first timestamp {first_timestamp}",
                entry=self._entries - 1,
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
        self._check_rules(
            (
                (self._first_break(timestamps, strict=False), "timestamps decrease"),
                (self._first_break(relative, strict=False), "offsets decrease"),
                *self._offset_rules(relative, end_offset),
            )
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
                        raise self._invalid_offset(
                            f"Attempt to append an offset ({offset}) to slot {n} no larger "
                            f"than the last offset appended ({last.offset})",
                            offset,
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
