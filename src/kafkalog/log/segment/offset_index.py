"""A segment's ``.index`` file: sparse map from offsets to ``.log`` positions (OffsetIndex.java).

Entry layout (8 bytes, big-endian)::

    0  i32  relative offset   offset - segment base offset
    4  i32  position          byte position of the batch in the segment's .log file

Invariants: relative offsets strictly increase; an entry (offset, position) says the batch whose
*last* offset is ``offset`` starts at ``position`` (LogSegment indexes every index.interval.bytes,
4096, of appended data). The index is not checksummed: after a crash Kafka rebuilds it from the
log, so :meth:`OffsetIndex.sanity_check` only catches what would make lookups wrong.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from .index import AbstractIndex

__all__ = ["OffsetIndex", "OffsetPosition"]

_ENTRY = struct.Struct(">ii")
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetPosition:
    """An offset index entry, offset absolute (Kafka's OffsetPosition)."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """The ``.index`` of one segment; read-only unless ``writable=True``."""

    ENTRY_SIZE = 8
    KIND = "offset index"
    _RELATIVE_OFFSET_AT = 0
    _KEY = struct.Struct(">i")
    _last_offset: int

    # -- reading --------------------------------------------------------------------------------

    def _load_last_entry(self) -> None:
        self._last_offset = self.last_entry.offset

    @property
    def last_offset(self) -> int:
        """The largest offset in the index; the base offset when it is empty."""
        return self._last_offset

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry; (base offset, 0) when empty."""
        with self._lock:
            if self._entries == 0:
                return OffsetPosition(offset=self._base_offset, position=0)
            return self._parse_entry(self._entries - 1)

    def _parse_entry(self, n: int) -> OffsetPosition:
        relative, position = _ENTRY.unpack_from(self._buffer(), n * 8)
        return OffsetPosition(offset=self._base_offset + relative, position=position)

    def _offset_at(self, n: int) -> int:
        return self._base_offset + _ENTRY.unpack_from(self._buffer(), n * 8)[0]

    def _position_at(self, n: int) -> int:
        return _ENTRY.unpack_from(self._buffer(), n * 8)[1]

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; (base offset, 0) when the
        index is empty or the target is below its first entry."""
        with self._lock:
            slot = self._key_slot(target_offset - self._base_offset)
            if slot == -1:
                return OffsetPosition(offset=self._base_offset, position=0)
            return self._parse_entry(slot)

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """An entry at or past ``fetch_offset.position + fetch_size``: an offset surely beyond a
        fetch of ``fetch_size`` bytes (not the smallest such offset). None if there is none."""
        with self._lock:
            slot = self._slot_for(
                fetch_offset.position + fetch_size, self._position_at, largest_lower_bound=False
            )
            return None if slot == -1 else self._parse_entry(slot)

    def _known_last_offset(self) -> int:
        return self._last_offset

    def check_entries(self, log_size: int, end_offset: int | None = None) -> None:
        """kafkalog's rules beyond Kafka's sanity check (docs/reading.md: indexes are hints):
        offsets and positions strictly increase, positions lie in the ``.log`` (``log_size``
        bytes) and offsets below ``end_offset`` (the next segment's base offset), when given.
        Raises :class:`CorruptIndexError` naming the first entry that breaks one."""
        columns = self._columns(">i4,>i4")
        if len(columns) == 0:
            return
        relative, positions = columns["f0"], columns["f1"]
        last = len(columns) - 1
        below_base, end_rule = self._offset_rules(relative, end_offset)
        self._check_rules(
            (
                (self._first_break(relative, strict=True), "offsets do not increase"),
                (self._first_break(positions, strict=True), "positions do not increase"),
                below_base,
                (0 if positions[0] < 0 else None, f"a negative position ({int(positions[0])})"),
                (
                    last if positions[last] >= log_size else None,
                    f"position {int(positions[last])} is outside the log ({log_size} bytes)",
                ),
                end_rule,
            )
        )

    # -- changing -------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); ``offset`` must exceed the last offset.

        Raises ValueError when full (callers roll first), :class:`InvalidOffsetError` for a
        non-increasing offset, IndexOffsetOverflowError when it is too far from the base.
        """
        self.append_all(((offset, position),))

    def _all_valid(self, entries: list[tuple[int, int]]) -> bool:
        """Whether every entry passes :meth:`append_all`'s checks (else it checks one by one,
        raising at the first that does not)."""
        n = self._entries
        if n + len(entries) > self._max_entries:
            return False
        offsets = [offset for offset, _ in entries]
        positions = [position for _, position in entries]
        if n != 0 and offsets[0] <= self._last_offset:
            return False
        if not all(map(operator.lt, offsets, offsets[1:])):
            return False
        base = self._base_offset
        if not (offsets[0] - base >= 0 and offsets[-1] - base <= _INT32_MAX):
            return False
        return min(positions) >= 0 and max(positions) <= _INT32_MAX

    def append_all(self, entries: Iterable[tuple[int, int]]) -> None:
        """:meth:`append` each (offset, position) in order, written with one call. On an invalid
        entry the ones before it are kept and the error raised."""
        with self._lock:
            self._check_writable("append to")
            if isinstance(entries, list) and len(entries) > 1 and self._all_valid(entries):
                # Many at once (a rebuild): checked as a whole, packed in one call.
                base = self._base_offset
                flat = [v for offset, position in entries for v in (offset - base, position)]
                self._write_entries(struct.pack(f">{len(flat)}i", *flat))
                self._last_offset = entries[-1][0]
                return
            packed, pack = bytearray(), _ENTRY.pack
            entries_before, last = self._entries, self._last_offset
            try:
                for offset, position in entries:
                    n = entries_before + len(packed) // 8
                    if n >= self._max_entries:
                        raise ValueError(f"Attempt to append to a full index (size = {n}).")
                    if n != 0 and offset <= last:
                        raise self._invalid_offset(
                            f"Attempt to append an offset {offset} to position {n} no larger "
                            f"than the last offset appended ({last})",
                            offset,
                        )
                    relative = self.relative_offset(offset)
                    if not 0 <= position <= _INT32_MAX:
                        raise ValueError(f"position {position} is outside 0..{_INT32_MAX}")
                    packed += pack(relative, position)
                    last = offset
            finally:
                if packed:
                    self._write_entries(packed)
                    self._last_offset = last
