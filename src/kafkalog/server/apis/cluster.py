"""DescribeCluster and DescribeTopicPartitions: the cluster and its topics as Kafka 4's admin
client asks for them (``describeCluster``, and ``describeTopics`` by name, KIP-966).

DescribeCluster answers as a KRaft broker does (AuthHelper.computeDescribeClusterResponse): this
node as the only broker, never fenced, and as the controller id (a broker names an alive broker
there). DescribeTopicPartitions pages topics and partitions as Kafka's
DescribeTopicPartitionsRequestHandler and KRaftMetadataCache do: topics sorted by name, from the
cursor's topic and partition on, at most ``ResponsePartitionLimit`` partitions (capped by
``max.request.partition.size.limit``, 2000) and then a next cursor; a replication factor of 1
leaves the eligible leader replicas (KIP-966) empty. There is no authorizer, so a resource's
authorized operations are every operation Kafka supports on it (AuthHelper.authorizedOperations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...format.message import ZERO_UUID
from ...log.datadir import validate_topic
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from ..internal_topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["CLUSTER_OPERATIONS", "TOPIC_OPERATIONS", "handlers", "partition_entry"]

NO_OPERATIONS = -(2**31)  # the schemas' default: operations not asked for


def _bits(*codes: int) -> int:
    return sum(1 << code for code in codes)


# AclOperation codes: ALTER 7, ALTER_CONFIGS 11, CLUSTER_ACTION 9, CREATE 5, DELETE 6,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, IDEMPOTENT_WRITE 12, READ 3, WRITE 4; the operations of
# AclEntry.supportedOperations(TOPIC) and (CLUSTER).
TOPIC_OPERATIONS = _bits(3, 4, 5, 8, 6, 7, 10, 11)
CLUSTER_OPERATIONS = _bits(5, 9, 10, 11, 12, 7, 8)

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # max.request.partition.size.limit, Kafka's default

# EndpointType ids; errors.MISMATCHED_ENDPOINT_TYPE and UNSUPPORTED_ENDPOINT_TYPE's codes.
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115


def partition_entry(broker: Broker, topic: str, partition: int, *, elr: bool = False) -> dict:
    """A partition as Metadata and DescribeTopicPartitions describe it: this node the leader,
    the only replica and the only in-sync one; ``elr``: with empty eligible leader replica
    lists, as Kafka's controller keeps them for a single replica."""
    partition_log = broker.get_log(topic, partition)
    epoch = 0 if partition_log is None else broker.leader_epoch(partition_log)
    entry = {
        "partition_index": partition,
        "leader_id": broker.node_id,
        "leader_epoch": epoch,
        "replica_nodes": [broker.node_id],
        "isr_nodes": [broker.node_id],
        "offline_replicas": [],
    }
    if elr:
        entry["eligible_leader_replicas"] = []
        entry["last_known_elr"] = []
    return entry


def _topic_error(name: str, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID,
            "is_internal": name in INTERNAL_TOPICS, "partitions": []}  # fmt: skip


def _unknown_topic_code(name: str) -> int:
    """Kafka's answer for a topic it does not have: Topic.validate decides between the two."""
    try:
        validate_topic(name)
    except KafkalogError:
        return ec.INVALID_TOPIC_EXCEPTION
    return ec.UNKNOWN_TOPIC_OR_PARTITION


def describe_topic_partitions(broker: Broker, request: dict) -> dict:
    """The response body (KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse)."""
    known = broker.log_manager.topics()
    cursor = request["cursor"]
    first = cursor["topic_name"] if cursor is not None else ""
    fetch_all = not request["topics"]
    wanted = known if fetch_all else {t["name"] for t in request["topics"]}
    names = sorted(t for t in wanted if t >= first)
    if cursor is not None and (
        (not fetch_all and cursor["topic_name"] not in names) or cursor["partition_index"] < 0
    ):
        return {"topics": [_topic_error(t["name"], ec.INVALID_REQUEST) | {"is_internal": False}
                           for t in request["topics"]]}  # fmt: skip
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request["response_partition_limit"]), 1)
    topics: list[dict] = []
    next_cursor = None
    for name in names:
        if remaining == 0:  # the partitions asked for are all given: go on from this topic
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        partitions = known.get(name)
        if partitions is None:
            if not fetch_all:
                topics.append(_topic_error(name, _unknown_topic_code(name)))
            continue
        start = cursor["partition_index"] if cursor is not None and name == first else 0
        upper = min(len(partitions), start + remaining)
        present = set(partitions)
        entries = [partition_entry(broker, name, p, elr=True)
                   for p in range(start, upper) if p in present]  # fmt: skip
        topics.append({"error_code": ec.NONE, "name": name,
                       "topic_id": broker.topic_id(name) or ZERO_UUID,
                       "is_internal": name in INTERNAL_TOPICS, "partitions": entries})  # fmt: skip
        if upper < len(partitions):
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(entries)
    for topic in topics:
        topic["topic_authorized_operations"] = TOPIC_OPERATIONS
    return {"topics": topics, "next_cursor": next_cursor}


def describe_cluster(broker: Broker, ctx: RequestContext, request: dict) -> dict:
    """The response body (KafkaApis.handleDescribeCluster)."""
    wanted = request["endpoint_type"]
    if wanted not in (BROKER_ENDPOINT, CONTROLLER_ENDPOINT):
        code = ec.INVALID_REQUEST if ctx.api_version == 0 else UNSUPPORTED_ENDPOINT_TYPE
        return {"error_code": code, "error_message": f"Unsupported endpoint type {wanted}"}
    if wanted != BROKER_ENDPOINT:
        code = ec.INVALID_REQUEST if ctx.api_version == 0 else MISMATCHED_ENDPOINT_TYPE
        return {"error_code": code, "error_message": "The request was sent to an endpoint of "
                "type BROKER, but we wanted an endpoint of type CONTROLLER"}  # fmt: skip
    host, port = ctx.advertised or (broker.host, broker.port)
    operations = CLUSTER_OPERATIONS if request["include_cluster_authorized_operations"] else None
    node = {"broker_id": broker.node_id, "host": host, "port": port, "rack": None}
    return {
        "endpoint_type": BROKER_ENDPOINT,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{**node, "is_fenced": False}],
        "cluster_authorized_operations": NO_OPERATIONS if operations is None else operations,
    }


def handlers(broker: Broker) -> dict[int, Handler]:
    async def describe_topic_partitions_handler(ctx: RequestContext, request: dict) -> dict:
        return describe_topic_partitions(broker, request)

    async def describe_cluster_handler(ctx: RequestContext, request: dict) -> dict:
        return describe_cluster(broker, ctx, request)

    return {
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions_handler,
        ApiKey.DESCRIBE_CLUSTER: describe_cluster_handler,
    }
