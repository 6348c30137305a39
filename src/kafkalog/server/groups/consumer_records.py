"""A consumer group's state as ``__consumer_offsets`` records, in the bytes Kafka 4.4 writes
(GroupCoordinatorRecordHelpers), computed as the difference between two states of the group.

Record types (the key's i16) and their keys: 3 ConsumerGroupMetadata (group: epoch and metadata
hash), 5 ConsumerGroupMemberMetadata (group, member: the subscription), 6
ConsumerGroupTargetAssignmentMetadata (group: the assignment epoch and when it was computed), 7
ConsumerGroupTargetAssignmentMember (group, member: its target), 8
ConsumerGroupCurrentMemberAssignment (group, member: epochs, state, assigned partitions with the
epoch each was assigned at, partitions pending revocation). Every value is version 0. A removed
member gets tombstones (8, 7, 5) before the group's new epoch; a deleted group gets Kafka's
tombstones for all of them, plus the ConsumerGroupPartitionMetadata (4) one Kafka 4.1+ still
writes. The order is Kafka's: removals, subscriptions, epoch, targets, target metadata, current
assignments.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from ...format.internal.consumer_offsets import consumer_offsets_value_schema
from ...format.message import Message, write_message
from .modern_state import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "MEMBER_STATES",
    "GroupSnapshot",
    "group_records",
    "restored",
    "snapshot",
]

METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
CONSUMER_GROUP_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8})
# Kafka's MemberState.value()
MEMBER_STATES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}

_I16 = struct.Struct(">h")
_GROUP_KEY = Message("ConsumerGroupKey", "0+", "none", "groupId string")
_MEMBER_KEY = Message("ConsumerGroupMemberKey", "0+", "none", "groupId string\nmemberId string")
Record = tuple[bytes, bytes | None]


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        body = write_message(_GROUP_KEY, {"groupId": group_id}, 0)
    else:
        body = write_message(_MEMBER_KEY, {"groupId": group_id, "memberId": member_id}, 0)
    return _I16.pack(record_type) + body


def _value(record_type: int, data: Mapping) -> bytes:
    return _I16.pack(0) + write_message(consumer_offsets_value_schema(record_type), data, 0)


def _subscription(m: ConsumerGroupMember) -> tuple:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor)  # fmt: skip


def _current(m: ConsumerGroupMember) -> tuple:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation,
            m.assigned_epochs)  # fmt: skip


@dataclass(frozen=True)
class GroupSnapshot:
    """What the records describe of a group, taken before an operation changes it."""

    group_epoch: int
    metadata_hash: int
    assignment_epoch: int
    assignment_timestamp_ms: int
    empty_since_ms: int = -1
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)


def snapshot(group: ConsumerGroup | None) -> GroupSnapshot | None:
    if group is None:
        return None
    return GroupSnapshot(group.group_epoch, group.metadata_hash, group.assignment_epoch,
                         group.assignment_timestamp_ms, group.empty_since_ms,
                         dict(group.members), dict(group.target))  # fmt: skip


def restored(
    group_id: str, before: GroupSnapshot, topics: Mapping[str, tuple[UUID, int]]
) -> ConsumerGroup:
    """The group as ``before`` describes it (after a write the log refused)."""
    group = ConsumerGroup(group_id, group_epoch=before.group_epoch,
                          assignment_epoch=before.assignment_epoch,
                          metadata_hash=before.metadata_hash,
                          assignment_timestamp_ms=before.assignment_timestamp_ms)  # fmt: skip
    group.target = dict(before.target)
    for member in before.members.values():
        group.put(member, -1)
    if not group.members:
        group.empty_since_ms = before.empty_since_ms
    subscribed = set().union(*group.subscribed_topics(topics).values())
    group.subscription_metadata = {t: topics[t] for t in sorted(subscribed) if t in topics}
    return group


def _topics(assignment: Assignment) -> list[tuple[UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
            if ps]  # fmt: skip


def _member_metadata(group_id: str, m: ConsumerGroupMember) -> Record:
    value = {
        "instanceId": m.instance_id,
        "rackId": m.rack_id,
        "clientId": m.client_id,
        "clientHost": m.client_host,
        "subscribedTopicNames": sorted(m.subscribed_topic_names),
        "subscribedTopicRegex": m.subscribed_topic_regex or "",
        "rebalanceTimeoutMs": m.rebalance_timeout_ms,
        "serverAssignor": m.server_assignor,
        # Kafka writes this tagged struct even when null (its default is an empty struct).
        "classicMemberMetadata": None,
    }
    return _key(MEMBER_METADATA, group_id, m.member_id), _value(MEMBER_METADATA, value)


def _target_member(group_id: str, member_id: str, target: Assignment) -> Record:
    rows = [{"topicId": t, "partitions": ps} for t, ps in _topics(target)]
    value = _value(TARGET_MEMBER, {"topicPartitions": rows})
    return _key(TARGET_MEMBER, group_id, member_id), value


def _current_assignment(group_id: str, m: ConsumerGroupMember) -> Record:
    def rows(assignment: Assignment) -> list[dict]:
        return [{"topicId": t, "partitions": ps,
                 "assignmentEpochs": [m.assigned_epochs.get((t, p), m.member_epoch) for p in ps]}
                for t, ps in _topics(assignment)]  # fmt: skip

    value = {
        "memberEpoch": m.member_epoch,
        "previousMemberEpoch": m.previous_member_epoch,
        "state": MEMBER_STATES[m.state],
        "assignedPartitions": rows(m.assigned),
        "partitionsPendingRevocation": rows(m.pending_revocation),
    }
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), _value(CURRENT_ASSIGNMENT, value)


def _member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [(_key(t, group_id, member_id), None)
            for t in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)]  # fmt: skip


def _deleted(group_id: str, before: GroupSnapshot) -> list[Record]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords."""
    members = sorted(before.members)
    out = [(_key(CURRENT_ASSIGNMENT, group_id, m), None) for m in members]
    out += [(_key(TARGET_MEMBER, group_id, m), None) for m in members]
    out.append((_key(TARGET_METADATA, group_id), None))
    out += [(_key(MEMBER_METADATA, group_id, m), None) for m in members]
    out.append((_key(PARTITION_METADATA, group_id), None))
    out.append((_key(METADATA, group_id), None))
    return out


def group_records(
    group_id: str, before: GroupSnapshot | None, after: ConsumerGroup | None
) -> list[Record]:
    """The records that take the stored group from ``before`` (None: not stored) to ``after``
    (None: deleted)."""
    if after is None:
        return [] if before is None else _deleted(group_id, before)
    if before is None:
        if not after.members and not after.target:
            return []  # created and left as it was: nothing to store yet
        before = GroupSnapshot(-1, 0, -1, 0)
    out: list[Record] = []
    for member_id in sorted(set(before.members) - set(after.members)):
        out += _member_tombstones(group_id, member_id)
    for member_id, m in after.members.items():
        old = before.members.get(member_id)
        if old is None or _subscription(old) != _subscription(m):
            out.append(_member_metadata(group_id, m))
    if (after.group_epoch, after.metadata_hash) != (before.group_epoch, before.metadata_hash):
        value: dict = {"epoch": after.group_epoch, "metadataHash": after.metadata_hash}
        out.append((_key(METADATA, group_id), _value(METADATA, value)))
    for member_id, target in after.target.items():
        if member_id in after.members and before.target.get(member_id) != target:
            out.append(_target_member(group_id, member_id, target))
    if (after.assignment_epoch, after.assignment_timestamp_ms) != (
        before.assignment_epoch, before.assignment_timestamp_ms
    ):  # fmt: skip
        value = {"assignmentEpoch": after.assignment_epoch,
                 "assignmentTimestamp": after.assignment_timestamp_ms}  # fmt: skip
        out.append((_key(TARGET_METADATA, group_id), _value(TARGET_METADATA, value)))
    for member_id, m in after.members.items():
        old = before.members.get(member_id)
        if old is None or _current(old) != _current(m):
            out.append(_current_assignment(group_id, m))
    return out
