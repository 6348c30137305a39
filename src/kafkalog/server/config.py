"""The server's settings, named after the broker configs they mirror."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import KafkalogError
from ..protocol import DEFAULT_MAX_REQUEST_SIZE
from .security.listeners import Listener

if TYPE_CHECKING:
    from .security.sasl import SaslSettings
    from .security.tls import TlsSettings

__all__ = ["ServerConfig"]


@dataclass
class ServerConfig:
    """What ``kafkalog serve`` runs with; defaults are Kafka's where Kafka has one."""

    data_dirs: list[Path]
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None  # advertised.listeners: the host clients are told
    node_id: int = 0
    socket_request_max_bytes: int = DEFAULT_MAX_REQUEST_SIZE  # socket.request.max.bytes
    max_connections: int = 1000  # max.connections
    max_connections_per_ip: int = 1000  # max.connections.per.ip
    connections_max_idle_ms: int = 10 * 60 * 1000  # connections.max.idle.ms
    num_partitions: int = 1  # num.partitions, for auto-created topics
    auto_create_topics_enable: bool = True  # auto.create.topics.enable
    sendfile: bool = True  # send fetched records with os.sendfile where the transport allows
    # acks=all answered once its records are fsynced (serve's rule); False: once appended, the
    # OS flushing them as with Kafka's default flush policy (flush.messages/flush.ms still apply).
    acks_all_fsync: bool = True
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    transaction_state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    # Segment files (.log, .index, .timeindex, .txnindex) open at once; None: half of what the
    # open-files limit leaves (kafkalog.server.limits.plan_descriptors).
    max_open_files: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # listeners: every listener with its security protocol; empty: PLAINTEXT on host:port.
    listeners: list[Listener] = field(default_factory=list)
    # advertised.listeners: listener name to the host and port clients are told (port 0: the
    # bound one); a listener not named here advertises advertised_host (or its own) and its port.
    advertised_listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    tls: TlsSettings | None = None  # ssl.*: for the SSL and SASL_SSL listeners
    sasl: SaslSettings | None = None  # sasl.enabled.mechanisms and the users

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    def all_listeners(self) -> list[Listener]:
        """The listeners: ``listeners``, else PLAINTEXT on ``host:port``."""
        return list(self.listeners) or [Listener("PLAINTEXT", self.host, self.port)]


def parse_bool(value: str) -> bool:
    """A boolean broker config as Kafka's ConfigDef reads one: ``true`` or ``false``."""
    lowered = str(value).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, not {value!r}")
    return lowered == "true"


def broker_settings(
    extra: dict[str, str],
    table: Iterable[tuple[str, str, Callable[[str], object], float | None]],
) -> dict[str, object]:
    """The broker configs of ``table`` (Kafka name, field name, parser, minimum or None) given
    in ``extra``, parsed and checked, by field name; a bad value is a KafkalogError naming it."""
    values: dict[str, object] = {}
    for name, field_name, parse, minimum in table:
        if name in extra:
            try:
                value = parse(extra[name])
            except ValueError as e:
                raise KafkalogError(f"{name}: {e}") from None
            if minimum is not None and value < minimum:  # type: ignore[operator]
                raise KafkalogError(f"{name} must be at least {minimum}, not {value}")
            values[field_name] = value
    return values


def broker_topic_defaults(config: ServerConfig) -> dict[str, str]:
    """The topic configs the broker's settings give every topic without its own
    (``log.retention.hours=1`` -> ``retention.ms=3600000``), each checked as the topic config it
    sets; a bad value is a KafkalogError naming the broker setting."""
    from ..log.partition import LogConfig, broker_synonym_given, topic_defaults

    extra = getattr(config, "extra", None) or {}
    defaults = topic_defaults(extra)
    for name, value in defaults.items():
        try:
            LogConfig(defaults={name: value})
        except KafkalogError as e:
            raise KafkalogError(f"{broker_synonym_given(extra, name)}: {e}") from None
    return defaults
