"""Walking a buffer of log entries of any magic: Kafka's MemoryRecords / FileLogInputStream.

An entry starts ``offset int64 | size int32 | ... | magic int8`` (magic at byte 16 whatever the
version), so 17 bytes decide how to read it. The walk is shallow: it slices each entry into a
:class:`RecordBatch` (magic 2) or :class:`LegacyBatch` (magic 0/1) view without touching its
records. As in Kafka, fewer than 17 bytes left, or an entry longer than what is left, is a *partial
tail* that ends the walk quietly (normal for an active segment), while a size below the minimum or
an unknown magic is corruption. Kafka's preallocated files end in zeros, which read as size 0:
:class:`RecordsScan` tells that ``zeros`` tail apart from a ``corrupt`` one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptRecordError, KafkalogError
from .batch import RecordBatch
from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from .constants import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
)
from .legacy import LegacyBatch

__all__ = ["Batch", "MemoryRecords", "RecordsScan", "Tail", "iter_batches"]

Batch = RecordBatch | LegacyBatch
_ENTRY_HEADER = struct.Struct(">qi")


class Tail:
    """How a walk over a buffer ended (the ``tail`` of ``kafkalog dump --json``)."""

    NONE = "none"  # every byte belongs to a complete entry
    PARTIAL = "partial"  # an incomplete last entry: normal for an active segment
    ZEROS = "zeros"  # a zero-filled remainder, as a preallocated file leaves after a crash
    CORRUPT = "corrupt"  # bytes that cannot be an entry


def _next_entry(buf, pos: int, end: int) -> tuple[int, int] | None:
    """``(size, magic)`` of the entry at ``pos``, None at a partial tail, or raise if corrupt."""
    if end - pos <= HEADER_SIZE_UP_TO_MAGIC:  # as FileLogInputStream.nextBatch
        return None
    offset, size = _ENTRY_HEADER.unpack_from(buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            position=pos,
            offset=offset,
        )
    if size > end - pos - LOG_OVERHEAD:
        return None
    magic = buf[pos + MAGIC_OFFSET]
    if magic > MAGIC_VALUE_V2:
        raise CorruptRecordError(
            f"Invalid magic {magic} (expected 0, 1 or 2)", position=pos, offset=offset
        )
    if magic == MAGIC_VALUE_V2 and size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"Record batch size {size + LOG_OVERHEAD} is less than the record batch overhead "
            f"({RECORD_BATCH_OVERHEAD})",
            position=pos,
            offset=offset,
        )
    return size, magic


def _view(buffer) -> memoryview:
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def iter_batches(
    buffer,
    *,
    start: int = 0,
    end: int | None = None,
    position_base: int = 0,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[Batch]:
    """Yield a view of every complete entry in ``buffer[start:end]``; stop at a partial tail.

    Raises :class:`CorruptRecordError` where an entry's header is corrupt. ``position_base`` is the
    file position of ``buffer[0]`` (for a buffer read from the middle of a file).
    """
    view = _view(buffer)
    end = len(view) if end is None else end
    pos = start
    while True:
        try:
            found = _next_entry(view, pos, end)
        except CorruptRecordError as e:
            e.position = position_base + pos
            raise
        if found is None:
            return
        size, magic = found
        entry = view[pos : pos + LOG_OVERHEAD + size]
        if magic == MAGIC_VALUE_V2:
            yield RecordBatch(
                entry, position_base + pos, max_decompressed_size=max_decompressed_size
            )
        else:
            yield LegacyBatch(
                entry, position_base + pos, max_decompressed_size=max_decompressed_size
            )
        pos += LOG_OVERHEAD + size


@dataclass(frozen=True, slots=True)
class TailInfo:
    valid_bytes: int
    kind: str
    error: KafkalogError | None


class RecordsScan:
    """A walk that never raises on the entries' framing: iterate it, then read how it ended.

    After iteration, ``valid_bytes`` is where the last complete entry ends (where Kafka's recovery
    would cut), ``tail`` one of :class:`Tail`'s values, and ``error`` the framing error met, if any
    (a zero-filled tail is reported as an error too: it only happens after an unclean shutdown).
    """

    def __init__(
        self,
        buffer,
        *,
        position_base: int = 0,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._view = _view(buffer)
        self._position_base = position_base
        self._max = max_decompressed_size
        self.valid_bytes = 0
        self.tail = Tail.NONE
        self.error: KafkalogError | None = None

    def __iter__(self) -> Iterator[Batch]:
        view, end, base = self._view, len(self._view), self._position_base
        pos = 0
        while True:
            try:
                found = _next_entry(view, pos, end)
            except CorruptRecordError as e:
                e.position = base + pos
                self._end_at(pos, e)
                return
            if found is None:
                self._end_at(pos, None)
                return
            size, magic = found
            entry = view[pos : pos + LOG_OVERHEAD + size]
            try:
                if magic == MAGIC_VALUE_V2:
                    batch: Batch = RecordBatch(entry, base + pos, max_decompressed_size=self._max)
                else:
                    batch = LegacyBatch(entry, base + pos, max_decompressed_size=self._max)
            except CorruptRecordError as e:
                self._end_at(pos, e)
                return
            pos += LOG_OVERHEAD + size
            self.valid_bytes = pos
            yield batch

    def _end_at(self, pos: int, error: KafkalogError | None) -> None:
        view, end = self._view, len(self._view)
        self.valid_bytes = pos
        if pos == end:
            self.tail = Tail.NONE
        elif _all_zero(view, pos, end):
            self.tail = Tail.ZEROS
            self.error = CorruptRecordError(
                f"Found {end - pos} zero bytes at the end (a preallocated file not trimmed after "
                f"an unclean shutdown)",
                position=self._position_base + pos,
            )
        elif error is None:
            self.tail = Tail.PARTIAL
        else:
            self.tail = Tail.CORRUPT
            self.error = error

    @property
    def invalid_bytes(self) -> int:
        return len(self._view) - self.valid_bytes


def _all_zero(view: memoryview, pos: int, end: int) -> bool:
    # Compare in chunks of at most 1 MiB against a zero buffer no larger than the range.
    chunk = min(1 << 20, end - pos)
    if chunk <= 0:
        return True
    zeros = memoryview(bytes(chunk))
    while pos < end:
        n = min(chunk, end - pos)
        if view[pos : pos + n] != zeros[:n]:
            return False
        pos += n
    return True


class MemoryRecords:
    """Log entries in memory (bytes, bytearray, memoryview or mmap), Kafka's MemoryRecords."""

    __slots__ = ("_max", "_view")

    def __init__(
        self, buffer, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> None:
        self._view = _view(buffer)
        self._max = max_decompressed_size

    def __len__(self) -> int:
        return len(self._view)

    @property
    def size_in_bytes(self) -> int:
        return len(self._view)

    def batches(self) -> Iterator[Batch]:
        return iter_batches(self._view, max_decompressed_size=self._max)

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    def records(self):
        """Deep iteration: every record of every batch, in order."""
        for batch in self.batches():
            yield from batch.records()

    def valid_bytes(self) -> int:
        """Bytes up to the end of the last complete entry (stops quietly at a partial tail)."""
        scan = RecordsScan(self._view, max_decompressed_size=self._max)
        for _ in scan:
            pass
        return scan.valid_bytes

    @property
    def buffer(self) -> memoryview:
        return self._view
