"""Which segments retention would delete now, worked out on a log that may be open read-only.

The same three passes as :meth:`kafkalog.log.partition.log.Log.delete_old_segments` (Kafka's
UnifiedLog.deleteOldSegments), each over what the previous left: segments wholly below the log
start offset; with a ``delete`` cleanup policy, segments whose newest record is older than
retention.ms; then the oldest segments while the log stays over retention.bytes without them.
Each pass stops at the first segment it keeps, and an empty active segment is never deleted (a
non-empty one is, after rolling a new one, so the log keeps its end offset).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..json_fields import json_fields
from ..segment import LogSegment
from .log import Log, over_retention_bytes

__all__ = ["RetentionPlan", "SegmentDeletion", "plan_retention"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentDeletion:
    """One segment retention deletes, and the rule that deletes it."""

    path: str
    base_offset: int
    next_offset: int  # the next segment's base (the log end for the active segment)
    size: int
    largest_timestamp: int
    active: bool
    reason: str

    def to_dict(self) -> dict:
        return json_fields(
            self,
            ("path", "base_offset", "next_offset", "size", "largest_timestamp", "active", "reason"),
        )


@dataclass(slots=True)
class RetentionPlan:
    """What retention would do to one log at ``now_ms``."""

    log_start_offset: int  # before
    new_log_start_offset: int  # after
    deletions: list[SegmentDeletion] = field(default_factory=list)

    @property
    def bytes_deleted(self) -> int:
        return sum(d.size for d in self.deletions)


def plan_retention(log: Log, *, now_ms: int | None = None) -> RetentionPlan:
    """The segments :meth:`Log.delete_old_segments` would delete at ``now_ms``; reads only."""
    now = log.clock.milliseconds() if now_ms is None else now_ms
    plan = RetentionPlan(log.log_start_offset, log.log_start_offset)
    remaining = list(log.segments)
    start = log.log_start_offset
    end = log.log_end_offset

    def run(predicate: Callable[[LogSegment, int], bool], why: str) -> None:
        nonlocal start
        while remaining:
            segment = remaining[0]
            active = len(remaining) == 1
            next_base = end if active else remaining[1].base_offset
            if (active and segment.size() == 0) or not predicate(segment, next_base):
                return
            plan.deletions.append(
                SegmentDeletion(
                    path=os.fspath(segment.log.path),
                    base_offset=segment.base_offset,
                    next_offset=next_base,
                    size=segment.size(),
                    largest_timestamp=segment.largest_timestamp(),
                    active=active,
                    reason=why,
                )
            )
            remaining.pop(0)
            start = max(start, next_base if not remaining else remaining[0].base_offset)

    run(lambda seg, nxt: nxt <= start, "below the log start offset")
    config = log.config
    if config.delete:
        retention_ms = config["retention.ms"]
        if retention_ms >= 0:
            run(
                lambda seg, nxt: now - seg.largest_timestamp() > retention_ms,
                f"older than retention.ms={retention_ms}",
            )
        retention_bytes = config["retention.bytes"]
        if retention_bytes >= 0:
            excess = sum(s.size() for s in remaining) - retention_bytes
            run(over_retention_bytes(excess), f"beyond retention.bytes={retention_bytes}")
    plan.new_log_start_offset = start
    return plan
