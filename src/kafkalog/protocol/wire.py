"""The wire protocol's use of the shared message engine (:mod:`kafkalog.format.message`).

A request that breaks its schema is the client's fault: :class:`~.errors.InvalidRequestError`,
naming the API, version, field path and byte. Strings must be UTF-8. Unknown tagged fields are
skipped, as Kafka's request readers do. Handlers build one response for every version: fields
the version does not carry are dropped, and null where a field is not nullable writes its empty
value.
"""

from __future__ import annotations

from ..format.message import Dialect, Message
from .errors import InvalidRequestError

__all__ = ["WIRE", "api_message"]

WIRE = Dialect(
    InvalidRequestError, "", utf8_errors="strict", keep_unknown_tags=False, strict_writes=False
)


def api_message(api_key: int, name: str, versions: str, flexible: str, table: str) -> Message:
    """A request or response schema: api key, name, versions served, flexible versions."""
    return Message(name, versions, flexible, table, api_key=api_key, dialect=WIRE)
