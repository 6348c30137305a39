"""Which logs need compaction, and how much of each: Kafka's LogCleanerManager and LogToClean.

The dirty part of a compacted log runs from the cleaner-offset-checkpoint (or the log start) up to
the first uncleanable offset: the smallest of the last stable offset, the active segment's base
and, with min.compaction.lag.ms, the base of the first segment holding a record younger than the
lag; it is then moved down to the base of the segment holding it, so only whole segments are
cleaned. A log needs cleaning when its dirty ratio (cleanable bytes over clean plus cleanable
bytes) exceeds min.cleanable.dirty.ratio, or when a dirty segment's first batch is older than
max.compaction.lag.ms. The checkpoint file sits at the root of the data directory and holds one
``topic partition offset`` line per compacted log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..datadir import (
    CLEANER_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from ..partition import Log
from ..segment import LogSegment

__all__ = [
    "LogToClean",
    "cleanable_ratio",
    "cleaner_checkpoint_path",
    "filthiest_log",
    "is_due",
    "log_to_clean",
    "needs_cleaning",
    "non_active_segments_from",
    "read_cleaner_checkpoint",
    "segments_in_range",
    "write_cleaner_checkpoint",
]

_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log's dirty range and sizes, as LogCleanerManager ranks logs for cleaning."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base: cleaning stops at segment boundaries
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int  # > 0: a dirty segment waited longer than max.compaction.lag.ms
    force_update_checkpoint: bool  # the checkpoint was outside the log and is reset

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0


def segments_in_range(log: Log, start: int, end: int) -> list[LogSegment]:
    """Kafka's LogSegments.values(from, to): from the segment holding ``start`` to the last
    segment whose base is below ``end``."""
    if start == end:
        return []
    if end < start:
        raise ValueError(f"Invalid log segment range: from offset {start} to {end} in {log.dir}")
    floor = log.segment_for(start)
    low = floor.base_offset if floor is not None else -1
    return [s for s in log.segments if low <= s.base_offset < end]


def non_active_segments_from(log: Log, start: int) -> list[LogSegment]:
    active = log.active_segment
    if start > active.base_offset:
        return []
    return segments_in_range(log, start, active.base_offset)


def cleaner_checkpoint_path(log: Log) -> Path:
    """cleaner-offset-checkpoint lives at the root of the data directory, one for all logs."""
    return log.dir.parent / CLEANER_OFFSET_CHECKPOINT


def read_cleaner_checkpoint(log: Log) -> int | None:
    """The checkpointed first dirty offset of ``log``, or None if it was never cleaned."""
    path = cleaner_checkpoint_path(log)
    if log.topic_partition is None or not path.exists():
        return None
    return read_offset_checkpoint(path).get(log.topic_partition)


def write_cleaner_checkpoint(log: Log, offset: int) -> bool:
    """Update this log's entry and keep the other partitions' (Kafka's updateCheckpoints)."""
    if log.topic_partition is None:
        return False
    path = cleaner_checkpoint_path(log)
    offsets = read_offset_checkpoint(path) if path.exists() else {}
    offsets[log.topic_partition] = offset
    write_offset_checkpoint(path, offsets)
    return True


def _first_batch_timestamp(segment: LogSegment) -> int:
    for batch in segment.log.batches():
        ts = batch.max_timestamp
        return ts if ts >= 0 else _LONG_MAX
    return _LONG_MAX


def log_to_clean(log: Log, *, now_ms: int | None = None) -> LogToClean:
    """Kafka's cleanableOffsets, calculateCleanableBytes and maxCompactionDelay for ``log``."""
    now = log.clock.milliseconds() if now_ms is None else now_ms
    config = log.config
    if not log.segments:  # a read-only directory without segments
        return LogToClean(log.log_start_offset, log.log_start_offset, 0, 0, 0, False)
    checkpoint = read_cleaner_checkpoint(log)
    first_dirty = log.log_start_offset if checkpoint is None else checkpoint
    force_update = False
    if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
        first_dirty, force_update = log.log_start_offset, True  # truncated or corrupt log

    uncleanable = min(log.last_stable_offset, log.active_segment.base_offset)
    min_lag = max(config["min.compaction.lag.ms"], 0)
    if min_lag > 0:
        for segment in non_active_segments_from(log, first_dirty):
            if segment.largest_timestamp() > now - min_lag:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(first_dirty, uncleanable)
    # Down to the base of the segment holding it: only whole segments are cleaned.
    non_active = non_active_segments_from(log, uncleanable)
    first_uncleanable = (non_active[0] if non_active else log.active_segment).base_offset
    clean_bytes = sum(s.size() for s in segments_in_range(log, -1, first_dirty))
    cleanable = segments_in_range(log, min(first_dirty, first_uncleanable), first_uncleanable)

    timestamps = [_first_batch_timestamp(s) for s in non_active_segments_from(log, first_dirty)]
    earliest = min((t for t in timestamps if t > 0), default=_LONG_MAX)
    clean_until = now - max(config["max.compaction.lag.ms"], 0)
    delay = clean_until - earliest if earliest < clean_until else 0
    return LogToClean(
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=first_uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=sum(s.size() for s in cleanable),
        max_compaction_delay_ms=delay,
        force_update_checkpoint=force_update,
    )


def cleanable_ratio(log: Log, *, now_ms: int | None = None) -> float:
    """Cleanable (dirty, below the first uncleanable offset) bytes over clean plus cleanable."""
    return log_to_clean(log, now_ms=now_ms).cleanable_ratio


def is_due(log: Log, ltc: LogToClean, min_cleanable_ratio: float | None = None) -> bool:
    """LogCleanerManager's filter: past max.compaction.lag.ms, or dirtier than the ratio
    (``min_cleanable_ratio``, else the topic's min.cleanable.dirty.ratio)."""
    if min_cleanable_ratio is None:
        min_cleanable_ratio = log.config["min.cleanable.dirty.ratio"]
    return ltc.total_bytes > 0 and (
        (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
        or ltc.cleanable_ratio > min_cleanable_ratio
    )


def filthiest_log(
    candidates: Iterable[tuple[Log, LogToClean]],
    *,
    min_cleanable_ratio: Callable[[Log], float] | None = None,
) -> tuple[Log, LogToClean] | None:
    """LogCleanerManager.grabFilthiestCompactedLog's choice among ``(log, its LogToClean)``:
    of the logs due (:func:`is_due`), the one with the highest dirty ratio; None if none is.

    ``min_cleanable_ratio(log)``: the ratio each log is held to (a broker: the topic's
    min.cleanable.dirty.ratio, else its log.cleaner.min.cleanable.ratio); default the topic's.
    """
    best: tuple[Log, LogToClean] | None = None
    for log, ltc in candidates:
        ratio = None if min_cleanable_ratio is None else min_cleanable_ratio(log)
        if is_due(log, ltc, ratio) and (
            best is None or ltc.cleanable_ratio > best[1].cleanable_ratio
        ):
            best = (log, ltc)
    return best


def needs_cleaning(log: Log, *, now_ms: int | None = None) -> bool:
    """Whether Kafka's cleaner would pick ``log``: compacted, and dirty beyond
    min.cleanable.dirty.ratio or holding a segment older than max.compaction.lag.ms."""
    return log.config.compact and is_due(log, log_to_clean(log, now_ms=now_ms))
