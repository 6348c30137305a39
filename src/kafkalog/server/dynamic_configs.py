"""Dynamic broker configs: what IncrementalAlterConfigs and AlterConfigs set on the broker
resource, cluster-wide (``kafka-configs --entity-type brokers --entity-default``) or for this
node (``--entity-name ID``), over the static settings given at start (``--config``).

A value is looked up as Kafka does: this node's dynamic config, then the cluster-wide default,
then the static setting, then Kafka's default. The dynamic ones are those Kafka lets change on
a running broker that mean something here: every broker setting that is a topic config's
default (``log.retention.ms``, ``log.segment.bytes``, ...), the log cleaner's and the connection
quotas (:mod:`.connection_quotas`). Kafka keeps them in its metadata log; this server keeps them
in ``kafkalog-broker-configs.json`` in its first data directory, written atomically before an
alteration is answered.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KafkalogError
from ..log.datadir import write_file_atomically
from ..log.partition import broker_synonyms
from .config import ServerConfig, broker_topic_defaults
from .connection_quotas import ConnectionQuotas
from .log_cleaner import CleanerSettings

__all__ = ["BROKER_CONFIGS_FILE_NAME", "DynamicBrokerConfigs", "dynamic_config_names"]

BROKER_CONFIGS_FILE_NAME = "kafkalog-broker-configs.json"
_FILE_VERSION = 1
CLUSTER_DEFAULT = ""  # the broker resource name of the cluster-wide defaults


def dynamic_config_names() -> frozenset[str]:
    """The broker configs that can be changed while serving."""
    return broker_synonyms() | frozenset(
        name for name, *_ in (*CleanerSettings.SETTINGS, *ConnectionQuotas.SETTINGS)
    )


@dataclass
class DynamicBrokerConfigs:
    """The static settings and the two dynamic levels, by Kafka's names."""

    static: dict[str, str]
    cluster_default: dict[str, str] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, config: ServerConfig) -> DynamicBrokerConfigs:
        """The static settings of ``config`` and the dynamic ones stored in its first data
        directory (a file that cannot be read is an error naming it: the broker would
        otherwise serve with defaults its operator changed)."""
        path = Path(config.data_dirs[0]) / BROKER_CONFIGS_FILE_NAME
        static = {  # --max-connections and --max-connections-per-ip are static settings too
            "max.connections": str(config.max_connections),
            "max.connections.per.ip": str(config.max_connections_per_ip),
            **(getattr(config, "extra", None) or {}),
        }
        found = cls(static, path=path)
        if not path.exists():
            return found
        try:
            doc = json.loads(path.read_bytes())
            if doc.get("version") != _FILE_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {_FILE_VERSION}")
            found.cluster_default = {str(k): str(v) for k, v in doc["clusterDefault"].items()}
            found.node = {str(k): str(v) for k, v in doc["node"].items()}
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:
            raise KafkalogError(f"{path}: cannot read the dynamic broker configs: {e}") from None
        found.check(found.effective())
        return found

    def applied_to(self, config: ServerConfig) -> ServerConfig:
        """``config`` with the settings in force as its ``extra``."""
        return dataclasses.replace(config, extra=self.effective())

    def level(self, resource_name: str) -> dict[str, str]:
        return self.cluster_default if resource_name == CLUSTER_DEFAULT else self.node

    def effective(self, **replaced: Mapping[str, str]) -> dict[str, str]:
        """The settings in force (``replaced``: ``cluster_default`` or ``node`` as they would
        become)."""
        default = replaced.get("cluster_default", self.cluster_default)
        node = replaced.get("node", self.node)
        return {**self.static, **default, **node}

    @staticmethod
    def check(settings: Mapping[str, str]) -> None:
        """A KafkalogError naming the setting when one of ``settings`` has a bad value."""
        config = ServerConfig([Path(".")], extra=dict(settings))
        broker_topic_defaults(config)
        CleanerSettings.from_config(config)
        ConnectionQuotas.from_config(config)

    def replace(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the dynamic configs of the level (checked, then stored)."""
        name = "cluster_default" if resource_name == CLUSTER_DEFAULT else "node"
        new = {str(k): str(v) for k, v in configs.items()}
        self.check(self.effective(**{name: new}))
        doc = {"version": _FILE_VERSION, "clusterDefault": self.cluster_default, "node": self.node}
        doc["clusterDefault" if name == "cluster_default" else "node"] = new
        if self.path is not None:
            write_file_atomically(self.path, json.dumps(doc, indent=2, sort_keys=True).encode())
        setattr(self, name, new)

    def source_of(self, broker_name: str) -> str | None:
        """Which level gives ``broker_name``: ``"node"``, ``"cluster_default"``, ``"static"``
        or None."""
        for level, values in (
            ("node", self.node),
            ("cluster_default", self.cluster_default),
            ("static", self.static),
        ):
            if broker_name in values:
                return level
        return None
