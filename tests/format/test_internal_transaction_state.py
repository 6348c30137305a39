"""__transaction_state keys and values, built byte by byte from TransactionLog{Key,Value}.json."""

from __future__ import annotations

import struct

import pytest

from kafkalog.format.internal import (
    TRANSACTION_STATUSES,
    decode_transaction_log_key,
    decode_transaction_log_value,
)


def uv(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s16(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def cstr(text: str) -> bytes:
    b = text.encode()
    return uv(len(b) + 1) + b


def test_key():
    key = decode_transaction_log_key(struct.pack(">h", 0) + s16("txn-1"))
    assert (key.kind, key.version, key.api_key) == ("transaction_log", 0, 0)
    assert key.data == {"transactionalId": "txn-1"} and key.raw is None and key.error is None


def test_key_of_unknown_type_is_raw():
    raw = struct.pack(">h", 1) + s16("txn-1")
    key = decode_transaction_log_key(raw)
    assert (key.version, key.data, key.raw, key.error) == (1, None, raw, None)


def test_value_v0_with_partitions():
    body = (
        struct.pack(">qhib", 4000, 3, 60_000, 1)  # producerId, epoch, timeout, status Ongoing
        + struct.pack(">i", 2)
        + s16("orders") + struct.pack(">iii", 2, 0, 5)
        + s16("payments") + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)
    )  # fmt: skip
    value = decode_transaction_log_value(struct.pack(">h", 0) + body)
    assert value.error is None, value.error
    assert (value.kind, value.version) == ("transaction_log", 0)
    assert value.data == {
        "producerId": 4000,
        "previousProducerId": -1,
        "nextProducerId": -1,
        "producerEpoch": 3,
        "nextProducerEpoch": -1,
        "transactionTimeoutMs": 60_000,
        "transactionStatus": 1,
        "transactionPartitions": [
            {"topic": "orders", "partitionIds": [0, 5]},
            {"topic": "payments", "partitionIds": [1]},
        ],
        "transactionLastUpdateTimestampMs": 1_700_000_000_500,
        "transactionStartTimestampMs": 1_700_000_000_000,
        "clientTransactionVersion": 0,
    }
    assert TRANSACTION_STATUSES[value.data["transactionStatus"]] == "Ongoing"


def test_value_v0_with_null_partitions():
    body = struct.pack(">qhib", 1, 0, 1000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 5, -1)
    value = decode_transaction_log_value(struct.pack(">h", 0) + body)
    assert value.data["transactionPartitions"] is None
    assert TRANSACTION_STATUSES[value.data["transactionStatus"]] == "Empty"


def test_value_v1_flexible_with_tagged_fields():
    tags = (
        uv(3)
        + uv(0) + uv(8) + struct.pack(">q", 3999)  # previousProducerId
        + uv(2) + uv(2) + struct.pack(">h", 2)  # clientTransactionVersion
        + uv(3) + uv(2) + struct.pack(">h", 4)  # nextProducerEpoch
    )  # fmt: skip
    body = (
        struct.pack(">qhib", 4000, 3, 60_000, 4)
        + uv(2) + cstr("orders") + uv(2) + struct.pack(">i", 7) + uv(0)
        + struct.pack(">qq", 20, 10)
        + tags
    )  # fmt: skip
    value = decode_transaction_log_value(struct.pack(">h", 1) + body)
    assert value.error is None, value.error
    assert value.version == 1
    assert value.data == {
        "producerId": 4000,
        "previousProducerId": 3999,
        "nextProducerId": -1,
        "producerEpoch": 3,
        "nextProducerEpoch": 4,
        "transactionTimeoutMs": 60_000,
        "transactionStatus": 4,
        "transactionPartitions": [{"topic": "orders", "partitionIds": [7]}],
        "transactionLastUpdateTimestampMs": 20,
        "transactionStartTimestampMs": 10,
        "clientTransactionVersion": 2,
    }


def test_value_tombstone_and_unknown_version():
    tomb = decode_transaction_log_value(None)
    assert (tomb.kind, tomb.version, tomb.data, tomb.raw, tomb.error) == (
        "transaction_log", -1, None, None, None,
    )  # fmt: skip
    raw = struct.pack(">h", 2) + b"\x00" * 30
    unknown = decode_transaction_log_value(raw)
    assert (unknown.version, unknown.data, unknown.raw, unknown.error) == (2, None, raw, None)


@pytest.mark.parametrize("cut", [1, 2, 9, 16, 20, 30])
def test_truncated_value_is_an_error(cut):
    body = struct.pack(">qhib", 1, 0, 1000, 0) + struct.pack(">i", 0) + struct.pack(">qq", 5, 6)
    full = struct.pack(">h", 0) + body
    value = decode_transaction_log_value(full[:cut])
    assert value.data is None and value.raw == full[:cut] and value.error


def test_status_names_are_kafkas():
    assert [TRANSACTION_STATUSES[i] for i in range(8)] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence",
    ]  # fmt: skip
