"""Errors of the wire protocol, each carrying the Kafka error code a broker would answer with.

A request that cannot be decoded is the client's fault and costs only its own connection; the
messages say which API and version, which field and at which byte of the request body.
"""

from __future__ import annotations

from ..errors import KafkalogError

__all__ = [
    "FrameTooLargeError",
    "InvalidRequestError",
    "ProtocolError",
    "UnsupportedVersionError",
]


class ProtocolError(KafkalogError, ValueError):
    """Bytes that are not a valid Kafka request or response."""

    code = 42  # INVALID_REQUEST


class InvalidRequestError(ProtocolError):
    """A request body that breaks its schema: truncated, a negative size, bad UTF-8, ..."""


class UnsupportedVersionError(ProtocolError):
    """An API key we do not serve, or a version of it we do not speak."""

    code = 35  # UNSUPPORTED_VERSION


class FrameTooLargeError(ProtocolError):
    """A size prefix larger than the server accepts (``socket.request.max.bytes``)."""
