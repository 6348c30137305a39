"""What recovering a segment will write, worked out by one read-only walk of its valid prefix.

:meth:`LogSegment.recover` is Kafka's LogSegment.recover split in two: this walk
(:class:`~.valid_prefix.ValidPrefixWalk`, a window at a time) first, reading only, then the
writes from what it found: the offset and time index entries (one every ``index.interval.bytes``,
with the largest timestamp so far), the leader epochs the batches start, and the batches that
producer state replays. A marker producer state cannot take ends the walk with
:class:`~kafkalog.errors.MarkerError` before anything of the segment is written; the loader walks
a segment before it rebuilds the producer state that recovery replays into, so the producer
snapshots are left as they were too (what the loading changed before that segment stays).

The batches to replay (magic 2 batches with a producer id) are kept as their 61-byte headers
(replay reads nothing else of a data batch), a producer's markers whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...format.batch import RecordBatch
from ...format.constants import MAGIC_VALUE_V2, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD
from .time_index import TimestampOffset
from .valid_prefix import ValidPrefixWalk

if TYPE_CHECKING:
    from .log_segment import LogSegment

__all__ = ["RecoveryScan", "scan_for_recovery"]


class RecoveryScan:
    """One segment's valid prefix (``walk``) and what its recovery writes from it."""

    __slots__ = (
        "_headers",
        "_positions",
        "_whole",
        "epochs",
        "last_v2_offset",
        "max_so_far",
        "offset_entries",
        "time_entries",
        "walk",
    )

    def __init__(self, walk: ValidPrefixWalk) -> None:
        self.walk = walk
        self.offset_entries: list[tuple[int, int]] = []  # (last offset, position)
        self.time_entries: list[tuple[int, int]] = []  # (largest timestamp so far, its offset)
        self.max_so_far = TimestampOffset(timestamp=NO_TIMESTAMP, offset=-1)
        # (epoch, base offset) of each batch whose partition leader epoch is above every one
        # before it in the segment: the only ones that can start an epoch in the cache.
        self.epochs: list[tuple[int, int]] = []
        self.last_v2_offset: int | None = None  # of the last magic 2 batch (producer state's end)
        self._headers = bytearray()
        self._positions: list[int] = []
        self._whole: dict[int, bytes] = {}  # replay index -> a marker's whole bytes

    @property
    def valid_bytes(self) -> int:
        return self.walk.valid_bytes

    def keep_for_replay(self, batch: RecordBatch, whole: bool) -> None:
        if whole:
            self._whole[len(self._positions)] = bytes(batch.buffer)
        else:
            self._headers += batch.buffer[:RECORD_BATCH_OVERHEAD]
        self._positions.append(batch.position)

    def keep_header_for_replay(self, view: memoryview, at: int, position: int) -> None:
        self._headers += view[at : at + RECORD_BATCH_OVERHEAD]
        self._positions.append(position)

    def to_replay(self) -> Iterator[RecordBatch]:
        """The batches producer state replays, in order: a data batch as a view of its header."""
        headers = memoryview(self._headers)
        at = 0
        for i, position in enumerate(self._positions):
            whole = self._whole.get(i)
            if whole is not None:
                yield RecordBatch(memoryview(whole), position)
            else:
                yield RecordBatch(headers[at : at + RECORD_BATCH_OVERHEAD], position)
                at += RECORD_BATCH_OVERHEAD


def scan_for_recovery(segment: LogSegment, index_interval_bytes: int) -> RecoveryScan:
    """Walk ``segment``'s valid prefix (reading only) and work out its recovery's writes."""
    from ...format.columnar import kernel_abi as abi

    walk = ValidPrefixWalk(segment)
    scan = RecoveryScan(walk)
    offsets, times, epochs = scan.offset_entries, scan.time_entries, scan.epochs
    max_ts, max_offset = NO_TIMESTAMP, -1
    top_epoch = -1
    valid_bytes = last_index_entry = 0
    last_v2 = None
    for run in walk.runs():
        columns = run.columns
        lasts = columns[abi.VP_LAST_OFFSET]
        for size, last, timestamp in zip(columns[abi.VP_SIZE], lasts,
                                         columns[abi.VP_MAX_TIMESTAMP]):  # fmt: skip
            if timestamp > max_ts:
                max_ts, max_offset = timestamp, last
            if valid_bytes - last_index_entry > index_interval_bytes:
                offsets.append((last, valid_bytes))
                times.append((max_ts, max_offset))
                last_index_entry = valid_bytes
            valid_bytes += size
        if run.magic < MAGIC_VALUE_V2:
            continue
        last_v2 = lasts[-1]
        leader_epochs = columns[abi.VP_LEADER_EPOCH]
        if max(leader_epochs) > top_epoch:
            for epoch, base in zip(leader_epochs, columns[abi.VP_BASE_OFFSET]):
                if epoch > top_epoch:
                    epochs.append((epoch, base))
                    top_epoch = epoch
        producer_ids = columns[abi.VP_PRODUCER_ID]
        if max(producer_ids) < 0:
            continue
        positions = columns[abi.VP_POSITION]
        for i, producer_id in enumerate(producer_ids):
            if producer_id < 0:
                continue
            if len(run) == 1:  # judged by the walk: a producer's marker, kept whole
                batch = run.batch(0)
                scan.keep_for_replay(batch, whole=batch.is_control)
            else:
                scan.keep_header_for_replay(run.buffer, positions[i], run.base + positions[i])
    scan.max_so_far = TimestampOffset(timestamp=max_ts, offset=max_offset)
    scan.last_v2_offset = last_v2
    return scan
