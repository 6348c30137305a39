"""The broker resource of DescribeConfigs, IncrementalAlterConfigs and AlterConfigs: this node
(its id as the resource name) and the cluster-wide defaults (the empty name), as
``kafka-configs --entity-type brokers`` reads and changes them.

Dynamic configs (:mod:`..dynamic_configs`) are stored before the answer and applied at once: a
topic default (``log.retention.ms``) to every topic without its own, a cleaner setting to the
log cleaner, a connection quota to the connections accepted from then on. Others are refused
as Kafka refuses them (``Cannot update these configs dynamically``). Sources are Kafka's
ConfigSource values, synonyms listed as Kafka lists them: this node's value, the cluster
default, the static setting, then Kafka's default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...log.partition import DEFAULT_SYNONYMS
from .. import error_codes as ec
from ..config import broker_topic_defaults
from ..connection_quotas import UNLIMITED, ConnectionQuotas
from ..dynamic_configs import CLUSTER_DEFAULT, DynamicBrokerConfigs, dynamic_config_names
from ..log_cleaner import CleanerSettings

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = [
    "alter_broker_configs",
    "broker_config_entries",
    "broker_level_sources",
    "dynamic_configs",
    "list_operation",
]

# ConfigSource
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = (
    2,
    3,
    4,
    5,
)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType
_LEVELS = (
    ("node", DYNAMIC_BROKER_CONFIG),
    ("cluster_default", DYNAMIC_DEFAULT_BROKER_CONFIG),
    ("static", STATIC_BROKER_CONFIG),
)
_LIST_CONFIGS = frozenset({"log.cleanup.policy"})


def _kafka_defaults() -> dict[str, str]:
    """Kafka's defaults of the dynamic broker configs that have one."""
    defaults = dict(DEFAULT_SYNONYMS.values())
    defaults.update(CleanerSettings().broker_configs())
    unlimited = ConnectionQuotas(UNLIMITED, UNLIMITED)  # Kafka's, not serve's 1000
    defaults.update(unlimited.broker_configs())
    return defaults


def dynamic_configs(broker: Broker) -> DynamicBrokerConfigs:
    """The broker's dynamic configs (its static settings alone before the app installs them)."""
    found = broker.dynamic_configs
    if found is None:
        found = DynamicBrokerConfigs(dict(getattr(broker.config, "extra", None) or {}))
    return found


def broker_level_sources(broker: Broker, broker_name: str) -> list[dict]:
    """The levels that give ``broker_name`` a value, most precedent first (DescribeConfigs'
    synonyms of a broker config, or behind a topic config)."""
    dynamic = dynamic_configs(broker)
    found = []
    for level, source in _LEVELS:
        values = getattr(dynamic, level)
        if broker_name in values:
            found.append({"name": broker_name, "value": values[broker_name], "source": source})
    return found


def broker_config_entries(
    broker: Broker, resource_name: str, keys: list[str] | None, synonyms: bool
) -> list[dict]:
    """This node's dynamic configs (with the cluster's and static ones behind them), or, for the
    empty name, the cluster-wide defaults only, as Kafka describes them."""
    dynamic = dynamic_configs(broker)
    defaults = _kafka_defaults()
    if resource_name == CLUSTER_DEFAULT:
        names = sorted(dynamic.cluster_default)
    else:
        names = sorted(set(dynamic.effective()) & dynamic_config_names())
    out = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        levels = broker_level_sources(broker, name)
        if resource_name == CLUSTER_DEFAULT:
            levels = [x for x in levels if x["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        entry = {"name": name, "value": levels[0]["value"], "read_only": False,
                 "config_source": levels[0]["source"], "is_sensitive": False}  # fmt: skip
        if synonyms:
            entry["synonyms"] = levels
            if resource_name != CLUSTER_DEFAULT and name in defaults:
                default = {"name": name, "value": defaults[name], "source": DEFAULT_CONFIG}
                entry["synonyms"] = [*levels, default]
        out.append(entry)
    return out


def list_operation(kind: int, current: str, value: str | None) -> str:
    """A list config after AlterConfigOp APPEND (items not there yet, in order) or SUBTRACT."""
    items = [x for x in current.split(",") if x]
    given = [x.strip() for x in (value or "").split(",") if x.strip()]
    if kind == APPEND:
        return ",".join(items + [x for x in given if x not in items])
    return ",".join(x for x in items if x not in given)


def _applied(current: dict[str, str], ops: list[dict]) -> dict[str, str]:
    new = dict(current)
    for op in ops:
        name, value, kind = op["name"], op["value"], op["config_operation"]
        if kind == SET:
            new[name] = value
        elif kind == DELETE:
            new.pop(name, None)
        elif kind in (APPEND, SUBTRACT) and name in _LIST_CONFIGS:
            new[name] = list_operation(kind, new.get(name, "delete"), value)
        else:
            raise KafkalogError(f"Config {name} is not a list: APPEND/SUBTRACT do not apply")
    return new


def alter_broker_configs(
    broker: Broker,
    resource_name: str,
    *,
    ops: list[dict] | None = None,
    replace: dict[str, str | None] | None = None,
    validate_only: bool,
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs (``ops``) or the legacy AlterConfigs (``replace``: the level's
    configs become exactly those) on this node or the cluster defaults: the error code and
    message."""
    if resource_name not in (CLUSTER_DEFAULT, str(broker.node_id)):
        return ec.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}"
    dynamic = dynamic_configs(broker)
    names = [op["name"] for op in ops] if ops is not None else list(replace or {})
    static = [n for n in names if n not in dynamic_config_names()]
    if static:
        return ec.INVALID_REQUEST, f"Cannot update these configs dynamically: [{', '.join(static)}]"
    try:
        if ops is not None:
            new = _applied(dynamic.level(resource_name), ops)
        else:
            new = {k: v for k, v in (replace or {}).items() if v is not None}
        if validate_only:
            level = "cluster_default" if resource_name == CLUSTER_DEFAULT else "node"
            dynamic.check(dynamic.effective(**{level: new}))
            return ec.NONE, None
        dynamic.replace(resource_name, new)
    except KafkalogError as e:
        return ec.INVALID_CONFIG, e.message
    except OSError as e:
        return ec.KAFKA_STORAGE_ERROR, f"storing the broker configs failed: {e}"
    applied = dynamic.applied_to(broker.config)
    broker.log_manager.set_topic_defaults(broker_topic_defaults(applied))
    cleaner = getattr(broker, "log_cleaner", None)
    if cleaner is not None:
        cleaner.settings = CleanerSettings.from_config(applied)
    broker.connection_quotas = ConnectionQuotas.from_config(applied)
    return ec.NONE, None
