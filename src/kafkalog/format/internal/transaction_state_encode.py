"""Writing ``__transaction_state`` records: one transactional id's state per record.

The inverse of :mod:`.transaction_state` (TransactionLog.keyToBytes / valueToBytes). The value
is written at v0, what Kafka writes below transaction.version 1 and what every broker since 0.11
reads; v1 adds only tagged fields for the epoch bump of transactions V2 (KIP-890), which a
coordinator speaking EndTxn below v5 never needs. As in Kafka, an Empty transaction has no
partitions; other states write their partitions grouped by topic (an empty list when none).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ..message import write_message
from .transaction_state import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE

__all__ = [
    "TRANSACTION_LOG_VALUE_VERSION",
    "encode_transaction_log_key",
    "encode_transaction_log_value",
]

TRANSACTION_LOG_KEY_TYPE = 0
TRANSACTION_LOG_VALUE_VERSION = 0
EMPTY_STATUS = 0
_I16 = struct.Struct(">h")


def encode_transaction_log_key(transactional_id: str) -> bytes:
    """Type 0 | transactionalId."""
    body = write_message(TRANSACTION_LOG_KEY, {"transactionalId": transactional_id}, 0)
    return _I16.pack(TRANSACTION_LOG_KEY_TYPE) + body


def encode_transaction_log_value(
    *,
    producer_id: int,
    producer_epoch: int,
    transaction_timeout_ms: int,
    transaction_status: int,
    partitions: Iterable[tuple[str, int]],
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
) -> bytes:
    """A transaction's state (TransactionLogValue v0); status is TRANSACTION_STATUSES' number."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if transaction_status == EMPTY_STATUS and by_topic:
        raise ValueError("an Empty transaction has no partitions")
    topics = None if transaction_status == EMPTY_STATUS else [
        {"topic": t, "partitionIds": sorted(ps)} for t, ps in by_topic.items()
    ]  # fmt: skip
    data = {
        "producerId": producer_id,
        "producerEpoch": producer_epoch,
        "transactionTimeoutMs": transaction_timeout_ms,
        "transactionStatus": transaction_status,
        "transactionPartitions": topics,
        "transactionLastUpdateTimestampMs": last_update_timestamp_ms,
        "transactionStartTimestampMs": start_timestamp_ms,
    }
    version = TRANSACTION_LOG_VALUE_VERSION
    return _I16.pack(version) + write_message(TRANSACTION_LOG_VALUE, data, version)
