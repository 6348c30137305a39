"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: the users, PLAIN, and one connection's
authentication as Kafka's SaslServerAuthenticator runs it.

Before a connection is authenticated it may send ApiVersions and one SaslHandshake naming a
mechanism; anything else closes it unanswered (Kafka's IllegalSaslStateException). After a
SaslHandshake v1 the tokens come in SaslAuthenticate requests (KIP-152, what librdkafka and the
Java client send when the broker lists SaslAuthenticate); after v0 they come raw, each an int32
size and the token, answered the same way with no Kafka header (what clients older than Kafka
1.0 send). A mechanism the listener does not enable is answered UNSUPPORTED_SASL_MECHANISM with
the enabled ones, and the connection closed. A failed exchange is answered
SASL_AUTHENTICATION_FAILED with Kafka's message, then closed (in the raw mode only closed).
Sessions do not expire (``session_lifetime_ms`` 0: no KIP-368 re-authentication).

Passwords are turned into SCRAM credentials at startup (:mod:`.scram`) and not kept: SASL/PLAIN
checks a password against the SCRAM-SHA-256 credential (or SCRAM-SHA-512 when only that one is
derived). Neither passwords nor tokens are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import error_codes as ec
from .errors import SaslFailed
from .scram import (
    DEFAULT_ITERATIONS,
    ScramCredential,
    ScramServer,
    derive_credential,
    verify_password,
)
from .scram import (
    MECHANISMS as SCRAM_MECHANISMS,
)

__all__ = [
    "DEFAULT_MECHANISMS",
    "PlainServer",
    "SaslAuthenticator",
    "SaslFailed",
    "SaslSettings",
    "Users",
    "read_users_file",
]

log = logging.getLogger("kafkalog.server")

DEFAULT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED_MECHANISMS = frozenset(DEFAULT_MECHANISMS)


def read_users_file(path: Path) -> dict[str, str]:
    """``user:password`` lines (blank lines and ``#`` comments skipped); ValueError naming the
    line of one without a colon or a name (never echoing the line: it holds a password)."""
    users: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, password = line.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{path}:{number}: expected user:password")
        users[name.strip()] = password
    return users


class Users:
    """The SASL users: per SCRAM mechanism a credential per user, derived from passwords."""

    def __init__(self, credentials: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        self._credentials = {m: dict(c) for m, c in credentials.items()}

    @classmethod
    def from_passwords(
        cls,
        passwords: Mapping[str, str],
        mechanisms: Iterable[str] = DEFAULT_MECHANISMS,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> Users:
        wanted = [m for m in mechanisms if m in SCRAM_MECHANISMS] or ["SCRAM-SHA-256"]
        return cls(
            {
                m: {user: derive_credential(m, pw, iterations) for user, pw in passwords.items()}
                for m in wanted
            }
        )

    def __len__(self) -> int:
        return len({user for creds in self._credentials.values() for user in creds})

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credentials.get(mechanism, {}).get(user)

    def check_password(self, user: str, password: str) -> bool:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            credential = self.scram(mechanism, user)
            if credential is not None:
                return verify_password(mechanism, credential, password)
        return False


@dataclass
class SaslSettings:
    """``sasl.enabled.mechanisms`` and the users (``--sasl-users``, ``--sasl-user``)."""

    users: Users
    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS


class PlainServer:
    """SASL/PLAIN (RFC 4616): one message ``authzid NUL authcid NUL passwd``, as Kafka's
    PlainSaslServer checks it (the same messages)."""

    mechanism = "PLAIN"

    def __init__(self, users: Users) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailed("unexpected SASL/PLAIN message after the exchange ended")
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError as e:
            raise SaslFailed("SASL/PLAIN message is not UTF-8") from e
        if len(parts) != 3:
            raise SaslFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts

        def fail(text: str) -> SaslFailed:
            return SaslFailed(text, client_message=text)

        if not username:
            raise fail("Authentication failed: username not specified")
        if not password:
            raise fail("Authentication failed: password not specified")
        if not self._users.check_password(username, password):
            raise fail("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise fail(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.username = username
        self.complete = True
        return b""


class SaslAuthenticator:
    """One connection's SASL state, sans I/O: the connection hands it SaslHandshake and
    SaslAuthenticate bodies, or raw tokens after a v0 handshake, and sends what it returns."""

    def __init__(self, settings: SaslSettings, client: str = "") -> None:
        self.settings = settings
        self.client = client
        self.state = "handshake"  # then "authenticate" (v1) or "raw" (v0); "done"; "failed"
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._server: PlainServer | ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == "done"

    @property
    def raw(self) -> bool:
        """Whether the next frame is a raw SASL token (after a SaslHandshake v0)."""
        return self.state == "raw"

    def handshake(self, version: int, request: dict) -> tuple[dict, bool]:
        """The SaslHandshake response and whether it is the connection's last."""
        enabled = list(self.settings.mechanisms)
        mechanism = request["mechanism"]
        if mechanism not in enabled or mechanism not in SUPPORTED_MECHANISMS:
            log.info(
                "connection from %s: SASL mechanism %s not enabled (%s)",
                self.client, mechanism, ", ".join(enabled),
            )  # fmt: skip
            self.state = "failed"
            return {"error_code": ec.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, True
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.settings.users)
        else:
            users = self.settings.users
            self._server = ScramServer(mechanism, lambda user: users.scram(mechanism, user))
        self.state = "raw" if version == 0 else "authenticate"
        return {"error_code": ec.NONE, "mechanisms": enabled}, False

    def authenticate(self, request: dict) -> tuple[dict, bool]:
        """The SaslAuthenticate response and whether it is the connection's last."""
        try:
            token = self._step(request["auth_bytes"] or b"")
        except SaslFailed as e:
            message = e.client_message or (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self.mechanism}"
            )
            return {
                "error_code": ec.SASL_AUTHENTICATION_FAILED,
                "error_message": message,
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            }, True
        return {
            "error_code": ec.NONE,
            "error_message": None,
            "auth_bytes": token,
            "session_lifetime_ms": 0,
        }, False

    def raw_token(self, token: bytes) -> bytes:
        """The answer to a raw token (v0 handshake); SaslFailed closes the connection."""
        return self._step(token)

    def _step(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None and self.state in ("authenticate", "raw")
        try:
            answer = server.step(token)
        except SaslFailed as e:
            self.state = "failed"
            log.info(
                "connection from %s: SASL/%s authentication failed%s: %s",
                self.client, self.mechanism,
                f" for user {server.username}" if server.username else "", e.message,
            )  # fmt: skip
            raise
        if server.complete:
            self.state = "done"
            self.principal = f"User:{server.username}"
            log.debug(
                "connection from %s: authenticated %s with SASL/%s",
                self.client, self.principal, self.mechanism,
            )  # fmt: skip
        return answer
