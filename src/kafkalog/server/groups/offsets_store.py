"""Committed offsets of every group, with transactional commits held until their marker.

A plain commit replaces the group's offset for a partition at once. A transactional commit
(TxnOffsetCommit) is pending under its producer id until the transaction's COMMIT marker lands in
the group's ``__consumer_offsets`` partition, when it becomes the committed offset (unless a
later plain commit already replaced it, as Kafka's OffsetMetadataManager decides by offset in
the log), or its ABORT marker, when it is dropped. The same rules replay the log on start, so
the state after a restart is the state before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["OffsetAndMetadata", "OffsetsStore"]

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """One committed offset, as OffsetCommitValue stores it; ``record_offset`` is where in the
    ``__consumer_offsets`` log it was written (-1 until known), used to order a transactional
    commit against plain ones."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    record_offset: int = -1


class OffsetsStore:
    """``group -> (topic, partition) -> OffsetAndMetadata`` plus pending transactional offsets."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        # producer id -> group -> partition -> offset awaiting the transaction's marker
        self.pending: dict[int, dict[str, dict[TopicPartitionKey, OffsetAndMetadata]]] = {}

    def groups(self) -> set[str]:
        return set(self.offsets)

    def committed(self, group: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return self.offsets.get(group, {})

    def commit(self, group: str, tp: TopicPartitionKey, value: OffsetAndMetadata) -> None:
        self.offsets.setdefault(group, {})[tp] = value

    def delete(self, group: str, tp: TopicPartitionKey) -> None:
        """A tombstone: the offset expired or was deleted."""
        offsets = self.offsets.get(group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self.offsets[group]
        for by_group in self.pending.values():
            by_group.get(group, {}).pop(tp, None)

    def delete_group(self, group: str) -> None:
        self.offsets.pop(group, None)

    def add_pending(
        self, producer_id: int, group: str, tp: TopicPartitionKey, value: OffsetAndMetadata
    ) -> None:
        self.pending.setdefault(producer_id, {}).setdefault(group, {})[tp] = value

    def has_pending(self, group: str, tp: TopicPartitionKey | None = None) -> bool:
        for by_group in self.pending.values():
            offsets = by_group.get(group)
            if offsets and (tp is None or tp in offsets):
                return True
        return False

    def pending_groups(self, producer_id: int) -> Iterable[str]:
        return list(self.pending.get(producer_id, {}))

    def complete_transaction(self, producer_id: int, groups: Iterable[str], commit: bool) -> None:
        """Apply (COMMIT) or drop (ABORT) the producer's pending offsets of ``groups``."""
        by_group = self.pending.get(producer_id)
        if by_group is None:
            return
        for group in list(groups):
            offsets = by_group.pop(group, None)
            if not offsets or not commit:
                continue
            current = self.offsets.setdefault(group, {})
            for tp, value in offsets.items():
                existing = current.get(tp)
                # A plain commit written after the transactional one wins (Kafka keeps the
                # offset with the higher record offset).
                if existing is None or existing.record_offset <= value.record_offset:
                    current[tp] = value
        if not by_group:
            del self.pending[producer_id]
