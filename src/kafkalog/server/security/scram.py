"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka runs them.

Kafka stores a SCRAM user as ``salt``, ``iterations``, ``stored_key`` = H(ClientKey) and
``server_key`` = HMAC(SaltedPassword, "Server Key"), where ClientKey = HMAC(SaltedPassword,
"Client Key") and SaltedPassword = PBKDF2(password, salt, iterations): the password is not kept,
and nothing stored lets anyone log in. Iterations are 4096 unless asked for more (Kafka's
minimum, which its Java client also insists on).

The exchange (a ``tokenauth`` extension, Kafka's delegation tokens, is refused)::

    client-first  n,[a=authzid],n=user,r=cnonce[,ext=value...]
    server-first  r=cnonce+snonce,s=base64(salt),i=iterations
    client-final  c=base64(gs2 header),r=cnonce+snonce,p=base64(ClientProof)
    server-final  v=base64(HMAC(ServerKey, AuthMessage))

The server checks H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field

from .errors import SaslFailed

__all__ = [
    "DEFAULT_ITERATIONS",
    "MECHANISMS",
    "ScramCredential",
    "ScramServer",
    "derive_credential",
    "salted_password",
]

DEFAULT_ITERATIONS = 4096
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True)
class ScramCredential:
    """What Kafka keeps of a SCRAM user (``kafka-configs --alter --add-config SCRAM-...``)."""

    salt: bytes = field(repr=False)
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def derive_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential with a random salt (as Kafka's ScramFormatter.generateCredential)."""
    hash_name = MECHANISMS[mechanism]
    salt = salt if salt is not None else os.urandom(32)
    salted = salted_password(hash_name, password, salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
    )


def verify_password(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was derived from (for SASL/PLAIN)."""
    hash_name = MECHANISMS[mechanism]
    salted = salted_password(hash_name, password, credential.salt, credential.iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), credential.stored_key)


def _saslname(text: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma and ``=3D`` an equals sign; no other ``=``."""
    out = text.replace("=2C", ",").replace("=3D", "=")
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise SaslFailed(f"invalid username encoding in {text!r}")
    return out


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isalpha():
            raise SaslFailed(f"invalid SCRAM attribute {part!r}")
        out.append((key, value))
    return out


class ScramServer:
    """One SCRAM exchange: :meth:`step` takes the client's message and gives the server's;
    SaslFailed on any error (an unknown user included, as Kafka)."""

    def __init__(self, mechanism: str, lookup) -> None:
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism]
        self._lookup = lookup  # username -> ScramCredential | None for this mechanism
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SaslFailed("SCRAM message is not UTF-8") from e
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise SaslFailed("unexpected SCRAM message after the exchange ended")

    def _first(self, message: str) -> bytes:
        # gs2-header: "n," or "y," (no channel binding), then an optional a=authzid, then ","
        flag, sep, rest = message.partition(",")
        authzid_part, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise SaslFailed("invalid SCRAM client-first message (channel binding unsupported)")
        if authzid_part and not authzid_part.startswith("a="):
            raise SaslFailed("invalid SCRAM client-first message")
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise SaslFailed("invalid SCRAM client-first message")
        if attributes[0][1] == "" or attributes[1][1] == "":
            raise SaslFailed("invalid SCRAM client-first message")
        extensions = dict(attributes[2:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslFailed("delegation tokens are not supported")
        username = _saslname(attributes[0][1])
        authzid = _saslname(authzid_part[2:]) if authzid_part else ""
        if authzid and authzid != username:
            text = (
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
            raise SaslFailed(text, client_message=text)
        credential = self._lookup(username)
        if credential is None:
            raise SaslFailed("Authentication failed: Invalid user credentials")
        self.username = username
        self._credential = credential
        self._gs2_header = message[: len(message) - len(bare)]
        self._client_first_bare = bare
        self._nonce = attributes[1][1] + secrets.token_urlsafe(24)
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode("utf-8")

    def _final(self, message: str) -> bytes:
        self._state = "done"
        without_proof, sep, proof_text = message.rpartition(",p=")
        if not sep:
            raise SaslFailed("invalid SCRAM client-final message: no proof")
        attributes = dict(_attributes(without_proof))
        if attributes.get("r") != self._nonce:
            raise SaslFailed("invalid SCRAM client-final message: nonce mismatch")
        expected_binding = base64.b64encode(self._gs2_header.encode("utf-8")).decode("ascii")
        if attributes.get("c") != expected_binding:
            raise SaslFailed("invalid SCRAM client-final message: channel binding mismatch")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError as e:
            raise SaslFailed("invalid SCRAM client proof encoding") from e
        credential = self._credential
        assert credential is not None
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        auth = auth_message.encode("utf-8")
        signature = _hmac(self.hash_name, credential.stored_key, auth)
        if len(proof) != len(signature):
            raise SaslFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        computed = hashlib.new(self.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise SaslFailed("Invalid client credentials")
        server_signature = _hmac(self.hash_name, credential.server_key, auth)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
