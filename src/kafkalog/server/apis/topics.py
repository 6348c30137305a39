"""CreateTopics, DeleteTopics and CreatePartitions. One node: a replication factor other than 1
(or -1, the default) is refused with INVALID_REPLICATION_FACTOR, as a one-broker Kafka cluster
does, and a manual assignment naming another broker with INVALID_REPLICA_ASSIGNMENT.

A topic's partitions are created by worker threads, a chunk at a time, and registered on the
event loop's thread, which serves other clients in between: 10,000 partitions take seconds of
file creation and fsyncs, which must not stall every producer and consumer meanwhile. Creation
completes or leaves nothing: on a failure (a full disk, a file system error) what was created is
removed and the topic gets the error code, as Kafka's controller creates a topic in one
metadata record or not at all.
CreatePartitions grows a topic the same way, and a failure removes the new partitions only.
DeleteTopics of a topic being created or grown waits for that to end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...format.message import ZERO_UUID
from ...log.datadir import (
    PARTITION_METADATA_FILE_NAME,
    TopicPartition,
    log_dir_name,
    validate_topic,
    write_partition_metadata,
)
from ...log.partition import Log, LogConfig
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from ..internal_topics import INTERNAL_TOPICS
from .configs import describe_topic_configs

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")

MAX_PARTITIONS_PER_TOPIC = 10_000
CREATE_WORKERS = 8  # partitions created at once (mostly waiting for fsyncs, which overlap)
CREATE_CHUNK = 128  # partitions handed to the workers before the created ones are registered


def _open_partition(directory: Path, config: LogConfig, clock, topic_id: uuid.UUID) -> Log:
    """What LogManager.get_or_create_log does for one new partition, minus its registration
    (which stays on the event loop's thread): the log and its ``partition.metadata``; and
    this node's leadership, epoch 0 from offset 0 (so that the first produce writes no
    leader-epoch checkpoint on the loop)."""
    partition_log = Log.open(directory, config=config, clock=clock, writable=True, create=True)
    try:
        write_partition_metadata(directory / PARTITION_METADATA_FILE_NAME, topic_id)
        partition_log.assign_epoch_start_offset(0)
    except BaseException:
        partition_log.close()
        raise
    return partition_log


async def create_partitions(broker: Broker, name: str, partitions: int, configs: dict) -> None:
    """Create topic ``name`` with ``partitions`` partitions; on any failure (or cancellation)
    remove what was created, then raise (:func:`_open_partitions` says how they are made)."""
    manager = broker.log_manager
    done = asyncio.Event()
    broker.creating_topics[name] = done
    try:
        manager.create_topic(name, 0, configs)  # the configs and topic id, no partition yet
        await _open_partitions(broker, name, 0, partitions)
    except BaseException:
        _remove_partial_topic(broker, name, partitions)
        raise
    finally:
        broker.topics_changed()
        del broker.creating_topics[name]
        done.set()


async def _open_partitions(broker: Broker, name: str, first: int, end: int) -> None:
    """Create partitions ``first`` to ``end - 1`` of topic ``name``, whose configs and topic id
    the log manager already records; raise on the first failure, the partitions that were made
    registered (the caller removes them).

    The files are created by worker threads, :data:`CREATE_CHUNK` partitions at a time, and
    each chunk registered with the log manager on the event loop's thread, which serves other
    clients meanwhile (file creation and its fsyncs release the GIL, and overlap across the
    workers). New partitions go to the data directory holding the fewest, as the manager's.
    """
    manager = broker.log_manager
    pending: list[concurrent.futures.Future] = []
    try:
        topic_id = manager.topic_id(name)
        config = manager.config_for(name)
        counts = Counter({d: 0 for d in manager.data_dirs})
        counts.update(manager.log_dir_of.values())
        with concurrent.futures.ThreadPoolExecutor(CREATE_WORKERS, "create-topic") as workers:
            for chunk_first in range(first, end, CREATE_CHUNK):
                chunk = []
                for partition in range(chunk_first, min(end, chunk_first + CREATE_CHUNK)):
                    tp = TopicPartition(name, partition)
                    target = min(manager.data_dirs, key=lambda d: counts[d])
                    counts[target] += 1
                    future = workers.submit(
                        _open_partition, target / log_dir_name(tp), config, manager.clock,
                        topic_id,
                    )  # fmt: skip
                    chunk.append((tp, target, future))
                pending = [f for _, _, f in chunk]
                await asyncio.wait([asyncio.wrap_future(f) for f in pending])
                failure = None
                for tp, target, future in chunk:
                    if future.exception() is not None:
                        failure = failure or future.exception()
                        continue
                    manager.register(tp, future.result(), target)
                pending = []
                broker.topics_changed()
                # The new logs live as long as the topic: out of the collector's way, or each
                # full collection walks every partition's objects with the event loop stopped
                # (hundreds of milliseconds at 10,000 partitions). DeleteTopics unfreezes.
                gc.freeze()
                if failure is not None:
                    raise failure
    except BaseException:
        concurrent.futures.wait(pending)  # (cancelled mid-chunk) the workers' files, too
        for future in pending:
            if not future.cancelled() and future.exception() is None:
                future.result().close()
        raise


async def add_partitions(broker: Broker, name: str, count: int) -> None:
    """CreatePartitions: grow topic ``name`` to ``count`` partitions, with its configs and topic
    id; on any failure (or cancellation) the new partitions are removed, the old untouched."""
    existing = len(broker.log_manager.topics()[name])
    done = asyncio.Event()
    broker.creating_topics[name] = done
    try:
        await _open_partitions(broker, name, existing, count)
    except BaseException:
        _remove_partitions(broker, name, existing, count)
        raise
    finally:
        broker.topics_changed()
        del broker.creating_topics[name]
        done.set()


def _remove_partitions(broker: Broker, name: str, first: int, end: int) -> None:
    """Undo a growth that failed: partitions ``first`` to ``end - 1``, registered or half-made."""
    manager = broker.log_manager
    for partition in range(first, end):
        tp = TopicPartition(name, partition)
        manager.log_dir_of.pop(tp, None)
        partition_log = manager.logs.pop(tp, None)
        if partition_log is not None:
            try:
                partition_log.close()
            except Exception:
                log.exception("closing the partly created partition %s failed", tp)
        for data_dir in manager.data_dirs:
            leftover = data_dir / log_dir_name(tp)
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    gc.unfreeze()


def _remove_partial_topic(broker: Broker, name: str, partitions: int) -> None:
    """Undo a creation that failed: the partitions registered, the topic's record in the
    topics file, and whatever a partition that failed half-way left in its directory."""
    manager = broker.log_manager
    try:
        manager.delete_topic(name)
    except Exception:
        log.exception("removing the partly created topic %s failed", name)
    gc.unfreeze()
    for partition in range(partitions):
        for data_dir in manager.data_dirs:
            leftover = data_dir / log_dir_name(TopicPartition(name, partition))
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


async def _create_one(broker: Broker, topic: dict, validate_only: bool) -> dict:
    name = topic["name"]
    out = {"name": name}

    def fail(code: int, message: str) -> dict:
        return {**out, "error_code": code, "error_message": message}

    try:
        validate_topic(name)
    except KafkalogError as e:
        return fail(ec.INVALID_TOPIC_EXCEPTION, e.message)
    if name in broker.log_manager.topics() or name in broker.creating_topics:
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
        started = time.monotonic()
        try:
            await create_partitions(broker, name, partitions, configs)
        except Exception as e:
            return fail(*_creation_error(e, f"creating topic {name}"))
        log.info("created topic %s with %d partitions in %.1f s", name, partitions,
                 time.monotonic() - started)  # fmt: skip
    return {
        **out,
        "error_code": ec.NONE,
        "topic_id": broker.topic_id(name) or ZERO_UUID,
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": describe_topic_configs(broker, name, configs=LogConfig(configs)),
    }


def _assignment_problem(broker: Broker, replicas: list[int]) -> str | None:
    """Kafka's validateManualPartitionAssignment for one new partition's sorted replicas."""
    prefix = "The manual partition assignment includes"
    if not replicas:
        return f"{prefix} an empty replica list."
    for i, broker_id in enumerate(replicas):
        if broker_id != broker.node_id:
            return f"{prefix} broker {broker_id}, but no such broker is registered."
        if i and broker_id == replicas[i - 1]:
            return f"{prefix} the broker {broker_id} more than once."
    return None


async def _grow_one(broker: Broker, topic: dict, validate_only: bool) -> dict:
    """One topic of a CreatePartitions, with the checks of Kafka's controller
    (ReplicationControlManager.createPartitions and validateManualPartitionAssignment)."""
    name, count, assignments = topic["name"], topic["count"], topic["assignments"]
    out = {"name": name, "error_code": ec.NONE, "error_message": None}

    def fail(code: int, message: str | None) -> dict:
        return {**out, "error_code": code, "error_message": message}

    # A creation or growth under way: judge what it leaves. (From here to add_partitions nothing
    # awaits, so no other growth of the topic can start in between.)
    while (creating := broker.creating_topics.get(name)) is not None:
        await creating.wait()
    existing = len(broker.log_manager.topics().get(name, []))
    if not existing:
        return fail(ec.UNKNOWN_TOPIC_OR_PARTITION, None)
    if count == existing:
        return fail(ec.INVALID_PARTITIONS, f"Topic already has {existing} partition(s).")
    if count < existing:
        return fail(ec.INVALID_PARTITIONS, f"The topic {name} currently has {existing} "
                    f"partition(s); {count} would not be an increase.")  # fmt: skip
    additional = count - existing
    if assignments is not None:
        if len(assignments) != additional:
            return fail(ec.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {additional} "
                        f"additional partition(s), but only {len(assignments)} assignment(s) "
                        "were specified.")  # fmt: skip
        for assignment in assignments:
            problem = _assignment_problem(broker, sorted(assignment["broker_ids"]))
            if problem is not None:
                return fail(ec.INVALID_REPLICA_ASSIGNMENT, problem)
    if count > MAX_PARTITIONS_PER_TOPIC:
        return fail(ec.INVALID_PARTITIONS,
                    f"Number of partitions {count} is above this server's limit of "
                    f"{MAX_PARTITIONS_PER_TOPIC} per topic.")  # fmt: skip
    if validate_only:
        return out
    try:
        await add_partitions(broker, name, count)
    except Exception as e:
        return fail(*_creation_error(e, f"adding partitions to {name}"))
    log.info("topic %s grew from %d to %d partitions", name, existing, count)
    return out


def _creation_error(error: Exception, doing: str) -> tuple[int, str]:
    """The code and message for partitions whose files could not be created (what was created
    of them is removed): a typed error's own, an I/O error's (KAFKA_STORAGE_ERROR), else
    UNKNOWN_SERVER_ERROR with its traceback logged."""
    if isinstance(error, KafkalogError):
        return ec.code_of(error), error.message
    if isinstance(error, OSError):
        log.error("%s failed (none of its partitions is left): %s", doing, error)
        return ec.code_of(error), f"Creating the partitions failed: {error}"
    log.exception("%s failed (none of its partitions is left)", doing)
    return ec.UNKNOWN_SERVER_ERROR, f"{type(error).__name__}: {error}"


def _named_once(topics: list[dict]) -> tuple[list[dict], list[dict]]:
    """The topics of a request named once, and an INVALID_REQUEST answer for each name given
    more than once: as Kafka's controller (CreateTopics, CreatePartitions), a name given twice
    is refused once and acted on by neither."""
    names = Counter(t["name"] for t in topics)
    duplicates = [
        {"name": name, "error_code": ec.INVALID_REQUEST, "error_message": "Duplicate topic name."}
        for name, n in names.items()
        if n > 1
    ]
    return [t for t in topics if names[t["name"]] == 1], duplicates


def handlers(broker: Broker) -> dict[int, Handler]:
    async def create_topics(ctx: RequestContext, request: dict) -> dict:
        once, duplicates = _named_once(request["topics"])
        created = [await _create_one(broker, t, request["validate_only"]) for t in once]
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
            creating = broker.creating_topics.get(name)
            if creating is not None:  # let its creation end first (completed or undone)
                await creating.wait()
            entry = {"name": name, "topic_id": broker.topic_id(name) or ZERO_UUID}
            if name in INTERNAL_TOPICS:
                responses.append({**entry, "error_code": ec.INVALID_TOPIC_EXCEPTION})
            elif name not in broker.log_manager.topics():
                responses.append({**entry, "error_code": ec.UNKNOWN_TOPIC_OR_PARTITION})
            else:
                broker.log_manager.delete_topic(name)
                broker.topics_changed()
                gc.unfreeze()  # what the deleted logs leave is collectable again
                log.info("deleted topic %s", name)
                responses.append({**entry, "error_code": ec.NONE})
        return {"responses": responses}

    async def create_partitions(ctx: RequestContext, request: dict) -> dict:
        once, duplicates = _named_once(request["topics"])
        grown = [await _grow_one(broker, t, request["validate_only"]) for t in once]
        return {"results": duplicates + grown}

    return {
        ApiKey.CREATE_TOPICS: create_topics,
        ApiKey.DELETE_TOPICS: delete_topics,
        ApiKey.CREATE_PARTITIONS: create_partitions,
    }
