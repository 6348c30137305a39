"""Topic configs (Kafka's names, defaults and ranges) and the KRaft metadata image.

The metadata image is checked against what the same brokers wrote elsewhere on disk: each
partition directory's partition.metadata (its topic id) and the directory names themselves.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

import pytest

from kafkalog.format import CompressionType, TimestampType
from kafkalog.log.datadir.cluster_metadata import load_metadata_image
from kafkalog.log.partition.config import ConfigError, LogConfig
from shared_fixtures import KAFKA_DATA, PRESENT, requires_shared_fixtures


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c["segment.bytes"] == 1073741824
    assert c["segment.ms"] == 604800000
    assert c["retention.ms"] == 604800000
    assert c["retention.bytes"] == -1
    assert c["delete.retention.ms"] == 86400000
    assert c["min.cleanable.dirty.ratio"] == 0.5
    assert c["segment.index.bytes"] == 10485760
    assert c["index.interval.bytes"] == 4096
    assert c["max.message.bytes"] == 1048588
    assert c["file.delete.delay.ms"] == 60000
    assert c["message.timestamp.after.max.ms"] == 3600000
    assert c.timestamp_type == TimestampType.CREATE_TIME
    assert c.compression is None  # "producer"
    assert c.delete and not c.compact
    assert c.overrides == {}


def test_string_values_are_parsed_and_typed() -> None:
    c = LogConfig(
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": "-1",
            "compression.type": "zstd",
            "preallocate": "true",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert c.compact and c.delete
    assert c["retention.ms"] == -1 and c["preallocate"] is True
    assert c.compression == CompressionType.ZSTD and c.compression_level == 3
    assert c.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert c.as_strings()["cleanup.policy"] == "compact,delete"


def test_a_segment_size_kafka_3_stored_is_read_though_4_0_raised_the_minimum():
    """Kafka 3.x takes segment.bytes down to 14 and 4.0 refuses below 1 MiB: what a 3.x broker
    stored in its metadata log is still read (its data directory must open), what a user asks
    for now is held to 4.x's minimum."""
    assert LogConfig({"segment.bytes": "1024"}, stored=True).segment_size == 1024
    with pytest.raises(ConfigError, match="at least 14"):
        LogConfig({"segment.bytes": "13"}, stored=True)
    with pytest.raises(ConfigError, match="at least 1048576"):
        LogConfig({"segment.bytes": "1024"})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "1000", "at least 1048576"),
        ("retention.ms", "-2", "at least -1"),
        ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
        ("cleanup.policy", "compact,forever", "one of"),
        ("compression.type", "brotli", "one of"),
        ("preallocate", "yes", "boolean"),
        ("segment.ms", "soon", "long"),
        ("no.such.config", "1", "Unknown topic config name"),
    ],
)
def test_bad_configs_name_the_config_and_the_rule(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig({name: value})
    assert message in str(info.value)


def test_internal_segment_bytes_lifts_the_minimum_for_tests() -> None:
    assert LogConfig({"internal.segment.bytes": 4096}).segment_size == 4096


def kraft_dirs() -> list[Path]:
    if not PRESENT:
        return []
    return sorted(p for p in KAFKA_DATA.iterdir() if (p / "__cluster_metadata-0").is_dir())


@requires_shared_fixtures
@pytest.mark.parametrize("data_dir", kraft_dirs(), ids=lambda p: p.name)
def test_metadata_image_agrees_with_partition_dirs(data_dir: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in data_dir.rglob("*")}
    image = load_metadata_image(str(data_dir))
    assert image is not None and image.problems == []
    checked = 0
    for part_dir in data_dir.iterdir():
        meta = part_dir / "partition.metadata"
        if part_dir.name.startswith("__cluster_metadata") or not meta.is_file():
            continue
        topic, _, partition = part_dir.name.rpartition("-")
        fields = dict(line.split(": ", 1) for line in meta.read_text().splitlines())
        raw = fields["topic_id"]
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        found = image.topics.get(topic)
        if found is None:
            # Allowed only when the metadata log that created the topic is missing.
            continue
        assert found.topic_id == topic_id, part_dir.name
        assert int(partition) in found.partitions, part_dir.name
        checked += 1
    assert checked > 0 or not image.topics
    assert {p: p.stat().st_mtime_ns for p in data_dir.rglob("*")} == before


def test_no_metadata_log_gives_none(tmp_path: Path) -> None:
    os.mkdir(tmp_path / "orders-0")
    assert load_metadata_image(str(tmp_path)) is None
