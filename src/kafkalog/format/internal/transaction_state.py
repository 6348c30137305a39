"""``__transaction_state`` records: one key type and one value type, per transactional id.

Layout (transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json;
CoordinatorRecordSerde)::

    key   = i16 type (0) | transactionalId string (i16 length)
    value = i16 version | TransactionLogValue at that version; null value = tombstone

TransactionLogValue v0 is fixed-layout; v1 is flexible (compact strings and arrays, tagged
fields: previousProducerId tag 0, nextProducerId 1, clientTransactionVersion 2,
nextProducerEpoch 3). ``transactionStatus`` stays the schema's int8; TRANSACTION_STATUSES names
it as Kafka's TransactionState does (DumpLogSegments prints the name).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from types import MappingProxyType

from ..message import Message
from .result import NO_VERSION, DecodedMessage, as_bytes, decode_body, malformed

__all__ = [
    "TRANSACTION_STATUSES",
    "decode_transaction_log_key",
    "decode_transaction_log_value",
]

KIND = "transaction_log"

#: TransactionStatus int8 -> Kafka's state name (TransactionState.java).
TRANSACTION_STATUSES: Mapping[int, str] = MappingProxyType(
    {
        0: "Empty",
        1: "Ongoing",
        2: "PrepareCommit",
        3: "PrepareAbort",
        4: "CompleteCommit",
        5: "CompleteAbort",
        6: "Dead",
        7: "PrepareEpochFence",
    }
)

TRANSACTION_LOG_KEY = Message(
    "TransactionLogKey",
    "0",
    "none",
    """
transactionalId string 0
""",
)

TRANSACTION_LOG_VALUE = Message(
    "TransactionLogValue",
    "0-1",
    "1+",
    """
producerId int64
previousProducerId int64 1+ tag=0 =-1
nextProducerId int64 1+ tag=1 =-1
producerEpoch int16
nextProducerEpoch int16 1+ tag=3 =-1
transactionTimeoutMs int32
transactionStatus int8
transactionPartitions [] ? =[]
  topic string
  partitionIds [int32]
transactionLastUpdateTimestampMs int64
transactionStartTimestampMs int64
clientTransactionVersion int16 1+ tag=2 =0
""",
)

_I16 = struct.Struct(">h")


def decode_transaction_log_key(key: bytes) -> DecodedMessage:
    """Decode a ``__transaction_state`` key; a type other than 0 comes back raw."""
    buf = as_bytes(key)
    if len(buf) < 2:
        return malformed(KIND, NO_VERSION, buf, f"key of {len(buf)} bytes has no i16 type")
    (version,) = _I16.unpack_from(buf)
    return decode_body(KIND, TRANSACTION_LOG_KEY, buf, 2, version, api_key=version)


def decode_transaction_log_value(value: bytes | None) -> DecodedMessage:
    """Decode a ``__transaction_state`` value; None is a tombstone (``data`` None)."""
    if value is None:
        return DecodedMessage(kind=KIND, version=NO_VERSION, data=None, raw=None)
    buf = as_bytes(value)
    if len(buf) < 2:
        return malformed(KIND, NO_VERSION, buf, f"value of {len(buf)} bytes has no i16 version")
    (version,) = _I16.unpack_from(buf)
    return decode_body(KIND, TRANSACTION_LOG_VALUE, buf, 2, version)
