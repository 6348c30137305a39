"""ListOffsets and OffsetForLeaderEpoch: where a consumer starts and how it checks its position.

ListOffsets answers earliest (-2), latest (-1, the last stable offset for read_committed), max
timestamp (-3: the first of the records sharing the largest timestamp, as Kafka 3.8+ answers) and
the first offset whose timestamp is at or after a given time, from the time indexes.
OffsetForLeaderEpoch answers from each partition's leader-epoch cache, which clients use to
detect a log that diverged from what they read (KIP-320).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...log.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from .fetch import check_leader_epoch, epoch_end_offset

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["handlers"]

_READ_COMMITTED = 1


def _list_offset(broker: Broker, topic: str, part: dict, isolation_level: int) -> dict:
    index = part["partition_index"]
    entry = {"partition_index": index, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        return {**entry, "error_code": ec.UNKNOWN_TOPIC_OR_PARTITION}
    code = check_leader_epoch(broker, partition_log, part["current_leader_epoch"])
    if code:
        return {**entry, "error_code": code}
    timestamp = part["timestamp"]
    epoch = broker.leader_epoch(partition_log)
    if timestamp == LATEST_TIMESTAMP:
        offset = (
            partition_log.last_stable_offset
            if isolation_level == _READ_COMMITTED
            else partition_log.high_watermark
        )
        return {**entry, "offset": offset, "leader_epoch": epoch}
    if timestamp == EARLIEST_TIMESTAMP:
        return {**entry, "offset": partition_log.log_start_offset, "leader_epoch": epoch}
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        return {**entry, "error_code": ec.INVALID_REQUEST}
    found = partition_log.fetch_offset_by_timestamp(timestamp)
    # Only what the client could fetch: below the last stable offset for read_committed, the
    # high watermark otherwise (Kafka's ReplicaManager answers -1 for anything at or past it).
    fetchable = (
        partition_log.last_stable_offset
        if isolation_level == _READ_COMMITTED
        else partition_log.high_watermark
    )
    if found is None or found.offset >= fetchable:
        return {**entry, "error_code": ec.NONE}
    return {
        **entry,
        "timestamp": found.timestamp,
        "offset": found.offset,
        "leader_epoch": found.leader_epoch if found.leader_epoch is not None else epoch,
    }


def handlers(broker: Broker) -> dict[int, Handler]:
    async def list_offsets(ctx: RequestContext, request: dict) -> dict:
        topics = []
        for topic in request["topics"]:
            name = topic["name"]
            topics.append(
                {
                    "name": name,
                    "partitions": [
                        _list_offset(broker, name, p, request["isolation_level"])
                        for p in topic["partitions"]
                    ],
                }
            )
        return {"topics": topics}

    async def offset_for_leader_epoch(ctx: RequestContext, request: dict) -> dict:
        topics = []
        for topic in request["topics"]:
            name = topic["topic"]
            parts = []
            for part in topic["partitions"]:
                entry = {"partition": part["partition"]}
                partition_log = broker.get_log(name, part["partition"])
                if partition_log is None:
                    parts.append({**entry, "error_code": ec.UNKNOWN_TOPIC_OR_PARTITION})
                    continue
                code = check_leader_epoch(broker, partition_log, part["current_leader_epoch"])
                if code:
                    parts.append({**entry, "error_code": code})
                    continue
                epoch, end = epoch_end_offset(broker, partition_log, part["leader_epoch"])
                parts.append({**entry, "leader_epoch": epoch, "end_offset": end})
            topics.append({"topic": name, "partitions": parts})
        return {"topics": topics}

    return {
        ApiKey.LIST_OFFSETS: list_offsets,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    }
