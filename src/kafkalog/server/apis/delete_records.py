"""DeleteRecords: move partitions' log start offsets forward, as Kafka's ReplicaManager does.

Per partition, Kafka's rules (ReplicaManager.deleteRecordsOnLocalLog, Partition.
deleteRecordsOnLeader, UnifiedLog.maybeIncrementLogStartOffset): an internal topic is refused
(INVALID_TOPIC_EXCEPTION), an unknown partition is UNKNOWN_TOPIC_OR_PARTITION, a topic whose
``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION; offset -1 means the high watermark; a
negative offset or one beyond the high watermark is OFFSET_OUT_OF_RANGE. An offset at or below
the current log start offset changes nothing. The answer's low watermark is the log start offset
after the deletion (-1 with an error): with one replica it is reached at once, so the request
never waits as Kafka's DelayedDeleteRecords can.

Segments wholly below the new start are deleted at once (Kafka leaves that to its next retention
pass); the log-start-offset checkpoint is written before answering, where Kafka writes it within
``log.flush.start.offset.checkpoint.interval.ms``: an acknowledged deletion survives a crash.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from ..internal_topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK


def _delete_one(broker: Broker, topic: str, partition: int, offset: int) -> tuple[int, int, bool]:
    """(error code, low watermark, whether the log start offset moved)."""
    if topic in INTERNAL_TOPICS:
        return ec.INVALID_TOPIC_EXCEPTION, -1, False
    partition_log = broker.get_log(topic, partition)
    if partition_log is None:
        return ec.UNKNOWN_TOPIC_OR_PARTITION, -1, False
    if not partition_log.config.delete:
        return ec.POLICY_VIOLATION, -1, False
    target = partition_log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > partition_log.high_watermark:
        return ec.OFFSET_OUT_OF_RANGE, -1, False
    before = partition_log.log_start_offset
    try:
        after = partition_log.increment_log_start_offset(target)
    except KafkalogError as e:
        return ec.code_of(e), -1, False
    except OSError as e:
        log.error("deleting records of %s-%d failed: %s", topic, partition, e)
        return ec.KAFKA_STORAGE_ERROR, -1, False
    if after != before:
        log.info("deleted records of %s-%d below offset %d", topic, partition, after)
    return ec.NONE, after, after != before


def handlers(broker: Broker) -> dict[int, Handler]:
    async def delete_records(ctx: RequestContext, request: dict) -> dict:
        topics, moved = [], False
        for topic in request["topics"]:
            name = topic["name"]
            partitions = []
            for part in topic["partitions"]:
                code, low, changed = _delete_one(
                    broker, name, part["partition_index"], part["offset"]
                )
                moved |= changed
                partitions.append({"partition_index": part["partition_index"],
                                   "low_watermark": low, "error_code": code})  # fmt: skip
            topics.append({"name": name, "partitions": partitions})
        if moved:
            try:
                broker.log_manager.checkpoint()
            except OSError as e:  # moved in memory, not recorded: a crash would bring them back
                log.error("writing the log-start-offset checkpoint failed: %s", e)
                for topic in topics:
                    for part in topic["partitions"]:
                        if part["error_code"] == ec.NONE:
                            part["error_code"], part["low_watermark"] = ec.KAFKA_STORAGE_ERROR, -1
        if moved:
            broker.notify_data()  # fetches waiting at an offset now deleted answer at once
        return {"topics": topics}

    return {ApiKey.DELETE_RECORDS: delete_records}
