"""Loading ``__consumer_offsets`` on start: committed offsets, classic groups and consumer
groups (KIP-848, :mod:`.consumer_replay`), as Kafka's GroupMetadataManager replays its
partitions when it becomes their coordinator.

Records are applied in log order, the last one per key winning, tombstones deleting; offset
commits from a transaction wait for its COMMIT or ABORT marker (one never seen stays pending,
so ``require_stable`` fetches report it, as Kafka does until the transaction coordinator's
timeout aborts it). A group stored with members comes back Stable with every member's session
timer running: members that are still alive heartbeat and carry on, the others expire and the
group rebalances; a consumer group's members keep their ids, epochs and assignments, their
sessions timed from the start. Records we cannot read (a newer version, a share or streams
group's, a damaged value) are skipped with a warning naming partition and offset: they belong to
features this coordinator does not run, and skipping them loses nothing it serves. A group known
only from its offset commits comes back Empty, as Kafka recreates such "simple" groups.
"""

from __future__ import annotations

import logging

from ...format.constants import ControlRecordType
from ...format.internal import decode_consumer_offsets_key, decode_consumer_offsets_value
from ...format.internal.consumer_offsets import consumer_offsets_value_schema
from ...format.internal.result import BYTE_ERRORS
from ...format.message import read_message
from .consumer_replay import ConsumerGroupReplay
from .offsets import GroupOffsets
from .offsets_store import OffsetAndMetadata
from .state import ClassicGroup, GroupMember, GroupState

__all__ = ["load_groups"]

_log = logging.getLogger(__name__)
_GROUP_METADATA_TYPE = 2
_CONSUMER_GROUP_KINDS = frozenset({
    "consumer_group_metadata", "consumer_group_member_metadata",
    "consumer_group_target_assignment_metadata", "consumer_group_target_assignment_member",
    "consumer_group_current_member_assignment",
})  # fmt: skip


def load_groups(offsets: GroupOffsets) -> int:
    """Replay every ``__consumer_offsets`` partition into ``offsets`` and its coordinator;
    returns the number of records read."""
    coordinator = offsets.coordinator
    log = coordinator.log
    count = 0
    replay = ConsumerGroupReplay()
    for partition in range(log.partitions):
        for record in log.read(partition):
            count += 1
            if record.control is not None:
                offsets.replay_marker(
                    record.producer_id, partition, record.control == ControlRecordType.COMMIT
                )
                continue
            if record.key is None:
                continue
            _replay(offsets, partition, record, replay)
    now = coordinator.now()
    for group_id, group in replay.groups(now).items():
        coordinator.consumer_groups[group_id] = group
        classic = coordinator.groups.get(group_id)
        if classic is not None and not classic.members:  # a stand-in made by its offsets
            del coordinator.groups[group_id]
    for group in coordinator.groups.values():
        for member in group.members.values():
            coordinator._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
        if not group.members and group.state_timestamp_ms < 0:
            group.state_timestamp_ms = now
    return count


def _replay(offsets: GroupOffsets, partition: int, record, replay: ConsumerGroupReplay) -> None:
    key = decode_consumer_offsets_key(record.key)
    where = f"{offsets.coordinator.log.topic}-{partition} at offset {record.offset}"
    if key.data is None or key.error is not None:
        _log.warning("skipping unreadable key in %s: %s", where, key.error or key.kind)
        return
    if key.kind == "offset_commit":
        tp = (key.data["topic"], key.data["partition"])
        group_id = key.data["group"]
        if record.value is None:
            offsets.store.delete(group_id, tp)
            return
        value = decode_consumer_offsets_value(key, record.value)
        if value.data is None:
            _log.warning("skipping unreadable offset commit in %s: %s", where, value.error)
            return
        v = value.data
        # A group that only commits offsets (assign and commit, admin tools) has no group
        # metadata record: as Kafka's OffsetMetadataManager.replay, it comes back a "simple"
        # group, Empty and without a protocol type, which ListGroups and DescribeGroups show.
        groups = offsets.coordinator.groups
        if group_id not in groups:
            groups[group_id] = ClassicGroup(group_id)
        expire = v["expireTimestamp"] if v["expireTimestamp"] >= 0 else None
        entry = OffsetAndMetadata(v["offset"], v["leaderEpoch"], v["metadata"],
                                  v["commitTimestamp"], expire, record.offset)  # fmt: skip
        if record.transactional:
            offsets.store.add_pending(record.producer_id, group_id, tp, entry)
        else:
            offsets.store.commit(group_id, tp, entry)
    elif key.kind == "group_metadata":
        _replay_group(offsets, key.data["group"], record.value, where)
    elif key.kind in _CONSUMER_GROUP_KINDS:
        value = decode_consumer_offsets_value(key, record.value)
        if record.value is not None and value.data is None:
            _log.warning("skipping unreadable %s record in %s: %s", key.kind, where,
                         value.error or f"unknown version {value.version}")  # fmt: skip
            return
        replay.apply(key.kind, key.data, value.data)
    elif key.kind not in ("consumer_group_partition_metadata", "consumer_group_regular_expression"):
        _log.warning("skipping %s record in %s: not a group kind this server runs", key.kind,
                     where)  # fmt: skip


def _replay_group(offsets: GroupOffsets, group_id: str, value: bytes | None, where: str) -> None:
    groups = offsets.coordinator.groups
    if value is None:  # the group is gone; its offsets have tombstones of their own
        groups.pop(group_id, None)
        return
    # Read without the consumer-protocol decoding the dump applies: the member's subscription
    # and assignment are kept as the bytes the clients sent.
    schema = consumer_offsets_value_schema(_GROUP_METADATA_TYPE)
    version = int.from_bytes(value[:2], "big", signed=True)
    if version not in schema.valid:
        _log.warning("skipping group metadata v%d of %s in %s", version, group_id, where)
        return
    try:
        data, _ = read_message(schema, value, 2, len(value), version)
    except BYTE_ERRORS as e:
        _log.warning("skipping unreadable group metadata of %s in %s: %s", group_id, where, e)
        return
    group = ClassicGroup(group_id)
    group.generation_id = data["generation"]
    group.protocol_type = data["protocolType"] or None
    group.protocol_name = data["protocol"]
    group.state_timestamp_ms = data["currentStateTimestamp"]
    for m in data["members"]:
        member = GroupMember(
            member_id=m["memberId"], group_instance_id=m["groupInstanceId"],
            client_id=m["clientId"], client_host=m["clientHost"],
            rebalance_timeout_ms=m["rebalanceTimeout"] if m["rebalanceTimeout"] >= 0
            else m["sessionTimeout"], session_timeout_ms=m["sessionTimeout"],
            protocol_type=data["protocolType"],
            protocols=[(data["protocol"] or "", m["subscription"])], assignment=m["assignment"],
        )  # fmt: skip
        group.add(member, None)
    group.leader_id = data["leader"] if data["members"] else None
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    groups[group_id] = group
