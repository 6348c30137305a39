"""Real brokers' data directories (../shared/fixtures) served to kafka-python: every partition of
every user topic yields the records EXPECTED.json counts in its segments, from the log start
offset the directory's checkpoint gives (records below it were deleted, as Kafka's DeleteRecords
leaves them). Directories are copied first: serving opens them writable. Expected values come from
EXPECTED.json and the fixtures' own checkpoint files, never from kafkalog."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig
from shared_fixtures import FIXTURES, KAFKA_DATA, PRESENT, REASON

if not PRESENT:
    pytest.skip(REASON, allow_module_level=True)
kafka = pytest.importorskip("kafka")

pytestmark = pytest.mark.slow

LOGS: dict[str, dict] = json.loads((FIXTURES / "EXPECTED.json").read_text())["logs"]
# KRaft with transactions, start offsets moved by DeleteRecords; snappy (xerial); lz4 with
# LogAppendTime; magic 1 message sets; a Kafka 0.11 directory.
DIRS = [
    "Danielowo2000+BigDataTechnologies-Version-2",
    "seanorth+kafka-server",
    "mscaldas2012+kafka-connect-spooldir",
    "xpxwo100+bullShit",
    "SharaWeil+kafka-0.11.0",
]


def start_offsets(directory: Path) -> dict[str, int]:
    path = directory / "log-start-offset-checkpoint"
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()[2:]
    return {f"{t}-{p}": int(o) for t, p, o in (line.rsplit(" ", 2) for line in lines)}


def expected_counts(name: str) -> dict[str, int]:
    """Visible data records per user partition, where EXPECTED.json pins the number down."""
    starts = start_offsets(KAFKA_DATA / name)
    per_partition: dict[str, list[dict]] = {}
    for key, entry in LOGS.items():
        parts = key.split("/")
        if len(parts) != 3:  # files at a directory's root (bootstrap.checkpoint)
            continue
        directory, partition, file = parts
        if directory == name and entry["kind"] == "log" and file.endswith(".log"):
            if not partition.startswith("__"):
                per_partition.setdefault(partition, []).append(entry)
    counts = {}
    for partition, entries in per_partition.items():
        records = sum(e["records"] - sum(e["control_record_types"].values()) for e in entries)
        start = starts.get(partition, 0)
        if start > 0:
            # Records below the start offset are gone; count them only where offsets are dense.
            (entry,) = entries
            dense = entry["records"] == entry["last_offset"] - entry["first_offset"] + 1
            if not dense or entry["control_batches"]:
                continue
            records = entry["last_offset"] + 1 - max(start, entry["first_offset"])
        if records:
            counts[partition] = records
    return counts


@pytest.mark.parametrize("name", DIRS)
def test_a_real_brokers_directory_is_served_record_for_record(tmp_path, name):
    expected = expected_counts(name)
    assert expected
    data = tmp_path / "data"
    shutil.copytree(KAFKA_DATA / name, data, symlinks=True)
    config = ServerConfig([data], port=0)
    with BackgroundServer(config) as server:
        consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap,
                                       consumer_timeout_ms=3000)  # fmt: skip
        partitions = [kafka.TopicPartition(t, int(p))
                      for t, _, p in (k.rpartition("-") for k in expected)]  # fmt: skip
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        got: dict[str, int] = {}
        for message in consumer:
            key = f"{message.topic}-{message.partition}"
            got[key] = got.get(key, 0) + 1
            if got == expected:
                break
        consumer.close()
    assert got == expected
