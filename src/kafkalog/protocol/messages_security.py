"""Schema tables of the SASL APIs (KIP-43, KIP-152): SaslHandshake and SaslAuthenticate, which a
client sends on a SASL_PLAINTEXT or SASL_SSL listener before anything but ApiVersions (table
syntax: :mod:`kafkalog.format.message.schema`). Versions are Kafka 4.0's: SaslHandshake v0-1
(v0: the SASL tokens then go raw, size-prefixed without a Kafka header; v1: in SaslAuthenticate
requests), SaslAuthenticate v0-2 (v1 adds the session lifetime of KIP-368, v2 is flexible).

Kept on their own for the schema-engine rewrite: ``protocol.apis`` reads these like the others.
"""

from __future__ import annotations

from .wire import api_message

SASL_HANDSHAKE_REQUEST = api_message(
    17,
    "SaslHandshakeRequest",
    "0-1",
    "none",
    """
mechanism string
""",
)

SASL_HANDSHAKE_RESPONSE = api_message(
    17,
    "SaslHandshakeResponse",
    "0-1",
    "none",
    """
error_code int16
mechanisms [string]
""",
)

SASL_AUTHENTICATE_REQUEST = api_message(
    36,
    "SaslAuthenticateRequest",
    "0-2",
    "2+",
    """
auth_bytes bytes
""",
)

SASL_AUTHENTICATE_RESPONSE = api_message(
    36,
    "SaslAuthenticateResponse",
    "0-2",
    "2+",
    """
error_code int16
error_message string ? =null
auth_bytes bytes
session_lifetime_ms int64 1+
""",
)
