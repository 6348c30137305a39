"""DeleteGroups: remove Empty groups with their committed offsets (Kafka's GroupCoordinatorShard.
deleteGroups; a consumer group of KIP-848 is Empty without members); OffsetDelete: remove a
group's offsets of the topics it does not consume (Kafka's OffsetMetadataManager.deleteOffsets).

Per group, as Kafka 4's coordinator answers: a null group id is INVALID_GROUP_ID; a group this
coordinator does not have (or one that is Dead) is GROUP_ID_NOT_FOUND; a group with members
(Stable, PreparingRebalance or CompletingRebalance) is NON_EMPTY_GROUP. Otherwise a tombstone is
written to ``__consumer_offsets`` for each committed offset, for each partition with only a
pending transactional offset (Kafka's deleteAllOffsets), and for the group's metadata, in one
batch, before the group and its offsets are dropped: after a restart the group stays deleted.
"""

from __future__ import annotations

import logging

from ...errors import KafkalogError
from ...format.internal import decode_consumer_protocol_subscription
from ...format.internal.consumer_offsets_encode import (
    encode_group_metadata_key,
    encode_offset_commit_key,
)
from ..error_codes import (
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    NONE,
    code_of,
)
from ..handlers import RequestContext
from .consumer_records import group_records, snapshot
from .modern_state import member_topics
from .offsets import GroupOffsets
from .state import GroupState

__all__ = ["NON_EMPTY_GROUP", "delete_groups", "delete_offsets"]

_log = logging.getLogger("kafkalog.server")


def _offset_keys(offsets: GroupOffsets, group_id: str) -> list[tuple[str, int]]:
    """The partitions to write offset tombstones for: committed, then pending-only ones."""
    store = offsets.store
    committed = sorted(store.committed(group_id))
    pending = sorted(
        {tp for by_group in store.pending.values() for tp in by_group.get(group_id, {})}
        - set(committed)
    )
    return committed + pending


async def _delete_one(offsets: GroupOffsets, group_id: str | None) -> int:
    coordinator = offsets.coordinator
    if group_id is None:
        return INVALID_GROUP_ID
    group = coordinator.groups.get(group_id)
    consumer_group = coordinator.consumer_groups.get(group_id)
    if consumer_group is not None:
        if consumer_group.members:
            return NON_EMPTY_GROUP
    elif group is None or group.is_in(GroupState.DEAD):
        return GROUP_ID_NOT_FOUND
    elif not group.is_in(GroupState.EMPTY):
        return NON_EMPTY_GROUP
    partitions = _offset_keys(offsets, group_id)
    records = [(encode_offset_commit_key(group_id, t, p), None) for t, p in partitions]
    if consumer_group is not None:
        records += group_records(group_id, snapshot(consumer_group), None)
    else:
        records.append((encode_group_metadata_key(group_id), None))
    log = coordinator.log
    now = coordinator.now()
    try:
        await log.append(log.partition_for(group_id), records, now_ms=now)
    except (KafkalogError, OSError) as e:
        _log.error("deleting group %s failed: %s", group_id, e)
        return code_of(e)
    for tp in partitions:
        offsets.store.delete(group_id, tp)
    if consumer_group is not None:
        del coordinator.consumer_groups[group_id]
    else:
        group.transition_to(GroupState.DEAD, now)
        del coordinator.groups[group_id]
    _log.info("deleted group %s and its %d offsets", group_id, len(partitions))
    return NONE


async def delete_groups(offsets: GroupOffsets, ctx: RequestContext, req: dict) -> dict:
    results = []
    async with offsets.coordinator.lock:
        for group_id in req.get("groups_names") or []:
            code = await _delete_one(offsets, group_id)
            results.append({"group_id": group_id, "error_code": code})
    return {"results": results}


def _subscribed_topics(group) -> set[str]:
    """The topics a consumer group's members subscribe to (ClassicGroup.computeSubscribedTopics):
    none when the group has no members, no chosen protocol, is not a consumer group, or a
    member's subscription does not decode (Kafka's isSubscribedToTopic is then false)."""
    if group.protocol_type != "consumer" or not group.protocol_name or not group.members:
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        decoded = decode_consumer_protocol_subscription(member.metadata(group.protocol_name))
        if decoded.error is not None:
            return set()
        topics.update(decoded.data.get("topics") or [])
    return topics


async def delete_offsets(offsets: GroupOffsets, ctx: RequestContext, req: dict) -> dict:
    """OffsetDelete: GROUP_ID_NOT_FOUND for a group this coordinator does not have (or a Dead
    one), NON_EMPTY_GROUP for a group with members that is not a consumer group; else each
    partition of a topic the group subscribes to is GROUP_SUBSCRIBED_TO_TOPIC and the others'
    offsets get tombstones in ``__consumer_offsets`` (NONE, whether or not one was committed)."""
    coordinator = offsets.coordinator
    group_id = req.get("group_id")
    async with coordinator.lock:
        group = coordinator.groups.get(group_id)
        consumer_group = coordinator.consumer_groups.get(group_id)
        if consumer_group is not None:
            names = [t["name"] for t in req.get("topics") or []]
            subscribed = set().union(
                *(member_topics(m, names) for m in consumer_group.members.values())
            )
        elif group is None or group.is_in(GroupState.DEAD):
            return {"error_code": GROUP_ID_NOT_FOUND, "topics": []}
        elif not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
            return {"error_code": NON_EMPTY_GROUP, "topics": []}
        else:
            subscribed = _subscribed_topics(group)
        committed = set(_offset_keys(offsets, group_id))
        answer, deleted = [], []
        for topic in req.get("topics") or []:
            name = topic["name"]
            parts = []
            for part in topic.get("partitions") or []:
                index = part["partition_index"]
                if name in subscribed:
                    parts.append(
                        {"partition_index": index, "error_code": GROUP_SUBSCRIBED_TO_TOPIC}
                    )
                    continue
                if (name, index) in committed:
                    deleted.append((name, index))
                parts.append({"partition_index": index, "error_code": NONE})
            answer.append({"name": name, "partitions": parts})
        if deleted:
            records = [(encode_offset_commit_key(group_id, t, p), None) for t, p in deleted]
            log = coordinator.log
            try:
                await log.append(log.partition_for(group_id), records, now_ms=coordinator.now())
            except (KafkalogError, OSError) as e:
                _log.error("deleting offsets of group %s failed: %s", group_id, e)
                return {"error_code": code_of(e), "topics": []}
            for tp in deleted:
                offsets.store.delete(group_id, tp)
            _log.info("deleted %d offsets of group %s", len(deleted), group_id)
        return {"error_code": NONE, "topics": answer}
