"""KRaft ``__cluster_metadata`` records: the frame around each record value, and its dispatch.

Layout of a record value (AbstractApiMessageSerde / MetadataRecordSerde), key always null::

    uvarint frameVersion (1) | uvarint apiKey | uvarint version | message (flexible encoding)

Frame version 0 was KRaft's 2.8 preview and, like any other frame version but 1, is not a format
we (or Kafka 3+) read: such values come back raw. apiKey and version above 0x7fff are corrupt, as
are bytes after the message. Snapshots (``*.checkpoint``) hold the same records; their control
records (snapshot header/footer, voters) are decoded by :mod:`.control`. The records of
``__remote_log_metadata`` are framed alike (:func:`decode_framed_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ...errors import CorruptRecordError
from ..message import MAX_VERSION, Message
from ..varint import decode_unsigned_varint
from . import _metadata_schemas as s
from .result import NO_VERSION, DecodedMessage, as_bytes, decode_body, malformed

__all__ = [
    "METADATA_RECORD_TYPES",
    "decode_framed_record",
    "decode_metadata_record",
    "metadata_record_schema",
]

FRAME_VERSION = 1

_SCHEMAS: dict[int, Message] = {
    0: s.REGISTER_BROKER_RECORD,
    1: s.UNREGISTER_BROKER_RECORD,
    2: s.TOPIC_RECORD,
    3: s.PARTITION_RECORD,
    4: s.CONFIG_RECORD,
    5: s.PARTITION_CHANGE_RECORD,
    7: s.FENCE_BROKER_RECORD,
    8: s.UNFENCE_BROKER_RECORD,
    9: s.REMOVE_TOPIC_RECORD,
    10: s.DELEGATION_TOKEN_RECORD,
    11: s.USER_SCRAM_CREDENTIAL_RECORD,
    12: s.FEATURE_LEVEL_RECORD,
    14: s.CLIENT_QUOTA_RECORD,
    15: s.PRODUCER_IDS_RECORD,
    17: s.BROKER_REGISTRATION_CHANGE_RECORD,
    18: s.ACCESS_CONTROL_ENTRY_RECORD,
    19: s.REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    20: s.NO_OP_RECORD,
    21: s.ZK_MIGRATION_STATE_RECORD,
    22: s.REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    23: s.BEGIN_TRANSACTION_RECORD,
    24: s.END_TRANSACTION_RECORD,
    25: s.ABORT_TRANSACTION_RECORD,
    26: s.REMOVE_DELEGATION_TOKEN_RECORD,
    27: s.REGISTER_CONTROLLER_RECORD,
    28: s.CLEAR_ELR_RECORD,
    29: s.UNREGISTER_CONTROLLER_RECORD,
}

#: apiKey -> record type name as Kafka's schema names it, without the "Record" suffix.
METADATA_RECORD_TYPES: Mapping[int, str] = MappingProxyType(
    {key: msg.name.removesuffix("Record") for key, msg in _SCHEMAS.items()}
)

_UNKNOWN = "unknown"


def metadata_record_schema(api_key: int) -> Message:
    """The schema of KRaft metadata records of type ``api_key`` (KeyError if unknown)."""
    return _SCHEMAS[api_key]


def _header_number(buf: bytes, pos: int, what: str, short: bool) -> tuple[int, int]:
    value, end = decode_unsigned_varint(buf, pos)
    if short and value > MAX_VERSION:  # Kafka reads these into a Java short
        raise CorruptRecordError(f"{what} {value} is above 0x7fff (at byte {pos})", position=pos)
    return value, end


def decode_framed_record(
    value: bytes | bytearray | memoryview,
    schemas: Mapping[int, Message],
    kinds: Mapping[int, str],
    *,
    short_header: bool = True,
) -> DecodedMessage:
    """Decode one value framed as AbstractApiMessageSerde writes it (the layout above), its
    message by apiKey from ``schemas``, named by ``kinds``; never raises on bad bytes.

    An apiKey or frame version not known comes back ``"unknown"`` with ``raw`` set, as does an
    unknown version. ``short_header``: an apiKey or version above 0x7fff is corrupt.
    """
    buf = as_bytes(value)
    frame = api_key = version = None
    try:
        frame, pos = decode_unsigned_varint(buf, 0)
        if frame != FRAME_VERSION:
            return DecodedMessage(
                kind=_UNKNOWN, version=NO_VERSION, data=None, raw=buf, frame_version=frame
            )
        api_key, pos = _header_number(buf, pos, "apiKey", short_header)
        version, pos = _header_number(buf, pos, "version", short_header)
    except CorruptRecordError as e:
        kind = _UNKNOWN if api_key is None else kinds.get(api_key, _UNKNOWN)
        return malformed(
            kind, NO_VERSION if version is None else version, buf, e,
            api_key=api_key, frame_version=frame,
        )  # fmt: skip
    msg = schemas.get(api_key)
    if msg is None:
        return DecodedMessage(
            kind=_UNKNOWN, version=version, data=None, raw=buf, api_key=api_key,
            frame_version=frame,
        )  # fmt: skip
    return decode_body(kinds[api_key], msg, buf, pos, version, api_key=api_key, frame_version=frame)


def decode_metadata_record(value: bytes) -> DecodedMessage:
    """Decode one ``__cluster_metadata`` record value; never raises on bad bytes.

    ``kind`` is the record type name (``METADATA_RECORD_TYPES``), or ``"unknown"`` for an apiKey
    or frame version we do not know (``raw`` set then, as for an unknown version).
    """
    return decode_framed_record(value, _SCHEMAS, METADATA_RECORD_TYPES)
