"""Fetch: windows of segment files for consumers, waiting up to max_wait for min_bytes.

Each partition's answer is a window of one segment file (Log.read), sent by the connection with
sendfile; nothing is decoded or copied here. read_committed reads stop at the last stable offset
and carry the aborted transactions in the range, from the ``.txnindex`` files, so the client can
drop their records. Fetch sessions (KIP-227) are not kept: a client asking for one is answered
with session id 0, which tells it to keep sending full fetch requests.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...log.datadir import EpochEntry
from ...log.partition import READ_COMMITTED, READ_UNCOMMITTED, OffsetOutOfRangeError, end_offset_for
from ...log.segment import FileRecords
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["check_leader_epoch", "handlers"]

_TOPIC_IDS_FROM = 13  # Fetch v13+ names topics by id (KIP-516)


def check_leader_epoch(broker: Broker, partition_log, requested: int) -> int:
    """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when a client's epoch is not ours (KIP-320)."""
    if requested < 0:
        return ec.NONE
    ours = broker.leader_epoch(partition_log)
    if requested > ours:
        return ec.UNKNOWN_LEADER_EPOCH
    if requested < ours:
        return ec.FENCED_LEADER_EPOCH
    return ec.NONE


def epoch_end_offset(broker: Broker, partition_log, epoch: int) -> tuple[int, int]:
    """``(epoch, end offset)`` as Kafka's leader answers OffsetForLeaderEpoch.

    A log written without epochs has an empty cache, where Kafka's leader would hold the epoch
    it leads with from the log start: this node's epoch is taken to begin there.
    """
    entries = partition_log.leader_epoch_cache.entries or [
        EpochEntry(
            epoch=broker.leader_epoch(partition_log), start_offset=partition_log.log_start_offset
        )
    ]
    return end_offset_for(entries, epoch, partition_log.log_end_offset)


class _Budget:
    """The request's max_bytes, shared by partitions in order; the first may exceed it."""

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes
        self.used = 0


def _read_partition(
    broker: Broker, topic: str, part: dict, isolation: str, budget: _Budget
) -> dict:
    index = part["partition"]
    entry: dict = {"partition_index": index, "records": b""}
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        entry["error_code"] = ec.UNKNOWN_TOPIC_OR_PARTITION
        entry["high_watermark"] = -1
        return entry
    entry["high_watermark"] = partition_log.high_watermark
    entry["last_stable_offset"] = partition_log.last_stable_offset
    entry["log_start_offset"] = partition_log.log_start_offset
    code = check_leader_epoch(broker, partition_log, part["current_leader_epoch"])
    if code:
        entry["error_code"] = code
        return entry
    fetch_offset = part["fetch_offset"]
    last_epoch = part["last_fetched_epoch"]
    if last_epoch >= 0:
        epoch, end = epoch_end_offset(broker, partition_log, last_epoch)
        if epoch < 0 or end < 0:  # Kafka: the last fetched epoch's end cannot be determined
            entry["error_code"] = ec.OFFSET_OUT_OF_RANGE
            return entry
        if epoch < last_epoch or end < fetch_offset:
            entry["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
            return entry
    limit = max(0, min(part["partition_max_bytes"], budget.left))
    try:
        info = partition_log.read(
            fetch_offset, limit, isolation=isolation, min_one_message=budget.used == 0
        )
    except OffsetOutOfRangeError:
        entry["error_code"] = ec.OFFSET_OUT_OF_RANGE
        return entry
    except KafkalogError as e:
        entry["error_code"] = ec.code_of(e)
        return entry
    if isolation == READ_COMMITTED:
        entry["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in info.aborted_transactions or ()
        ]
    if info.records is not None:
        size = info.records.size_in_bytes()
        if size:
            entry["records"] = info.records
            budget.used += size
            budget.left -= size
    return entry


def _read_all(broker: Broker, request: dict, version: int, isolation: str) -> tuple[list, int]:
    budget = _Budget(request["max_bytes"])
    responses = []
    for topic_req in request["topics"]:
        topic = topic_req["topic"]
        out = {"topic": topic, "topic_id": topic_req["topic_id"]}
        if version >= _TOPIC_IDS_FROM:
            topic = broker.topic_by_id(topic_req["topic_id"])
            if topic is None:
                out["partitions"] = [
                    {"partition_index": p["partition"], "error_code": ec.UNKNOWN_TOPIC_ID,
                     "high_watermark": -1, "records": b""}
                    for p in topic_req["partitions"]
                ]  # fmt: skip
                responses.append(out)
                continue
        out["partitions"] = [
            _read_partition(broker, topic, p, isolation, budget) for p in topic_req["partitions"]
        ]
        responses.append(out)
    return responses, budget.used


def _own_windows(broker: Broker, responses: list) -> None:
    """Give each segment window its own descriptor, closed once sent (see FileRecords.detach),
    or, beyond the broker's allowance of such descriptors, its bytes (Broker.own_window).

    Runs with no await between the reads and here, so no DeleteTopics can come in between.
    """
    for topic in responses:
        for entry in topic["partitions"]:
            records = entry.get("records")
            if isinstance(records, FileRecords):
                entry["records"] = broker.own_window(records)


def _unknown_isolation_level(request: dict) -> dict:
    """Kafka's answer to an isolation level it cannot parse (IsolationLevel.forId throws, and
    the request's error response carries UNKNOWN_SERVER_ERROR for the whole and each partition).
    """
    code = ec.UNKNOWN_SERVER_ERROR
    return {"error_code": code, "session_id": request["session_id"], "responses": [
        {"topic": t["topic"], "topic_id": t["topic_id"], "partitions": [
            {"partition_index": p["partition"], "error_code": code, "high_watermark": -1,
             "last_stable_offset": -1, "log_start_offset": -1, "records": b""}
            for p in t["partitions"]]}
        for t in request["topics"]]}  # fmt: skip


def handlers(broker: Broker) -> dict[int, Handler]:
    async def fetch(ctx: RequestContext, request: dict) -> dict:
        version = ctx.api_version
        if request["session_id"] != 0:
            return {"error_code": ec.FETCH_SESSION_ID_NOT_FOUND, "responses": []}
        if request["isolation_level"] not in (0, 1):
            return _unknown_isolation_level(request)
        isolation = READ_COMMITTED if request["isolation_level"] == 1 else READ_UNCOMMITTED
        deadline = time.monotonic() + max(0, request["max_wait_ms"]) / 1000
        while True:
            responses, size = _read_all(broker, request, version, isolation)
            left = deadline - time.monotonic()
            errors = any(p.get("error_code") for t in responses for p in t["partitions"])
            if size >= request["min_bytes"] or left <= 0 or errors:
                _own_windows(broker, responses)
                return {"error_code": ec.NONE, "session_id": 0, "responses": responses}
            await broker.wait_for_data(left)
            await asyncio.sleep(0)

    return {ApiKey.FETCH: fetch}
