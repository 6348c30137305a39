"""Opening a partition directory: leftovers, segments, indexes and recovery (Kafka's LogLoader).

Steps, as Kafka 4.x does them:

1. ``*.deleted`` files (retention's and the cleaner's trash) and ``*.cleaned`` files (an
   unfinished clean) go; ``*.swap`` files at or above the smallest ``.cleaned`` offset belong to
   an unfinished operation and go too; the other swaps are finished cleans that replace the
   segments they cover.
2. Index files without a ``.log`` go. A segment whose offset or time index is missing or fails
   its sanity check (Kafka's, and kafkalog's on the entries' order and range:
   :func:`check_indexes`) is recovered (indexes rebuilt).
3. After an unclean shutdown every segment from the recovery point on is recovered: batches are
   CRC-checked, the first invalid one and everything after it is cut, later segments dropped.
   After a clean one too when the last segment's end cannot be read (a zero-filled or corrupt
   tail, which only a crash leaves: the marker was stale or copied), with a warning naming the
   file and position; Kafka's startup fails on such a partition instead. Every segment recovered
   (here or in step 2) rewrites the producer snapshots as Kafka's recoverSegment does
   (:func:`_recover_segment`), and the load ends with the producer state rebuilt to the log end
   (:func:`rebuild_producer_state`).
4. The log start offset is the larger of the checkpointed one and the first segment's base.

A partition directory in object storage (a :class:`~kafkalog.log.storage.RemotePath` or its URL)
is only ever read: its live ``.log`` objects are its segments
(:func:`~kafkalog.log.segment.remote_segments.open_remote_segments`), and
:func:`open_remote_log` opens it as a read-only Log.

Where Kafka deletes, kafkalog moves files and cut bytes to the partition's quarantine
(:mod:`kafkalog.log.partition.quarantine`). Read-only opening does none of this: it only works out
which files make up the log as Kafka would load it (leftovers ignored, valid swaps used in place of
what they replace) and reports the rest.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ...errors import CorruptIndexError, CorruptRecordError
from ..clock import Clock
from ..datadir import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
    require_regular_entries,
)
from ..producer import ProducerStateManager
from ..segment import LogSegment, RecoveryScan, ValidPrefix, records_from
from ..storage import RemotePath, as_path, is_remote
from ..storage.remote_storage import missing_object
from .config import LogConfig
from .quarantine import Quarantine

__all__ = [
    "DroppedSegment",
    "LoadResult",
    "RecoveryRecord",
    "SegmentRecovery",
    "check_indexes",
    "classify_leftovers",
    "leftover_reason",
    "load_segments",
    "open_remote_log",
    "rebuild_producer_state",
]

if TYPE_CHECKING:
    from .log import Log

L = TypeVar("L", bound="Log")
_INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_log = logging.getLogger("kafkalog.log")


@dataclass(slots=True)
class LoadResult:
    segments: list[LogSegment]
    notes: list[str] = field(default_factory=list)  # what loading did or (read-only) would do
    recovered_bytes_cut: int = 0
    # Whether the segments from the recovery point on were recovered (an unclean shutdown, or
    # a last segment whose end could not be read).
    recovered: bool = False
    next_offset: int | None = None  # the log end offset, when loading read it
    # What a writable loading's recovery re-checked, cut and dropped (None: read-only).
    record: RecoveryRecord | None = None


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """A segment recovery re-checked: what its walk kept of the ``.log`` at ``path`` and why
    the rest went (:class:`~kafkalog.log.segment.ValidPrefix`, sizes as before the cut)."""

    path: Path
    base_offset: int
    prefix: ValidPrefix


@dataclass(frozen=True, slots=True)
class DroppedSegment:
    """A segment that left the log after a cut in the segment based at ``after``: its files as
    they were moved to the quarantine (path, bytes), and the records its batches held."""

    base_offset: int
    after: int
    files: tuple[tuple[Path, int], ...]
    records: int
    records_exact: bool


@dataclass(slots=True)
class RecoveryRecord:
    """What one writable loading of a partition directory recovered, cut and dropped."""

    recovered: list[SegmentRecovery] = field(default_factory=list)
    dropped: list[DroppedSegment] = field(default_factory=list)


def _files(directory: Path) -> list[Path]:
    """The regular files of a partition directory. Anything else but a folder (a FIFO, socket or
    device named like a segment, a symlink loop) is refused by name, unopened: nothing in a
    partition directory is skipped without a word."""
    require_regular_entries(directory)
    return sorted(p for p in directory.iterdir() if p.is_file())


def classify_leftovers(directory: Path) -> tuple[list[Path], list[Path], list[Path], list[Path]]:
    """(deleted, cleaned, invalid swaps, valid swap .log files)."""
    deleted, cleaned, swaps = [], [], []
    min_cleaned = None
    for path in _files(directory):
        name = path.name
        if name.endswith(DELETED_FILE_SUFFIX):
            deleted.append(path)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            cleaned.append(path)
            offset = offset_from_file_name(name)
            min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(path)
    invalid = [
        p for p in swaps if min_cleaned is not None and offset_from_file_name(p.name) >= min_cleaned
    ]
    valid_logs = [
        p for p in swaps if p not in invalid and p.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)
    ]
    return deleted, cleaned, invalid, valid_logs


def leftover_reason(path: Path) -> str:
    """Why loading sets aside a ``.deleted``, ``.cleaned`` or invalid ``.swap`` file that
    :func:`classify_leftovers` found."""
    if path.name.endswith(DELETED_FILE_SUFFIX):
        return "scheduled for deletion by retention or the cleaner"
    if path.name.endswith(CLEANED_FILE_SUFFIX):
        return "left by an unfinished log clean"
    return "swap file of an unfinished operation (at or above a .cleaned file's offset)"


def load_segments(
    directory: str | os.PathLike,
    config: LogConfig,
    clock: Clock,
    *,
    writable: bool,
    recovery_point: int = 0,
    had_clean_shutdown: bool = True,
    leader_epoch_cache=None,
    log_start_offset: int = 0,
) -> LoadResult:
    if is_remote(directory):  # copies in object storage: nothing to sort out or recover
        if writable:
            raise ValueError(f"{directory}: object storage is read-only")
        from ..segment import open_remote_segments  # imported here: it imports this package

        return LoadResult(open_remote_segments(as_path(directory), config, clock))
    directory = Path(directory)
    notes: list[str] = []
    record = RecoveryRecord() if writable else None
    quarantine = Quarantine(directory, clock_ms=clock.milliseconds()) if writable else None
    deleted, cleaned, invalid_swaps, valid_swaps = classify_leftovers(directory)
    for path in deleted + cleaned + invalid_swaps:
        why = leftover_reason(path)
        if quarantine is not None:
            quarantine.move_file(path, why)
        notes.append(f"{path.name}: {why}")

    # Finished cleans: the swap replaces the segments it covers.
    swap_segments: dict[int, LogSegment] = {}
    replaced: set[int] = set()
    for swap_log in valid_swaps:
        base = offset_from_file_name(swap_log.name)
        segment = LogSegment.open(
            directory, base, config, clock, writable=writable, suffix=SWAP_FILE_SUFFIX
        )
        if writable:
            segment.recover(producer_state=None)
        end = segment.read_next_offset()
        swap_segments[base] = segment
        for path in _files(directory):
            if path.name.endswith(LOG_FILE_SUFFIX):
                other = offset_from_file_name(path.name)
                if base <= other < max(end, base + 1):
                    replaced.add(other)
        notes.append(f"{swap_log.name}: a finished clean replacing segments {sorted(replaced)}")

    # Orphan indexes and the segments proper.
    logs = {
        offset_from_file_name(p.name): p
        for p in _files(directory)
        if p.name.endswith(LOG_FILE_SUFFIX)
    }
    for path in _files(directory):
        if path.name.endswith(_INDEX_SUFFIXES) and offset_from_file_name(path.name) not in logs:
            why = "index without a .log file"
            if quarantine is not None:
                quarantine.move_file(path, why)
            notes.append(f"{path.name}: {why}")

    # After an unclean shutdown every segment from the one holding the recovery point on is
    # recovered below (indexes rebuilt with it), so their indexes need no separate rebuild.
    recovered_from = None
    if writable and not had_clean_shutdown:
        bases = sorted((set(logs) - replaced) | set(swap_segments))
        below = [b for b in bases if b <= recovery_point]
        recovered_from = below[-1] if below else (bases[0] if bases else None)
    segments: dict[int, LogSegment] = {}
    rebuilt_state = False  # whether a segment's recovery rewrote producer snapshots
    first_cut: int | None = None  # base of the first segment whose index rebuild cut bytes
    live = sorted((set(logs) - replaced) | set(swap_segments))
    for base in sorted(logs):
        if base in replaced:
            if writable:
                for suffix in (LOG_FILE_SUFFIX, *_INDEX_SUFFIXES):
                    old = directory / (logs[base].name[: -len(LOG_FILE_SUFFIX)] + suffix)
                    if old.exists():
                        quarantine.move_file(old, "replaced by a finished clean (.swap)")
            continue
        if writable:
            missing = not (
                logs[base].with_suffix(INDEX_FILE_SUFFIX).exists()
                and logs[base].with_suffix(TIME_INDEX_FILE_SUFFIX).exists()
            )
            segment = LogSegment.open(directory, base, config, clock, writable=True)
            try:
                if recovered_from is None or base < recovered_from:  # else: recovered below
                    if missing:
                        raise CorruptIndexError("missing index")
                    check_indexes(segment, _next_base(live, base))
            except CorruptIndexError as e:
                notes.append(f"{logs[base].name}: indexes rebuilt ({e.message})")
                rebuilt_state = True
                cut = _recover_segment(
                    directory, clock, list(segments.values()), segment, log_start_offset,
                    quarantine, notes, None, record,
                )  # fmt: skip
                if cut and first_cut is None:
                    first_cut = base
        else:
            segment = LogSegment.open(directory, base, config, clock, writable=False)
        segments[base] = segment

    for base, segment in swap_segments.items():
        if writable:
            segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        segments[base] = segment
    ordered = [segments[b] for b in sorted(segments)]
    if first_cut is not None:
        # The log ends in that segment now: what follows would leave a gap in the offsets.
        at = next(i for i, s in enumerate(ordered) if s.base_offset == first_cut)
        _drop_after(ordered, at, quarantine, record)
        ordered = [s for s in ordered if not s.dropped]

    cut = 0
    unclean = writable and not had_clean_shutdown
    next_offset = None
    if writable and not unclean and ordered:
        # A clean shutdown skips recovery, but a last segment whose end cannot be read (a
        # zero-filled or corrupt tail: a crash with preallocated files, a stale or copied
        # marker) cannot be appended to nor served: recover this partition as after an
        # unclean shutdown, instead of refusing to open it.
        next_offset, problem = _read_end(ordered[-1])
        if problem is not None:
            where = f"{ordered[-1].log.path}, position {problem.position}"
            _log.warning(
                "%s: the end of the log cannot be read (%s) although the last shutdown was "
                "clean: recovering %s as after an unclean shutdown",
                where,
                problem.message,
                directory.name,
            )
            notes.append(
                f"{where}: the end of the log cannot be read ({problem.message}): recovered as "
                f"after an unclean shutdown"
            )
            unclean = True
    if unclean:
        cut = _recover_from(
            ordered,
            recovery_point,
            quarantine,
            notes,
            leader_epoch_cache,
            directory,
            clock,
            log_start_offset,
            record,
        )
        ordered = [s for s in ordered if not s.dropped]
        next_offset = None
        rebuilt_state = True
    if rebuilt_state and ordered:
        # Kafka's LogLoader.load ends with the producer state rebuilt up to the log end (stray
        # snapshots removed first): that reload deletes and writes snapshot files too.
        end = ordered[-1].read_next_offset()
        state = _producer_state(directory, clock, quarantine)
        state.remove_stray_snapshots(s.base_offset for s in ordered)
        rebuild_producer_state(
            state, ordered, max(log_start_offset, ordered[0].base_offset), end,
            reload_from_clean_shutdown=had_clean_shutdown,
        )  # fmt: skip
    return LoadResult(
        ordered, notes, cut, recovered=unclean, next_offset=next_offset, record=record
    )


def open_remote_log(
    log_class: type[L],
    directory: RemotePath,
    config: LogConfig,
    clock: Clock,
    *,
    log_start_offset: int = 0,
    bases: Collection[int] | None = None,
) -> L:
    """A partition directory in object storage opened read-only as ``log_class`` (a Log): what
    ``Log.open`` gives for a local one opened read-only, found by one listing. Its log end is
    where the last segment's readable batches end; every offset counts as recovered (nothing
    is left to recover in a copy). ``bases``: the segments a commit names (a writer's
    manifest), the only ones read; None: every segment listed."""
    if not directory.is_dir():
        raise missing_object(str(directory))
    log = log_class(directory, config, clock, False)
    segments = load_segments(directory, config, clock, writable=False).segments
    if bases is not None:
        for uncommitted in [s for s in segments if s.base_offset not in bases]:
            uncommitted.close()
        segments = [s for s in segments if s.base_offset in bases]
    log.segments = segments
    first_base = log.segments[0].base_offset if log.segments else log_start_offset
    log.log_start_offset = max(log_start_offset, first_base)
    log._log_end_offset = log._read_log_end_offset() if log.segments else first_base
    log.recovery_point = log.durable_offset = log._log_end_offset
    return log


def _read_end(segment: LogSegment) -> tuple[int | None, CorruptRecordError | None]:
    """The offset after ``segment``'s last batch, or the framing error that stops reading it."""
    try:
        return segment.read_next_offset(), None
    except CorruptRecordError as e:
        return None, e


def check_indexes(segment: LogSegment, next_base: int | None) -> None:
    """Raise :class:`CorruptIndexError` when the loader rebuilds ``segment``'s indexes: Kafka's
    sanity checks (OffsetIndex, TimeIndex and TransactionIndex ``sanityCheck``), and the entries'
    order and range (offsets and positions increasing, positions inside the ``.log``, offsets
    below the next segment's base offset ``next_base``): indexes are hints, and one that breaks
    these is rebuilt rather than trusted."""
    segment.offset_index.sanity_check()
    segment.time_index.sanity_check()
    segment.txn_index.sanity_check()
    segment.offset_index.check_entries(segment.log.size_in_bytes(), next_base)
    segment.time_index.check_entries(next_base)


def _next_base(bases: list[int], base: int) -> int | None:
    i = bisect_right(bases, base)
    return bases[i] if i < len(bases) else None


def _recover(
    segment: LogSegment, quarantine, notes, producer_state, leader_epoch_cache, scan, record
) -> int:
    prefix: list[ValidPrefix] = []

    def keep_tail(valid_bytes: int) -> None:
        size = segment.log.file_size()
        data = segment.log.read(valid_bytes, size - valid_bytes)
        if not data.strip(b"\0"):
            why = "a zero-filled tail (preallocated space not written before a crash)"
        else:
            why = "a torn or corrupt batch and everything after it (failed CRC or framing)"
        quarantine.save_bytes(os.path.basename(segment.log.path), valid_bytes, data, why)
        if record is not None:
            prefix.append(scan.walk.prefix(tail=data))

    cut = segment.recover(producer_state, leader_epoch_cache, before_truncate=keep_tail, scan=scan)
    if cut:
        notes.append(f"{os.path.basename(segment.log.path)}: recovery cut {cut} bytes")
    if record is not None:
        kept = prefix[0] if prefix else scan.walk.prefix(tail=b"")
        record.recovered.append(SegmentRecovery(Path(segment.log.path), segment.base_offset, kept))
    return cut


def _recover_from(
    segments, recovery_point, quarantine, notes, epochs, directory, clock, log_start_offset, record
) -> int:
    """Recover every segment that may hold data written after the recovery point (Kafka's
    LogLoader.recoverLog), each with :func:`_recover_segment`."""
    start = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            start = i
    if start >= len(segments):
        return 0
    total = 0
    for i in range(start, len(segments)):
        segment = segments[i]
        cut = _recover_segment(
            directory, clock, segments, segment, log_start_offset, quarantine, notes, epochs,
            record,
        )  # fmt: skip
        total += cut
        if cut:
            _drop_after(segments, i, quarantine, record)
            break
    return total


def _producer_state(directory, clock, quarantine) -> ProducerStateManager:
    """A producer state manager over the snapshot files on disk now, whose deleted snapshots go
    to the quarantine."""

    def discard(path, why: str) -> None:
        quarantine.move_file(path, f"producer snapshot {why} (Kafka's log recovery deletes it)")

    return ProducerStateManager(directory, clock=clock, discard_snapshot=discard)


def _recover_segment(
    directory, clock, segments, segment, log_start_offset, quarantine, notes, epochs, record=None
) -> int:
    """Kafka's LogLoader.recoverSegment: a fresh producer state rebuilt up to the segment's base
    offset (:func:`rebuild_producer_state`: snapshots above it deleted, the newest one at or
    below it reloaded without the producers expired by now, the batches after it replayed), the
    segment recovered with it (aborted transactions to the ``.txnindex``), then a snapshot taken
    at the segment's new end. ``segments`` are the log's segments as Kafka's recovery sees them
    (for the snapshots it takes at the last two segments' bases). The segment's walk comes
    first (:meth:`LogSegment.recovery_scan`): a marker producer state cannot take stops the
    recovery there, before the snapshots change. Returns the bytes cut."""
    scan: RecoveryScan = segment.recovery_scan()
    state = _producer_state(directory, clock, quarantine)
    rebuild_producer_state(state, segments, log_start_offset, segment.base_offset)
    cut = _recover(segment, quarantine, notes, state, epochs, scan, record)
    state.take_snapshot()
    return cut


def rebuild_producer_state(
    state: ProducerStateManager,
    segments: list[LogSegment],
    log_start_offset: int,
    last_offset: int,
    *,
    reload_from_clean_shutdown: bool = False,
) -> None:
    """Kafka's UnifiedLog.rebuildProducerState (magic v2 logs): bring ``state`` to
    ``last_offset``, deleting and writing snapshot files as Kafka does.

    Without any snapshot after a clean shutdown, empty snapshots are taken at the last two
    segments' bases and at ``last_offset`` (nothing is replayed). Otherwise snapshots outside
    (log start, last offset] are deleted, the newest remaining one is loaded (producers idle for
    ``producer.id.expiration.ms`` by the clock's now are dropped), the batches from there to
    ``last_offset`` are replayed (a snapshot taken at the base of either of the last two
    segments on the way), and a snapshot is taken at ``last_offset``.
    """
    to_snapshot: list[int] = []
    if segments:
        if len(segments) > 1:
            to_snapshot.append(segments[-2].base_offset)
        to_snapshot.append(segments[-1].base_offset)
    to_snapshot.append(last_offset)
    if state.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in to_snapshot:
            state.update_map_end_offset(offset)
            state.take_snapshot()
        return
    empty_before = state.is_empty() and state.map_end_offset >= last_offset
    state.truncate_and_reload(log_start_offset, last_offset)
    if last_offset > state.map_end_offset and not empty_before:
        bases = [s.base_offset for s in segments]
        last_segment = bisect_right(bases, last_offset) - 1  # the floor segment of last_offset
        start_index = max(bisect_right(bases, state.map_end_offset) - 1, 0)
        for i in range(start_index, len(segments)):
            segment = segments[i]
            if segment.base_offset >= last_offset:
                break
            start = max(segment.base_offset, state.map_end_offset, log_start_offset)
            state.update_map_end_offset(start)
            if segment.base_offset in to_snapshot:
                state.take_snapshot()
            state.load_producers_from_batches(
                batch
                for batch in segment.log.batches()
                if batch.last_offset >= start
                and (i != last_segment or batch.last_offset < last_offset)
            )
    state.update_map_end_offset(last_offset)
    state.take_snapshot()


def _drop_after(segments: list[LogSegment], i: int, quarantine, record=None) -> None:
    """Move every segment after ``segments[i]``, which recovery cut, to the quarantine."""
    for later in segments[i + 1 :]:
        records, exact = records_from(later, later.log.start) if record is not None else (0, True)
        later.close()
        moved = []
        for path in (
            later.log.path,
            later.offset_index_path,
            later.time_index_path,
            later.txn_index.file,
        ):
            if os.path.exists(path):
                size = os.path.getsize(path)
                quarantine.move_file(
                    path, f"after a corrupt batch in segment {segments[i].base_offset}"
                )
                moved.append((Path(path), size))
        later.dropped = True
        if record is not None:
            record.dropped.append(
                DroppedSegment(later.base_offset, segments[i].base_offset, tuple(moved), records,
                               exact)
            )  # fmt: skip
