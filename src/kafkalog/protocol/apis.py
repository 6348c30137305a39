"""Api keys, the request and response headers, and whole requests in and responses out.

Request header v1 is api_key, api_version (int16), correlation_id (int32) and a nullable client_id
(an int16-prefixed string even in flexible versions); v2 adds a tagged-field section. Response
header v0 is the correlation id; v1 adds tagged fields. The header version follows the body's:
flexible bodies use request header v2 and response header v1, except ApiVersions responses,
always header v0, so a client that does not yet know our versions can read the answer (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..format.message import Encoded, Message, Reader
from . import messages_admin as ma
from . import messages_broker as mb
from . import messages_consumer_group as mcg
from . import messages_coordinator as mc
from . import messages_security as ms
from .errors import InvalidRequestError, ProtocolError, UnsupportedVersionError
from .framing import size_prefix
from .wire import WIRE

__all__ = [
    "API_NAMES",
    "MESSAGES",
    "ApiKey",
    "Request",
    "RequestHeader",
    "decode_request",
    "encode_request",
    "encode_response",
]


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75


def _pairs() -> dict[int, tuple[Message, Message]]:
    found: dict[int, dict[str, Message]] = {}
    for module in (mb, mc, ma, ms, mcg):
        for name, value in vars(module).items():
            if isinstance(value, Message):
                kind = "request" if name.endswith("_REQUEST") else "response"
                found.setdefault(value.api_key, {})[kind] = value
    return {k: (v["request"], v["response"]) for k, v in sorted(found.items())}


MESSAGES: dict[int, tuple[Message, Message]] = _pairs()
API_NAMES: dict[int, str] = {
    k: req.name.removesuffix("Request") for k, (req, _) in MESSAGES.items()
}

_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: dict

    @property
    def name(self) -> str:
        return API_NAMES.get(self.header.api_key, f"api key {self.header.api_key}")


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: enough to answer even an unreadable request."""
    if len(frame) < _HEADER.size:
        raise InvalidRequestError(
            f"request of {len(frame)} bytes is shorter than the {_HEADER.size}-byte header",
            position=0,
        )
    return _HEADER.unpack_from(frame, 0)


def decode_request(frame: bytes) -> Request:
    """A frame's body (without its size) as a request; UnsupportedVersionError names the API."""
    api_key, version, correlation_id = peek_header(frame)
    pair = MESSAGES.get(api_key)
    if pair is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    message = pair[0]
    lo, hi = message.versions
    if not lo <= version <= hi:
        raise UnsupportedVersionError(
            f"{API_NAMES[api_key]} v{version} is not supported (this server speaks v{lo}-v{hi})"
        )
    r = Reader(frame, _HEADER.size, None, WIRE)
    try:
        n = r.unpack(_I16, "length of client_id")
        if n < -1:
            raise InvalidRequestError(f"negative client_id length {n}", position=r.pos)
        client_id = None if n == -1 else str(r.take(n, "client_id"), "utf-8", errors="replace")
        if message.is_flexible(version):
            for _ in range(r.uvarint("number of tagged fields")):  # header tags: none we use
                r.uvarint("tag")
                r.take(r.uvarint("size of a tagged field"), "tagged field")
    except ProtocolError as e:
        e.message = f"{API_NAMES[api_key]} v{version} request header: {e.message}"
        e.args = (e.message,)
        raise
    body = message.decode(r, version, strict=False)
    return Request(RequestHeader(api_key, version, correlation_id, client_id), body)


def encode_response(api_key: int, version: int, correlation_id: int, body: dict) -> list:
    """A whole response frame as parts: bytes chunks and windows of segment files."""
    message = MESSAGES[api_key][1]
    out = Encoded()
    out.buf += b"\0\0\0\0"  # the size, filled in below
    out.buf += _I32.pack(correlation_id)
    if message.is_flexible(version) and api_key != ApiKey.API_VERSIONS:
        out.buf.append(0)  # no header tagged fields
    message.encode(body, version, out)
    size = out.total_size() - 4
    parts = out.finish()
    parts[0][:4] = size_prefix(size)
    return parts


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """A whole request frame (for tests and tools that talk to a broker)."""
    message = MESSAGES[api_key][0]
    out = Encoded()
    out.buf += _HEADER.pack(api_key, version, correlation_id)
    if client_id is None:
        out.buf += _I16.pack(-1)
    else:
        raw = client_id.encode()
        out.buf += _I16.pack(len(raw)) + raw
    if message.is_flexible(version):
        out.buf.append(0)
    message.encode(body, version, out)
    data = bytes(out.buf)
    return size_prefix(len(data)) + data


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, dict]:
    """A response frame's body (without its size): correlation id and body (for tests/tools)."""
    message = MESSAGES[api_key][1]
    r = Reader(frame, 0, None, WIRE)
    correlation_id = r.unpack(_I32, "correlation_id")
    if message.is_flexible(version) and api_key != ApiKey.API_VERSIONS:
        for _ in range(r.uvarint("number of tagged fields")):
            r.uvarint("tag")
            r.take(r.uvarint("size of a tagged field"), "tagged field")
    return correlation_id, message.decode(r, version)
