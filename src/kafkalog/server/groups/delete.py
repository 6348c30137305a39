"""DeleteGroups: remove Empty groups with their committed offsets (Kafka's GroupCoordinatorShard.
deleteGroups, classic groups).

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
from ...format.internal.consumer_offsets_encode import (
    encode_group_metadata_key,
    encode_offset_commit_key,
)
from ..error_codes import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NON_EMPTY_GROUP, NONE, code_of
from ..handlers import RequestContext
from .offsets import GroupOffsets
from .state import GroupState

__all__ = ["NON_EMPTY_GROUP", "delete_groups"]

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
    if group is None or group.is_in(GroupState.DEAD):
        return GROUP_ID_NOT_FOUND
    if not group.is_in(GroupState.EMPTY):
        return NON_EMPTY_GROUP
    partitions = _offset_keys(offsets, group_id)
    records = [(encode_offset_commit_key(group_id, t, p), None) for t, p in partitions]
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
