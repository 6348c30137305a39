"""Writing ``__consumer_offsets`` records: committed offsets and classic group metadata.

The inverse of :mod:`.consumer_offsets` for the records a classic group coordinator writes, with
the same schema tables (GroupCoordinatorRecordHelpers). Versions written, and why:

- OffsetCommitKey as record type 1 (type 0 is the pre-0.9 form no broker writes any more).
- OffsetCommitValue v3 (leader epoch, no expire timestamp), v1 when an expire timestamp is
  given (OffsetCommit v1's retention field). Kafka 4.1+ writes v4 only to carry a topic id
  tag; v3 is what every broker since 2.1 reads, so a data directory written here stays
  readable by older Kafka.
- GroupMetadataValue v3, Kafka's GROUP_METADATA_VALUE_VERSION.

A tombstone (deleted offset or group) is a key with a null value: these functions return the
key and value bytes, None for the tombstone's value.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..message import write_message
from . import _group_schemas as g
from .consumer_offsets import _GROUP, _OFFSET_KEY

__all__ = [
    "GROUP_METADATA_KEY_TYPE",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_TYPE",
    "GroupMemberRecord",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_I16 = struct.Struct(">h")


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key of a committed offset: type 1 | group | topic | partition."""
    body = write_message(_OFFSET_KEY, {"group": group, "topic": topic, "partition": partition}, 0)
    return _I16.pack(OFFSET_COMMIT_KEY_TYPE) + body


def encode_offset_commit_value(
    *,
    offset: int,
    metadata: str,
    commit_timestamp: int,
    leader_epoch: int = -1,
    expire_timestamp: int | None = None,
) -> bytes:
    """A committed offset's value; v1 if ``expire_timestamp`` is set, else v3."""
    if expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        data = {"offset": offset, "metadata": metadata, "commitTimestamp": commit_timestamp,
                "expireTimestamp": expire_timestamp}  # fmt: skip
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
        data = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata,
                "commitTimestamp": commit_timestamp}  # fmt: skip
    return _I16.pack(version) + write_message(g.OFFSET_COMMIT_VALUE, data, version)


def encode_group_metadata_key(group: str) -> bytes:
    """The key of a group's metadata: type 2 | group."""
    return _I16.pack(GROUP_METADATA_KEY_TYPE) + write_message(_GROUP, {"group": group}, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMemberRecord:
    """One member as GroupMetadataValue stores it (the subscription of the chosen protocol)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


def encode_group_metadata_value(
    *,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int,
    members: Sequence[GroupMemberRecord],
) -> bytes:
    """A classic group's metadata value (GroupMetadataValue v3)."""
    data = {
        "protocolType": protocol_type,
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "currentStateTimestamp": current_state_timestamp,
        "members": [
            {
                "memberId": m.member_id,
                "groupInstanceId": m.group_instance_id,
                "clientId": m.client_id,
                "clientHost": m.client_host,
                "rebalanceTimeout": m.rebalance_timeout,
                "sessionTimeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in members
        ],
    }
    version = GROUP_METADATA_VALUE_VERSION
    return _I16.pack(version) + write_message(g.GROUP_METADATA_VALUE, data, version)
