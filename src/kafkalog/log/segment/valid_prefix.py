"""The valid prefix of a segment: the batches Kafka's LogSegment.recover keeps.

One rule, walked by recovery (:meth:`LogSegment.recover`, which rebuilds indexes from the
batches it is given), by recovery's dry run (:mod:`kafkalog.log.partition.recovery_plan`) and by
``rebuild-index``: batches are kept in order until the first that

- cannot be framed (:func:`kafkalog.format.entries.frame_entry`; a partial tail ends the walk),
- fails its checks (``ensure_valid``: size and CRC),
- breaks the offset rule (:func:`kafkalog.format.offsets_rule.check_entry_offsets`: offsets fit
  int64 and increase), or
- holds an offset the segment cannot index (more than 2^31 - 1 past its base);

and a transaction marker that producer state cannot take (not a COMMIT or ABORT that decodes)
raises :class:`MarkerError`: Kafka cannot load such a log (its recovery replays the marker into
producer state, and so does the producer-state rebuild that follows), so neither recovery nor its
dry run gets past it.

The walk reads the segment a window of up to 4 MiB at a time. The columnar kernels'
``valid_prefix_run`` (compiled, or its pure twin, which calls the rule's functions) keeps the run
of plain magic 2 batches that pass the rule in one call; the entry it stops at (a legacy entry, a
producer's marker, or one that breaks a rule) is judged here by the same functions, which raise
the walk's errors. After iterating :meth:`ValidPrefixWalk.runs`, the walk says where the kept
bytes end and why the rest goes (:meth:`ValidPrefixWalk.prefix`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import CorruptRecordError, InvalidRecordError, KafkalogError, MarkerError
from ...format.constants import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_VALUE_V2
from ...format.entries import ENTRY_HEADER, frame_entry
from ...format.offsets_rule import check_entry_offsets
from ...format.records import Batch, iter_batches
from ..producer import end_txn_marker

if TYPE_CHECKING:
    from .log_segment import LogSegment

__all__ = [
    "MarkerError",
    "ValidPrefix",
    "ValidPrefixWalk",
    "ValidRun",
    "marker_error",
    "records_from",
    "zero_filled",
]

WINDOW = 4 << 20  # bytes read and handed to the kernel at once
_ROWS = 8192  # rows of the kernel's output per call
_ZERO_TAIL = "a zero-filled tail (preallocated space not written before a crash)"


class ValidRun:
    """Consecutive batches the walk keeps, all in ``buffer`` (file position ``base`` at its
    start; the walk reuses it: valid until the walk moves on). ``columns``: the kernels' ``VP_*``
    columns (position in ``buffer``, size, base offset, last offset, max timestamp, partition
    leader epoch, producer id), one item per batch; ``magic`` is theirs (2, except for a legacy
    entry, which runs alone)."""

    __slots__ = ("base", "buffer", "columns", "magic")

    def __init__(self, buffer: memoryview, base: int, columns: tuple, magic: int = 2) -> None:
        self.buffer = buffer
        self.base = base
        self.columns = columns
        self.magic = magic

    def __len__(self) -> int:
        return len(self.columns[0])

    def batch(self, i: int) -> Batch:
        """The ``i``-th batch, a view over the buffer."""
        at, size = self.columns[0][i], self.columns[1][i]
        return next(iter_batches(self.buffer, start=at, end=at + size, position_base=self.base))


@dataclass(frozen=True, slots=True)
class ValidPrefix:
    """How much of a segment recovery keeps: ``valid_bytes`` of ``size``."""

    valid_bytes: int
    size: int
    next_offset: int | None  # after the last valid batch (None: no valid batch)
    reason: str | None  # why the rest goes (None: nothing goes)
    first_bad_offset: int | None = None
    records_cut: int = 0  # records in the bytes that go (see records_from)
    records_cut_exact: bool = True


class ValidPrefixWalk:
    """Iterate the runs of valid batches of ``segment``'s log (:meth:`runs`); then
    ``valid_bytes`` (bytes kept, from the log's start), ``last_offset`` (of the last batch kept,
    None if none), ``error`` (what ended the walk: None for the end of the file or a partial
    tail), ``bad_offset`` (the offending batch's offset, when a whole batch was read) and
    ``reason`` (a phrase for reports, None when every byte is kept)."""

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.valid_bytes = 0
        self.last_offset: int | None = None
        self.error: KafkalogError | None = None
        self.bad_offset: int | None = None
        self.reason: str | None = None

    def runs(self) -> Iterator[ValidRun]:
        from ...format.columnar import kernel_abi as abi
        from ...format.columnar import kernels

        segment, log = self.segment, self.segment.log
        kernel, base_offset = kernels.valid_prefix_run, segment.base_offset
        out = array("q", bytes(8 * abi.VP_WIDTH * _ROWS))
        buffer = bytearray(WINDOW)
        start, end = log.start, log.end
        pos = start
        while end - pos > HEADER_SIZE_UP_TO_MAGIC:
            got = log.read_into(pos, buffer)
            view = memoryview(buffer)[:got]
            at = 0
            while True:
                has_prev = self.last_offset is not None
                status, at, n, _, _ = kernel(view, at, got, base_offset,
                                             self.last_offset or 0, has_prev, out)  # fmt: skip
                if n:
                    rows = out[: n * abi.VP_WIDTH]
                    columns = tuple(rows[k :: abi.VP_WIDTH].tolist() for k in range(abi.VP_WIDTH))
                    self.last_offset = columns[abi.VP_LAST_OFFSET][-1]
                    self.valid_bytes = pos + at - start
                    yield ValidRun(view, pos, columns)
                if status == abi.VP_FULL:
                    continue
                if status == abi.VP_END:
                    break
                batch = self._judge(view, at, got, pos)  # VP_STOP: the rule's functions decide
                if batch is None:
                    return
                size = batch.size_in_bytes
                columns = ([at], [size], [batch.base_offset], [batch.last_offset],
                           [batch.max_timestamp], [batch.partition_leader_epoch],
                           [batch.producer_id])  # fmt: skip
                self.last_offset = batch.last_offset
                at += size
                self.valid_bytes = pos + at - start
                yield ValidRun(view, pos, columns, batch.magic)
            if at == 0:  # no whole entry in the window: a larger one, or a partial tail
                size = LOG_OVERHEAD + ENTRY_HEADER.unpack_from(view)[1]
                if not got < size <= end - pos:
                    break
                buffer = bytearray(size)
                continue
            pos += at
            if len(buffer) > WINDOW:
                buffer = bytearray(WINDOW)
        if self.valid_bytes < log.size_in_bytes():
            self.reason = "a torn last batch (incomplete)"

    def _judge(self, view: memoryview, at: int, end: int, base: int) -> Batch | None:
        """The entry at ``view[at:]`` if the rule keeps it, else None (the walk ends there)."""
        segment = self.segment
        path = str(segment.log.path)
        try:
            found = frame_entry(view, at, end, position_base=base)
        except (CorruptRecordError, InvalidRecordError) as e:
            self.error = e.located(path=path)
            self.reason = f"corrupt framing: {e.message}"
            return None
        if found is None:  # the kernel stops only at whole entries
            raise AssertionError(f"{path}: no entry at position {base + at}")
        batch = next(iter_batches(view, start=at, end=end, position_base=base))
        try:
            batch.ensure_valid()
            check_entry_offsets(
                batch.base_offset if batch.magic >= 2 else batch.last_offset,
                batch.last_offset,
                self.last_offset,
                position=batch.position,
            )
        except (CorruptRecordError, InvalidRecordError) as e:
            self._stop(e, batch, f"an invalid batch: {e.message}")
            return None
        if not segment.can_convert_to_relative_offset(batch.last_offset):
            error = CorruptRecordError(
                f"Offset {batch.last_offset} does not fit segment {segment.base_offset} "
                f"(more than 2^31 - 1 past its base offset)",
                position=batch.position,
                offset=batch.last_offset,
            )
            self._stop(error, batch, error.message)
            return None
        if batch.magic >= MAGIC_VALUE_V2 and batch.is_control and batch.producer_id >= 0:
            _check_marker(batch, path)
        return batch

    def _stop(self, error: KafkalogError, batch: Batch, reason: str) -> None:
        self.error = error.located(path=str(self.segment.log.path))
        self.bad_offset = batch.base_offset if batch.magic >= 2 else batch.last_offset
        self.reason = reason

    def prefix(self, tail: bytes | None = None) -> ValidPrefix:
        """After the walk: what recovery keeps and why the rest goes (records in the rest
        counted from their headers). ``tail``: the bytes past the kept ones, when the caller
        has read them (recovery, before it cuts them): judged from there, not read again."""
        segment = self.segment
        valid, reason, bad_offset = self.valid_bytes, self.reason, self.bad_offset
        size = segment.log.size_in_bytes() if tail is None else valid + len(tail)
        if bad_offset is None and valid < size:
            zeros = zero_filled(segment, valid, size) if tail is None else not tail.strip(b"\0")
            if zeros:
                reason = _ZERO_TAIL
        next_offset = None if self.last_offset is None else self.last_offset + 1
        if valid >= size:
            return ValidPrefix(valid, size, next_offset, None, bad_offset)
        at = segment.log.start + valid
        if tail is None:
            records, exact = records_from(segment, at)
        else:
            records, exact = _records_in(iter_batches(tail, position_base=at))
        return ValidPrefix(valid, size, next_offset, reason, bad_offset, records, exact)


def records_from(segment: LogSegment, position: int) -> tuple[int, bool]:
    """(records, complete): how many records the batches from ``position`` to the end of the
    segment hold, by their headers (CRCs not checked: a cut takes them whatever they hold);
    ``complete`` is False when the framing breaks first (then more may be lost than counted)."""
    return _records_in(segment.log.batches(position))


def _records_in(batches: Iterator[Batch]) -> tuple[int, bool]:
    count = 0
    try:
        for batch in batches:
            count += batch.count
    except KafkalogError:
        return count, False
    return count, True


def zero_filled(segment: LogSegment, start: int, end: int) -> bool:
    """Whether the segment's bytes ``start..end`` are all zeros (read 1 MiB at a time)."""
    for position in range(start, end, 1 << 20):
        if segment.log.read(position, min(end - position, 1 << 20)).strip(b"\0"):
            return False
    return True


def _check_marker(batch: Batch, path: str) -> None:
    try:
        end_txn_marker(batch)
    except (CorruptRecordError, InvalidRecordError) as e:
        raise marker_error(e, batch, path) from None


def marker_error(error: KafkalogError, batch: Batch, path: str) -> MarkerError:
    """The error for a producer's marker that producer state cannot take."""
    return MarkerError(
        f"a transaction marker that producer state cannot take ({error.message}): Kafka "
        f"cannot load this log",
        path=path,
        position=batch.position,
        offset=batch.base_offset,
    )
