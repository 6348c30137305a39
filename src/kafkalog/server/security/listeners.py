"""Listeners as Kafka names them: ``listeners=PLAINTEXT://127.0.0.1:9092,SSL://:9093``.

A listener's name is its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) unless
``listener.security.protocol.map`` maps a custom name to one. An empty host binds every
interface (Kafka's ``PLAINTEXT://:9092``); port 0 takes any free port, reported once bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ListenerError

__all__ = [
    "SECURITY_PROTOCOLS",
    "Listener",
    "ListenerError",
    "parse_endpoint",
    "parse_listeners",
    "parse_protocol_map",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_endpoint(text: str, default_name: str | None = None) -> tuple[str, str, int]:
    """``NAME://HOST:PORT`` (or ``HOST:PORT`` when ``default_name`` is given): name, host, port."""
    text = text.strip()
    name, sep, rest = text.partition("://")
    if not sep:
        if default_name is None:
            raise ListenerError(f"expected NAME://HOST:PORT, got {text!r}")
        name, rest = default_name, text
    host, sep, port = rest.rpartition(":")
    if not name or not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenerError(f"expected NAME://HOST:PORT, got {text!r}")
    return name.upper(), host.strip("[]"), int(port)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(
                f"expected NAME:PROTOCOL ({', '.join(SECURITY_PROTOCOLS)}), got {item!r}"
            )
        out[name.strip().upper()] = protocol
    return out


def parse_listeners(
    items: list[str], protocol_map: dict[str, str] | None = None, default_host: str = "0.0.0.0"
) -> list[Listener]:
    """Listeners from ``HOST:PORT`` (PLAINTEXT) and ``NAME://HOST:PORT`` items, each possibly a
    comma-separated list; names must be unique, and be a protocol or mapped to one."""
    protocol_map = protocol_map or {}
    listeners: list[Listener] = []
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, host, port = parse_endpoint(part, default_name="PLAINTEXT")
            protocol = protocol_map.get(name, name if name in SECURITY_PROTOCOLS else None)
            if protocol is None:
                raise ListenerError(
                    f"listener {name} is not a security protocol "
                    f"({', '.join(SECURITY_PROTOCOLS)}) and not in the protocol map"
                )
            if any(existing.name == name for existing in listeners):
                raise ListenerError(f"listener {name} is given twice")
            listeners.append(Listener(name, host or default_host, port, protocol))
    return listeners
