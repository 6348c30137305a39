"""The one result type of every internal-record decoder, and its JSON form.

Decoders never raise on bytes: a record of a type or version we do not know comes back with its
``raw`` bytes (``data`` None), and known bytes that break the schema come back with ``raw`` and an
``error`` naming the byte position and the rule, so a dump of a damaged log keeps going.

JSON: ``bytes`` become standard base64 (as Jackson writes ``byte[]``), ``uuid.UUID`` Kafka's own
form, URL-safe base64 without padding (``Uuid.toString``, e.g. ``AAAAAAAAAAAAAAAAAAAAAA``).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import CorruptRecordError
from ..message import Message, read_message

__all__ = ["NO_VERSION", "DecodedMessage", "to_json_safe", "uuid_to_kafka_string"]

NO_VERSION = -1  # the version of a tombstone, or of a value whose version could not be read


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedMessage:
    """One decoded key or value.

    ``kind`` names the record type: ``"offset_commit"``, ``"group_metadata"``, ... for
    ``__consumer_offsets`` (CONSUMER_OFFSETS_RECORD_TYPES), ``"transaction_log"``, a control type
    (``"COMMIT"``, ``"LEADER_CHANGE"``, ... or ``"UNKNOWN"``), a KRaft record name such as
    ``"PartitionChange"`` (METADATA_RECORD_TYPES), or ``"unknown"``.

    ``version``: the i16 record type of a ``__consumer_offsets`` or ``__transaction_state`` key,
    the i16 version of their values, of a control key or transaction marker, the ``version``
    field of a KRaft quorum control record, the version in a KRaft record's frame; -1
    (NO_VERSION) for a tombstone or when no version could be read.

    ``data`` holds every field of the schema by Kafka's camelCase name (fields absent at this
    version at their defaults); None for a tombstone or when ``raw`` is set. ``raw`` holds the
    bytes when the type or version is unknown (``error`` None) or the bytes are malformed
    (``error`` says which rule broke at which byte). ``api_key``: the record type (coordinator
    key type, control type or KRaft apiKey); ``frame_version``: the KRaft frame version.
    """

    kind: str
    version: int
    data: dict | None
    raw: bytes | None
    api_key: int | None = None
    frame_version: int | None = None
    error: str | None = None


def uuid_to_kafka_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def to_json_safe(obj: object) -> object:
    """A copy of ``obj`` that ``json.dumps`` accepts: bytes -> base64, UUID -> Kafka's string.

    Dicts, lists and tuples are converted recursively; a DecodedMessage becomes a dict of its
    fields. Other values (ints, floats, str, bool, None) pass through.
    """
    if isinstance(obj, dict):
        return {str(k): to_json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json_safe(v) for v in obj]
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, uuid.UUID):
        return uuid_to_kafka_string(obj)
    if isinstance(obj, DecodedMessage):
        return {name: to_json_safe(getattr(obj, name)) for name in DecodedMessage.__slots__}
    return obj


# Errors a decoder may meet in bytes; anything else is a bug and propagates.
BYTE_ERRORS = (CorruptRecordError, struct.error, IndexError, ValueError, OverflowError)


def decode_body(
    kind: str,
    msg: Message,
    buf: bytes,
    pos: int,
    version: int,
    *,
    api_key: int | None = None,
    frame_version: int | None = None,
    read_version: int | None = None,
    allow_trailing: bool = False,
    finish: Callable[[dict], dict] | None = None,
) -> DecodedMessage:
    """Read ``msg`` from ``buf[pos:]`` into a DecodedMessage, errors included.

    ``version`` is the one reported; the bytes are read at ``read_version`` (default: the same),
    which must be one ``msg`` knows, else the result is raw. Bytes left after the message are
    corruption unless ``allow_trailing`` (where Kafka reads a newer version with an older
    schema and ignores what follows).
    """
    if read_version is None:
        read_version = version
    if read_version not in msg.valid:
        return DecodedMessage(
            kind=kind, version=version, data=None, raw=buf, api_key=api_key,
            frame_version=frame_version,
        )  # fmt: skip
    try:
        data, end = read_message(msg, buf, pos, len(buf), read_version)
        if end != len(buf) and not allow_trailing:
            raise CorruptRecordError(
                f"{len(buf) - end} byte(s) left after {msg.name} v{read_version} (at byte {end})",
                position=end,
            )
        if finish is not None:
            data = finish(data)
    except BYTE_ERRORS as e:
        return malformed(kind, version, buf, e, api_key=api_key, frame_version=frame_version)
    return DecodedMessage(
        kind=kind, version=version, data=data, raw=None, api_key=api_key,
        frame_version=frame_version,
    )  # fmt: skip


def malformed(
    kind: str,
    version: int,
    buf: bytes,
    error: BaseException | str,
    *,
    api_key: int | None = None,
    frame_version: int | None = None,
) -> DecodedMessage:
    """A result for bytes of a known type that break its schema."""
    if isinstance(error, CorruptRecordError):
        text = error.message
    elif isinstance(error, str):
        text = error
    else:
        text = f"{type(error).__name__}: {error}"
    return DecodedMessage(
        kind=kind, version=version, data=None, raw=buf, api_key=api_key,
        frame_version=frame_version, error=f"malformed {kind}: {text}",
    )  # fmt: skip


def as_bytes(value: bytes | bytearray | memoryview) -> bytes:
    return value if isinstance(value, bytes) else bytes(value)
