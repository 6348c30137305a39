"""Errors of the wire protocol (defined in :mod:`kafkalog.errors`, with every other exception),
each carrying the Kafka error code a broker would answer with.

A request that cannot be decoded is the client's fault and costs only its own connection; the
messages say which API and version, which field and at which byte of the request body.
"""

from __future__ import annotations

from ..errors import FrameTooLargeError, InvalidRequestError, ProtocolError, UnsupportedVersionError

__all__ = [
    "FrameTooLargeError",
    "InvalidRequestError",
    "ProtocolError",
    "UnsupportedVersionError",
]
