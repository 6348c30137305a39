"""KRaft __cluster_metadata records, built byte by byte from metadata/*Record.json.

Every value is ``uvarint frameVersion (1) | uvarint apiKey | uvarint version | message`` with the
message in flexible encoding (compact strings and arrays, tagged fields after each struct).
"""

from __future__ import annotations

import json
import struct
import uuid

import pytest

from kafkalog.format.internal import METADATA_RECORD_TYPES, decode_metadata_record, to_json_safe


def uv(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    b = text.encode()
    return uv(len(b) + 1) + b


def i32s(*values: int) -> bytes:
    return uv(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


def frame(api_key: int, version: int) -> bytes:
    return uv(1) + uv(api_key) + uv(version)


TOPIC_ID = uuid.UUID("8a6a4b96-f1e9-4b2e-8c3f-6a0f3b1c9e21")
DIR = uuid.UUID("5c786493-8b64-4ac8-bdf4-d34e43ca4f7e")


def test_record_type_names_are_kafkas_without_record_suffix():
    assert METADATA_RECORD_TYPES[0] == "RegisterBroker"
    assert METADATA_RECORD_TYPES[5] == "PartitionChange"
    assert METADATA_RECORD_TYPES[20] == "NoOp"
    assert METADATA_RECORD_TYPES[21] == "ZkMigrationState"
    assert METADATA_RECORD_TYPES[28] == "ClearElr"
    assert sorted(METADATA_RECORD_TYPES) == [k for k in range(30) if k not in (6, 13, 16)]


def test_topic_record():
    value = decode_metadata_record(frame(2, 0) + cstr("orders") + TOPIC_ID.bytes + uv(0))
    assert (value.kind, value.api_key, value.version, value.frame_version) == ("Topic", 2, 0, 1)
    assert value.data == {"name": "orders", "topicId": TOPIC_ID}


def test_uuids_print_as_kafka_does():
    assert to_json_safe(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    odd = uuid.UUID(bytes=b"\xfb\xef\xbe" * 5 + b"\xff")  # URL-safe alphabet, no padding
    assert to_json_safe({"id": [odd]}) == {"id": ["--------------------_w"]}


def test_partition_record_v2_with_tagged_elr():
    body = (
        struct.pack(">i", 3) + TOPIC_ID.bytes
        + i32s(1, 2, 3) + i32s(1, 2) + i32s() + i32s(3)
        + struct.pack(">i", 1)  # leader
        + struct.pack(">ii", 5, 6)  # leaderEpoch, partitionEpoch
        + uv(2) + DIR.bytes  # directories
        + uv(2) + uv(1) + uv(5) + i32s(3) + uv(2) + uv(1) + b"\x00"  # ELR [3], lastKnownElr null
    )  # fmt: skip
    value = decode_metadata_record(frame(3, 2) + body)
    assert value.error is None, value.error
    assert value.data == {
        "partitionId": 3,
        "topicId": TOPIC_ID,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "removingReplicas": [],
        "addingReplicas": [3],
        "leader": 1,
        "leaderRecoveryState": 0,
        "leaderEpoch": 5,
        "partitionEpoch": 6,
        "directories": [DIR],
        "eligibleLeaderReplicas": [3],
        "lastKnownElr": None,
    }


def test_partition_change_record_tagged_fields_and_defaults():
    tags = uv(3) + uv(0) + uv(9) + i32s(1, 2) + uv(1) + uv(4) + struct.pack(">i", 2)
    tags += uv(5) + uv(1) + struct.pack(">b", 1)
    value = decode_metadata_record(frame(5, 0) + struct.pack(">i", 0) + TOPIC_ID.bytes + tags)
    assert value.error is None, value.error
    assert value.data == {
        "partitionId": 0,
        "topicId": TOPIC_ID,
        "isr": [1, 2],
        "leader": 2,
        "replicas": None,
        "removingReplicas": None,
        "addingReplicas": None,
        "leaderRecoveryState": 1,
        "directories": None,
        "eligibleLeaderReplicas": None,
        "lastKnownElr": None,
    }


def test_register_broker_record_v0_with_null_rack():
    endpoint = cstr("PLAINTEXT") + cstr("kafka") + struct.pack(">Hh", 9092, 0) + uv(0)
    feature = cstr("metadata.version") + struct.pack(">hh", 1, 8) + uv(0)
    body = (
        struct.pack(">i", 1) + DIR.bytes + struct.pack(">q", 6)
        + uv(2) + endpoint + uv(2) + feature
        + cstr(None) + b"\x01" + uv(0)
    )  # fmt: skip
    value = decode_metadata_record(frame(0, 0) + body)
    assert value.error is None, value.error
    assert value.data == {
        "brokerId": 1,
        "isMigratingZkBroker": False,
        "incarnationId": DIR,
        "brokerEpoch": 6,
        "endPoints": [{"name": "PLAINTEXT", "host": "kafka", "port": 9092, "securityProtocol": 0}],
        "features": [
            {"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 8}
        ],
        "rack": None,
        "fenced": True,
        "inControlledShutdown": False,
        "logDirs": [],
        "cordonedLogDirs": None,
    }
    json.dumps(to_json_safe(value))


@pytest.mark.parametrize(
    ("api_key", "body", "kind", "data"),
    [
        (12, cstr("metadata.version") + struct.pack(">h", 19) + uv(0), "FeatureLevel",
         {"name": "metadata.version", "featureLevel": 19}),
        (20, uv(0), "NoOp", {}),
        (4, b"\x02" + cstr("t") + cstr("cleanup.policy") + cstr(None) + uv(0), "Config",
         {"resourceType": 2, "resourceName": "t", "name": "cleanup.policy", "value": None}),
        (15, struct.pack(">iqq", 1, 2, 1000) + uv(0), "ProducerIds",
         {"brokerId": 1, "brokerEpoch": 2, "nextProducerId": 1000}),
        (21, b"\x02" + uv(0), "ZkMigrationState", {"zkMigrationState": 2}),
        (23, uv(1) + uv(0) + uv(10) + cstr("Bootstrap"), "BeginTransaction", {"name": "Bootstrap"}),
        (24, uv(0), "EndTransaction", {}),
        (28, cstr("orders") + uv(0), "ClearElr", {"topicName": "orders"}),
        (14, uv(2) + cstr("user") + cstr(None) + uv(0) + cstr("producer_byte_rate")
         + struct.pack(">d?", 1024.0, False) + uv(0), "ClientQuota",
         {"entity": [{"entityType": "user", "entityName": None}], "key": "producer_byte_rate",
          "value": 1024.0, "remove": False}),
    ],
)  # fmt: skip
def test_sample_of_record_types(api_key, body, kind, data):
    value = decode_metadata_record(frame(api_key, 0) + body)
    assert (value.kind, value.api_key, value.error) == (kind, api_key, None)
    assert value.data == data


@pytest.mark.parametrize("api_key", [6, 13, 16, 30, 500])
def test_unknown_api_key_is_raw(api_key):
    raw = frame(api_key, 0) + b"\x00"
    value = decode_metadata_record(raw)
    assert (value.kind, value.api_key, value.version, value.data, value.raw, value.error) == (
        "unknown", api_key, 0, None, raw, None,
    )  # fmt: skip


def test_unknown_version_is_raw():
    raw = frame(2, 1) + cstr("orders") + TOPIC_ID.bytes + uv(0)
    value = decode_metadata_record(raw)
    assert (value.kind, value.version, value.data, value.raw, value.error) == (
        "Topic", 1, None, raw, None,
    )  # fmt: skip


@pytest.mark.parametrize("frame_version", [0, 2])
def test_unknown_frame_version_is_raw(frame_version):
    raw = uv(frame_version) + uv(2) + uv(0) + cstr("t") + TOPIC_ID.bytes + uv(0)
    value = decode_metadata_record(raw)
    assert (value.kind, value.frame_version, value.data, value.raw) == (
        "unknown", frame_version, None, raw,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        (frame(2, 0) + cstr("orders") + TOPIC_ID.bytes + uv(0) + b"\x00", "1 byte(s) left"),
        (frame(2, 0) + cstr("orders") + TOPIC_ID.bytes[:5], "needs 16 bytes"),
        (uv(1) + uv(0x8000) + uv(0), "apiKey 32768 is above 0x7fff"),
        (uv(1) + uv(2) + uv(0x10000), "version 65536 is above 0x7fff"),
        (b"", "runs past the end"),
        (uv(1) + uv(3) + uv(0) + struct.pack(">i", 0) + bytes(16) + uv(0x7FFFFFFF), "claims"),
    ],
)
def test_malformed_records_are_errors(raw, rule):
    value = decode_metadata_record(raw)
    assert value.data is None and value.raw == raw
    assert rule in value.error
