"""Produce: validate and append each partition's records as the leader, then answer.

The log layer does Kafka's work (LogValidator's checks and offset assignment, the producer state's
sequence and epoch checks for idempotent and transactional producers, duplicates answered with
the original offsets); this module turns its errors into per-partition error codes. acks=all
waits for an fsync of every partition written, so an acknowledged record survives power loss.
"""

from __future__ import annotations

import logging

from ..errors import KafkalogError
from ..format.validator_types import RecordValidationError
from ..protocol import ApiKey
from . import error_codes as ec
from .broker import Broker
from .handlers import CloseConnection, Handler, RequestContext

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")


def _append_one(broker: Broker, topic: str, part: dict) -> tuple[dict, bool]:
    """The partition's response entry, and whether records were appended (to flush)."""
    index = part["index"]
    entry = {"index": index, "base_offset": -1, "log_append_time_ms": -1}
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        entry["error_code"] = ec.UNKNOWN_TOPIC_OR_PARTITION
        return entry, False
    entry["log_start_offset"] = partition_log.log_start_offset
    records = part["records"]
    if records is None:
        entry["error_code"] = ec.INVALID_RECORD
        entry["error_message"] = "Produce request carries null records"
        return entry, False
    try:
        info = broker.append(topic, index, records, origin="client")
    except RecordValidationError as e:
        entry["error_code"] = e.code
        entry["error_message"] = e.message
        entry["record_errors"] = [
            {"batch_index": i, "batch_index_error_message": m} for i, m in e.errors
        ]
        return entry, False
    except KafkalogError as e:
        entry["error_code"] = ec.code_of(e)
        entry["error_message"] = str(e)
        if entry["error_code"] in (ec.UNKNOWN_SERVER_ERROR, ec.KAFKA_STORAGE_ERROR):
            log.error("append to %s-%d failed: %s", topic, index, e)
        return entry, False
    entry["base_offset"] = info.first_offset
    if info.log_append_time >= 0:
        entry["log_append_time_ms"] = info.log_append_time
    entry["log_start_offset"] = partition_log.log_start_offset
    return entry, not info.duplicate


def handlers(broker: Broker) -> dict[int, Handler]:
    async def produce(ctx: RequestContext, request: dict) -> dict | None:
        acks = request["acks"]
        responses = []
        written = []
        for topic_data in request["topic_data"]:
            topic = topic_data["name"]
            parts = []
            for part in topic_data["partition_data"]:
                if acks not in (0, 1, -1):
                    parts.append({"index": part["index"], "error_code": ec.INVALID_REQUIRED_ACKS,
                                  "base_offset": -1, "log_append_time_ms": -1,
                                  "log_start_offset": -1})  # fmt: skip
                    continue
                entry, appended = _append_one(broker, topic, part)
                parts.append(entry)
                if appended:
                    written.append((topic, part["index"], entry))
            responses.append({"name": topic, "partition_responses": parts})
        if acks == -1:
            for topic, index, entry in written:
                try:
                    await broker.flush(topic, index)
                except OSError as e:  # appended but not durable: the client must not count on it
                    log.error("fsync of %s-%d failed: %s", topic, index, e)
                    entry["error_code"] = ec.KAFKA_STORAGE_ERROR
                    entry["error_message"] = f"fsync failed: {e}"
        if acks == 0:
            failed = [
                f"{t['name']}-{p['index']}: error {p['error_code']}"
                for t in responses
                for p in t["partition_responses"]
                if p.get("error_code")
            ]
            if failed:  # as Kafka: the producer sees the close and refreshes its metadata
                raise CloseConnection("acks=0 produce failed for " + ", ".join(failed))
            return None
        return {"responses": responses}

    return {ApiKey.PRODUCE: produce}
