"""Replaying a consumer group's records (types 3-8 of ``__consumer_offsets``, as Kafka's
GroupMetadataManager.replay does) into :class:`~.modern_state.ConsumerGroup` objects.

Records of a group arrive in log order, a member's subscription and assignment in separate
records, so each part is kept by key (the last value wins, a tombstone removes it) and the
groups are built once the whole partition is read. A group exists while its epoch record
(type 3) does; a member while its subscription record (type 5) does. The records of
ConsumerGroupPartitionMetadata (type 4, the topics' metadata Kafka 4.0 kept before the metadata
hash) are not needed: the topics are read from this broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from uuid import UUID

from .consumer_records import MEMBER_STATES
from .modern_state import Assignment, ConsumerGroup, ConsumerGroupMember

__all__ = ["ConsumerGroupReplay"]

_STATES = {v: k for k, v in MEMBER_STATES.items()}


@dataclass
class _Group:
    epoch: dict | None = None
    target_metadata: dict | None = None
    subscriptions: dict[str, dict] = field(default_factory=dict)
    targets: dict[str, dict] = field(default_factory=dict)
    current: dict[str, dict] = field(default_factory=dict)


def _assignment(rows: list[dict]) -> Assignment:
    return {r["topicId"]: frozenset(r["partitions"]) for r in rows if r["partitions"]}


class ConsumerGroupReplay:
    """Collects records with :meth:`apply`, then :meth:`groups` builds the groups."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}

    def apply(self, kind: str, key: dict, value: dict | None) -> None:
        """One decoded record (``kind`` as :mod:`kafkalog.format.internal` names it)."""
        group_id = key["groupId"]
        g = self._groups.setdefault(group_id, _Group())
        member_id = key.get("memberId")
        if kind == "consumer_group_metadata":
            g.epoch = value
        elif kind == "consumer_group_target_assignment_metadata":
            g.target_metadata = value
        elif kind == "consumer_group_member_metadata":
            _put(g.subscriptions, member_id, value)
        elif kind == "consumer_group_target_assignment_member":
            _put(g.targets, member_id, value)
        elif kind == "consumer_group_current_member_assignment":
            _put(g.current, member_id, value)

    def groups(self, now_ms: int) -> dict[str, ConsumerGroup]:
        out = {}
        for group_id, g in self._groups.items():
            if g.epoch is None:
                continue
            group = ConsumerGroup(group_id, group_epoch=g.epoch["epoch"],
                                  metadata_hash=g.epoch.get("metadataHash", 0))  # fmt: skip
            if g.target_metadata is not None:
                group.assignment_epoch = g.target_metadata["assignmentEpoch"]
                group.assignment_timestamp_ms = g.target_metadata.get("assignmentTimestamp", 0)
            for member_id, sub in g.subscriptions.items():
                member = _member(member_id, sub, g.current.get(member_id))
                target = g.targets.get(member_id)
                if target is not None:
                    group.target[member_id] = _assignment(target["topicPartitions"])
                group.put(member, now_ms)
            if not group.members:
                group.empty_since_ms = now_ms
            out[group_id] = group
        return out


def _put(table: dict[str, dict], member_id: str, value: dict | None) -> None:
    if value is None:
        table.pop(member_id, None)
    else:
        table[member_id] = value


def _member(member_id: str, sub: dict, current: dict | None) -> ConsumerGroupMember:
    member = ConsumerGroupMember(
        member_id,
        instance_id=sub["instanceId"],
        rack_id=sub["rackId"],
        client_id=sub["clientId"],
        client_host=sub["clientHost"],
        rebalance_timeout_ms=sub["rebalanceTimeoutMs"],
        subscribed_topic_names=tuple(sub["subscribedTopicNames"]),
        subscribed_topic_regex=sub["subscribedTopicRegex"] or None,
        server_assignor=sub["serverAssignor"],
    )
    if current is None:
        return member
    epochs: dict[tuple[UUID, int], int] = {}
    for row in (*current["assignedPartitions"], *current["partitionsPendingRevocation"]):
        given = row.get("assignmentEpochs") or []
        for i, p in enumerate(row["partitions"]):
            epochs[(row["topicId"], p)] = given[i] if i < len(given) else current["memberEpoch"]
    return replace(
        member,
        member_epoch=current["memberEpoch"],
        previous_member_epoch=current["previousMemberEpoch"],
        state=_STATES.get(current["state"], _STATES[0]),
        assigned=_assignment(current["assignedPartitions"]),
        pending_revocation=_assignment(current["partitionsPendingRevocation"]),
        assigned_epochs=epochs,
    )
