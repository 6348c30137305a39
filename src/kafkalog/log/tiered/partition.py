"""A tiered partition (KIP-405) read as one offset-continuous log: its segments, remote then
local, each read for the offsets ``[start, end)`` it serves (:mod:`.plan` chooses them), with
the records Kafka's consumer reads at either isolation level. Where the readable prefix ends
(:attr:`TieredPartition.problem`, or a remote ``.log`` shorter than its metadata) the records
before it are yielded, then a :class:`~.errors.TieredStorageError` is raised.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import KafkalogError
from ...format import Batch, ControlRecordType, Record
from ...format.control import decode_control_type
from ..partition import READ_COMMITTED, READ_UNCOMMITTED, Log
from ..segment import AbortedTxn, LogSegment
from ..storage.remote_file import ClosedOnExit
from .errors import RemoteSegmentTruncatedError, TieredStorageError
from .metadata import RemoteLogSegmentMetadata, TopicIdPartition

__all__ = ["TieredPartition", "TieredSegment"]


@dataclass(frozen=True, slots=True)
class TieredSegment:
    """One segment of the tiered log and the offsets ``[start, end)`` read from it; ``remote``
    is its metadata when it is a remote segment, None for a local one."""

    segment: LogSegment
    start: int
    end: int
    remote: RemoteLogSegmentMetadata | None = None

    @property
    def path(self) -> str:
        return self.segment.log.path

    def start_position(self) -> int:
        """Where the first batch read from the segment starts in its ``.log``: the batch
        holding ``start`` (the file's start when none does)."""
        seg = self.segment
        found = seg.translate_offset(self.start) if self.start > seg.base_offset else None
        return found.position if found is not None else seg.log.start

    def byte_range(self) -> tuple[int, int]:
        """Where the batches read from the segment lie in its ``.log``: from
        :meth:`start_position` to the batch holding ``end`` (the file's end when none does)."""
        stop = self.segment.translate_offset(self.end)
        return self.start_position(), stop.position if stop is not None else self.segment.log.end

    def truncation(
        self, next_offset: int, *, position: int | None = None
    ) -> RemoteSegmentTruncatedError | None:
        """Why this remote segment, whose batches end at ``next_offset`` (``position`` in its
        ``.log``), ends before the offsets it serves: the end offset its metadata gives (a
        remote segment is complete, or its records are lost). None when it does not."""
        if self.remote is None or next_offset >= min(self.end, self.remote.end_offset + 1):
            return None
        size = self.segment.log.file_size()
        return RemoteSegmentTruncatedError(
            f"remote segment {self.remote.segment_id} ends at offset {next_offset}, its "
            f"metadata says {self.remote.end_offset} ({size} bytes, its metadata says "
            f"{self.remote.segment_size_in_bytes})",
            offset=next_offset,
            path=self.path,
            position=position,
        )


@dataclass(eq=False)
class TieredPartition(ClosedOnExit):
    """A tiered partition's log; see :func:`open_tiered_partition`. ``segments`` are what is
    read, in offset order; ``problem`` is where the readable prefix ends, if it ends before
    ``log_end_offset``; ``close()`` releases the files.

    ``beyond`` are the segments past ``problem`` (read by nothing that reads records, checked
    by verify) and ``problems`` every problem in offset order, ``problem`` the first."""

    topic_id_partition: TopicIdPartition
    local: Log
    segments: list[TieredSegment]
    log_start_offset: int
    local_log_start_offset: int
    problem: TieredStorageError | None
    beyond: list[TieredSegment] = field(default_factory=list)
    problems: list[TieredStorageError] = field(default_factory=list)
    _remote_opened: list[LogSegment] = field(init=False)
    _txns: tuple[list[AbortedTxn], int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        every = [*self.segments, *self.beyond]
        self._remote_opened = [s.segment for s in every if s.remote is not None]

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def remote_segments(self) -> list[TieredSegment]:
        return [s for s in self.segments if s.remote is not None]

    def batches(self) -> Iterator[Batch]:
        """Every batch with an offset the log serves, in offset order, then :attr:`problem` raised
        if there is one. A batch straddling the local log start (segments rolled at other
        offsets remotely) comes from both sides: :meth:`records` keeps each offset once."""
        for piece in self.segments:
            yield from self._piece_batches(piece)
        if self.problem is not None:
            raise self.problem

    def _piece_batches(self, piece: TieredSegment) -> Iterator[Batch]:
        position = piece.start_position()
        next_offset = piece.start
        for batch in piece.segment.log.batches(position):
            if batch.base_offset >= piece.end:
                break
            if batch.last_offset < piece.start:
                continue
            next_offset = batch.last_offset + 1
            yield batch
        truncated = piece.truncation(next_offset)
        if truncated is not None:
            raise truncated

    def records(
        self, isolation: str = READ_UNCOMMITTED, *, control: bool = False
    ) -> Iterator[tuple[Batch, Record]]:
        """(batch, record) of every record in offset order, as Kafka's consumer sees them at
        ``isolation``: at read_committed up to the last stable offset, without the records of
        aborted transactions (:meth:`aborted_transactions`, applied as the consumer applies the
        list a fetch returns).
        Control records only with ``control``."""
        committed = isolation == READ_COMMITTED
        if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
            raise ValueError(f"unknown isolation level {isolation!r}")
        upper = self.last_stable_offset() if committed else self.log_end_offset
        aborted = [(t.first_offset, t.producer_id) for t in self.aborted_transactions()]
        heapq.heapify(aborted)
        aborted_producers: set[int] = set()
        floor = self.log_start_offset
        for batch in self.batches():
            if batch.base_offset >= upper:
                break
            if committed and batch.magic >= 2 and batch.has_producer_id:
                while aborted and aborted[0][0] <= batch.last_offset:
                    aborted_producers.add(heapq.heappop(aborted)[1])
            if batch.is_control:
                for record in batch.records():
                    if committed and _is_abort(record):
                        aborted_producers.discard(batch.producer_id)
                    if control and floor <= record.offset < upper:
                        floor = record.offset + 1
                        yield batch, record
                floor = max(floor, batch.last_offset + 1)
                continue
            skip = committed and batch.is_transactional
            skip = skip and batch.producer_id in aborted_producers
            for record in batch.records():
                if floor <= record.offset < upper:
                    floor = record.offset + 1
                    if not skip:
                        yield batch, record
        if self.problem is not None:  # the bound may lie past it: never end quietly
            raise self.problem

    def aborted_transactions(self) -> list[AbortedTxn]:
        """The aborted transactions of the log, by first offset: from the markers (as a
        segment's transaction index is built from them), not from the remote ``.txnindex``
        files, which a store may not keep (Kafka 3.x's LocalTieredStorage keeps none for a
        segment without aborts, and its metadata does not say which segments have one)."""
        return self._transactions()[0]

    def last_stable_offset(self) -> int:
        """Where the oldest transaction without a marker starts, or the log end offset."""
        return self._transactions()[1]

    def _transactions(self) -> tuple[list[AbortedTxn], int]:
        """One walk over the batches: the aborted transactions and the last stable offset."""
        if self._txns is not None:
            return self._txns
        ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        aborted: list[AbortedTxn] = []
        try:
            for batch in self.batches():
                if batch.magic < 2 or not batch.is_transactional:
                    continue
                pid = batch.producer_id
                if not batch.is_control:
                    ongoing.setdefault(pid, batch.base_offset)
                    continue
                # A transaction begun below the log start: its records there are not read.
                first = ongoing.pop(pid, self.log_start_offset)
                if any(_is_abort(r) for r in batch.records()):
                    aborted.append(
                        AbortedTxn(producer_id=pid, first_offset=first,
                                   last_offset=batch.last_offset, last_stable_offset=first)
                    )  # fmt: skip
        except TieredStorageError:
            pass  # the records stop there anyway, and say why
        lso = min(ongoing.values(), default=self.log_end_offset)
        self._txns = sorted(aborted, key=lambda t: (t.first_offset, t.producer_id)), lso
        return self._txns

    def close(self) -> None:
        for seg in self._remote_opened:
            seg.close()
        self.local.close()

    def __repr__(self) -> str:
        return (
            f"TieredPartition({self.topic_id_partition}, log start {self.log_start_offset}, "
            f"local log start {self.local_log_start_offset}, end {self.log_end_offset}, "
            f"{len(self.remote_segments)} remote segments)"
        )


def _is_abort(record: Record) -> bool:
    try:
        return decode_control_type(record.key) == ControlRecordType.ABORT
    except KafkalogError:
        return False
