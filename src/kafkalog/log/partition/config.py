"""Topic configuration (Kafka's LogConfig): names, types, defaults and valid ranges.

Kafka keeps topic configs outside the data directory (in KRaft metadata or ZooKeeper); kafkalog
reads them from a KRaft ``__cluster_metadata`` log when one is there, else from its own topics
file, and otherwise uses Kafka's defaults below (Kafka 4.x: LogConfig, ServerLogConfigs). Values
arrive as strings (properties, ConfigRecords) or Python values; both are validated the same way.
``internal.segment.bytes`` is Kafka's testing override that lifts segment.bytes' 1 MiB minimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ...format import CompressionType, TimestampType

__all__ = ["LOG_CONFIG_DEFS", "ConfigError", "LogConfig"]

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # int, long, double, boolean, string, list
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    # The minimum of Kafka 3.x where 4.0 raised it: a value a 3.x broker stored is still read.
    stored_min: float | None = None
    # A value inside [min, max] that is still refused (gzip's level 0: Kafka takes -1 or 1..9).
    also_not: float | None = None


_COMPRESSION_CHOICES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

LOG_CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("segment.bytes", "int", 1 << 30, min=1 << 20, stored_min=14),
        ConfigDef("internal.segment.bytes", "int", None, min=14),
        ConfigDef("segment.ms", "long", 7 * 24 * 3600 * 1000, min=1),
        ConfigDef("segment.jitter.ms", "long", 0, min=0),
        ConfigDef("segment.index.bytes", "int", 10 << 20, min=4),
        ConfigDef("flush.messages", "long", LONG_MAX, min=1),
        ConfigDef("flush.ms", "long", LONG_MAX, min=0),
        ConfigDef("retention.bytes", "long", -1),
        ConfigDef("retention.ms", "long", 7 * 24 * 3600 * 1000, min=-1),
        ConfigDef("max.message.bytes", "int", (1 << 20) + 12, min=0),
        ConfigDef("index.interval.bytes", "int", 4096, min=0),
        ConfigDef("delete.retention.ms", "long", 24 * 3600 * 1000, min=0),
        ConfigDef("min.compaction.lag.ms", "long", 0, min=0),
        ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, min=1),
        ConfigDef("file.delete.delay.ms", "long", 60_000, min=0),
        ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, min=0, max=1),
        ConfigDef("cleanup.policy", "list", ("delete",), choices=("compact", "delete")),
        ConfigDef("unclean.leader.election.enable", "boolean", False),
        ConfigDef("min.insync.replicas", "int", 1, min=1),
        ConfigDef("compression.type", "string", "producer", choices=_COMPRESSION_CHOICES),
        # -1: zlib's default (6), as Kafka's default is (Deflater.DEFAULT_COMPRESSION).
        ConfigDef("compression.gzip.level", "int", -1, min=-1, max=9, also_not=0),
        ConfigDef("compression.lz4.level", "int", 9, min=1, max=17),
        ConfigDef("compression.zstd.level", "int", 3, min=-131072, max=22),
        ConfigDef("preallocate", "boolean", False),
        ConfigDef(
            "message.timestamp.type",
            "string",
            "CreateTime",
            choices=("CreateTime", "LogAppendTime"),
        ),
        ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX, min=0),
        ConfigDef("message.timestamp.after.max.ms", "long", 3_600_000, min=0),
        ConfigDef("message.downconversion.enable", "boolean", True),
        ConfigDef("leader.replication.throttled.replicas", "list", ()),
        ConfigDef("follower.replication.throttled.replicas", "list", ()),
        ConfigDef("remote.storage.enable", "boolean", False),
        ConfigDef("local.retention.ms", "long", -2, min=-2),
        ConfigDef("local.retention.bytes", "long", -2, min=-2),
        ConfigDef("remote.log.copy.disable", "boolean", False),
        ConfigDef("remote.log.delete.on.disable", "boolean", False),
        ConfigDef("errors.deadletterqueue.group.enable", "boolean", False),
        # Removed from Kafka 4.0 but present in older clusters' metadata: accepted, ignored.
        ConfigDef("message.format.version", "string", "3.0-IV1"),
        ConfigDef("message.timestamp.difference.max.ms", "long", LONG_MAX, min=0),
    )
}


def _parse(d: ConfigDef, value: Any, *, stored: bool = False) -> Any:
    name = d.name
    try:
        if d.type in ("int", "long"):
            if isinstance(value, bool):
                raise ValueError
            parsed = int(value.strip()) if isinstance(value, str) else int(value)
            limit = INT_MAX if d.type == "int" else LONG_MAX
            if not -limit - 1 <= parsed <= limit:
                raise ValueError
        elif d.type == "double":
            parsed = float(value.strip()) if isinstance(value, str) else float(value)
        elif d.type == "boolean":
            if isinstance(value, bool):
                parsed = value
            elif isinstance(value, str) and value.strip().lower() in ("true", "false"):
                parsed = value.strip().lower() == "true"
            else:
                raise ValueError
        elif d.type == "list":
            if isinstance(value, str):
                parsed = tuple(v.strip() for v in value.split(",") if v.strip())
            else:
                parsed = tuple(str(v) for v in value)
        else:
            parsed = str(value).strip()
    except (ValueError, TypeError):
        raise ConfigError(
            f"Invalid value {value!r} for configuration {name}: expected a {d.type}"
        ) from None
    least = d.stored_min if stored and d.stored_min is not None else d.min
    if least is not None and parsed < least:
        raise ConfigError(
            f"Invalid value {parsed} for configuration {name}: Value must be at least {_num(least)}"
        )
    if d.also_not is not None and parsed == d.also_not:
        raise ConfigError(
            f"Invalid value {parsed} for configuration {name}: Value must be between "
            f"{_num(d.also_not + 1)} and {_num(d.max)} or {_num(d.min)}"
        )
    if d.max is not None and parsed > d.max:
        raise ConfigError(
            f"Invalid value {parsed} for configuration {name}: Value must be no "
            f"more than {_num(d.max)}"
        )
    if d.choices is not None:
        items = parsed if d.type == "list" else (parsed,)
        for item in items:
            if item not in d.choices:
                raise ConfigError(
                    f"Invalid value {item} for configuration {name}: String must "
                    f"be one of: {', '.join(d.choices)}"
                )
    return parsed


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _parsed(configs: Mapping[str, Any] | None, *, stored: bool) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for name, value in (configs or {}).items():
        d = LOG_CONFIG_DEFS.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        parsed[name] = _parse(d, value, stored=stored)
    return parsed


class LogConfig:
    """A topic's effective configuration: Kafka's defaults, then the broker's ``defaults``
    (topic configs a broker setting such as ``log.retention.hours`` sets, see
    :mod:`.config_synonyms`), then the topic's ``overrides``.

    Read a value by Kafka's name (``config["retention.ms"]``) or through the typed properties the
    log uses. ``overrides`` keeps only what was set explicitly, as Kafka's overriddenConfigs;
    ``defaults`` what the broker set.
    """

    __slots__ = ("_values", "defaults", "overrides")

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        stored: bool = False,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """``stored``: the overrides are what a broker already stored (its metadata log), so a
        value an older Kafka allowed is taken (segment.bytes down to 3.x's 14 bytes)."""
        values = {name: d.default for name, d in LOG_CONFIG_DEFS.items()}
        self.defaults = _parsed(defaults, stored=False)
        self.overrides = _parsed(overrides, stored=stored)
        values.update(self.defaults)
        values.update(self.overrides)
        self._values = values

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def source(self, name: str) -> str:
        """Where ``name``'s value comes from: ``"topic"``, ``"broker"`` or ``"default"``."""
        if name in self.overrides:
            return "topic"
        return "broker" if name in self.defaults else "default"

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        return LogConfig({**self.overrides, **overrides}, defaults=self.defaults)

    def as_strings(self) -> dict[str, str]:
        """Overrides as Kafka writes them (lists comma-joined, booleans lower case)."""
        out = {}
        for name, value in self.overrides.items():
            if isinstance(value, tuple):
                out[name] = ",".join(value)
            elif isinstance(value, bool):
                out[name] = "true" if value else "false"
            else:
                out[name] = str(value)
        return out

    # -- typed views used by the log --------------------------------------------------------------
    @property
    def segment_size(self) -> int:
        internal = self._values["internal.segment.bytes"]
        return self._values["segment.bytes"] if internal is None else internal

    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def timestamp_type(self) -> TimestampType:
        if self._values["message.timestamp.type"] == "LogAppendTime":
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def compression(self) -> CompressionType | None:
        """The topic's codec, or None for ``producer`` (keep what the producer sent)."""
        name = self._values["compression.type"]
        if name == "producer":
            return None
        return CompressionType.NONE if name == "uncompressed" else CompressionType.from_label(name)

    @property
    def compression_level(self) -> int | None:
        codec = self.compression
        if codec is None or codec in (CompressionType.NONE, CompressionType.SNAPPY):
            return None
        return self._values[f"compression.{codec.label}.level"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and other.overrides == self.overrides

    def __repr__(self) -> str:
        return f"LogConfig({self.overrides!r})"
