"""Produce: validate and append each partition's records as the leader, then answer.

The log layer does Kafka's work (LogValidator's checks and offset assignment, the producer state's
sequence and epoch checks for idempotent and transactional producers, duplicates answered with
the original offsets); this module turns its errors into per-partition error codes. acks=all
waits for an fsync of every partition written, so an acknowledged record survives power loss
(unless the server runs with ``--acks-all-durability page-cache``, Kafka's default flush policy).

Before the log, each partition's records get the checks Kafka's KafkaApis makes on a produce
(``ProduceRequest.validateRecords``: v3 and later carry exactly one magic 2 batch per partition,
zstd only from v7) and one the log layer would only meet when rebuilding the batch (a
transactional batch needs a producer id). Whatever fails gets the partition's error code, never
a closed connection: an error of the record layer that is not typed (a ``ValueError`` or
``OverflowError`` of a batch it cannot rebuild) is mapped by :func:`error_of`, and anything else
unexpected is UNKNOWN_SERVER_ERROR for that partition, its traceback logged once.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from ...errors import CorruptRecordError, KafkalogError, VarintRangeError
from ...format.entries import frame_entry
from ...format.validate import RecordValidationError
from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import CloseConnection, Handler, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["handlers"]

log = logging.getLogger("kafkalog.server")

_ZSTD_FROM = 7  # Produce v7+ may carry zstd (KIP-110)
_LOG_OVERHEAD = 12
_ATTRIBUTES = struct.Struct(">h")  # at byte 21 of a v2 batch
_PRODUCER_ID = struct.Struct(">q")  # at byte 43
_CODEC_MASK, _ZSTD, _TRANSACTIONAL = 0x07, 4, 0x10
_logged_failures: set[tuple[str, str]] = set()


def check_request_records(version: int, records) -> tuple[int, str] | None:
    """Kafka's ``ProduceRequest.validateRecords`` (and the transactional batch without a
    producer id): ``(error code, message)`` for records a produce of ``version`` may not carry,
    None when they pass (the log's validator checks the rest). Entries are framed as every
    walker of kafkalog frames them (:func:`kafkalog.format.entries.frame_entry`)."""
    view = memoryview(records).cast("B")
    try:
        first = frame_entry(view, 0, len(view))
        second = None if first is None else frame_entry(view, _LOG_OVERHEAD + first[0], len(view))
    except CorruptRecordError as e:
        return ec.CORRUPT_MESSAGE, e.message
    if first is None:
        return ec.INVALID_RECORD, (
            f"Produce requests with version {version} must have at least one record batch per "
            "partition"
        )
    if first[1] != 2:
        return ec.INVALID_RECORD, (
            f"Produce requests with version {version} are only allowed to contain record "
            "batches with magic version 2"
        )
    (attributes,) = _ATTRIBUTES.unpack_from(view, 21)
    if version < _ZSTD_FROM and attributes & _CODEC_MASK == _ZSTD:
        return ec.UNSUPPORTED_COMPRESSION_TYPE, (
            f"Produce requests with version {version} are not allowed to use ZStandard compression"
        )
    if second is not None:
        return ec.INVALID_RECORD, (
            f"Produce requests with version {version} are only allowed to contain exactly one "
            "record batch per partition"
        )
    (producer_id,) = _PRODUCER_ID.unpack_from(view, 43)
    if attributes & _TRANSACTIONAL and producer_id < 0:
        return ec.INVALID_RECORD, (
            f"Invalid transactional batch: producerId {producer_id}; a transactional batch "
            "needs the producer id InitProducerId gave"
        )
    return None


def error_of(error: BaseException) -> tuple[int, str]:
    """The code and message for an append's failure: a KafkalogError carries its code; an
    varlong that does not fit, or an OverflowError of the record layer (a batch it cannot
    rebuild), is a timestamp the client sent that cannot be stored (a record's only 64-bit
    field): INVALID_TIMESTAMP; any other ValueError is the client's records' fault:
    INVALID_RECORD."""
    text = str(error)
    if isinstance(error, OverflowError) or (
        isinstance(error, VarintRangeError) and error.bits == 64
    ):
        return ec.INVALID_TIMESTAMP, f"A record's timestamp cannot be stored: {text}"
    if isinstance(error, KafkalogError):
        return ec.code_of(error), text
    return ec.INVALID_RECORD, f"Invalid record batch: {text}"


def _log_unexpected(topic: str, index: int, error: BaseException) -> None:
    """The traceback once per kind of failure (type and message), a line after that."""
    key = (type(error).__name__, str(error))
    if key in _logged_failures:
        log.error("append to %s-%d failed: %s: %s", topic, index, *key)
        return
    if len(_logged_failures) < 1000:
        _logged_failures.add(key)
    log.error("append to %s-%d failed", topic, index, exc_info=error)


def _append_one(broker: Broker, topic: str, part: dict, version: int) -> tuple[dict, int | None]:
    """:func:`_append_partition`, any failure it did not expect an error code (never a crash
    of the request: the other partitions and the connection go on)."""
    try:
        return _append_partition(broker, topic, part, version)
    except Exception as e:
        _log_unexpected(topic, part["index"], e)
        entry = {"index": part["index"], "base_offset": -1, "log_append_time_ms": -1,
                 "log_start_offset": -1, "error_code": ec.UNKNOWN_SERVER_ERROR,
                 "error_message": f"{type(e).__name__}: {e}"}  # fmt: skip
        return entry, None


def _append_partition(
    broker: Broker, topic: str, part: dict, version: int
) -> tuple[dict, int | None]:
    """The partition's response entry, and the offset below which the records it acknowledges
    lie (what acks=all makes durable; a duplicate's too, whose first answer may have failed its
    fsync), None when it acknowledges none."""
    index = part["index"]
    entry = {"index": index, "base_offset": -1, "log_append_time_ms": -1}
    partition_log = broker.get_log(topic, index)
    if partition_log is None:
        entry["error_code"] = ec.UNKNOWN_TOPIC_OR_PARTITION
        return entry, None
    entry["log_start_offset"] = partition_log.log_start_offset
    records = part["records"]
    if records is None:
        entry["error_code"] = ec.INVALID_RECORD
        entry["error_message"] = "Produce request carries null records"
        return entry, None
    refused = check_request_records(version, records)
    if refused is not None:
        entry["error_code"], entry["error_message"] = refused
        return entry, None
    try:
        info = broker.append(topic, index, records, origin="client")
    except RecordValidationError as e:
        entry["error_code"] = e.code
        entry["error_message"] = e.message
        entry["record_errors"] = [
            {"batch_index": i, "batch_index_error_message": m} for i, m in e.errors
        ]
        return entry, None
    except KafkalogError as e:
        entry["error_code"] = ec.code_of(e)
        entry["error_message"] = str(e)
        if entry["error_code"] in (ec.UNKNOWN_SERVER_ERROR, ec.KAFKA_STORAGE_ERROR):
            log.error("append to %s-%d failed: %s", topic, index, e)
        return entry, None
    except (ValueError, OverflowError) as e:  # the record layer refusing untyped
        entry["error_code"], entry["error_message"] = error_of(e)
        log.warning("append to %s-%d refused: %s", topic, index, entry["error_message"])
        return entry, None
    entry["base_offset"] = info.first_offset
    if info.log_append_time >= 0:
        entry["log_append_time_ms"] = info.log_append_time
    entry["log_start_offset"] = partition_log.log_start_offset
    return entry, info.last_offset + 1


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
                entry, durable_below = _append_one(broker, topic, part, ctx.api_version)
                parts.append(entry)
                if durable_below is not None:
                    written.append((topic, part["index"], entry, durable_below))
            responses.append({"name": topic, "partition_responses": parts})
        if acks != -1 or not broker.config.acks_all_fsync:
            # those whose flush.messages or flush.ms calls for a flush, as Kafka's append
            written = [w for w in written if broker.flush_due(w[0], w[1])]
        if written:
            # The partitions' fsyncs at once, off the event loop, each joined with other
            # requests' to the same partition (Broker.flush).
            flushed = await asyncio.gather(
                *(broker.flush(topic, index, offset) for topic, index, _, offset in written),
                return_exceptions=True,
            )
            for (topic, index, entry, _), error in zip(written, flushed):
                if error is None:
                    continue
                # appended but not durable: the client must not count on it
                if isinstance(error, OSError):
                    log.error("fsync of %s-%d failed: %s", topic, index, error)
                    entry["error_code"] = ec.KAFKA_STORAGE_ERROR
                    entry["error_message"] = f"fsync failed: {error}"
                else:
                    _log_unexpected(topic, index, error)
                    entry["error_code"] = ec.UNKNOWN_SERVER_ERROR
                    entry["error_message"] = f"flush failed: {type(error).__name__}: {error}"
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
