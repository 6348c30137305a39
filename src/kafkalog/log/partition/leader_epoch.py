"""The leader epoch cache: which leader epoch started at which offset (LeaderEpochFileCache).

Kept in ``leader-epoch-checkpoint`` (version 0, count, ``epoch startOffset`` lines). Epochs and
start offsets both increase; a new epoch that does not, replaces the entries it contradicts, as
Kafka's assign() does. Followers use it to find where their log diverged (OffsetForLeaderEpoch).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..datadir import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

__all__ = ["LeaderEpochFileCache", "end_offset_for"]

UNDEFINED = (-1, -1)  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


def end_offset_for(entries: list[EpochEntry], epoch: int, log_end_offset: int) -> tuple[int, int]:
    """Where ``epoch`` ended in a log with these epoch ``entries`` (LeaderEpochFileCache).

    The latest epoch is still being written: it ends at the log end offset. An older one ends
    where the next epoch starts, answered with the largest known epoch <= it; one below every
    known epoch ends where the first starts (its data is gone). Undefined (-1, -1) for epoch -1,
    an epoch above the latest, and an empty cache.
    """
    if epoch == -1:
        return UNDEFINED
    if entries and entries[-1].epoch == epoch:
        return (epoch, log_end_offset)
    higher = next((e for e in entries if e.epoch > epoch), None)
    if higher is None:
        return UNDEFINED
    floor = [e for e in entries if e.epoch <= epoch]
    return (floor[-1].epoch if floor else epoch, higher.start_offset)


class LeaderEpochFileCache:
    """Epoch entries of one partition; persisted on every change when ``writable``."""

    def __init__(self, partition_dir: str | os.PathLike, *, writable: bool = False) -> None:
        self.path = Path(partition_dir) / LEADER_EPOCH_CHECKPOINT
        self.writable = writable
        self._entries: list[EpochEntry] = (
            read_leader_epoch_checkpoint(self.path) if self.path.exists() else []
        )

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset`` (ignored if it adds nothing)."""
        if epoch < 0:
            return
        last = self._entries[-1] if self._entries else None
        if last is not None and last.epoch == epoch and last.start_offset <= start_offset:
            return
        if last is not None and last.epoch > epoch and last.start_offset <= start_offset:
            return  # an older epoch after a newer one's start: not a change
        # Drop entries the new one contradicts: same or later epoch, or later start offset.
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch=epoch, start_offset=start_offset))
        self._persist()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch, as Kafka's endOffsetFor."""
        return end_offset_for(self._entries, epoch, log_end_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below the new log start, moving the last of them up to it."""
        below = [e for e in self._entries if e.start_offset <= start_offset]
        if not below:
            return
        keep_from = len(below) - 1
        moved = EpochEntry(epoch=below[-1].epoch, start_offset=start_offset)
        entries = [moved, *self._entries[keep_from + 1 :]]
        if entries != self._entries:
            self._entries = entries
            self._persist()

    def clear(self) -> None:
        self._entries = []
        self._persist()

    def _persist(self) -> None:
        if self.writable:
            write_leader_epoch_checkpoint(self.path, self._entries)
