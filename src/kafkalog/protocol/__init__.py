"""Kafka's wire protocol, sans I/O: frames in, requests out; responses in, byte parts out.

Nothing here touches a socket: :mod:`kafkalog.server` owns the network and calls these.
"""

from .apis import (
    API_NAMES,
    MESSAGES,
    ApiKey,
    Request,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
)
from .errors import FrameTooLargeError, InvalidRequestError, ProtocolError, UnsupportedVersionError
from .framing import DEFAULT_MAX_REQUEST_SIZE, FrameBuffer

__all__ = [
    "API_NAMES",
    "DEFAULT_MAX_REQUEST_SIZE",
    "MESSAGES",
    "ApiKey",
    "FrameBuffer",
    "FrameTooLargeError",
    "InvalidRequestError",
    "ProtocolError",
    "Request",
    "RequestHeader",
    "UnsupportedVersionError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_header",
]
