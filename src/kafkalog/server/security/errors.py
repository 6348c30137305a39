"""The one error of an authentication exchange."""

from __future__ import annotations

__all__ = ["SaslFailed"]


class SaslFailed(Exception):
    """The exchange failed. ``client_message``: what the client is told; None for Kafka's
    generic "invalid credentials" message (a mechanism's own detail, which may say whether the
    user exists, stays in the server's log)."""

    def __init__(self, message: str, client_message: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.client_message = client_message
