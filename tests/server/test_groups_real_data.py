"""The group coordinator takes over ``__consumer_offsets`` written by real Kafka brokers.

A copy of each fixture data directory is opened as the server would (writable, recovered), the
coordinator loads it, and every group's committed offsets must be the last ones the broker
wrote, as read independently with kafka-python's record reader and ``struct`` over the key and
value layouts of Kafka's OffsetCommitKey/Value (the value's offset is the first field at every
version).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.server.coordinator_log import CoordinatorLog
from kafkalog.server.groups.coordinator import GroupCoordinator
from kafkalog.server.groups.load import load_groups
from kafkalog.server.groups.offsets import GroupOffsets
from shared_fixtures import KAFKA_DATA, PRESENT, REASON

from .coordination_helpers import FakeBroker, ctx

DIRS = ["KAIPASUBHASH+kafka-logs", "seanorth+kafka-server", "VolodymyrZee+kafka",
        "Niloufar1171+LDI-POC", "aviramcohenwork+Pizza-Project-MS",
        "mscaldas2012+kafka-connect-spooldir"]  # fmt: skip

if not PRESENT:
    pytest.skip(REASON, allow_module_level=True)

from kafka.record import MemoryRecords  # noqa: E402


def writable_copy(source: Path, target: Path) -> None:
    """The fixtures are read-only; the server opens its directory writable."""
    for root, _, files in os.walk(source):
        out = target / Path(root).relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copyfile(Path(root) / name, out / name)


def _str16(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def expected_offsets(data_dir: Path) -> tuple[dict, set[str]]:
    """Last committed offset per (group, topic, partition), and the groups a coordinator holds
    after replaying: those with live metadata, and those an offset commit created after their
    last metadata tombstone (Kafka's OffsetMetadataManager.replay recreates such "simple" groups;
    only a group tombstone removes them)."""
    offsets, groups = {}, {}
    for part in sorted(data_dir.glob("__consumer_offsets-*")):
        for log in sorted(part.glob("*.log")):
            batches = MemoryRecords(log.read_bytes())
            while (batch := batches.next_batch()) is not None:
                if getattr(batch, "is_control_batch", False):
                    continue
                for record in batch:
                    key = bytes(record.key)
                    (kind,) = struct.unpack_from(">h", key)
                    group, pos = _str16(key, 2)
                    if kind in (0, 1):
                        topic, pos = _str16(key, pos)
                        (partition,) = struct.unpack_from(">i", key, pos)
                        if record.value is None:
                            offsets.pop((group, topic, partition), None)
                        else:
                            if not groups.get(group):
                                groups[group] = True
                            value = bytes(record.value)
                            offsets[(group, topic, partition)] = struct.unpack_from(">q", value, 2)[
                                0
                            ]
                    elif kind == 2:
                        groups[group] = record.value is not None
    return offsets, {g for g, live in groups.items() if live}


@pytest.mark.parametrize("name", DIRS)
def test_coordinator_loads_what_a_real_broker_committed(tmp_path, name):
    source = KAFKA_DATA / name
    if not source.is_dir():
        pytest.skip(f"fixture {name} absent")
    writable_copy(source, tmp_path)
    want_offsets, want_groups = expected_offsets(tmp_path)
    assert want_offsets, "the fixture holds committed offsets"
    broker = FakeBroker(tmp_path)
    try:
        partitions = max(broker.log_manager.topics()["__consumer_offsets"]) + 1
        coordinator = GroupCoordinator(
            CoordinatorLog(broker, "__consumer_offsets", partitions), broker.clock
        )
        offsets = GroupOffsets(coordinator)
        load_groups(offsets)
        got = {(g, t, p): v.offset for g, by_tp in offsets.store.offsets.items()
               for (t, p), v in by_tp.items()}  # fmt: skip
        assert got == want_offsets
        assert set(coordinator.groups) == want_groups

        async def fetch_all():
            for group in {g for g, _, _ in want_offsets}:
                response = await offsets.offset_fetch(
                    ctx(9, 7), {"group_id": group, "topics": None, "require_stable": True}
                )
                fetched = {(group, t["name"], p["partition_index"]): p["committed_offset"]
                           for t in response["topics"] for p in t["partitions"]}  # fmt: skip
                assert fetched == {k: v for k, v in want_offsets.items() if k[0] == group}

        asyncio.run(fetch_all())
    finally:
        broker.log_manager.close()
