"""SaslHandshake and SaslAuthenticate once a connection is past authentication, or on a listener
without SASL: ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers them. While a SASL connection
authenticates, the connection hands these requests to its authenticator
(:mod:`kafkalog.server.security.sasl`) instead; being in the route table is what lists them in
ApiVersions, which clients read to choose SaslAuthenticate over raw tokens."""

from __future__ import annotations

from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext

__all__ = ["handlers"]


def handlers(broker: object) -> dict[int, Handler]:
    async def sasl_handshake(ctx: RequestContext, request: dict) -> dict:
        return {"error_code": ec.ILLEGAL_SASL_STATE, "mechanisms": []}

    async def sasl_authenticate(ctx: RequestContext, request: dict) -> dict:
        return {
            "error_code": ec.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
        }

    return {ApiKey.SASL_HANDSHAKE: sasl_handshake, ApiKey.SASL_AUTHENTICATE: sasl_authenticate}
