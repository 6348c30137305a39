"""ApiVersions, Metadata and FindCoordinator: what a client asks before anything else; with them
the descriptions of the cluster, its topics' partitions and this node's log directories
(:mod:`.cluster`, :mod:`.log_dirs`), which admin clients ask for beside Metadata.

This node is the only broker, the controller, every partition's leader and its only in-sync
replica, and every group's and transaction's coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...format.message import ZERO_UUID
from ...log.datadir import validate_topic
from ...protocol import MESSAGES, ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from ..internal_topics import INTERNAL_TOPICS
from .cluster import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, partition_entry

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["api_versions_body", "handlers"]

log = logging.getLogger("kafkalog.server")


# Kafka 4.0 advertises Produce from v0 though it serves v3+ only (KAFKA-18659, ApiKeys'
# PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION): librdkafka before 2.11.1 (2.0.x as Debian 12 ships it)
# enables gzip, snappy and lz4 only when the broker lists Produce v0..v2, else it sends those
# batches uncompressed. Clients pick the highest version both sides know, so none ends up asking
# for v0-v2; one that does has its connection closed, as Kafka's SocketServer does
# (Processor.parseRequestHeader: UnsupportedVersionException, the channel closed unanswered).
_ADVERTISED_MIN_VERSION = {ApiKey.PRODUCE: 0}


def api_versions_body(served: Collection[int], error_code: int = ec.NONE) -> dict:
    """Exactly the APIs ``served`` (the route table's keys), at the versions our schema tables
    speak (Produce from v0, as Kafka 4.0 advertises it: see ``_ADVERTISED_MIN_VERSION``)."""
    keys = [
        {
            "api_key": key,
            "min_version": _ADVERTISED_MIN_VERSION.get(key, req.versions[0]),
            "max_version": req.versions[1],
        }
        for key, (req, _) in MESSAGES.items()
        if key in served
    ]
    return {"error_code": error_code, "api_keys": keys}


def _partition_entries(broker: Broker, topic: str) -> list[dict]:
    return [partition_entry(broker, topic, p) for p in broker.log_manager.topics().get(topic, [])]


def _topic_entry(broker: Broker, topic: str, error_code: int = ec.NONE) -> dict:
    return {
        "error_code": error_code,
        "name": topic,
        "topic_id": broker.topic_id(topic) or ZERO_UUID,
        "is_internal": topic in INTERNAL_TOPICS,
        "partitions": _partition_entries(broker, topic) if error_code == ec.NONE else [],
    }


def _maybe_create(broker: Broker, topic: str, allowed: bool) -> int:
    """Auto-create a topic a client asked about; the error code for its entry."""
    try:
        validate_topic(topic)
    except KafkalogError:
        return ec.INVALID_TOPIC_EXCEPTION
    if not (allowed and broker.config.auto_create_topics_enable) or topic in INTERNAL_TOPICS:
        return ec.UNKNOWN_TOPIC_OR_PARTITION
    broker.log_manager.create_topic(topic, broker.config.num_partitions)
    log.info("auto-created topic %s with %d partitions", topic, broker.config.num_partitions)
    return ec.NONE


def handlers(broker: Broker, served: Collection[int]) -> dict[int, Handler]:
    """``served``: the route table these handlers go into, read at each ApiVersions; with the
    handlers of :mod:`.cluster` and :mod:`.log_dirs`."""

    async def api_versions(ctx: RequestContext, request: dict) -> dict:
        return api_versions_body(served)

    async def metadata(ctx: RequestContext, request: dict) -> dict:
        known = broker.log_manager.topics()
        wanted = request["topics"]
        if wanted is None or (ctx.api_version == 0 and not wanted):
            topics = [_topic_entry(broker, t) for t in known]
        else:
            topics = []
            for entry in wanted:
                name = entry["name"]
                if name is None:
                    name = broker.topic_by_id(entry["topic_id"])
                    if name is None:
                        topics.append(
                            {"error_code": ec.UNKNOWN_TOPIC_ID, "topic_id": entry["topic_id"]}
                        )
                        continue
                code = ec.NONE
                if name not in known:
                    code = _maybe_create(broker, name, request["allow_auto_topic_creation"])
                topics.append(_topic_entry(broker, name, code))
        host, port = ctx.advertised or (broker.host, broker.port)
        body = {
            "brokers": [{"node_id": broker.node_id, "host": host, "port": port}],
            "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "topics": topics,
        }
        # No authorizer: every operation Kafka supports on the resource (v8+, when asked); not
        # for an unknown topic id, which Kafka adds after setting them.
        if ctx.api_version >= 8 and request["include_topic_authorized_operations"]:
            for topic in topics:
                if "name" in topic:
                    topic["topic_authorized_operations"] = TOPIC_OPERATIONS
        if 8 <= ctx.api_version <= 10 and request["include_cluster_authorized_operations"]:
            body["cluster_authorized_operations"] = CLUSTER_OPERATIONS
        return body

    async def find_coordinator(ctx: RequestContext, request: dict) -> dict:
        host, port = ctx.advertised or (broker.host, broker.port)
        here = {"node_id": broker.node_id, "host": host, "port": port}
        if ctx.api_version < 4:
            return {**here, "error_code": ec.NONE}
        return {"coordinators": [{"key": k, **here} for k in request["coordinator_keys"]]}

    return {
        ApiKey.API_VERSIONS: api_versions,
        ApiKey.METADATA: metadata,
        ApiKey.FIND_COORDINATOR: find_coordinator,
    }
