"""CreateTopics and DeleteTopics. One node: a replication factor other than 1 (or -1, the
default) is refused with INVALID_REPLICATION_FACTOR, as a one-broker Kafka cluster does."""

from __future__ import annotations

import logging
from collections import Counter

from ..errors import KafkalogError
from ..log.config import LogConfig
from ..log.naming import validate_topic
from ..protocol import ApiKey
from ..protocol.schema import ZERO_UUID
from . import error_codes as ec
from .broker import INTERNAL_TOPICS, Broker
from .configs import describe_topic_configs
from .handlers import Handler, RequestContext

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")

MAX_PARTITIONS_PER_TOPIC = 10_000


def _create_one(broker: Broker, topic: dict, validate_only: bool) -> dict:
    name = topic["name"]
    out = {"name": name}

    def fail(code: int, message: str) -> dict:
        return {**out, "error_code": code, "error_message": message}

    try:
        validate_topic(name)
    except KafkalogError as e:
        return fail(ec.INVALID_TOPIC_EXCEPTION, e.message)
    if name in broker.log_manager.topics():
        return fail(ec.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if topic["assignments"]:
        if topic["replication_factor"] != -1 or topic["num_partitions"] != -1:
            return fail(ec.INVALID_REQUEST, "A manual partition assignment was specified, "
                        "but replication factor and numPartitions were not both -1.")  # fmt: skip
        indexes = [a["partition_index"] for a in topic["assignments"]]
        if len(set(indexes)) != len(indexes):
            return fail(ec.INVALID_REPLICA_ASSIGNMENT,
                        "Found multiple manual assignments for one partition.")  # fmt: skip
        if sorted(indexes) != list(range(len(indexes))):
            return fail(ec.INVALID_REPLICA_ASSIGNMENT,
                        "partitions should be a consecutive 0-based integer sequence")  # fmt: skip
        if any(a["broker_ids"] != [broker.node_id] for a in topic["assignments"]):
            return fail(ec.INVALID_REPLICATION_FACTOR, "Replicas must all be this node.")
        partitions = len(topic["assignments"])
    else:
        partitions = topic["num_partitions"]
        if partitions == -1:
            partitions = broker.config.num_partitions
        replication = topic["replication_factor"]
        if replication not in (-1, 1):
            return fail(
                ec.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication} larger than available brokers: 1.",
            )
    if partitions <= 0:
        return fail(ec.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if partitions > MAX_PARTITIONS_PER_TOPIC:
        # Each partition is a directory with preallocated indexes: a request must not be able
        # to fill the disk with them.
        return fail(ec.INVALID_PARTITIONS,
                    f"Number of partitions {partitions} is above this server's limit of "
                    f"{MAX_PARTITIONS_PER_TOPIC} per topic.")  # fmt: skip
    configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
    try:
        LogConfig(configs)
    except KafkalogError as e:
        return fail(ec.INVALID_CONFIG, e.message)
    if not validate_only:
        broker.log_manager.create_topic(name, partitions, configs)
        log.info("created topic %s with %d partitions", name, partitions)
    return {
        **out,
        "error_code": ec.NONE,
        "topic_id": broker.topic_id(name) or ZERO_UUID,
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": describe_topic_configs(broker, name, configs=LogConfig(configs)),
    }


def handlers(broker: Broker) -> dict[int, Handler]:
    async def create_topics(ctx: RequestContext, request: dict) -> dict:
        names = Counter(t["name"] for t in request["topics"])
        # As Kafka's controller: a name given twice is refused once, and neither is created.
        duplicates = [
            {
                "name": name,
                "error_code": ec.INVALID_REQUEST,
                "error_message": "Duplicate topic name.",
            }
            for name, n in names.items()
            if n > 1
        ]
        created = [
            _create_one(broker, t, request["validate_only"])
            for t in request["topics"]
            if names[t["name"]] == 1
        ]
        return {"topics": created + duplicates}

    async def delete_topics(ctx: RequestContext, request: dict) -> dict:
        if ctx.api_version >= 6:
            wanted = [(t["name"], t["topic_id"]) for t in request["topics"]]
        else:
            wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
        responses = []
        for name, topic_id in wanted:
            if name is None:
                name = broker.topic_by_id(topic_id)
                if name is None:
                    responses.append({"topic_id": topic_id, "error_code": ec.UNKNOWN_TOPIC_ID})
                    continue
            entry = {"name": name, "topic_id": broker.topic_id(name) or ZERO_UUID}
            if name in INTERNAL_TOPICS:
                responses.append({**entry, "error_code": ec.INVALID_TOPIC_EXCEPTION})
            elif name not in broker.log_manager.topics():
                responses.append({**entry, "error_code": ec.UNKNOWN_TOPIC_OR_PARTITION})
            else:
                broker.log_manager.delete_topic(name)
                broker.topics_changed()
                log.info("deleted topic %s", name)
                responses.append({**entry, "error_code": ec.NONE})
        return {"responses": responses}

    return {ApiKey.CREATE_TOPICS: create_topics, ApiKey.DELETE_TOPICS: delete_topics}
