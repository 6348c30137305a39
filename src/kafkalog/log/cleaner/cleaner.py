"""Log compaction: Kafka's log cleaner (Cleaner.doClean, LocalLog.replaceSegments).

A compacted log has a *clean* head, already deduplicated, and a *dirty* tail up to the first
uncleanable offset (:mod:`.cleaner_manager` says where, and whether a clean is due). A clean

1. maps every key of the dirty part to its latest offset (:class:`~.offset_map.OffsetMap`,
   keyed by MD5 like Kafka's), skipping aborted transactions;
2. rewrites every segment below that offset, clean and dirty alike, in groups whose total stays
   under segment.bytes and the index size (groupSegmentsBySize), each group into one
   ``<base>.log.cleaned`` (with indexes) by :mod:`.cleaner_filter`'s rules;
3. swaps each group in: ``.cleaned`` -> ``.swap`` (highest first), the old segments -> ``.deleted``
   and deleted, ``.swap`` -> final names. A crash at any step is finished or undone by the loader
   (a ``.cleaned`` file, and any ``.swap`` at or above it, means "undo"; a lone ``.swap`` "finish");
4. writes the new dirty start to ``cleaner-offset-checkpoint`` (atomically, as every checkpoint).

``clean(..., dry_run=True)`` takes the same decisions on a log that may be open read-only and
reports what would go, changing nothing. Kafka then deletes old segments of ``compact,delete``
logs; here that is :meth:`Log.delete_old_segments`, left to the caller.

A caller that cleans while others use the log (a broker: appends to the active segment, reads)
runs the clean on a thread of its own and passes ``exclusive``, which runs a function where
nothing else touches the log and returns its result (the broker: on its event loop, waited for).
Every step that reads the log's mutable state (the dirty range, the producers) or changes the
log (the renames of each swap) goes through it; the slow part, reading segments that are no
longer active, writing and fsyncing the ``.cleaned`` files, does not, and neither do the
directory fsyncs that order a swap's renames: they run on the cleaning thread between its
exclusive steps (see :func:`replace_segments`), as does the checkpoint's write. ``delete_later``
receives the old segments once renamed ``.deleted`` instead of removing them at once
(file.delete.delay.ms).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..datadir import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from ..partition import Log
from ..segment import AbortedTxn, LogSegment, keys_and_offsets
from .filter import (
    CleanedTransactionMetadata,
    CleanerStats,
    LastRecord,
    LogCleanerFilter,
    filter_batch,
)
from .manager import (
    LogToClean,
    cleanable_ratio,
    is_due,
    log_to_clean,
    needs_cleaning,
    read_cleaner_checkpoint,
    segments_in_range,
    write_cleaner_checkpoint,
)
from .offset_map import DEFAULT_DEDUPE_BUFFER_SIZE, OffsetMap

__all__ = [
    "CleanResult",
    "LogToClean",
    "clean",
    "cleanable_ratio",
    "group_segments_by_size",
    "log_to_clean",
    "needs_cleaning",
    "read_cleaner_checkpoint",
    "replace_segments",
]

_INT32_MAX = (1 << 31) - 1


class Exclusive(Protocol):
    """Runs ``fn`` where nothing else touches the log and returns its result. ``finishing``:
    the step completes a swap whose first renames are done, so a caller that is stopping
    still runs it (one refused there would leave the swap to the loader)."""

    def __call__(self, fn: Callable[[], Any], *, finishing: bool = False) -> Any: ...


def _call(fn: Callable[[], Any], *, finishing: bool = False) -> Any:
    return fn()


# -- cleaning (Cleaner) ----------------------------------------------------------------------------
@dataclass(slots=True)
class CleanResult:
    """What a clean did (or, ``dry_run``, would do); ``end_offset`` is the new checkpoint."""

    cleaned: bool
    dry_run: bool
    first_dirty_offset: int
    first_uncleanable_offset: int
    end_offset: int
    stats: CleanerStats
    segments_before: list[int] = field(default_factory=list)  # base offsets rewritten
    segments_after: list[int] = field(default_factory=list)
    buffer_utilization: float = 0.0
    reason: str = ""  # why nothing was cleaned

    @property
    def records_kept(self) -> int:
        return self.stats.messages_written

    @property
    def records_removed(self) -> int:
        return self.stats.records_removed

    @property
    def bytes_read(self) -> int:
        return self.stats.bytes_read

    @property
    def bytes_written(self) -> int:
        return self.stats.bytes_written

    @property
    def messages(self) -> list[str]:
        return self.stats.messages


def clean(
    log: Log,
    *,
    now_ms: int | None = None,
    force: bool = False,
    dry_run: bool = False,
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    max_messages: int = 1000,
    exclusive: Exclusive | None = None,
    delete_later: Callable[[LogSegment], None] | None = None,
) -> CleanResult:
    """Compact ``log`` once, if it needs it (``force``: whatever its dirty ratio or lag).

    ``dry_run`` changes no file (the log may be read-only) and reports what would be removed.
    At most ``max_messages`` removal messages are kept; the counts are always complete.
    ``exclusive`` and ``delete_later``: for a log in use meanwhile (see the module docstring).
    """
    run = exclusive or _call
    if not log.config.compact:
        raise ValueError(
            f"{log.dir} is not compacted (cleanup.policy={log.config['cleanup.policy']})"
        )
    if not dry_run and not log.writable:
        raise PermissionError(f"{log.dir} is open read-only (use dry_run=True)")
    now = log.clock.milliseconds() if now_ms is None else now_ms
    ltc = run(lambda: log_to_clean(log, now_ms=now))
    stats = CleanerStats(max_messages=max_messages)
    result = CleanResult(
        cleaned=False,
        dry_run=dry_run,
        first_dirty_offset=ltc.first_dirty_offset,
        first_uncleanable_offset=ltc.first_uncleanable_offset,
        end_offset=ltc.first_dirty_offset,
        stats=stats,
    )
    if ltc.force_update_checkpoint:
        stats.messages.append(
            f"cleaner-offset-checkpoint {read_cleaner_checkpoint(log)} is outside the log "
            f"[{log.log_start_offset}, {log.log_end_offset}]: cleaning from the log start"
        )
        if not dry_run:
            run(lambda: None)  # refused when the log is gone
            write_cleaner_checkpoint(log, ltc.first_dirty_offset)
    if ltc.cleanable_bytes == 0:
        result.reason = "nothing cleanable: the dirty section is empty or uncleanable"
        return result
    if not force and not is_due(log, ltc):
        result.reason = (
            f"dirty ratio {ltc.cleanable_ratio:.3f} <= min.cleanable.dirty.ratio "
            f"{log.config['min.cleanable.dirty.ratio']} and no segment past max.compaction.lag.ms"
        )
        return result
    offset_map = OffsetMap(dedupe_buffer_size)
    _Cleaner(log, offset_map, now, stats, dry_run, result, run, delete_later).do_clean(ltc)
    result.cleaned = True
    result.buffer_utilization = offset_map.utilization()
    # After the swaps' final directory fsyncs (Kafka's order). The checkpoint file is the cleaner's
    # alone, so its write (two fsyncs) needs no exclusive step: one only refuses a log now gone.
    if not dry_run and not (run(lambda: True) and write_cleaner_checkpoint(log, result.end_offset)):
        stats.messages.append(
            f"no cleaner-offset-checkpoint written: {log.dir.name} is not a partition directory"
        )
    return result


@dataclass
class _Cleaner:
    """One clean of one log (Kafka's Cleaner.doClean and what it calls)."""

    log: Log
    map: OffsetMap
    now: int
    stats: CleanerStats
    dry_run: bool
    result: CleanResult
    run: Exclusive = _call
    delete_later: Callable[[LogSegment], None] | None = None

    def do_clean(self, ltc: LogToClean) -> None:
        log = self.log
        # Legacy (magic < 2) tombstones have no horizon of their own: they go once their segment
        # is older than delete.retention.ms before the last clean segment was modified.
        clean_segments = segments_in_range(log, 0, ltc.first_dirty_offset)
        legacy_delete_horizon = (
            clean_segments[-1].last_modified() - log.config["delete.retention.ms"]
            if clean_segments
            else 0
        )
        self.build_offset_map(ltc.first_dirty_offset, ltc.first_uncleanable_offset)
        end_offset = self.map.latest_offset + 1
        self.result.end_offset = end_offset
        groups = group_segments_by_size(
            segments_in_range(log, 0, end_offset),
            log.config.segment_size,
            log.config["segment.index.bytes"],
            ltc.first_uncleanable_offset,
        )
        txn = CleanedTransactionMetadata()
        active = self.run(lambda: {
            pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None,
                            e.producer_epoch)
            for pid, e in log.producer_state.active_producers.items()
        })  # fmt: skip
        for group in groups:
            self.clean_segments(group, txn, active, legacy_delete_horizon)

    # -- the offset map ----------------------------------------------------------------------------
    def build_offset_map(self, start: int, end: int) -> None:
        self.map.clear()
        dirty = segments_in_range(self.log, start, end)
        next_starts = [s.base_offset for s in dirty[1:]] + [end]
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(self.collect_aborted_transactions(start, end))
        for segment, next_start in zip(dirty, next_starts):
            if self._map_segment(segment, start, next_start, txn):
                break  # full: the clean ends where the map does

    def _map_segment(
        self, segment: LogSegment, start: int, next_start: int, txn: CleanedTransactionMetadata
    ) -> bool:
        """Put the keys of ``segment`` from ``start`` on; True when the map filled up."""
        stats, offset_map = self.stats, self.map
        max_desired = offset_map.max_desired_size
        position = segment.offset_index.lookup(start).position if segment.offset_index else 0
        if not 0 <= position <= segment.size():
            position = 0  # an index that is not the log's (a read-only open does not check it)
        for batch in segment.log.batches(position):
            stats.map_bytes_read += batch.size_in_bytes
            if batch.is_control:
                txn.on_control_batch_read(batch)
                stats.map_messages_read += 1
            elif txn.on_batch_read(batch):
                stats.map_messages_read += batch.count  # aborted: its keys must not count
            else:
                for key, offset in keys_and_offsets(batch):
                    if key is not None and offset >= start:
                        if offset_map.size >= max_desired:
                            return True
                        offset_map.put(key, offset)
                    stats.map_messages_read += 1
            if batch.last_offset >= start:
                offset_map.update_latest_offset(batch.last_offset)
        offset_map.update_latest_offset(next_start - 1)  # over any offset gap to the next segment
        return False

    def collect_aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """UnifiedLog.collectAbortedTransactions: from the segment holding ``start`` on, every
        aborted transaction above the log start whose first offset is below ``upper``."""
        log = self.log
        first = log.segment_for(start)
        if first is None:
            return []
        found: list[AbortedTxn] = []
        for segment in log.segments[log.segments.index(first) :]:
            search = segment.collect_aborted_txns(log.log_start_offset, upper)
            found.extend(search.aborted_txns)
            if search.is_complete:
                break
        return found

    # -- rewriting -------------------------------------------------------------------------------
    def clean_segments(
        self,
        group: list[LogSegment],
        txn: CleanedTransactionMetadata,
        active: dict[int, LastRecord],
        legacy_delete_horizon: int,
    ) -> None:
        """Clean a group of segments into one (more past 2 GiB or 2^31 offsets) and swap it in.

        The transaction state carries over from group to group: a transaction may span them.
        """
        log, stats = self.log, self.stats
        cleaned: list[LogSegment] = []
        bases = [group[0].base_offset]
        dest = None if self.dry_run else _create_cleaned_segment(log, group[0].base_offset)
        dest_size = 0
        try:
            for segment in group:
                # Kafka's upper bound: the next segment's base (the last cleaned segment is never
                # the active one), read from the log only when there is none.
                following = [s.base_offset for s in log.segments
                             if s.base_offset > segment.base_offset]  # fmt: skip
                upper = min(following) if following else segment.read_next_offset()
                txn.add_aborted_transactions(
                    self.collect_aborted_transactions(segment.base_offset, upper)
                )
                record_filter = LogCleanerFilter(
                    current_time=self.now,
                    delete_retention_ms=log.config["delete.retention.ms"],
                    offset_map=self.map,
                    retain_legacy_deletes=segment.last_modified() > legacy_delete_horizon,
                    transaction_metadata=txn,
                    last_records_of_active_producers=active,
                    high_watermark=log.high_watermark,
                    stats=stats,
                )
                for batch in segment.log.batches():
                    stats.bytes_read += batch.size_in_bytes
                    out = filter_batch(batch, record_filter)
                    retained_txns, txn.retained_aborted_txns = txn.retained_aborted_txns, []
                    if out is None:
                        continue
                    if dest_size > 0 and (
                        out.size_in_bytes > _INT32_MAX - dest_size
                        or out.last_offset - bases[-1] > _INT32_MAX
                    ):  # recompression or merging outgrew a segment: start another one
                        bases.append(batch.base_offset)
                        if dest is not None:
                            cleaned.append(_finish(dest, segment.last_modified()))
                            dest = _create_cleaned_segment(log, batch.base_offset)
                        dest_size = 0
                    if dest is not None:
                        data = out.data
                        if data is None:  # unchanged: copy the original bytes
                            data = segment.log.read(batch.position, batch.size_in_bytes)
                        dest.append(out.last_offset, data)
                        for aborted in retained_txns:
                            dest.txn_index.append(aborted)
                    dest_size += out.size_in_bytes
                    stats.bytes_written += out.size_in_bytes
                    stats.messages_written += out.records_retained
            if dest is not None:
                cleaned.append(_finish(dest, group[-1].last_modified()))
        except Exception:  # a crash (or kill) leaves the .cleaned files to the loader
            for segment in [*cleaned, dest]:
                if segment is not None:
                    segment.delete_if_exists()
            raise
        self.result.segments_before.extend(s.base_offset for s in group)
        self.result.segments_after.extend(bases)
        if not self.dry_run:
            try:
                replace_segments(log, cleaned, group, self.delete_later, exclusive=self.run)
            except BaseException:
                # Refused before any rename (the caller's exclusive step: the log is gone or the
                # caller stops): the .cleaned files go. A failure midway is left to the loader.
                if all(str(s.log.path).endswith(CLEANED_FILE_SUFFIX) for s in cleaned):
                    for segment in cleaned:
                        segment.delete_if_exists()
                raise


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose log bytes, offset index bytes and
    time index bytes each total at most the limits, and whose offsets fit one segment's 32-bit
    relative offsets, become one cleaned segment, so that compaction does not leave a trail of
    ever smaller segments."""
    grouped: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size, index_size, time_size = first.size(), *_index_sizes(first)
        i += 1
        while i < n:
            candidate = segments[i]
            c_index, c_time = _index_sizes(candidate)
            # The candidate's last offset, estimated without a scan: the next base minus one.
            last = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (
                log_size + candidate.size() <= max_size
                and index_size + c_index <= max_index_size
                and time_size + c_time <= max_index_size
                and (candidate.size() == 0 or last - first.base_offset <= _INT32_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size()
            index_size += c_index
            time_size += c_time
            i += 1
        grouped.append(group)
    return grouped


def _index_sizes(segment: LogSegment) -> tuple[int, int]:
    # A read-only segment may have no index files (dry runs over copied disks).
    return tuple(0 if index is None else index.size_in_bytes
                 for index in (segment.offset_index, segment.time_index))  # fmt: skip


def _create_cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    """A new ``<base>.log.cleaned`` with its indexes; leftovers of an earlier try go first."""
    for name in (log_file, offset_index_file, time_index_file, transaction_index_file):
        Path(name(log.dir, base_offset, CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)
    return LogSegment.open(log.dir, base_offset, log.config, log.clock, writable=True,
                           file_already_exists=False, suffix=CLEANED_FILE_SUFFIX)  # fmt: skip


def _finish(segment: LogSegment, last_modified_ms: int) -> LogSegment:
    """Trim and fsync a cleaned segment; it keeps the source's mtime, which legacy tombstones'
    retention is measured from."""
    segment.on_become_inactive_segment()
    segment.flush()
    ns = last_modified_ms * 1_000_000
    for path in (segment.log.path, segment.offset_index_path, segment.time_index_path):
        os.utime(path, ns=(ns, ns))
    return segment


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- swapping in (LocalLog.replaceSegments) --------------------------------------------------------
def replace_segments(
    log: Log,
    new_segments: list[LogSegment],
    old_segments: list[LogSegment],
    delete_later: Callable[[LogSegment], None] | None = None,
    *,
    exclusive: Exclusive | None = None,
) -> None:
    """Replace ``old_segments`` of ``log`` by the ``.cleaned`` ``new_segments``, crash-safely.

    Three steps, each a batch of renames, with a directory fsync after each, so that no rename
    of a step can reach the disk before every rename of the step before it (a power cut must
    leave a state the loader reads right):

    1. ``.cleaned`` -> ``.swap``, from the highest base down (a crash midway leaves a
       ``.cleaned`` below every ``.swap``: the loader undoes them all);
    2. the old segments -> ``.deleted`` (then deleted, or given to ``delete_later``: readers
       still holding them keep reading until then) and the new ones take their place in the
       log (a crash leaves ``.swap`` files alone: the loader finishes the swap);
    3. the ``.swap`` suffixes go.

    Each step runs through ``exclusive`` (steps 2 and 3 as ``finishing``), each fsync on the
    calling thread after it returns: a broker's event loop does the renames, never an fsync,
    and between the steps it serves the log as it was (before step 2: the old segments, under
    their names; after it: the new ones, still named ``.swap``). If the first fsync fails the
    ``.swap`` files are removed, the log untouched; a later failure leaves the rest to the
    loader.
    """
    run = exclusive or _call
    new_sorted = sorted(new_segments, key=lambda s: s.base_offset)

    def to_swap() -> None:
        for segment in reversed(new_sorted):
            segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)

    def install() -> None:
        old_sorted = sorted((s for s in old_segments if s in log.segments),
                            key=lambda s: s.base_offset)  # fmt: skip
        by_base = {s.base_offset: s for s in log.segments}
        for segment in new_sorted:
            by_base[segment.base_offset] = segment
        new_bases = {s.base_offset for s in new_sorted}
        for segment in old_sorted:
            if segment.base_offset not in new_bases:
                del by_base[segment.base_offset]
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            if delete_later is None:
                segment.delete_if_exists()
            else:
                delete_later(segment)
        log.segments[:] = [by_base[b] for b in sorted(by_base)]
        removed.extend(s.base_offset for s in old_sorted if s.base_offset not in new_bases)

    def from_swap() -> None:
        # A segment retention or DeleteRecords removed meanwhile is no longer named .swap.
        for segment in new_sorted:
            if segment in log.segments and str(segment.log.path).endswith(SWAP_FILE_SUFFIX):
                segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        if removed and log.writable:
            # Kafka deletes the producer snapshots named after segments that are gone.
            log.producer_state.remove_stray_snapshots(s.base_offset for s in log.segments)

    removed: list[int] = []  # old bases no new segment takes
    run(to_swap)
    try:
        _fsync_dir(log.dir)
    except BaseException:
        with contextlib.suppress(Exception):  # (refused: the log is gone anyway)
            run(lambda: [segment.delete_if_exists() for segment in new_sorted], finishing=True)
        raise
    run(install, finishing=True)
    _fsync_dir(log.dir)
    run(from_swap, finishing=True)
    _fsync_dir(log.dir)
