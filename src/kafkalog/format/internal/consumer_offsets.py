"""``__consumer_offsets`` records: committed offsets and group state, keyed by record type.

Layout (CoordinatorRecordSerde; group-coordinator/src/main/resources/common/message/)::

    key   = i16 record type | key fields (non-flexible: i16-length strings, i32 ints)
    value = i16 version | the type's value message at that version; null value = tombstone

The key's i16 was once "the key version"; since Kafka 4 it is the record type (apiKey). Types:
0, 1 offset commit (group, topic, partition; 0 is the pre-0.9 form), 2 classic group metadata
(group), 3-8 consumer groups (KIP-848), 9-15 share groups (KIP-932; 9 exists only in Kafka 4.0),
16 consumer-group regular expressions, 17 and 19-23 streams groups (KIP-1071). 18 held
StreamsGroupPartitionMetadata on trunk only (Dec 2024-Jun 2025, never released): unknown here.

A value version outside the type's range is unknown (raw), as Kafka's UnknownRecordVersion.
For a classic group with protocolType "consumer", each member's ``subscription`` and
``assignment`` bytes are replaced by the decoded ConsumerProtocolSubscription/Assignment dict,
exactly as kafka-dump-log's offsets decoder does; bytes that do not decode stay bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..message import Message, read_message
from . import _group_schemas as g
from . import _share_streams_schemas as ss
from .result import (
    BYTE_ERRORS,
    NO_VERSION,
    DecodedMessage,
    as_bytes,
    decode_body,
    malformed,
)

__all__ = [
    "CONSUMER_OFFSETS_RECORD_TYPES",
    "consumer_offsets_value_schema",
    "decode_consumer_offsets_key",
    "decode_consumer_offsets_value",
    "decode_consumer_protocol_assignment",
    "decode_consumer_protocol_subscription",
]

_I16 = struct.Struct(">h")
_UNKNOWN = "unknown"
_CONSUMER_PROTOCOL_TYPE = "consumer"
_SUBSCRIPTION = g.CONSUMER_PROTOCOL_SUBSCRIPTION
_ASSIGNMENT = g.CONSUMER_PROTOCOL_ASSIGNMENT


@dataclass(frozen=True, slots=True)
class _RecordType:
    kind: str
    key: Message
    value: Message


def _key(name: str, *fields: str) -> Message:
    # Keys are never versioned beyond their type and never flexible; read them at version 0.
    return Message(name, "0+", "none", "\n".join(fields))


_OFFSET_KEY = _key("OffsetCommitKey", "group string", "topic string", "partition int32")
_GROUP = _key("GroupMetadataKey", "group string")
_GROUP_ID = _key("GroupIdKey", "groupId string")
_MEMBER = _key("GroupAndMemberKey", "groupId string", "memberId string")
_REGEX = _key("ConsumerGroupRegularExpressionKey", "groupId string", "regularExpression string")

_TYPES: dict[int, _RecordType] = {
    0: _RecordType("offset_commit", _OFFSET_KEY, g.OFFSET_COMMIT_VALUE),
    1: _RecordType("offset_commit", _OFFSET_KEY, g.OFFSET_COMMIT_VALUE),
    2: _RecordType("group_metadata", _GROUP, g.GROUP_METADATA_VALUE),
    3: _RecordType("consumer_group_metadata", _GROUP_ID, g.CONSUMER_GROUP_METADATA_VALUE),
    4: _RecordType(
        "consumer_group_partition_metadata", _GROUP_ID, g.CONSUMER_GROUP_PARTITION_METADATA_VALUE
    ),
    5: _RecordType(
        "consumer_group_member_metadata", _MEMBER, g.CONSUMER_GROUP_MEMBER_METADATA_VALUE
    ),
    6: _RecordType(
        "consumer_group_target_assignment_metadata",
        _GROUP_ID,
        g.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    ),
    7: _RecordType(
        "consumer_group_target_assignment_member",
        _MEMBER,
        g.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    ),
    8: _RecordType(
        "consumer_group_current_member_assignment",
        _MEMBER,
        g.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    ),
    9: _RecordType(
        "share_group_partition_metadata", _GROUP_ID, ss.SHARE_GROUP_PARTITION_METADATA_VALUE
    ),
    10: _RecordType("share_group_member_metadata", _MEMBER, ss.SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: _RecordType("share_group_metadata", _GROUP_ID, ss.SHARE_GROUP_METADATA_VALUE),
    12: _RecordType(
        "share_group_target_assignment_metadata",
        _GROUP_ID,
        ss.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    ),
    13: _RecordType(
        "share_group_target_assignment_member",
        _MEMBER,
        ss.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    ),
    14: _RecordType(
        "share_group_current_member_assignment",
        _MEMBER,
        ss.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    ),
    15: _RecordType(
        "share_group_state_partition_metadata",
        _GROUP_ID,
        ss.SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
    ),
    16: _RecordType(
        "consumer_group_regular_expression", _REGEX, g.CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE
    ),
    17: _RecordType("streams_group_metadata", _GROUP_ID, ss.STREAMS_GROUP_METADATA_VALUE),
    19: _RecordType(
        "streams_group_member_metadata", _MEMBER, ss.STREAMS_GROUP_MEMBER_METADATA_VALUE
    ),
    20: _RecordType(
        "streams_group_target_assignment_metadata",
        _GROUP_ID,
        ss.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    ),
    21: _RecordType(
        "streams_group_target_assignment_member",
        _MEMBER,
        ss.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    ),
    22: _RecordType(
        "streams_group_current_member_assignment",
        _MEMBER,
        ss.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    ),
    23: _RecordType("streams_group_topology", _GROUP_ID, ss.STREAMS_GROUP_TOPOLOGY_VALUE),
}

#: Record type (the key's i16) -> ``kind`` of its DecodedMessages.
CONSUMER_OFFSETS_RECORD_TYPES: Mapping[int, str] = MappingProxyType(
    {t: rt.kind for t, rt in _TYPES.items()}
)


def consumer_offsets_value_schema(record_type: int) -> Message:
    """The schema of the values stored under keys of ``record_type`` (KeyError if unknown)."""
    return _TYPES[record_type].value


def decode_consumer_offsets_key(key: bytes) -> DecodedMessage:
    """Decode a ``__consumer_offsets`` key; ``version`` and ``api_key`` are its record type."""
    buf = as_bytes(key)
    if len(buf) < 2:
        return malformed(_UNKNOWN, NO_VERSION, buf, f"key of {len(buf)} bytes has no i16 type")
    (record_type,) = _I16.unpack_from(buf)
    rt = _TYPES.get(record_type)
    if rt is None:
        return DecodedMessage(
            kind=_UNKNOWN, version=record_type, data=None, raw=buf, api_key=record_type
        )
    return decode_body(rt.kind, rt.key, buf, 2, record_type, read_version=0, api_key=record_type)


def decode_consumer_offsets_value(key: DecodedMessage, value: bytes | None) -> DecodedMessage:
    """Decode a ``__consumer_offsets`` value with the schema the decoded ``key``'s type names.

    None is a tombstone (``data`` None, ``version`` -1). A key of unknown type gives a raw value.
    """
    rt = None if key.api_key is None else _TYPES.get(key.api_key)
    kind = _UNKNOWN if rt is None else rt.kind
    if value is None:
        return DecodedMessage(
            kind=kind, version=NO_VERSION, data=None, raw=None, api_key=key.api_key
        )
    buf = as_bytes(value)
    if len(buf) < 2:
        return malformed(
            kind, NO_VERSION, buf, f"value of {len(buf)} bytes has no i16 version",
            api_key=key.api_key,
        )  # fmt: skip
    (version,) = _I16.unpack_from(buf)
    if rt is None:
        return DecodedMessage(kind=kind, version=version, data=None, raw=buf, api_key=key.api_key)
    finish = _decode_member_protocols if rt.value is g.GROUP_METADATA_VALUE else None
    return decode_body(kind, rt.value, buf, 2, version, api_key=key.api_key, finish=finish)


def _decode_member_protocols(data: dict) -> dict:
    if data.get("protocolType") == _CONSUMER_PROTOCOL_TYPE:
        for member in data["members"]:
            member["subscription"] = _embedded(
                g.CONSUMER_PROTOCOL_SUBSCRIPTION, member["subscription"]
            )
            member["assignment"] = _embedded(g.CONSUMER_PROTOCOL_ASSIGNMENT, member["assignment"])
    return data


def _protocol_read_version(msg: Message, version: int) -> int:
    # ConsumerProtocol reads a newer version with the newest schema it has: fields are only
    # ever appended, and what follows is ignored.
    return min(version, msg.valid.hi)


def _embedded(msg: Message, blob: bytes) -> dict | bytes:
    if len(blob) < 2:
        return blob
    (version,) = _I16.unpack_from(blob)
    if version < 0:
        return blob
    try:
        data, _ = read_message(msg, blob, 2, len(blob), _protocol_read_version(msg, version))
    except BYTE_ERRORS:
        return blob
    return data


def _decode_protocol(kind: str, msg: Message, blob: bytes) -> DecodedMessage:
    buf = as_bytes(blob)
    if len(buf) < 2:
        return malformed(kind, NO_VERSION, buf, f"{len(buf)} bytes hold no i16 version")
    (version,) = _I16.unpack_from(buf)
    if version < 0:
        return malformed(kind, version, buf, f"invalid version {version} (at byte 0)")
    read_version = _protocol_read_version(msg, version)
    return decode_body(kind, msg, buf, 2, version, read_version=read_version, allow_trailing=True)


def decode_consumer_protocol_subscription(blob: bytes) -> DecodedMessage:
    """Decode a consumer's JoinGroup metadata (i16 version | ConsumerProtocolSubscription)."""
    return _decode_protocol(
        "consumer_protocol_subscription", g.CONSUMER_PROTOCOL_SUBSCRIPTION, blob
    )


def decode_consumer_protocol_assignment(blob: bytes) -> DecodedMessage:
    """Decode a consumer's SyncGroup assignment (i16 version | ConsumerProtocolAssignment)."""
    return _decode_protocol("consumer_protocol_assignment", _ASSIGNMENT, blob)
