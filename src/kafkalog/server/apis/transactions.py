"""DescribeProducers (61) and WriteTxnMarkers (27): the partition leader's side of transactions,
which ``kafka-transactions.sh find-hanging`` and ``abort`` use (KIP-664).

DescribeProducers lists a partition's active producers from its producer state, as Kafka's
UnifiedLog.activeProducers: epoch, last sequence, last timestamp, coordinator epoch and the first
offset of the transaction it has open (-1 outside one). A transaction whose coordinator has lost
it (a hanging one) shows here with a start offset that holds the last stable offset back.

WriteTxnMarkers appends the COMMIT or ABORT control batch each marker names, as the transaction
coordinator does, with the same checks (KafkaApis.handleWriteTxnMarkersRequest): an unknown
partition is UNKNOWN_TOPIC_OR_PARTITION; the log refuses an older producer epoch
(INVALID_PRODUCER_EPOCH) or an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED). A marker
in ``__consumer_offsets`` completes the transaction's pending offset commits there. Admin's
abortTransaction sends one to abort a hanging transaction by hand.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...format.builder import build_end_txn_marker_batch
from ...format.constants import ControlRecordType
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext
from ..internal_topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")


def _active_producers(broker: Broker, topic: str, partition: int) -> dict:
    entry: dict = {"partition_index": partition, "error_code": ec.NONE}
    partition_log = broker.get_log(topic, partition)
    if partition_log is None:
        entry.update(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION,
                     error_message="This server does not host this topic-partition.")  # fmt: skip
        return entry
    producers = partition_log.producer_state.active_producers
    entry["active_producers"] = [
        {
            "producer_id": producer_id,
            "producer_epoch": state.producer_epoch,
            "last_sequence": state.last_seq,
            "last_timestamp": state.last_timestamp,
            "coordinator_epoch": state.coordinator_epoch,
            "current_txn_start_offset": -1
            if state.current_txn_first_offset is None
            else state.current_txn_first_offset,
        }
        for producer_id, state in sorted(producers.items())
    ]
    return entry


async def _write_marker(broker: Broker, marker: dict, topic: str, partition: int) -> int:
    """One partition's marker: its error code."""
    if broker.get_log(topic, partition) is None:
        return ec.UNKNOWN_TOPIC_OR_PARTITION
    commit = bool(marker["transaction_result"])
    batch = build_end_txn_marker_batch(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
        producer_id=marker["producer_id"],
        producer_epoch=marker["producer_epoch"],
        coordinator_epoch=marker["coordinator_epoch"],
        timestamp=broker.log_manager.clock.milliseconds(),  # the coordinator's clock
    )
    try:
        await broker.append_records(topic, partition, batch, origin="coordinator")
        await broker.flush(topic, partition)
    except KafkalogError as e:
        code = ec.code_of(e)
        log.warning("WriteTxnMarkers: no marker for producer %d in %s-%d: %s",
                    marker["producer_id"], topic, partition, e)  # fmt: skip
        return code
    except OSError as e:
        log.error("WriteTxnMarkers: %s-%d could not be made durable: %s", topic, partition, e)
        return ec.KAFKA_STORAGE_ERROR
    coordinators = getattr(broker, "coordinators", None)
    if topic == OFFSETS_TOPIC and coordinators is not None:
        await coordinators.offsets.complete_transaction(marker["producer_id"], partition, commit)
    return ec.NONE


def handlers(broker: Broker) -> dict[int, Handler]:
    async def describe_producers(ctx: RequestContext, request: dict) -> dict:
        topics = []
        for topic in request["topics"]:
            name = topic["name"]
            partitions = [_active_producers(broker, name, p) for p in topic["partition_indexes"]]
            topics.append({"name": name, "partitions": partitions})
        return {"topics": topics}

    async def write_txn_markers(ctx: RequestContext, request: dict) -> dict:
        results = []
        for marker in request["markers"]:
            topics = []
            for topic in marker["topics"]:
                name = topic["name"]
                partitions = [
                    {
                        "partition_index": p,
                        "error_code": await _write_marker(broker, marker, name, p),
                    }
                    for p in topic["partition_indexes"]
                ]
                topics.append({"name": name, "partitions": partitions})
            results.append({"producer_id": marker["producer_id"], "topics": topics})
        return {"markers": results}

    return {
        ApiKey.DESCRIBE_PRODUCERS: describe_producers,
        ApiKey.WRITE_TXN_MARKERS: write_txn_markers,
    }
