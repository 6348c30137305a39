"""Planning on the driver: which partitions, which offsets, which byte ranges.

Everything here comes from directory listings, index files, producer snapshots and the *tail* of
each active segment; a ``.log`` file is never read whole:

- a partition's log end offset is found by walking batch headers (61 bytes each, one ``pread``
  per batch) from the active segment's last offset-index entry to the last complete batch; a torn
  tail (a batch still being written) ends the walk and is left out;
- its last stable offset (read_committed) is the first offset of the oldest transaction still
  open: open transactions come from the newest producer snapshot, then a header walk from the
  snapshot's offset to the end (a snapshot is taken at every roll, so usually only the active
  segment is walked);
- aborted transactions come from the ``.txnindex`` files;
- timestamps become offsets through the time index and a bounded scan from its entry
  (Kafka's ListOffsets).

Segments without an index (copies of a live broker often lack the active segment's preallocated
index) fall back to walking batch headers from the segment's start.
"""

from __future__ import annotations

import os
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KafkalogError
from ..log.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offset_checkpoint
from ..log.clock import SystemClock
from ..log.config import LogConfig
from ..log.errors import InvalidFileNameError
from ..log.loader import load_segments
from ..log.naming import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    PartitionDirKind,
    TopicPartition,
    parse_partition_dir_name,
)
from ..log.offset_index import OffsetPosition
from ..log.producer_snapshot import CorruptSnapshotError, list_snapshot_files, read_snapshot
from ..log.segment import LogSegment

__all__ = [
    "BatchHeader",
    "DataLossError",
    "PartitionLog",
    "SegmentInfo",
    "discover",
    "open_partition",
    "walk_headers",
]

_ENTRY = struct.Struct(">qi")  # base offset, length; the magic byte is at 16
_V2 = struct.Struct(">qiiBIhiqqq")  # ... producerId at 43
_V2_HEADER_SIZE = 61
_LEGACY_MIN = 12 + 14
_ZERO = OffsetPosition(offset=0, position=0)


class DataLossError(KafkalogError):
    """Offsets asked for are not in the data directory (retention, a missing segment, a
    checkpoint past the data); with failOnDataLoss=false they are skipped with a warning."""


def data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(
            message + ". Some data may have been lost: if you want the query to go on "
            "regardless, set the option failOnDataLoss to false."
        )
    warnings.warn(f"kafkalog: {message}; skipped (failOnDataLoss=false)", stacklevel=3)


def discover(paths) -> dict[TopicPartition, Path]:
    """Live partition directories of the data directories ``paths`` (one broker's log.dirs).

    ``-delete``, ``-future`` and ``-stray`` directories are skipped; a partition in two
    directories is an error. A path that is itself a partition directory counts as one."""
    found: dict[TopicPartition, Path] = {}
    for raw in paths:
        root = Path(raw)
        if not root.is_dir():
            raise FileNotFoundError(
                f"data directory {raw} does not exist or is not a directory (it must be visible "
                f"from the driver and every executor)"
            )
        children = [root] if _is_partition_dir(root) else sorted(p for p in root.iterdir())
        for child in children:
            if not child.is_dir():
                continue
            try:
                parsed = parse_partition_dir_name(child.name)
            except (InvalidFileNameError, KafkalogError):
                continue
            if parsed.kind != PartitionDirKind.LIVE:
                continue
            tp = parsed.topic_partition
            if tp in found:
                raise KafkalogError(
                    f"Duplicate log directories for {tp} are found in both {found[tp]} and "
                    f"{child}: the paths given to load() are one broker's log.dirs, where a "
                    f"partition lives in one directory",
                    path=str(child),
                )
            found[tp] = child
    return found


def _is_partition_dir(path: Path) -> bool:
    try:
        parsed = parse_partition_dir_name(path.name)
    except (InvalidFileNameError, KafkalogError):
        return False
    return parsed.kind == PartitionDirKind.LIVE and any(
        p.name.endswith(LOG_FILE_SUFFIX) for p in path.iterdir()
    )


@dataclass
class SegmentInfo:
    base_offset: int
    path: str
    end_position: int  # bytes of complete batches (planned: later appends are not read)
    segment: LogSegment = field(repr=False)


@dataclass
class PartitionLog:
    """A partition as planning sees it; ``close()`` releases its files."""

    tp: TopicPartition
    directory: Path
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    missing: list[tuple[int, int]]  # offset ranges of segments whose .log is gone

    def close(self) -> None:
        for s in self.segments:
            s.segment.close()

    def segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the last with base <= offset), or 0."""
        i = 0
        for n, s in enumerate(self.segments):
            if s.base_offset <= offset:
                i = n
        return i

    def next_base(self, i: int) -> int:
        return (
            self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset
        )

    # -- offsets -----------------------------------------------------------------------------
    def position_for(self, i: int, offset: int) -> int:
        """A position in segment ``i`` at or before the batch holding ``offset``."""
        seg = self.segments[i]
        if seg.segment.offset_index is None or offset <= seg.base_offset:
            return 0
        return min(seg.segment.offset_index.lookup(offset).position, seg.end_position)

    def split_positions(self, i: int, start: int, end: int, step: int) -> list[int]:
        """Batch-start positions in segment ``i`` about every ``step`` bytes between ``start``
        and ``end`` (from the offset index; none without one)."""
        index = self.segments[i].segment.offset_index
        if index is None or index.entries == 0:
            return []
        cuts = []
        target = start + step
        while target < end - step // 4:
            found = index.fetch_upper_bound_offset(_ZERO, target)
            if found is None or found.position >= end - step // 4:
                break
            if found.position > (cuts[-1] if cuts else start):
                cuts.append(found.position)
            target = max(target + step, found.position + step)
        return cuts

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose timestamp >= ``timestamp`` (ListOffsets), None if none."""
        for seg in self.segments:
            segment = seg.segment
            if segment.max_timestamp_so_far() < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None and found.offset < self.log_end_offset:
                return max(found.offset, self.log_start_offset)
        return None

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(producer id, first offset, last offset) of aborted transactions overlapping
        ``[start, end)``, from the transaction indexes."""
        out = []
        for seg in self.segments:
            for txn in seg.segment.txn_index:
                if txn.last_offset >= start and txn.first_offset < end:
                    out.append((txn.producer_id, txn.first_offset, txn.last_offset))
        return sorted(set(out), key=lambda t: t[1])

    def last_stable_offset(self) -> int:
        """Where the oldest open transaction starts, or the log end offset."""
        open_txns: dict[int, int] = {}
        start = self.log_start_offset
        snapshots = [
            s for s in list_snapshot_files(self.directory) if s.offset <= self.log_end_offset
        ]
        for snap in reversed(snapshots):
            if snap.offset < self.log_start_offset:
                break
            try:
                entries = read_snapshot(snap.path)
            except CorruptSnapshotError:
                continue
            open_txns = {
                e.producer_id: e.current_txn_first_offset
                for e in entries
                if e.current_txn_first_offset is not None and e.current_txn_first_offset >= 0
            }
            start = snap.offset
            break
        i = self.segment_index(start)
        for n in range(i, len(self.segments)):
            seg = self.segments[n]
            pos = self.position_for(n, start) if n == i else 0
            for h in walk_headers(seg.path, pos, seg.end_position):
                if h.magic < 2 or h.last_offset < start or not h.transactional:
                    continue
                if h.control:
                    open_txns.pop(h.producer_id, None)
                else:
                    open_txns.setdefault(h.producer_id, h.base_offset)
        return min(open_txns.values(), default=self.log_end_offset)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    position: int
    size: int
    base_offset: int
    last_offset: int
    magic: int
    transactional: bool
    control: bool
    producer_id: int


def walk_headers(path: str, start: int, end: int | None = None):
    """Batch headers from ``start`` up to the last complete entry before ``end`` (or the file's
    end): one small ``pread`` per batch, so only header pages are touched."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if end is None:
            end = os.fstat(fd).st_size
        pos = start
        while end - pos >= _LEGACY_MIN:
            head = os.pread(fd, _V2_HEADER_SIZE, pos)
            if len(head) < 17:
                return
            base, length = _ENTRY.unpack_from(head)
            magic = head[16]
            size = 12 + length
            if length < 14 or pos + size > end:
                return  # a torn tail (or garbage): the log ends at the last complete batch
            if magic >= 2 and len(head) >= _V2_HEADER_SIZE:
                (_, _, _, _, _, attributes, delta, _, _, pid) = _V2.unpack_from(head)
                txn, control = bool(attributes & 0x10), bool(attributes & 0x20)
                yield BatchHeader(pos, size, base, base + delta, magic, txn, control, pid)
            else:
                yield BatchHeader(pos, size, base, base, magic, False, False, -1)
            pos += size
    finally:
        os.close(fd)


def _tail(seg: LogSegment, path: str, file_size: int) -> tuple[int, int]:
    """(next offset, end of the last complete batch) of a segment, walking from its last index
    entry (or its start without an index)."""
    pos, next_offset = 0, seg.base_offset
    index = seg.offset_index
    if index is not None and index.entries:
        last = index.last_entry
        if last.position < file_size:
            pos = last.position
    end = pos
    for h in walk_headers(path, pos, file_size):
        next_offset = h.last_offset + 1
        end = h.position + h.size
    if end == 0 and pos == 0:
        return seg.base_offset, 0
    return max(next_offset, seg.base_offset), end


def open_partition(tp: TopicPartition, directory: Path, *, fail_on_data_loss: bool) -> PartitionLog:
    """A partition's segments, start and end offsets, from listings, indexes and tails."""
    result = load_segments(directory, LogConfig(), SystemClock(), writable=False)
    segments: list[SegmentInfo] = []
    for n, seg in enumerate(result.segments):
        path = str(seg.path)
        size = os.stat(path).st_size
        if n + 1 < len(result.segments):
            segments.append(SegmentInfo(seg.base_offset, path, size, seg))  # rolled: whole
        else:
            next_offset, end = _tail(seg, path, size)
            segments.append(SegmentInfo(seg.base_offset, path, end, seg))
            result_end = next_offset
    if not segments:
        return PartitionLog(tp, directory, [], 0, 0, _orphans(directory, []))
    start_cp = _log_start_checkpoint(directory.parent).get(tp, 0)
    first_base = segments[0].base_offset
    log_end = max(result_end, segments[-1].base_offset)
    log_start = max(start_cp, first_base)
    if start_cp > log_end:
        data_loss(
            f"{tp}: log-start-offset-checkpoint says {start_cp}, past the data present "
            f"(log end offset {log_end})",
            fail_on_data_loss,
        )
        log_start = first_base
    missing = _orphans(directory, [s.base_offset for s in segments])
    if missing and missing[0][0] < first_base and start_cp <= missing[0][0]:
        log_start = missing[0][0]  # the log began at a segment that is gone: offsets lost
    return PartitionLog(tp, directory, segments, log_start, log_end, missing)


_CHECKPOINT_CACHE: dict[Path, dict[TopicPartition, int]] = {}


def _log_start_checkpoint(root: Path) -> dict[TopicPartition, int]:
    cached = _CHECKPOINT_CACHE.get(root)
    if cached is None:
        path = root / LOG_START_OFFSET_CHECKPOINT
        try:
            cached = read_offset_checkpoint(path) if path.exists() else {}
        except KafkalogError:
            cached = {}
        _CHECKPOINT_CACHE[root] = cached
    return cached


def _orphans(directory: Path, bases: list[int]) -> list[tuple[int, int]]:
    """Offset ranges of segments whose indexes remain but whose ``.log`` is gone."""
    present = set(bases)
    orphans = set()
    for p in directory.iterdir():
        name = p.name
        for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
            if name.endswith(suffix) and name[: -len(suffix)].isdigit():
                base = int(name[: -len(suffix)])
                if base not in present:
                    orphans.add(base)
    ranges = []
    ordered = sorted(present)
    for base in sorted(orphans):
        later = [b for b in ordered if b > base]
        ranges.append((base, later[0] if later else -1))
    return ranges


def clear_caches() -> None:
    _CHECKPOINT_CACHE.clear()
