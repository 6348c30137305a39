"""__consumer_offsets keys and values, built byte by byte from Kafka's schemas.

Layouts follow group-coordinator/src/main/resources/common/message/*.json: non-flexible strings
are i16-length-prefixed, bytes and arrays i32-count-prefixed; flexible versions use uvarint
length+1 and end each struct with a tagged-field section.
"""

from __future__ import annotations

import json
import struct
import uuid

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from kafkalog.format.internal import (
    CONSUMER_OFFSETS_RECORD_TYPES,
    DecodedMessage,
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_consumer_protocol_assignment,
    decode_consumer_protocol_subscription,
    to_json_safe,
)


def uv(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def cstr(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    b = text.encode()
    return uv(len(b) + 1) + b


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def cbytes(data: bytes) -> bytes:
    return uv(len(data) + 1) + data


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


TOPIC_ID = uuid.UUID("0b3c2a63-19f4-4b43-8e1e-5d7a2c9f0e11")


def key_of(record_type: int) -> DecodedMessage:
    return decode_consumer_offsets_key(i16(record_type) + s16("g"))


# ---- keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize("record_type", [0, 1])
def test_offset_commit_key(record_type):
    key = decode_consumer_offsets_key(i16(record_type) + s16("grp") + s16("orders") + i32(7))
    assert key.kind == "offset_commit"
    assert key.version == record_type and key.api_key == record_type
    assert key.data == {"group": "grp", "topic": "orders", "partition": 7}
    assert key.raw is None and key.error is None


def test_group_metadata_key():
    key = decode_consumer_offsets_key(i16(2) + s16("my-group"))
    assert (key.kind, key.version, key.data) == ("group_metadata", 2, {"group": "my-group"})


GROUP_ONLY = {
    3: "consumer_group_metadata",
    4: "consumer_group_partition_metadata",
    6: "consumer_group_target_assignment_metadata",
    9: "share_group_partition_metadata",
    11: "share_group_metadata",
    12: "share_group_target_assignment_metadata",
    15: "share_group_state_partition_metadata",
    17: "streams_group_metadata",
    20: "streams_group_target_assignment_metadata",
    23: "streams_group_topology",
}
GROUP_AND_MEMBER = {
    5: "consumer_group_member_metadata",
    7: "consumer_group_target_assignment_member",
    8: "consumer_group_current_member_assignment",
    10: "share_group_member_metadata",
    13: "share_group_target_assignment_member",
    14: "share_group_current_member_assignment",
    19: "streams_group_member_metadata",
    21: "streams_group_target_assignment_member",
    22: "streams_group_current_member_assignment",
}


@pytest.mark.parametrize(("record_type", "kind"), sorted(GROUP_ONLY.items()))
def test_group_id_keys(record_type, kind):
    key = decode_consumer_offsets_key(i16(record_type) + s16("g1"))
    assert (key.kind, key.api_key, key.data) == (kind, record_type, {"groupId": "g1"})


@pytest.mark.parametrize(("record_type", "kind"), sorted(GROUP_AND_MEMBER.items()))
def test_group_and_member_keys(record_type, kind):
    key = decode_consumer_offsets_key(i16(record_type) + s16("g1") + s16("m-1"))
    assert key.kind == kind
    assert key.data == {"groupId": "g1", "memberId": "m-1"}


def test_regular_expression_key():
    key = decode_consumer_offsets_key(i16(16) + s16("g1") + s16("orders-.*"))
    assert key.kind == "consumer_group_regular_expression"
    assert key.data == {"groupId": "g1", "regularExpression": "orders-.*"}


def test_record_type_table_covers_0_to_23_but_18():
    assert sorted(CONSUMER_OFFSETS_RECORD_TYPES) == [t for t in range(24) if t != 18]


@pytest.mark.parametrize("record_type", [18, 24, 999, -1])
def test_unknown_key_type_is_raw_and_its_value_too(record_type):
    raw_key = i16(record_type) + b"\x01\x02"
    key = decode_consumer_offsets_key(raw_key)
    assert (key.kind, key.version, key.api_key, key.data, key.raw) == (
        "unknown", record_type, record_type, None, raw_key,
    )  # fmt: skip
    value = decode_consumer_offsets_value(key, i16(3) + b"zz")
    assert (value.version, value.data, value.raw, value.error) == (3, None, i16(3) + b"zz", None)


def test_truncated_key_is_an_error_with_position():
    key = decode_consumer_offsets_key(i16(1) + s16("grp") + s16("orders") + b"\x00")
    assert key.kind == "offset_commit" and key.data is None
    assert key.raw is not None and "needs 4 bytes" in key.error and "at byte 15" in key.error


# ---- OffsetCommitValue v0-v4 --------------------------------------------------------------


OFFSET_KEY = decode_consumer_offsets_key(i16(1) + s16("g") + s16("t") + i32(0))


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    [
        (0, i64(42) + s16("m0") + i64(1000),
         {"offset": 42, "metadata": "m0", "commitTimestamp": 1000}),
        (
            1,
            i64(43) + s16("") + i64(1001) + i64(2001),
            {"offset": 43, "metadata": "", "commitTimestamp": 1001, "expireTimestamp": 2001},
        ),
        (2, i64(44) + s16("m2") + i64(1002),
         {"offset": 44, "metadata": "m2", "commitTimestamp": 1002}),
        (
            3,
            i64(45) + i32(9) + s16("m3") + i64(1003),
            {"offset": 45, "leaderEpoch": 9, "metadata": "m3", "commitTimestamp": 1003},
        ),
        (
            4,
            i64(46) + i32(10) + cstr("m4") + i64(1004) + uv(1) + uv(0) + uv(16) + TOPIC_ID.bytes,
            {"offset": 46, "leaderEpoch": 10, "metadata": "m4", "commitTimestamp": 1004,
             "topicId": TOPIC_ID},
        ),
        (
            4,
            i64(47) + i32(-1) + cstr("") + i64(1005) + uv(0),
            {"offset": 47, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 1005},
        ),
    ],
)  # fmt: skip
def test_offset_commit_value_versions(version, body, expected):
    value = decode_consumer_offsets_value(OFFSET_KEY, i16(version) + body)
    assert value.kind == "offset_commit" and value.version == version and value.api_key == 1
    assert value.error is None and value.raw is None
    defaults = {"leaderEpoch": -1, "expireTimestamp": -1, "topicId": uuid.UUID(int=0)}
    assert value.data == {**defaults, **expected}


def test_offset_commit_value_unknown_version_is_raw():
    raw = i16(5) + i64(1) + i32(0) + cstr("") + i64(0) + uv(0)
    value = decode_consumer_offsets_value(OFFSET_KEY, raw)
    assert (value.kind, value.version, value.data, value.raw, value.error) == (
        "offset_commit", 5, None, raw, None,
    )  # fmt: skip


def test_tombstone_value():
    value = decode_consumer_offsets_value(OFFSET_KEY, None)
    assert (value.kind, value.version, value.data, value.raw) == ("offset_commit", -1, None, None)


def test_trailing_bytes_after_a_value_are_an_error():
    value = decode_consumer_offsets_value(OFFSET_KEY, i16(0) + i64(1) + s16("") + i64(2) + b"!")
    assert value.data is None and value.raw is not None
    assert "1 byte(s) left" in value.error and "at byte 20" in value.error


def test_absurd_metadata_length_is_an_error_not_an_allocation():
    value = decode_consumer_offsets_value(
        OFFSET_KEY, i16(4) + i64(1) + i32(0) + b"\xfe\xff\xff\x7f"
    )
    assert value.data is None and "string field metadata had invalid length" in value.error


# ---- GroupMetadataValue v0-v4 with the consumer protocol ----------------------------------


SUB_V1 = ConsumerProtocolSubscription(
    version=1,
    topics=["orders", "payments"],
    user_data=b"\x01\x02",
    owned_partitions=[
        ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[0, 2])
    ],
).encode(1)
SUB_V3 = ConsumerProtocolSubscription(
    version=3, topics=["orders"], user_data=None, owned_partitions=[], generation_id=5, rack_id="r1"
).encode(3)
ASSIGNMENT_V0 = ConsumerProtocolAssignment(
    version=0,
    assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic="orders", partitions=[1, 3])
    ],
    user_data=b"",
).encode(0)

SUB_V1_DATA = {
    "topics": ["orders", "payments"],
    "userData": b"\x01\x02",
    "ownedPartitions": [{"topic": "orders", "partitions": [0, 2]}],
    "generationId": -1,
    "rackId": None,
}
SUB_V3_DATA = {
    "topics": ["orders"],
    "userData": None,
    "ownedPartitions": [],
    "generationId": 5,
    "rackId": "r1",
}
ASSIGNMENT_DATA = {
    "assignedPartitions": [{"topic": "orders", "partitions": [1, 3]}],
    "userData": b"",
}

GROUP_KEY = decode_consumer_offsets_key(i16(2) + s16("grp"))


def group_value(version: int, protocol_type: str, sub: bytes, assignment: bytes) -> bytes:
    flexible = version >= 4
    string = cstr if flexible else s16
    blob = cbytes if flexible else b32
    out = i16(version) + string(protocol_type) + i32(3) + string("range") + string("m-1")
    if version >= 2:
        out += i64(1_700_000_000_000)
    out += uv(2) if flexible else i32(1)
    out += string("m-1")
    if version >= 3:
        out += string(None)  # groupInstanceId
    out += string("client-a") + string("/10.0.0.1")
    if version >= 1:
        out += i32(300_000)
    out += i32(10_000) + blob(sub) + blob(assignment)
    if flexible:
        out += uv(0) + uv(0)  # member's tag section, then the message's
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize(("sub", "sub_data"), [(SUB_V1, SUB_V1_DATA), (SUB_V3, SUB_V3_DATA)])
def test_group_metadata_value_decodes_consumer_subscription_and_assignment(version, sub, sub_data):
    value = decode_consumer_offsets_value(
        GROUP_KEY, group_value(version, "consumer", sub, ASSIGNMENT_V0)
    )
    assert value.error is None, value.error
    assert (value.kind, value.version, value.api_key) == ("group_metadata", version, 2)
    assert value.data == {
        "protocolType": "consumer",
        "generation": 3,
        "protocol": "range",
        "leader": "m-1",
        "currentStateTimestamp": 1_700_000_000_000 if version >= 2 else -1,
        "members": [
            {
                "memberId": "m-1",
                "groupInstanceId": None,
                "clientId": "client-a",
                "clientHost": "/10.0.0.1",
                "rebalanceTimeout": 300_000 if version >= 1 else -1,
                "sessionTimeout": 10_000,
                "subscription": sub_data,
                "assignment": ASSIGNMENT_DATA,
            }
        ],
    }
    json.dumps(to_json_safe(value))


def test_other_protocol_types_keep_member_bytes():
    value = decode_consumer_offsets_value(GROUP_KEY, group_value(3, "connect", b"\x00\x01s", b"a"))
    member = value.data["members"][0]
    assert member["subscription"] == b"\x00\x01s" and member["assignment"] == b"a"


def test_undecodable_consumer_protocol_bytes_stay_bytes():
    value = decode_consumer_offsets_value(
        GROUP_KEY, group_value(2, "consumer", b"\x00", b"\xff\xff")
    )
    assert value.error is None
    assert value.data["members"][0]["subscription"] == b"\x00"


def test_consumer_protocol_newer_version_read_with_newest_schema():
    blob = i16(9) + SUB_V3[2:] + b"future-field"
    result = decode_consumer_protocol_subscription(blob)
    assert (result.version, result.data, result.error) == (9, SUB_V3_DATA, None)
    assignment = decode_consumer_protocol_assignment(ASSIGNMENT_V0)
    assert assignment.data == ASSIGNMENT_DATA


def test_group_with_absurd_member_count_is_an_error():
    raw = i16(3) + s16("consumer") + i32(1) + s16(None) + s16(None) + i64(0) + i32(2**31 - 1)
    value = decode_consumer_offsets_value(GROUP_KEY, raw)
    assert value.data is None and "claims 2147483647 elements" in value.error


# ---- KIP-848 / KIP-932 / KIP-1071 values --------------------------------------------------


def test_consumer_group_member_metadata_value_with_classic_member_tag():
    classic = i32(45_000) + uv(2) + cstr("range") + cbytes(b"\x00\x03") + uv(0) + uv(0)
    body = (
        cstr(None)  # instanceId
        + cstr("rack-1")
        + cstr("client-b")
        + cstr("/10.0.0.2")
        + uv(3) + cstr("a") + cstr("b")  # subscribedTopicNames
        + cstr(None)  # subscribedTopicRegex
        + i32(60_000)
        + cstr("uniform")
        + uv(1) + uv(0) + uv(len(classic) + 1) + uv(1) + classic
    )  # fmt: skip
    key = decode_consumer_offsets_key(i16(5) + s16("g") + s16("m"))
    value = decode_consumer_offsets_value(key, i16(0) + body)
    assert value.error is None, value.error
    assert value.data == {
        "instanceId": None,
        "rackId": "rack-1",
        "clientId": "client-b",
        "clientHost": "/10.0.0.2",
        "subscribedTopicNames": ["a", "b"],
        "subscribedTopicRegex": None,
        "rebalanceTimeoutMs": 60_000,
        "serverAssignor": "uniform",
        "classicMemberMetadata": {
            "sessionTimeoutMs": 45_000,
            "supportedProtocols": [{"name": "range", "metadata": b"\x00\x03"}],
        },
    }


def test_consumer_group_current_member_assignment_value():
    topic = (
        TOPIC_ID.bytes + uv(3) + i32(0) + i32(4) + uv(1) + uv(0) + uv(9) + uv(3) + i32(7) + i32(8)
    )
    body = i32(12) + i32(11) + struct.pack(">b", 0) + uv(2) + topic + uv(1) + uv(0)
    key = decode_consumer_offsets_key(i16(8) + s16("g") + s16("m"))
    value = decode_consumer_offsets_value(key, i16(0) + body)
    assert value.error is None, value.error
    assert value.data == {
        "memberEpoch": 12,
        "previousMemberEpoch": 11,
        "state": 0,
        "assignedPartitions": [
            {"topicId": TOPIC_ID, "partitions": [0, 4], "assignmentEpochs": [7, 8]}
        ],
        "partitionsPendingRevocation": [],
    }


def test_share_group_metadata_value():
    value = decode_consumer_offsets_value(key_of(11), i16(0) + i32(4) + i64(-99) + uv(0))
    assert value.kind == "share_group_metadata"
    assert value.data == {"epoch": 4, "metadataHash": -99}


def test_share_group_partition_metadata_value_of_kafka_4_0():
    topic = TOPIC_ID.bytes + cstr("t") + i32(1) + uv(2) + i32(0) + uv(2) + cstr("r") + uv(0) + uv(0)
    value = decode_consumer_offsets_value(key_of(9), i16(0) + uv(2) + topic + uv(0))
    assert value.data == {
        "topics": [
            {
                "topicId": TOPIC_ID,
                "topicName": "t",
                "numPartitions": 1,
                "partitionMetadata": [{"partition": 0, "racks": ["r"]}],
            }
        ]
    }


def test_streams_group_metadata_value_with_tagged_fields():
    tags = uv(2) + uv(0) + uv(4) + i32(3) + uv(1) + uv(6) + uv(2) + cstr("k") + cstr("v") + uv(0)
    value = decode_consumer_offsets_value(key_of(17), i16(0) + i32(2) + i64(5) + tags)
    assert value.error is None, value.error
    assert value.data == {
        "epoch": 2,
        "metadataHash": 5,
        "validatedTopologyEpoch": 3,
        "lastAssignmentConfigs": [{"key": "k", "value": "v"}],
        "storedDescriptionTopologyEpoch": -1,
        "failedDescriptionTopologyEpoch": -1,
    }


def test_value_of_a_known_type_with_an_unknown_version_is_raw():
    value = decode_consumer_offsets_value(key_of(3), i16(1) + i32(1) + uv(0))
    assert (value.kind, value.version, value.data) == ("consumer_group_metadata", 1, None)
    assert value.raw == i16(1) + i32(1) + uv(0) and value.error is None
