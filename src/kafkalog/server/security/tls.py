"""The TLS side of SSL and SASL_SSL listeners: one server :class:`ssl.SSLContext` from PEM files.

Kafka's settings, by the names of :class:`TlsSettings`: ``ssl.keystore`` (here a certificate
chain and a private key, PEM), ``ssl.key.password``, ``ssl.truststore`` (CA certificates, PEM,
to verify client certificates) and ``ssl.client.auth`` (``none``: no client certificate asked;
``requested``: asked, verified when given; ``required``: a verified one or no connection).
TLS 1.2 and 1.3 only, as Kafka's ``ssl.enabled.protocols``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import TlsError

__all__ = ["CLIENT_AUTH", "TlsError", "TlsSettings", "peer_principal", "server_context"]

CLIENT_AUTH = ("none", "requested", "required")


@dataclass
class TlsSettings:
    certfile: Path
    keyfile: Path | None = None  # None: the key is in certfile
    key_password: str | None = field(default=None, repr=False)
    cafile: Path | None = None
    client_auth: str = "none"


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The server context; TlsError saying which file or setting is wrong."""
    if settings.client_auth not in CLIENT_AUTH:
        raise TlsError(f"ssl client auth must be one of {', '.join(CLIENT_AUTH)}")
    if settings.client_auth != "none" and settings.cafile is None:
        raise TlsError(f"ssl client auth {settings.client_auth} needs a CA file (--ssl-cafile)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(
            str(settings.certfile),
            str(settings.keyfile) if settings.keyfile else None,
            password=settings.key_password,
        )
    except (OSError, ssl.SSLError) as e:
        raise TlsError(
            f"cannot load the certificate {settings.certfile} and key "
            f"{settings.keyfile or settings.certfile}: {e}"
        ) from e
    if settings.cafile is not None:
        try:
            context.load_verify_locations(cafile=str(settings.cafile))
        except (OSError, ssl.SSLError) as e:
            raise TlsError(f"cannot load the CA certificates {settings.cafile}: {e}") from e
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[settings.client_auth]
    return context


def peer_principal(peercert: dict | None) -> str:
    """Kafka's default SSL principal: the client certificate's subject as an X.500 name
    (``CN=client,O=org``, most specific first), ANONYMOUS without one."""
    if not peercert:
        return "ANONYMOUS"
    rdns = [f"{k}={v}" for rdn in peercert.get("subject", ()) for k, v in rdn]
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L"}  # fmt: skip
    for long, abbreviation in short.items():
        rdns = [r.replace(f"{long}=", f"{abbreviation}=", 1) for r in rdns]
    return ",".join(reversed(rdns)) or "ANONYMOUS"
