"""DescribeConfigs, IncrementalAlterConfigs and the legacy AlterConfigs for topics and the
broker (:mod:`.broker_configs`). The legacy AlterConfigs replaces a resource's whole set of
configs: what it does not name goes back to the default, as Kafka applies it.

Topic configs are the log layer's: Kafka's defaults, then the broker's settings that are topic
defaults (static, or dynamic for the cluster or this node), overridden per topic (KRaft metadata
or the data directory's topics file). Sources are Kafka's ConfigSource values.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ...log.partition import (
    DEFAULT_SYNONYMS,
    LOG_CONFIG_DEFS,
    LogConfig,
    broker_synonyms_given,
)
from ...protocol import ApiKey
from .. import error_codes as ec
from ..dynamic_configs import dynamic_config_names
from ..handlers import Handler, RequestContext
from .broker_configs import (
    alter_broker_configs,
    broker_config_entries,
    broker_level_sources,
    dynamic_configs,
    list_operation,
)

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["describe_topic_configs", "handlers"]

TOPIC, BROKER = 2, 4  # ConfigResource.Type
_RESOURCE_TYPES = frozenset(
    {2, 4, 8, 16, 32}
)  # topic, broker, broker logger, client metrics, group
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5  # ConfigSource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
# Known to the log layer but not shown unless set: an internal config and two removed in 4.0.
_HIDDEN = frozenset(
    {"internal.segment.bytes", "message.format.version", "message.timestamp.difference.max.ms"}
)


def _as_string(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe_topic_configs(
    broker: Broker,
    topic: str,
    *,
    keys: list[str] | None = None,
    synonyms: bool = False,
    configs: LogConfig | None = None,
) -> list[dict]:
    config = configs or broker.log_manager.config_for(topic)
    overridden = config.as_strings()
    out = []
    for name, definition in LOG_CONFIG_DEFS.items():
        if (keys is not None and name not in keys) or (name in _HIDDEN and name not in overridden):
            continue
        value = overridden.get(name, _as_string(config[name]))
        source, found = _topic_source(broker, name, config)
        entry = {
            "name": name,
            "value": value,
            "read_only": False,
            "config_source": source,
            "is_sensitive": False,
            "config_type": _CONFIG_TYPES.get(definition.type, 0),
        }
        if synonyms:
            entry["synonyms"] = found
        out.append(entry)
    return out


def _topic_source(broker: Broker, name: str, config: LogConfig) -> tuple[int, list[dict]]:
    """A topic config's source and its synonyms, as Kafka lists them: the topic's own value,
    each broker setting that gives its default at each level it is set, then the broker config
    whose default it is."""
    found = []
    overridden = config.as_strings()
    if name in overridden:
        found.append({"name": name, "value": overridden[name], "source": TOPIC_CONFIG})
    given = broker_synonyms_given(dynamic_configs(broker).effective(), name)
    for broker_name in given:
        found.extend(broker_level_sources(broker, broker_name))
    source = found[0]["source"] if found else DEFAULT_CONFIG
    if name in DEFAULT_SYNONYMS:
        broker_name, value = DEFAULT_SYNONYMS[name]
        found.append({"name": broker_name, "value": value, "source": DEFAULT_CONFIG})
    return source, found


def _broker_configs(broker: Broker, keys: list[str] | None) -> list[dict]:
    c = broker.config
    values = {
        "node.id": str(broker.node_id),
        "num.partitions": str(c.num_partitions),
        "auto.create.topics.enable": "true" if c.auto_create_topics_enable else "false",
        "socket.request.max.bytes": str(c.socket_request_max_bytes),
        "max.connections": str(c.max_connections),
        "max.connections.per.ip": str(c.max_connections_per_ip),
        "connections.max.idle.ms": str(c.connections_max_idle_ms),
        "offsets.topic.num.partitions": str(c.offsets_topic_num_partitions),
        "transaction.state.log.num.partitions": str(c.transaction_state_log_num_partitions),
        "log.dirs": ",".join(str(d) for d in c.data_dirs),
    }
    retention = getattr(broker, "log_retention", None)
    if retention is not None:
        values.update(retention.settings.broker_configs())
    cleaner = getattr(broker, "log_cleaner", None)
    if cleaner is not None:
        values.update(cleaner.settings.broker_configs())
    dynamic = dynamic_config_names()
    return [
        {"name": k, "value": v, "read_only": True, "config_source": STATIC_BROKER_CONFIG}
        for k, v in values.items()
        if (keys is None or k in keys) and k not in dynamic
    ]


def _alter(current: dict[str, str], ops: list[dict]) -> dict[str, str]:
    new = dict(current)
    for op in ops:
        name, value, kind = op["name"], op["value"], op["config_operation"]
        definition = LOG_CONFIG_DEFS.get(name)
        if definition is None:
            raise KafkalogError(f"Unknown topic config name: {name}")
        if kind == SET:
            new[name] = value
        elif kind == DELETE:
            new.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if definition.type != "list":
                raise KafkalogError(f"Config {name} is not a list: APPEND/SUBTRACT do not apply")
            current = new.get(name, _as_string(definition.default) or "")
            new[name] = list_operation(kind, current, value)
        else:
            raise KafkalogError(f"Unknown config operation {kind} for {name}")
    LogConfig(new)  # validate the whole result before anything changes
    return new


def _from_kraft_metadata(broker: Broker, topic: str) -> bool:
    image = broker.log_manager.metadata
    return image is not None and topic in image.topics


def handlers(broker: Broker) -> dict[int, Handler]:
    async def describe_configs(ctx: RequestContext, request: dict) -> dict:
        results = []
        for res in request["resources"]:
            kind, name, keys = res["resource_type"], res["resource_name"], res["configuration_keys"]
            entry = {"resource_type": kind, "resource_name": name}
            if kind == TOPIC:
                if name not in broker.log_manager.topics():
                    entry.update(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message=f"Topic {name} does not exist")  # fmt: skip
                else:
                    entry["configs"] = describe_topic_configs(
                        broker, name, keys=keys, synonyms=request["include_synonyms"]
                    )
            elif kind == BROKER and name in ("", str(broker.node_id)):
                entry["configs"] = broker_config_entries(
                    broker, name, keys, request["include_synonyms"]
                )
                if name:
                    entry["configs"] += _broker_configs(broker, keys)
            else:
                entry.update(error_code=ec.INVALID_REQUEST,
                             error_message=f"Unsupported resource {kind}/{name}")  # fmt: skip
            results.append(entry)
        return {"results": results}

    async def incremental_alter_configs(ctx: RequestContext, request: dict) -> dict:
        responses = []
        for res in request["resources"]:
            kind, name = res["resource_type"], res["resource_name"]
            entry = {"resource_type": kind, "resource_name": name}
            if kind == BROKER:
                code, message = alter_broker_configs(
                    broker, name, ops=res["configs"], validate_only=request["validate_only"]
                )
                entry.update(error_code=code, error_message=message)
            elif kind != TOPIC:
                message = "Only topic and broker configs can be altered"
                entry.update(error_code=ec.INVALID_REQUEST, error_message=message)
            elif name not in broker.log_manager.topics():
                entry.update(error_code=ec.UNKNOWN_TOPIC_OR_PARTITION,
                             error_message=f"Topic {name} does not exist")  # fmt: skip
            elif _from_kraft_metadata(broker, name):
                message = (f"The configs of topic {name} come from this directory's KRaft "
                           f"metadata log, which this server does not write")  # fmt: skip
                entry.update(error_code=ec.INVALID_CONFIG, error_message=message)
            else:
                try:
                    new = _alter(broker.log_manager.config_for(name).as_strings(), res["configs"])
                except KafkalogError as e:
                    entry.update(error_code=ec.INVALID_CONFIG, error_message=e.message)
                else:
                    if not request["validate_only"]:
                        broker.log_manager.alter_topic_configs(name, new)
            responses.append(entry)
        return {"responses": responses}

    async def alter_configs(ctx: RequestContext, request: dict) -> dict:
        """The legacy AlterConfigs: each resource's configs become exactly those given (a null
        value, or a name left out, goes back to the default), as Kafka's controller applies it
        (ConfigurationControlManager.legacyAlterConfigs); duplicates as ControllerApis."""
        keys = [(r["resource_type"], r["resource_name"]) for r in request["resources"]]
        counts = Counter(keys)
        responses, wanted, reported = [], [], set()
        for res, key in zip(request["resources"], keys):
            entry = {"resource_type": key[0], "resource_name": key[1]}
            if key[0] not in _RESOURCE_TYPES:
                responses.append({**entry, "error_code": ec.UNSUPPORTED_VERSION,
                                  "error_message": f"Unknown resource type {key[0]}."})  # fmt: skip
            elif counts[key] > 1:
                if key not in reported:  # once per duplicated resource, which is not altered
                    reported.add(key)
                    responses.append({**entry, "error_code": ec.INVALID_REQUEST,
                                      "error_message": "Duplicate resource."})  # fmt: skip
            else:
                wanted.append(res)
        for res in wanted:
            kind, name = res["resource_type"], res["resource_name"]
            entry = {"resource_type": kind, "resource_name": name}
            if kind == BROKER:
                replace = {c["name"]: c["value"] for c in res["configs"]}
                code, message = alter_broker_configs(
                    broker, name, replace=replace, validate_only=request["validate_only"]
                )
            else:
                code, message = _replace_topic_configs(broker, kind, name, res["configs"],
                                                       request["validate_only"])  # fmt: skip
            responses.append({**entry, "error_code": code, "error_message": message})
        return {"responses": responses}

    return {
        ApiKey.DESCRIBE_CONFIGS: describe_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
        ApiKey.ALTER_CONFIGS: alter_configs,
    }


def _replace_topic_configs(
    broker: Broker, kind: int, name: str, configs: list[dict], validate_only: bool
) -> tuple[int, str | None]:
    """One resource of a legacy AlterConfigs: the configs validated as a whole, then the
    topic's existence checked (Kafka's validateAlterConfig order), then the overrides replaced."""
    if kind != TOPIC:
        return ec.INVALID_REQUEST, "Only topic and broker configs can be altered"
    given = {c["name"]: c["value"] for c in configs}  # a name given twice: the last wins
    new = {k: v for k, v in given.items() if v is not None}
    unknown = [n for n in new if n not in LOG_CONFIG_DEFS]
    if unknown:
        return ec.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}"
    try:
        LogConfig(new)
    except KafkalogError as e:
        return ec.INVALID_CONFIG, e.message
    if name not in broker.log_manager.topics():
        return ec.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if _from_kraft_metadata(broker, name):
        message = (f"The configs of topic {name} come from this directory's KRaft metadata "
                   "log, which this server does not write")  # fmt: skip
        return ec.INVALID_CONFIG, message
    if not validate_only:
        broker.log_manager.alter_topic_configs(name, new)
    return ec.NONE, None
