"""Control records: transaction markers and KRaft's quorum records, told apart by their key.

Layout (ControlRecordType.java, EndTransactionMarker.java, ControlRecordUtils.java)::

    key   = i16 version (0) | i16 type    0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3 SNAPSHOT_HEADER,
                                          4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS
    ABORT/COMMIT value = i16 version (0) | i32 coordinatorEpoch            (EndTxnMarker.json)
    other values       = a flexible message read at schema version 0 whose first field is an
                         i16 ``version`` (LeaderChangeMessage, SnapshotHeaderRecord,
                         SnapshotFooterRecord, KRaftVersionRecord, VotersRecord)

Kafka rejects a negative key or marker version and reads a newer one as version 0, ignoring
what follows: so do we. The quorum records are always read at schema version 0, as Kafka does,
whatever their own ``version`` field says; that field is reported as the DecodedMessage version.
"""

from __future__ import annotations

import struct

from ..constants import ControlRecordType
from ..message import Message
from .result import NO_VERSION, DecodedMessage, as_bytes, decode_body, malformed

__all__ = ["UNKNOWN_CONTROL_TYPE", "decode_control_key", "decode_control_value"]

UNKNOWN_CONTROL_TYPE = "UNKNOWN"

_I16 = struct.Struct(">h")
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")

LEADER_CHANGE_MESSAGE = Message(
    "LeaderChangeMessage",
    "0-1",
    "0+",
    """
version int16
leaderId int32
voters []
  voterId int32
  voterDirectoryId uuid 1+
grantingVoters []
  voterId int32
  voterDirectoryId uuid 1+
""",
)

SNAPSHOT_HEADER_RECORD = Message(
    "SnapshotHeaderRecord",
    "0",
    "0+",
    """
version int16
lastContainedLogTimestamp int64
""",
)

SNAPSHOT_FOOTER_RECORD = Message(
    "SnapshotFooterRecord",
    "0",
    "0+",
    """
version int16
""",
)

KRAFT_VERSION_RECORD = Message(
    "KRaftVersionRecord",
    "0",
    "0+",
    """
version int16
kRaftVersion int16
""",
)

VOTERS_RECORD = Message(
    "VotersRecord",
    "0",
    "0+",
    """
version int16
voters []
  voterId int32
  voterDirectoryId uuid
  endpoints []
    name string
    host string
    port uint16
  kRaftVersionFeature {}
    minSupportedVersion int16
    maxSupportedVersion int16
""",
)

_QUORUM_SCHEMAS = {
    ControlRecordType.LEADER_CHANGE: LEADER_CHANGE_MESSAGE,
    ControlRecordType.SNAPSHOT_HEADER: SNAPSHOT_HEADER_RECORD,
    ControlRecordType.SNAPSHOT_FOOTER: SNAPSHOT_FOOTER_RECORD,
    ControlRecordType.KRAFT_VERSION: KRAFT_VERSION_RECORD,
    ControlRecordType.KRAFT_VOTERS: VOTERS_RECORD,
}


def _type_name(control_type: int) -> str:
    try:
        return ControlRecordType(control_type).name
    except ValueError:
        return UNKNOWN_CONTROL_TYPE


def decode_control_key(key: bytes) -> DecodedMessage:
    """Decode a control record key: ``kind`` is the type name (``"UNKNOWN"`` if new to us).

    ``data`` is ``{"version": v, "type": t}`` and ``api_key`` the type number.
    """
    buf = as_bytes(key)
    if len(buf) < 4:
        return malformed(
            UNKNOWN_CONTROL_TYPE, NO_VERSION, buf,
            f"control key needs 4 bytes (i16 version, i16 type), found {len(buf)}",
        )  # fmt: skip
    version, control_type = _KEY.unpack_from(buf)
    kind = _type_name(control_type)
    if version < 0:
        return malformed(
            kind, version, buf, f"invalid control key version {version} (at byte 0)",
            api_key=control_type,
        )  # fmt: skip
    if version == 0 and len(buf) != 4:
        return malformed(
            kind, version, buf, f"{len(buf) - 4} byte(s) left after control key v0 (at byte 4)",
            api_key=control_type,
        )  # fmt: skip
    return DecodedMessage(
        kind=kind, version=version, data={"version": version, "type": control_type}, raw=None,
        api_key=control_type,
    )  # fmt: skip


def _decode_end_txn_marker(kind: str, control_type: int, buf: bytes) -> DecodedMessage:
    if len(buf) < 2:
        return malformed(kind, NO_VERSION, buf, "end transaction marker has no i16 version",
                         api_key=control_type)  # fmt: skip
    (version,) = _I16.unpack_from(buf)
    if version < 0:
        return malformed(
            kind, version, buf, f"invalid end transaction marker version {version} (at byte 0)",
            api_key=control_type,
        )  # fmt: skip
    if len(buf) < 6 or (version == 0 and len(buf) != 6):
        return malformed(
            kind, version, buf,
            f"end transaction marker v{version} is 6 bytes (i16 version, i32 coordinatorEpoch), "
            f"found {len(buf)}",
            api_key=control_type,
        )  # fmt: skip
    (_, epoch) = _MARKER.unpack_from(buf)
    return DecodedMessage(
        kind=kind, version=version, data={"version": version, "coordinatorEpoch": epoch},
        raw=None, api_key=control_type,
    )  # fmt: skip


def decode_control_value(control_type: int, value: bytes | None) -> DecodedMessage:
    """Decode a control record value given the type from its key.

    An unknown type comes back as ``kind="UNKNOWN"`` with the type number in ``api_key`` and the
    bytes in ``raw``. A null value of a known type is reported as an error (Kafka writes none).
    """
    kind = _type_name(control_type)
    if kind == UNKNOWN_CONTROL_TYPE:
        raw = None if value is None else as_bytes(value)
        return DecodedMessage(
            kind=kind, version=NO_VERSION, data=None, raw=raw, api_key=control_type
        )
    if value is None:
        return DecodedMessage(
            kind=kind, version=NO_VERSION, data=None, raw=None, api_key=control_type,
            error=f"malformed {kind}: control record value is null",
        )  # fmt: skip
    buf = as_bytes(value)
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return _decode_end_txn_marker(kind, control_type, buf)
    result = decode_body(kind, _QUORUM_SCHEMAS[control_type], buf, 0, 0, api_key=control_type)
    if result.data is None:
        return result
    return DecodedMessage(
        kind=kind, version=result.data["version"], data=result.data, raw=None,
        api_key=control_type,
    )  # fmt: skip
