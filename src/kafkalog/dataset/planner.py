"""Planning on the driver: which partitions, which offsets, which byte ranges.

Everything here comes from directory listings, index files, producer snapshots and the *tail* of
each active segment; a ``.log`` file is never read whole:

- a partition's log end offset is found by walking batch headers (61 bytes each, one ``pread``
  per batch, :class:`kafkalog.log.segment.entry_walk.SegmentWalk`) from the active segment's last
  offset-index entry to the end of its valid entries. A torn tail (an incomplete last batch, or
  a zero-filled remainder: what Kafka's recovery cuts) is the end of the log, reported as a
  warning naming the file and position; any other damage there (a bad size or magic, offsets
  that overflow or go back) is data loss: an error, or with failOnDataLoss=false a warning and
  the log ends before it;
- its last stable offset (read_committed) is the first offset of the oldest transaction still
  open: open transactions come from the newest producer snapshot, then a header walk from the
  snapshot's offset to the end (a snapshot is taken at every roll, so usually only the active
  segment is walked);
- aborted transactions come from the ``.txnindex`` files;
- timestamps become offsets through the time index and a bounded scan from its entry
  (Kafka's ListOffsets).

Indexes are hints (:class:`IndexHints`): an offset index whose entries break the index rules,
or whose entry used does not point at a batch start at or below its offset, is set aside, and
positions come from walking the log from the segment's start, as Kafka rebuilds such an index.
A damaged index never changes what is read. Segments without an index (copies of a live broker
often lack the active segment's preallocated index) walk from their start too.

A data directory in object storage that kafkalog wrote has manifests (:mod:`.manifest`): it is
read as the newest one says (its partitions, segments and log start offsets), so objects of a
write that has not committed are never read.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
import os
import socket
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import CorruptRecordError, DataLossError, KafkalogError
from ..format.constants import HEADER_SIZE_UP_TO_MAGIC
from ..format.entries import HEADER_PEEK, Tail, entry_header
from ..log.clock import SystemClock
from ..log.datadir import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    TIME_INDEX_FILE_SUFFIX,
    PartitionDirKind,
    TopicPartition,
    parse_partition_dir_name,
    read_offset_checkpoint,
)
from ..log.errors import InvalidFileNameError
from ..log.partition import LogConfig, load_segments
from ..log.producer import CorruptSnapshotError, list_snapshot_files, read_snapshot
from ..log.segment import LogSegment, SegmentWalk, open_remote_segments
from ..log.storage import as_path, is_remote
from ..log.tiered import copied_remote_offsets, open_tiered_partition
from ..log.verify import DEFAULT_MAX_MESSAGE_BYTES, partial_tail_problem

__all__ = [
    "DataLossError",
    "IndexHints",
    "PartitionLog",
    "SegmentInfo",
    "data_loss",
    "discover",
    "notice",
    "open_partition",
    "torn_tail",
]


_log = logging.getLogger("kafkalog")

_GO_ON = (
    ". Some data may have been lost: if you want the query to go on regardless, set the option "
    "failOnDataLoss to false."
)


def data_loss(
    message: str,
    fail: bool,
    *,
    cause: KafkalogError | None = None,
    log_dir: str | None = None,
) -> None:
    """Fail, or warn and go on (failOnDataLoss=false): a ``warnings`` warning, a warning on the
    ``kafkalog`` logger and, with ``log_dir`` (the option dataLossLog), a line of
    :func:`record_data_loss`. ``cause`` gives the file, position and offset of damaged bytes."""
    where = {}
    if cause is not None:
        where = {"path": cause.path, "position": cause.position, "offset": cause.offset}
    if fail:
        raise DataLossError(message + _GO_ON, **where)
    text = str(KafkalogError(message, **where))
    _log.warning("%s; skipped (failOnDataLoss=false)", text)
    if log_dir is not None:
        record_data_loss(log_dir, text, **where)
    warnings.warn(f"kafkalog: {text}; skipped (failOnDataLoss=false)", stacklevel=3)


def record_data_loss(log_dir: str, text: str, **where) -> None:
    """Append one JSON line for a skipped damage or loss to a file of this process in
    ``log_dir`` (each Spark task's process writes its own; :func:`read_data_loss` reads all)."""
    os.makedirs(log_dir, exist_ok=True)
    line = json.dumps({"time": int(time.time() * 1000), "message": text, **where}) + "\n"
    name = f"data-loss-{socket.gethostname()}-{os.getpid()}.jsonl"
    fd = os.open(os.path.join(log_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_data_loss(log_dir: str) -> list[dict]:
    """Every damage or loss recorded in ``log_dir`` by :func:`record_data_loss`, by time."""
    found = []
    if os.path.isdir(log_dir):
        for name in sorted(os.listdir(log_dir)):
            if name.startswith("data-loss-") and name.endswith(".jsonl"):
                with open(os.path.join(log_dir, name), encoding="utf-8") as f:
                    found.extend(json.loads(line) for line in f if line.strip())
    return sorted(found, key=lambda e: e.get("time", 0))


def torn_tail(path: str, position: int, size: int, tail: str) -> None:
    """Report the end of a partition's log at a torn tail (Kafka's recovery would cut it)."""
    what = "a zero-filled remainder" if tail == Tail.ZEROS else "an incomplete last batch"
    text = (
        f"{path}, position {position}: {what} ({size - position} bytes) ends the log: "
        f"the records before it are read (Kafka's recovery cuts such a tail after an unclean "
        f"shutdown; a live broker may be appending it)"
    )
    _log.warning("%s", text)
    warnings.warn(f"kafkalog: {text}", stacklevel=3)


def notice(text: str) -> None:
    """A warning the user should see: on the ``kafkalog`` logger (in Spark, the log of the
    process that plans) and as a ``warnings`` warning."""
    _log.warning("%s", text)
    warnings.warn(f"kafkalog: {text}", stacklevel=3)


def discover(paths, *, report: bool = False, warn: bool = True) -> dict[TopicPartition, Path]:
    """Live partition directories of the data directories ``paths`` (one broker's log.dirs).

    ``-delete``, ``-future`` and ``-stray`` directories are skipped; a partition in two
    directories is an error. A path that is itself a partition directory counts as one.

    With ``report`` (a read), what was found is checked against what a data directory is: a
    partition directory given as a path is read with a warning; a path without partition
    directories whose subfolders hold some (the parent of several data directories) is an
    error naming them; an empty one is a warning (``warn=False``: only the error)."""
    found: dict[TopicPartition, Path] = {}
    for raw in paths:
        root = as_path(raw)  # a local directory, or one in object storage (RemotePath)
        if not root.is_dir():
            raise FileNotFoundError(
                f"data directory {raw} does not exist or is not a directory (it must be visible "
                f"from the driver and every executor)"
            )
        if _is_partition_dir(root):
            children = [root]
            if report and warn:
                notice(
                    f"{raw} is a topic-partition directory ({root.name}: it holds .log files), "
                    f"not a data directory: only that partition is read; give its parent "
                    f"{root.parent} to read the data directory's partitions"
                )
        else:
            children = sorted(p for p in root.iterdir())
        committed = _committed_in(root, children) if is_remote(root) else None
        before = len(found)
        for child in children:
            if not child.is_dir():
                continue
            if committed is not None and child.name not in committed:
                continue  # not committed (a write under way, or one that died)
            try:
                parsed = parse_partition_dir_name(child.name)
            except (InvalidFileNameError, KafkalogError):
                continue
            if parsed.kind != PartitionDirKind.LIVE or _nested_data_dir(child):
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
        if report and len(found) == before:
            _no_partitions(raw, children, warn)
    return found


# A remote data directory's newest commit, by its URL, as the last discover() found it: what
# open_partition reads there (the plan's snapshot of the directory).
_COMMITTED: dict = {}


def _committed_in(root, children) -> set[str] | None:
    """The partition directories the newest manifest of the remote data directory holding
    ``children`` lists (None: no manifest, every partition directory is read)."""
    from ..log.datadir import newest_manifest

    partition_dir = len(children) == 1 and children[0] is root
    data_dir = root.parent if partition_dir else root
    manifest = newest_manifest(data_dir)
    if manifest is None:
        _COMMITTED.pop(str(data_dir), None)
        return None
    _COMMITTED[str(data_dir)] = manifest
    from ..log.datadir import log_dir_name

    names = {log_dir_name(tp) for tp in manifest.partitions}
    return names if not partition_dir else ({root.name} & names)


def _committed_segments(tp: TopicPartition, directory) -> list[LogSegment]:
    """The segments of a remote partition that its data directory's newest commit lists (all of
    them when it has no manifest); a listed segment whose object changed size is an error."""
    manifest = _COMMITTED.get(str(directory.parent))
    if manifest is None or tp not in manifest.partitions:
        return open_remote_segments(directory, LogConfig(), SystemClock())
    from .remote_writer import check_committed

    entry = manifest.partitions[tp]
    segments: list[LogSegment] = []
    try:
        for base, _ in entry.segments:
            segment = LogSegment.open(directory, base, LogConfig(), SystemClock(), writable=False)
            segments.append(segment)
            check_committed(manifest, tp, base, segment.log.path, segment.log.file_size())
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _no_partitions(raw: str, children: list[Path], warn: bool) -> None:
    """A path where no topic-partition directory was found: an error if its subfolders look
    like data directories (the parent of several log.dirs), else a warning."""
    from .options import OptionError

    nested = [c for c in children if c.is_dir() and _holds_partitions(c)]
    if nested:
        names = ", ".join(c.name for c in nested[:10]) + (" ..." if len(nested) > 10 else "")
        paths = ", ".join(repr(str(c)) for c in nested[:3])
        raise OptionError(
            f"no topic-partition directories in {raw}; its subfolders {names} look like data "
            f"directories (they hold <topic>-<partition> folders): load one of them, or several "
            f"of one broker's log.dirs with load([{paths}{', ...' if len(nested) > 3 else ''}])"
        )
    what = "it is empty" if not children else "none of its entries is one"
    if warn:
        notice(
            f"no topic-partition directories in {raw} ({what}; a Kafka data directory holds "
            f"folders named <topic>-<partition> with .log segment files): nothing is read from it"
        )


def _nested_data_dir(path: Path) -> bool:
    """Whether a folder named like a partition (``broker-1``) is rather a data directory: no
    segment file in it, and folders named like partitions."""
    nested = False
    try:
        for p in path.iterdir():
            if p.name.endswith(LOG_FILE_SUFFIX):
                return False
            if not nested and _is_partition_name(p.name) and p.is_dir():
                nested = True
    except OSError:
        return False
    return nested


def _holds_partitions(path: Path, limit: int = 1000) -> bool:
    try:
        entries = path.iterdir()
        for n, p in enumerate(entries):
            if n >= limit:
                break
            if p.is_dir() and _is_partition_name(p.name):
                return True
    except OSError:
        return False
    return False


def _is_partition_name(name: str) -> bool:
    try:
        return parse_partition_dir_name(name).kind == PartitionDirKind.LIVE
    except (InvalidFileNameError, KafkalogError):
        return False


def _is_partition_dir(path: Path) -> bool:
    return _is_partition_name(path.name) and any(
        p.name.endswith(LOG_FILE_SUFFIX) for p in path.iterdir()
    )


class IndexHints:
    """A segment's offset index taken as hints. Entries are kept up to the first that breaks the
    index rules (offsets and positions strictly increase, positions inside the segment's planned
    bytes); a position is used only once the batch header there is read and its base offset is at
    or below the entry's offset. An entry that fails sets the whole index aside: the segment is
    then read from its start, as Kafka rebuilds an index it cannot trust."""

    def __init__(self, path: str, segment: LogSegment, end_position: int) -> None:
        self.path = path
        self.base_offset = segment.base_offset
        self.end_position = end_position
        self._index = segment.offset_index  # read on first use: most segments' never are
        self._records = segment.log
        self._checked: set[int] = set()

    @functools.cached_property
    def offsets(self) -> np.ndarray:
        self.positions = np.zeros(0, dtype=np.int64)
        index, self._index = self._index, None
        if index is None or index.entries == 0:
            return np.zeros(0, dtype=np.int64)
        try:
            raw = _index_entries(index, ">i4", 2 * index.entries)
        except (OSError, ValueError):
            return np.zeros(0, dtype=np.int64)
        raw = raw[: len(raw) // 2 * 2].reshape(-1, 2).astype(np.int64)
        rel, pos = raw[:, 0], raw[:, 1]
        ok = (rel >= 0) & (pos >= 0) & (pos < self.end_position)
        ok[1:] &= (np.diff(rel) > 0) & (np.diff(pos) > 0)
        good = len(ok) if ok.all() else int(np.argmin(ok))
        self.positions = pos[:good]
        return rel[:good] + self.base_offset

    def _usable(self, n: int) -> bool:
        if n in self._checked:
            return True
        offset, position = int(self.offsets[n]), int(self.positions[n])
        try:
            if is_remote(self.path):  # one ranged read (of a block, with the next headers)
                head = self._records.read(position, HEADER_PEEK)
            else:
                with open(self.path, "rb") as f:
                    head = os.pread(f.fileno(), HEADER_PEEK, position)
            header = entry_header(head, 0, self.end_position - position)
        except (OSError, KafkalogError):
            header = None
        if header is None or header.base_offset > offset or header.base_offset < self.base_offset:
            self.offsets = self.positions = np.zeros(0, dtype=np.int64)  # set aside
            self._checked.clear()
            return False
        self._checked.add(n)
        return True

    def floor(self, offset: int) -> int:
        """A batch start at or before the batch holding ``offset`` (0 without usable hints)."""
        n = int(np.searchsorted(self.offsets, offset, side="right")) - 1
        return int(self.positions[n]) if n >= 0 and self._usable(n) else 0

    def last(self) -> int:
        """The position of the last usable entry's batch (0 without usable hints)."""
        n = len(self.offsets) - 1
        return int(self.positions[n]) if n >= 0 and self._usable(n) else 0

    def past(self, offset: int) -> int | None:
        """A batch start past every offset below ``offset``: the entry after the first entry
        whose offset is >= ``offset``; None when there is none."""
        n = int(np.searchsorted(self.offsets, offset, side="left")) + 1
        if n < len(self.offsets) and self._usable(n):
            return int(self.positions[n])
        return None

    def cuts(self, start: int, end: int, step: int) -> list[int]:
        """Batch starts about every ``step`` bytes between ``start`` and ``end``."""
        if not len(self.offsets):  # (reading the offsets loads the positions too)
            return []
        out: list[int] = []
        target = start + step
        while target < end - step // 4:
            n = bisect.bisect_left(self.positions, target)
            if n >= len(self.positions) or self.positions[n] >= end - step // 4:
                break
            if not self._usable(n):
                return []
            found = int(self.positions[n])
            if found > (out[-1] if out else start):
                out.append(found)
            target = max(target + step, found + step)
        return out


_TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative", ">i4")])


class TimeHints:
    """A segment's time index taken as hints: its entries up to the first that breaks the index
    rules (timestamps and offsets increase, offsets inside the segment). A rolled segment's last
    entry is its largest timestamp (Kafka appends it at the roll); entries only ever say where to
    start walking batch headers, which decide."""

    def __init__(self, segment: LogSegment, next_base: int | None) -> None:
        self._segment, self._next_base = segment, next_base  # read on first use

    @functools.cached_property
    def timestamps(self) -> np.ndarray:
        self.offsets = np.zeros(0, dtype=np.int64)
        segment, self._segment = self._segment, None
        index = segment.time_index
        if index is None or index.entries == 0:
            return np.zeros(0, dtype=np.int64)
        try:
            raw = _index_entries(index, _TIME_ENTRY, index.entries)
        except (OSError, ValueError):
            return np.zeros(0, dtype=np.int64)
        ts = raw["timestamp"].astype(np.int64)
        offsets = raw["relative"].astype(np.int64) + segment.base_offset
        ok = (raw["relative"] >= 0) & (ts >= 0)
        if self._next_base is not None:
            ok &= offsets < self._next_base
        ok[1:] &= (np.diff(ts) > 0) & (np.diff(offsets) >= 0)
        good = len(ok) if ok.all() else int(np.argmin(ok))
        self.offsets = offsets[:good]
        return ts[:good]

    def older_than(self, timestamp: int) -> bool:
        """Whether every record of the (rolled) segment is older than ``timestamp``."""
        return len(self.timestamps) > 0 and int(self.timestamps[-1]) < timestamp

    def start_offset(self, timestamp: int) -> int | None:
        """An offset at or before the first record with a timestamp >= ``timestamp``."""
        n = int(np.searchsorted(self.timestamps, timestamp, side="left")) - 1
        return int(self.offsets[n]) if n >= 0 else None


def _index_entries(index, dtype, count: int) -> np.ndarray:
    """An index file's first ``count`` items of ``dtype`` (the entries already fetched, for an
    index in object storage)."""
    if is_remote(index.file):
        return np.frombuffer(index.raw_entries(), dtype=dtype, count=count)
    return np.fromfile(index.file, dtype=dtype, count=count)


@dataclass
class SegmentInfo:
    base_offset: int
    path: str
    end_position: int  # bytes of complete batches (planned: later appends are not read)
    segment: LogSegment = field(repr=False)
    hints: IndexHints = field(repr=False)
    times: TimeHints = field(repr=False)


@dataclass
class PartitionLog:
    """A partition as planning sees it; ``close()`` releases its files."""

    tp: TopicPartition
    directory: Path
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    missing: list[tuple[int, int]]  # offset ranges of segments whose .log is gone
    # Damage that ends the last segment's valid entries (failOnDataLoss=true): raised by the
    # reader once the records before it are read, if the read reaches it.
    end_damage: DataLossError | None = None

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
        if offset <= seg.base_offset:
            return 0
        return min(seg.hints.floor(offset), seg.end_position)

    def split_positions(self, i: int, start: int, end: int, step: int) -> list[int]:
        """Batch-start positions in segment ``i`` about every ``step`` bytes between ``start``
        and ``end`` (from the offset index's usable hints; none without)."""
        return self.segments[i].hints.cuts(start, end, step)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose timestamp >= ``timestamp`` (ListOffsets), None if none.
        The time index says which rolled segments to skip and where to start; batch headers
        decide which batch to search."""
        for i, seg in enumerate(self.segments):
            if i + 1 < len(self.segments) and seg.times.older_than(timestamp):
                continue
            hinted = seg.times.start_offset(timestamp)
            pos = self.position_for(i, max(self.log_start_offset, hinted or 0))
            start = None
            for header in SegmentWalk(seg.path, pos, seg.end_position):
                if header.last_offset >= self.log_start_offset and (
                    header.max_timestamp >= timestamp or header.magic == 0
                ):
                    start = header.position
                    break
            if start is None:
                continue
            found = seg.segment.log.search_for_timestamp(timestamp, start, self.log_start_offset)
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
        snapshots = [s for s in _snapshot_files(self.directory) if s.offset <= self.log_end_offset]
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
            for h in SegmentWalk(seg.path, pos, seg.end_position):
                if h.magic < 2 or h.last_offset < start or not h.transactional:
                    continue
                if h.control:
                    open_txns.pop(h.producer_id, None)
                else:
                    open_txns.setdefault(h.producer_id, h.base_offset)
        return min(open_txns.values(), default=self.log_end_offset)


class _Snapshot(NamedTuple):
    offset: int
    path: os.PathLike


def _snapshot_files(directory) -> list:
    """The producer snapshots of a partition directory, by offset."""
    if not is_remote(directory):
        return list_snapshot_files(directory)
    found = [
        _Snapshot(int(p.name[: -len(".snapshot")]), p)
        for p in directory.iterdir()
        if p.name.endswith(".snapshot") and p.name[: -len(".snapshot")].isdigit()
    ]
    return sorted(found, key=lambda s: s.offset)


def _tail(
    seg: LogSegment, path: str, hints: IndexHints, max_message_bytes: Callable[[], int]
) -> tuple[int, SegmentWalk]:
    """(next offset, the walk) of the last segment, walking headers from its last usable index
    hint (its start without one). An incomplete last entry that verify would call damage (a
    size past the largest batch the topic accepts, ``max_message_bytes()``, or a whole batch
    inside the bytes it claims: :func:`kafkalog.log.verify.tail.partial_tail_problem`) is not a
    torn tail but corruption."""
    start = hints.last()
    walk = SegmentWalk(path, start).run()
    if walk.valid_end == start and start > 0:  # nothing valid past the hint: from the start
        walk = SegmentWalk(path, 0).run()
    left = (walk.end or 0) - walk.valid_end
    if walk.tail == Tail.PARTIAL and left > HEADER_SIZE_UP_TO_MAGIC:  # a header to judge
        limit = max_message_bytes()
        if is_remote(path):
            rest = seg.log.read(walk.valid_end, min(left, 2 * limit))
        else:
            with open(path, "rb") as f:
                rest = os.pread(f.fileno(), min(left, 2 * limit), walk.valid_end)
        problem = partial_tail_problem(rest, 0, max_batch_size=limit)
        if problem is not None:
            walk.tail = Tail.CORRUPT
            walk.error = CorruptRecordError(problem, position=walk.valid_end, path=path)
    next_offset = seg.base_offset if walk.last_offset is None else walk.last_offset + 1
    return max(next_offset, seg.base_offset), walk


def open_partition(
    tp: TopicPartition,
    directory: Path,
    *,
    fail_on_data_loss: bool,
    data_loss_log: str | None = None,
    max_message_bytes: Callable[[], int] = lambda: DEFAULT_MAX_MESSAGE_BYTES,
    remote_storage: str | os.PathLike | None = None,
    remote_metadata: Mapping | None = None,
) -> PartitionLog:
    """A partition's segments, start and end offsets, from listings, indexes and tails;
    ``max_message_bytes()`` is the topic's (the largest batch a torn append can have been),
    asked only when the log ends in an incomplete entry.

    A partition of a broker with tiered storage (copied remote segments in ``remote_metadata``,
    its data directory's ``__remote_log_metadata``) is read from ``remote_storage`` below its
    local segments; without it, those offsets are data loss (said, never silently left out)."""
    tiered = None
    end_damage = None
    if is_remote(directory):  # object storage: read-only by nature, nothing to recover
        loaded = _committed_segments(tp, directory)
    else:
        copied = (
            copied_remote_offsets(directory, metadata=remote_metadata) if remote_metadata else None
        )
        if copied is not None and remote_storage is not None:
            tiered = open_tiered_partition(directory, remote_storage, metadata=remote_metadata)
            loaded = [piece.segment for piece in tiered.segments]
        else:
            loaded = load_segments(directory, LogConfig(), SystemClock(), writable=False).segments
            if copied is not None:
                data_loss(
                    f"{tp}: offsets {copied[0]} to {copied[1]} are in tiered storage (give the "
                    "remote storage directory, option remoteStorage, to read them)",
                    fail_on_data_loss, log_dir=data_loss_log,
                )  # fmt: skip
    segments: list[SegmentInfo] = []
    for n, seg in enumerate(loaded):
        path = seg.log.path
        size = seg.log.file_size()
        if n + 1 < len(loaded):  # rolled: read whole (damage in it is the reader's)
            hints = IndexHints(path, seg, size)
            times = TimeHints(seg, loaded[n + 1].base_offset)
            segments.append(SegmentInfo(seg.base_offset, path, size, seg, hints, times))
            continue
        hints = IndexHints(path, seg, size)
        result_end, walk = _tail(seg, path, hints, max_message_bytes)
        if walk.tail in (Tail.PARTIAL, Tail.ZEROS):
            torn_tail(path, walk.valid_end, size, walk.tail)
        elif walk.tail == Tail.CORRUPT:
            assert walk.error is not None
            message = (
                f"{tp}: the log cannot be read past this point ({walk.error.message}), "
                f"so its records from offset {result_end} on are lost"
            )
            try:
                data_loss(message, fail_on_data_loss, cause=walk.error, log_dir=data_loss_log)
            except DataLossError as e:
                end_damage = e
        times = TimeHints(seg, None)
        segments.append(SegmentInfo(seg.base_offset, path, walk.valid_end, seg, hints, times))
    if tiered is not None and tiered.problem is not None:  # the readable prefix ends there
        try:
            data_loss(str(tiered.problem), fail_on_data_loss, cause=tiered.problem,
                      log_dir=data_loss_log)  # fmt: skip
        except DataLossError as e:
            end_damage = e
    if not segments:
        committed = is_remote(directory) and str(directory.parent) in _COMMITTED
        return PartitionLog(tp, directory, [], 0, 0, [] if committed else _orphans(directory, []))
    manifest = _COMMITTED.get(str(directory.parent)) if is_remote(directory) else None
    if manifest is not None and tp in manifest.partitions:
        start_cp = manifest.partitions[tp].log_start_offset
    else:
        start_cp = _log_start_checkpoint(directory.parent).get(tp, 0)
    first_base = segments[0].base_offset
    log_end = max(result_end, segments[-1].base_offset)
    log_start = max(start_cp, first_base)
    if start_cp > log_end:
        data_loss(
            f"{tp}: log-start-offset-checkpoint says {start_cp}, past the data present "
            f"(log end offset {log_end})",
            fail_on_data_loss,
            log_dir=data_loss_log,
        )
        log_start = first_base
    if manifest is not None:  # its commit names every segment; other objects are not yet
        missing = []
    else:
        missing = _orphans(directory, [s.base_offset for s in segments])
    if missing and missing[0][0] < first_base and start_cp <= missing[0][0]:
        log_start = missing[0][0]  # the log began at a segment that is gone: offsets lost
    return PartitionLog(tp, directory, segments, log_start, log_end, missing, end_damage)


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
    _COMMITTED.clear()
