"""The handler contract between the connection loop and every API's implementation.

A handler receives the request's context and its decoded body (a dict of Kafka's JSON field names in
snake_case) and returns the response body as a dict; the response encoder fills any field left out
with the schema's default, so handlers return just what they mean. Handlers never see sockets or
bytes of the framing: that keeps coordinators and the broker's own APIs testable without a network.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import CloseConnection

__all__ = ["CloseConnection", "Handler", "RequestContext"]


@dataclass
class RequestContext:
    """Who asked and with which version: what a handler needs beyond the request body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    listener: str = "PLAINTEXT"  # the listener's name
    advertised: tuple[str, int] | None = None  # its advertised host and port; None: the broker's
    principal: str = "User:ANONYMOUS"  # User:NAME after SASL, else the TLS subject or ANONYMOUS


Handler = Callable[[RequestContext, dict], Awaitable[dict]]
