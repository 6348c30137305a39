"""What one batch and one record print as: kafka-dump-log's lines and the JSON contract's objects.

Text lines reproduce DumpLogSegments.dumpLog's (Kafka 4.4) byte for byte; the JSON objects are
documented in docs/cli.md.
"""

from __future__ import annotations

import base64

from ...errors import KafkalogError
from ...format import Batch, ControlRecordType, TimestampType
from ...format.constants import MAGIC_VALUE_V0, MAGIC_VALUE_V2
from ...format.control import decode_control_type, decode_end_txn_marker
from ...format.record import Record
from .file_dump import optional_long
from .kafka_json import java_json
from .message_parsers import Parsed, control_json

__all__ = [
    "batch_line",
    "batch_object",
    "control_data",
    "control_fields",
    "control_problem",
    "record_line",
    "record_object",
]


def control_fields(record: Record) -> tuple[int, str, int | None]:
    """``(type id, ControlRecordType name, coordinatorEpoch or None)`` of a control record."""
    type_id = decode_control_type(record.key)
    try:
        control_type = ControlRecordType(type_id)
    except ValueError:
        return type_id, "UNKNOWN", None
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return type_id, control_type.name, decode_end_txn_marker(record.value)[1]
    return type_id, control_type.name, None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def batch_object(batch: Batch, base_offset: int, count: int, valid: bool) -> dict:
    """The ``batch`` object of the JSON contract (docs/cli.md); ``valid``: the batch's CRC
    check, which the caller makes once."""
    return {
        "type": "batch",
        "position": batch.position,
        "size": batch.size_in_bytes,
        "baseOffset": base_offset,
        "lastOffset": batch.last_offset,
        "count": count,
        "magic": batch.magic,
        "compression": batch.compression.label,
        "crc": batch.crc,
        "isValid": valid,
        "timestampType": str(batch.timestamp_type),
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "deleteHorizonMs": batch.delete_horizon_ms,
    }


def record_object(batch: Batch, record: Record) -> dict:
    """The ``record`` object of the JSON contract (docs/cli.md), without the decoder fields."""
    control_type = coordinator_epoch = None
    if batch.is_control:
        try:
            type_id, control_type, coordinator_epoch = control_fields(record)
        except KafkalogError:  # reported by control_problem
            type_id, control_type = -1, "UNKNOWN"
        if control_type == "UNKNOWN":
            control_type = f"UNKNOWN({type_id})"
    return {
        "type": "record",
        "offset": record.offset,
        "timestamp": None if batch.magic == MAGIC_VALUE_V0 else record.timestamp,
        "timestampType": str(record.timestamp_type),
        "keySize": record.key_size,
        "valueSize": record.value_size,
        "key": _b64(record.key),
        "value": _b64(record.value),
        "headers": [[h.key, _b64(h.value)] for h in record.headers],
        "sequence": record.sequence,
        "isControl": batch.is_control,
        "controlType": control_type,
        "coordinatorEpoch": coordinator_epoch,
    }


def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: Batch, base_offset: int, count: int, valid: bool) -> str:
    """One batch line exactly as kafka-dump-log prints it; ``valid``: the batch's CRC check,
    which the caller makes once."""
    if batch.magic >= MAGIC_VALUE_V2:
        horizon = batch.delete_horizon_ms
        head = (
            f"baseOffset: {base_offset} lastOffset: {batch.last_offset} count: {count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_bool(batch.is_transactional)} "
            f"isControl: {_bool(batch.is_control)} deleteHorizonMs: {optional_long(horizon)}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {batch.compression.label} crc: {batch.crc} "
        f"isvalid: {_bool(valid)}"
    )


def record_line(
    batch: Batch,
    record: Record,
    *,
    print_data: bool = False,
    skip_metadata: bool = False,
    parsed: Parsed | None = None,
) -> str:
    """One ``| offset: ...`` record line exactly as kafka-dump-log prints it.

    ``parsed`` is the key and payload text to print (``print_data`` without ``parsed`` prints
    them as lenient UTF-8, kafka-dump-log's default); control records never print them.
    """
    parts: list[str] = []
    prefix = "| "
    if not skip_metadata:
        ts_type: TimestampType = batch.timestamp_type
        parts.append(
            f"{prefix}offset: {record.offset} {ts_type}: {record.timestamp} "
            f"keySize: {record.key_size} valueSize: {record.value_size}"
        )
        prefix = " "
        if batch.magic >= MAGIC_VALUE_V2:
            keys = ",".join(h.key for h in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        else:
            parts.append(f" isValid: {_bool(record.is_valid)} crc: {record.crc}")  # 4.3+: no "}"
        if batch.is_control:
            parts.append(_control_text(record))
    if parsed is None and print_data and not batch.is_control:
        key = None if record.key is None else bytes(record.key).decode("utf-8", "replace")
        value = None if record.value is None else bytes(record.value).decode("utf-8", "replace")
        parsed = Parsed(key, value)
    if parsed is not None and not batch.is_control:
        if parsed.key_text is not None:
            parts.append(f"{prefix}key: {parsed.key_text}")
            prefix = " "
        if parsed.value_text is not None:  # "| payload:" when it comes first (Kafka 4.3+)
            parts.append(f"{prefix}payload: {parsed.value_text}")
    return "".join(parts)


def control_problem(record: Record) -> KafkalogError | None:
    """Why a control record's key or value does not decode, or None."""
    try:
        type_id, _, _ = control_fields(record)
        control_json(type_id, record.value)
    except KafkalogError as e:
        return e
    return None


def control_data(record: Record) -> dict | None:
    try:
        quorum = control_json(decode_control_type(record.key), record.value)
    except KafkalogError:
        return None  # reported by control_problem
    return None if quorum is None else quorum[1]


def _control_text(record: Record) -> str:
    """What kafka-dump-log appends for a control record; an undecodable one (reported by
    control_problem) gets what can still be said of it."""
    try:
        type_id, name, coordinator_epoch = control_fields(record)
    except KafkalogError:
        return " controlType: UNKNOWN(?)"
    if coordinator_epoch is not None:
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    try:
        quorum = control_json(type_id, record.value)
    except KafkalogError:
        quorum = None
    if quorum is not None:
        label, body = quorum
        return f" {label} {java_json(body)}"
    return f" controlType: {name}({type_id})"
