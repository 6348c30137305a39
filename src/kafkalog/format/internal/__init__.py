"""Decoders for the records of Kafka's internal topics and for control records.

Kafka keeps its own state in logs: committed offsets and group state in ``__consumer_offsets``,
transactions in ``__transaction_state``, the KRaft cluster metadata in ``__cluster_metadata``,
and transaction markers and quorum changes as control records in any log. All of them are
messages of Kafka's JSON schema language; :mod:`..message` reads that language once, and the
modules here hold the schemas per topic family, transcribed from Kafka's JSON (trunk, 2026).

Every function takes the key or value bytes of one record and returns a :class:`DecodedMessage`;
none raises on bad bytes. Values are plain dicts keyed by Kafka's camelCase field names, with
``bytes`` and ``uuid.UUID`` values; :func:`to_json_safe` turns them into JSON-ready data.
"""

from __future__ import annotations

from .consumer_offsets import (
    CONSUMER_OFFSETS_RECORD_TYPES,
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_consumer_protocol_assignment,
    decode_consumer_protocol_subscription,
)
from .control import UNKNOWN_CONTROL_TYPE, decode_control_key, decode_control_value
from .metadata import METADATA_RECORD_TYPES, decode_metadata_record
from .result import NO_VERSION, DecodedMessage, to_json_safe, uuid_to_kafka_string
from .transaction_state import (
    TRANSACTION_STATUSES,
    decode_transaction_log_key,
    decode_transaction_log_value,
)

__all__ = [
    "CONSUMER_OFFSETS_RECORD_TYPES",
    "METADATA_RECORD_TYPES",
    "NO_VERSION",
    "TRANSACTION_STATUSES",
    "UNKNOWN_CONTROL_TYPE",
    "DecodedMessage",
    "decode_consumer_offsets_key",
    "decode_consumer_offsets_value",
    "decode_consumer_protocol_assignment",
    "decode_consumer_protocol_subscription",
    "decode_control_key",
    "decode_control_value",
    "decode_metadata_record",
    "decode_transaction_log_key",
    "decode_transaction_log_value",
    "to_json_safe",
    "uuid_to_kafka_string",
]
