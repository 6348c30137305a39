"""Connection quotas: Kafka's ConnectionQuotas settings, changeable while serving.

``max.connections`` (all listeners), ``max.connections.per.ip`` with its
``max.connections.per.ip.overrides`` (``host:count,...``; a host name is resolved once, when the
setting is applied) and ``max.connection.creation.rate`` (new connections a second) are the
broker configs Kafka's DynamicConnectionQuota reconfigures on a running broker. A connection over
a count limit is closed at once, as Kafka's acceptor closes it; one over the creation rate waits
until the rate allows it (Kafka throttles its acceptor the same way), measured here by a token
bucket holding one second's worth (Kafka samples the rate over its quota windows); a rate of 0
closes every new connection.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import KafkalogError
from .config import ServerConfig, broker_settings

__all__ = ["ConnectionQuotas", "CreationRate"]

UNLIMITED = 2**31 - 1  # Kafka's default of the rate (Int.MaxValue)


def _overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, as Kafka's getMap reads them
    (an empty value: none), each host as the address a peer shows."""
    found: dict[str, int] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"expected host:count pairs separated by commas, not {item!r}")
        found[_address(host.strip())] = int(count)
    return found


def _address(host: str) -> str:
    """A host's address, as ``peername`` gives it (``[::1]`` and ``::1`` alike)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(bare)
    except OSError:
        raise ValueError(f"contains invalid addresses: {host}") from None


@dataclass(frozen=True)
class ConnectionQuotas:
    """The connection limits in force (Kafka's names in :attr:`SETTINGS`)."""

    max_connections: int = 1000
    max_connections_per_ip: int = 1000
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    overrides_text: str = ""
    max_connection_creation_rate: int = UNLIMITED

    SETTINGS: ClassVar[tuple] = (
        ("max.connections", "max_connections", int, 0),
        ("max.connections.per.ip", "max_connections_per_ip", int, 0),
        ("max.connections.per.ip.overrides", "overrides_text", str, None),
        ("max.connection.creation.rate", "max_connection_creation_rate", int, 0),
    )

    @classmethod
    def from_config(cls, config: ServerConfig) -> ConnectionQuotas:
        """The quotas of ``config``: its ``--config``/dynamic settings over its fields (what
        ``--max-connections`` and ``--max-connections-per-ip`` set)."""
        values = broker_settings(getattr(config, "extra", None) or {}, cls.SETTINGS)
        values.setdefault("max_connections", config.max_connections)
        values.setdefault("max_connections_per_ip", config.max_connections_per_ip)
        text = values.get("overrides_text", "")
        try:
            overrides = _overrides(text)
        except ValueError as e:
            raise KafkalogError(f"max.connections.per.ip.overrides {e}") from None
        if values["max_connections_per_ip"] == 0 and not overrides:
            raise KafkalogError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set."
            )
        return cls(per_ip_overrides=overrides, **values)

    def per_ip_limit(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def broker_configs(self) -> dict[str, str]:
        return {
            "max.connections": str(self.max_connections),
            "max.connections.per.ip": str(self.max_connections_per_ip),
            "max.connections.per.ip.overrides": self.overrides_text,
            "max.connection.creation.rate": str(self.max_connection_creation_rate),
        }


class CreationRate:
    """``max.connection.creation.rate`` as a token bucket: :meth:`delay` is how long a new
    connection waits before it is served (0 within the rate)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._tokens: float | None = None
        self._at = 0.0

    def delay(self, rate: int) -> float | None:
        """Seconds to wait; None when the rate is 0 (no new connection is let in)."""
        now = self.clock()
        if rate >= UNLIMITED:
            self._tokens = None
            return 0.0
        if rate <= 0:
            return None
        if self._tokens is None:
            self._tokens = float(rate)
        else:
            self._tokens = min(float(rate), self._tokens + (now - self._at) * rate)
        self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / rate
