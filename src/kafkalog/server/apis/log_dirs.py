"""DescribeLogDirs: this node's data directories and the partitions in each, as Kafka's
ReplicaManager.describeLogDirs answers (``kafka-log-dirs.sh --describe``, the Admin's
``describeLogDirs``).

Per data directory: its absolute path, the size and free space of its volume (TotalBytes and
UsableBytes, v4+: the file system's blocks and those available to this user, as Java's FileStore
counts them), and the partitions asked for (all of them, internal topics included, for a null
topic list) that it holds, grouped by topic. A partition's size is Kafka's ``UnifiedLog.size``:
the bytes of its segments' ``.log`` files, indexes not counted; its offset lag is the high
watermark less the log end offset, 0 with a single replica, and no log is a future one (there is
no AlterReplicaLogDirs). A partition asked for that no directory holds is left out, as are topics
left with no partition. A directory that cannot be read is KAFKA_STORAGE_ERROR with its path.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ...protocol import ApiKey
from .. import error_codes as ec
from ..handlers import Handler, RequestContext

if TYPE_CHECKING:
    from pathlib import Path

    from ..broker import Broker

__all__ = ["describe_log_dirs", "handlers"]

log = logging.getLogger("kafkalog.server")


def _volume(directory: Path) -> tuple[int, int]:
    """Total and usable bytes of the volume holding ``directory`` (FileStore.getTotalSpace and
    getUsableSpace: statvfs' blocks and blocks available to unprivileged users)."""
    st = os.statvfs(directory)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _topics(broker: Broker, directory: Path, wanted: set[tuple[str, int]] | None) -> list[dict]:
    """The partitions asked for that ``directory`` holds, grouped by topic."""
    manager = broker.log_manager
    topics: dict[str, list[dict]] = {}
    for tp in sorted(manager.logs, key=lambda t: (t.topic, t.partition)):
        if manager.log_dir_of.get(tp) != directory:
            continue
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        partition_log = manager.logs[tp]
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition,
            "partition_size": partition_log.size_in_bytes(),
            "offset_lag": max(partition_log.high_watermark - partition_log.log_end_offset, 0),
            "is_future_key": False,
        })  # fmt: skip
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


def describe_log_dirs(broker: Broker, request: dict) -> dict:
    """The response body for ``request["topics"]`` (None: every partition)."""
    wanted = None
    if request["topics"] is not None:
        wanted = {(t["topic"], p) for t in request["topics"] for p in t["partitions"]}
    results = []
    for directory in broker.log_manager.data_dirs:
        path = os.path.abspath(directory)
        try:
            total, usable = _volume(directory)
            topics = _topics(broker, directory, wanted)
        except OSError as e:
            log.warning("Unable to describe replica dirs for %s: %s", path, e)
            results.append({"error_code": ec.KAFKA_STORAGE_ERROR, "log_dir": path})
            continue
        results.append({"error_code": ec.NONE, "log_dir": path, "topics": topics,
                        "total_bytes": total, "usable_bytes": usable})  # fmt: skip
    return {"error_code": ec.NONE, "results": results}


def handlers(broker: Broker) -> dict[int, Handler]:
    async def describe_log_dirs_handler(ctx: RequestContext, request: dict) -> dict:
        return describe_log_dirs(broker, request)

    return {ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs_handler}
