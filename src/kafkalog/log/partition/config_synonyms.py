"""The broker configs that set every topic's default, as Kafka's ServerTopicConfigSynonyms lists
them: ``log.retention.hours=1`` on a broker is ``retention.ms=3600000`` for each topic without
its own ``retention.ms``.

A topic config can have several broker synonyms, the first one given wins (``log.retention.ms``
over ``log.retention.minutes`` over ``log.retention.hours``), and some are in other units
(hours and minutes become milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import ConfigError

__all__ = [
    "DEFAULT_SYNONYMS",
    "TOPIC_CONFIG_SYNONYMS",
    "broker_synonym_given",
    "broker_synonyms",
    "broker_synonyms_given",
    "topic_defaults",
]

_HOUR, _MINUTE = 3_600_000, 60_000

# Topic config -> its broker configs, most preferred first, each with the factor to the topic's
# unit (Kafka's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS, 4.0-4.4).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTE),
        ("log.retention.hours", _HOUR),
    ),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}


# The broker config Kafka names as the source of a topic config's default, with that default in
# the broker config's unit (DescribeConfigs' DEFAULT_CONFIG synonym, as Kafka 4.x answers it;
# segment.ms, segment.jitter.ms and flush.ms have none there).
DEFAULT_SYNONYMS: dict[str, tuple[str, str]] = {
    "segment.bytes": ("log.segment.bytes", "1073741824"),
    "segment.index.bytes": ("log.index.size.max.bytes", "10485760"),
    "flush.messages": ("log.flush.interval.messages", "9223372036854775807"),
    "retention.bytes": ("log.retention.bytes", "-1"),
    "retention.ms": ("log.retention.hours", "168"),
    "max.message.bytes": ("message.max.bytes", "1048588"),
    "index.interval.bytes": ("log.index.interval.bytes", "4096"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "86400000"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "0"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "60000"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "0.5"),
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false"),
    "min.insync.replicas": ("min.insync.replicas", "1"),
    "compression.type": ("compression.type", "producer"),
    "compression.gzip.level": ("compression.gzip.level", "-1"),
    "compression.lz4.level": ("compression.lz4.level", "9"),
    "compression.zstd.level": ("compression.zstd.level", "3"),
    "preallocate": ("log.preallocate", "false"),
    "message.timestamp.type": ("log.message.timestamp.type", "CreateTime"),
    "message.timestamp.before.max.ms": (
        "log.message.timestamp.before.max.ms",
        "9223372036854775807",
    ),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", "3600000"),
    "local.retention.ms": ("log.local.retention.ms", "-2"),
    "local.retention.bytes": ("log.local.retention.bytes", "-2"),
}


def broker_synonyms_given(broker_configs: Mapping[str, str], topic_name: str) -> list[str]:
    """Every broker config given that sets ``topic_name``'s default, the one in force first."""
    return [name for name, _ in TOPIC_CONFIG_SYNONYMS.get(topic_name, ()) if name in broker_configs]


def broker_synonyms() -> frozenset[str]:
    """Every broker config name that sets a topic default."""
    return frozenset(name for synonyms in TOPIC_CONFIG_SYNONYMS.values() for name, _ in synonyms)


def broker_synonym_given(broker_configs: Mapping[str, str], topic_name: str) -> str | None:
    """The broker config that sets ``topic_name``'s default (the first synonym given), if any."""
    for broker_name, _ in TOPIC_CONFIG_SYNONYMS.get(topic_name, ()):
        if broker_name in broker_configs:
            return broker_name
    return None


def topic_defaults(broker_configs: Mapping[str, str]) -> dict[str, str]:
    """The topic defaults ``broker_configs`` (by Kafka's broker names) set, by topic config name.

    A value in hours or minutes must be a whole number (ConfigError naming the broker config);
    ``-1`` stays ``-1`` (unlimited retention) whatever the unit. Values are otherwise checked
    where the topic's LogConfig is built, as Kafka checks a topic's effective config.
    """
    out: dict[str, str] = {}
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        broker_name = broker_synonym_given(broker_configs, topic_name)
        if broker_name is None:
            continue
        factor = dict(synonyms)[broker_name]
        value = str(broker_configs[broker_name]).strip()
        if factor != 1:
            try:
                number = int(value)
            except ValueError:
                raise ConfigError(
                    f"Invalid value {value!r} for configuration {broker_name}: expected a long"
                ) from None
            value = str(number if number < 0 else number * factor)
        out[topic_name] = value
    return out
