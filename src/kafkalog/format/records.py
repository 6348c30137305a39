"""Walking a buffer of log entries of any magic: Kafka's MemoryRecords.

Entries are framed by the one entry walk (:func:`kafkalog.format.entries.frame_entry`: a partial
tail ends the walk quietly, a bad size or magic is corruption). The walk is shallow: it slices
each entry into a :class:`RecordBatch` (magic 2) or :class:`LegacyBatch` (magic 0/1) view without
touching its records. :class:`RecordsScan` never raises on framing and says how the walk ended
(a ``zeros`` tail apart from a ``partial`` and a ``corrupt`` one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptRecordError, KafkalogError
from .batch import RecordBatch
from .codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from .constants import LOG_OVERHEAD, MAGIC_VALUE_V2
from .entries import Tail, classify_tail, frame_entry, zeros_error
from .legacy import LegacyBatch

__all__ = ["Batch", "MemoryRecords", "RecordsScan", "Tail", "iter_batches"]

Batch = RecordBatch | LegacyBatch


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
        found = frame_entry(view, pos, end, position_base=position_base)
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
                found = frame_entry(view, pos, end, position_base=base)
            except CorruptRecordError as e:
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
        self.valid_bytes = pos
        self.tail = classify_tail(self._view[pos:], error)
        if self.tail == Tail.ZEROS:
            self.error = zeros_error(len(self._view) - pos, self._position_base + pos)
        elif self.tail == Tail.CORRUPT:
            self.error = error

    @property
    def invalid_bytes(self) -> int:
        return len(self._view) - self.valid_bytes


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
