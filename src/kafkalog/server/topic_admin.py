"""Topic changes the log layer's LogManager does not offer yet: deleting a topic and changing
a topic's configs while its logs are open.

Both follow Kafka: a deleted partition's directory is first renamed ``<tp>.<uuid>-delete`` (so a
crash midway never leaves a half-deleted live partition) and then removed; changed configs are
written to the data directory's topics file and applied to the open logs.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from ..log.config import LogConfig
from ..log.manager import LogManager
from ..log.naming import log_delete_dir_name, log_dir_name

__all__ = ["delete_topic", "topic_overrides", "update_topic_configs"]


def topic_overrides(manager: LogManager, topic: str) -> dict[str, str]:
    """The topic's explicitly set configs, as strings."""
    return manager.config_for(topic).as_strings()


def update_topic_configs(manager: LogManager, topic: str, configs: Mapping[str, str]) -> None:
    """Replace the topic's overrides (validated first) and apply them to its open logs."""
    new = LogConfig(configs)
    manager._topic_configs[topic] = {str(k): str(v) for k, v in configs.items()}
    manager._write_topics_file()
    for tp, partition_log in manager.logs.items():
        if tp.topic == topic:
            partition_log.config = new


def delete_topic(manager: LogManager, topic: str) -> int:
    """Close and remove every partition of ``topic``; the number of partitions removed."""
    removed = 0
    for tp in [tp for tp in manager.logs if tp.topic == topic]:
        partition_log = manager.logs.pop(tp)
        directory = manager.log_dir_of.pop(tp)
        partition_log.close()
        live = directory / log_dir_name(tp)
        doomed = directory / log_delete_dir_name(tp)
        live.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        removed += 1
    manager._topic_configs.pop(topic, None)
    manager._topic_ids.pop(topic, None)
    manager._write_topics_file()
    manager.checkpoint()
    return removed
