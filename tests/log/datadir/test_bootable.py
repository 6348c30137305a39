"""make_bootable (kafkalog.log.datadir.bootable) and ``kafkalog make-bootable``, without a broker:
the files written, decoded with kafkalog's own metadata decoder, and their structure.

tests/apache_kafka/test_kafka_boots_ours.py starts a real Kafka node on such directories; here
the FeatureLevelRecord bytes are compared with the ones Kafka 4.4's ``kafka-storage format
--release-version`` wrote (copied below as hex), the rest by decoding.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from kafkalog.cli.main import main
from kafkalog.errors import KafkalogError
from kafkalog.format.builder import MemoryRecordsBuilder
from kafkalog.format.constants import ControlRecordType
from kafkalog.format.control import decode_control_type
from kafkalog.format.internal import decode_metadata_record
from kafkalog.format.internal.control import decode_control_value
from kafkalog.log.datadir.bootable import (
    BOOTSTRAP_SNAPSHOT_NAME,
    MAX_BATCH_RECORDS,
    RELEASES,
    TopicBootstrap,
    bootstrap_records,
    encode_bootstrap_snapshot,
    make_bootable,
)
from kafkalog.log.datadir.checkpoints import (
    EpochEntry,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
)
from kafkalog.log.datadir.cluster_metadata import load_metadata_image
from kafkalog.log.datadir.kafka_uuid import uuid_from_kafka_string
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.meta_properties import read_meta_properties
from kafkalog.log.datadir.naming import TopicPartition
from kafkalog.log.datadir.partition_metadata import (
    read_partition_metadata,
    write_partition_metadata,
)
from kafkalog.log.segment.file_records import FileRecords

T0 = 1_767_225_600_000
# Producer state expires a day after a producer's last batch: the idempotent batches are recent.
NOW = (time.time_ns() // 1_000_000 // 1000) * 1000 - 3_600_000

# The record values of the data batch of what Kafka 4.4.0's `kafka-storage format
# --release-version 4.0` and `... 4.4` wrote (and 4.2.2's own format, for 4.2).
KAFKA_FEATURES = {
    "4.0": [
        "010c00116d657461646174612e76657273696f6e001900",
        "010c000e67726f75702e76657273696f6e000100",
        "010c00147472616e73616374696f6e2e76657273696f6e000200",
    ],
    "4.2": [
        "010c00116d657461646174612e76657273696f6e001d00",
        "010c0021656c696769626c652e6c65616465722e7265706c696361732e76657273696f6e000100",
        "010c000e67726f75702e76657273696f6e000100",
        "010c000e73686172652e76657273696f6e000100",
        "010c001073747265616d732e76657273696f6e000100",
        "010c00147472616e73616374696f6e2e76657273696f6e000200",
    ],
    "4.4": [
        "010c00116d657461646174612e76657273696f6e002100",
        "010c0021656c696769626c652e6c65616465722e7265706c696361732e76657273696f6e000100",
        "010c000e67726f75702e76657273696f6e000100",
        "010c000e73686172652e76657273696f6e000200",
        "010c001073747265616d732e76657273696f6e000100",
        "010c00147472616e73616374696f6e2e76657273696f6e000200",
    ],
}


def write_dir(root: Path, *, producer_id: int = 7) -> None:
    """Three topics: two partitions with records (one from an idempotent producer), a topic
    with a config, and one whose partition 1 is missing (0 and 2 written)."""
    with LogManager(root, writable=True, create=True) as logs:
        logs.create_topic("orders", 2)
        logs.create_topic("compacted", 1, {"cleanup.policy": "compact", "retention.ms": "-1"})
        for p, n in ((0, 3), (1, 2)):
            builder = MemoryRecordsBuilder(
                producer_id=producer_id, producer_epoch=0, base_sequence=0
            )
            for i in range(n):
                builder.append(timestamp=NOW + i, key=b"k%d" % i, value=b"v")
            logs.get_log(TopicPartition("orders", p)).append_as_leader(builder.build())
        for p in (0, 2):
            log = logs.get_or_create_log(TopicPartition("gappy", p))
            builder = MemoryRecordsBuilder()
            builder.append(timestamp=T0, value=b"x")
            log.append_as_leader(builder.build())


def read_bootstrap(path: Path) -> tuple[list, list[tuple[str, dict]]]:
    """(batches, [(kind, data)] of the data records) of a bootstrap file."""
    with FileRecords(str(path)) as records:
        batches = list(records.batches())
        decoded = []
        for batch in batches:
            if batch.is_control:
                continue
            for r in batch.records():
                d = decode_metadata_record(bytes(r.value))
                assert d.error is None and d.data is not None, d
                decoded.append((d.kind, d.version, d.data))
    return batches, decoded


def control_kinds(batch) -> list[tuple[int, dict]]:
    return [
        (
            decode_control_type(bytes(r.key)),
            decode_control_value(decode_control_type(bytes(r.key)), bytes(r.value)),
        )
        for r in batch.records()
    ]


def test_files_written_for_release_4_0(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    before = read_meta_properties(root / "meta.properties")
    result = make_bootable(root, node_id=5, now_ms=T0)

    meta = read_meta_properties(root / "meta.properties")
    assert (meta.version, meta.node_id) == (1, 5)
    assert meta.cluster_id == before.cluster_id == result.cluster_id  # kafkalog's, kept
    assert meta.directory_id == before.directory_id == result.directory_id
    uuid_from_kafka_string(meta.cluster_id)

    path = root / "bootstrap.checkpoint"
    assert result.bootstrap_file == path
    assert not (root / "__cluster_metadata-0").exists()
    batches, records = read_bootstrap(path)
    # Header, one data batch, footer; offsets 0..n+1; leader epoch 0, no producer.
    assert [b.is_control for b in batches] == [True, False, True]
    assert [b.base_offset for b in batches] == [0, 1, 1 + len(records)]
    assert all(b.partition_leader_epoch == 0 and b.producer_id == -1 for b in batches)
    (header_type, header), = control_kinds(batches[0])  # fmt: skip
    assert header_type == ControlRecordType.SNAPSHOT_HEADER
    assert header.data == {"version": 0, "lastContainedLogTimestamp": 0}
    assert [t for t, _ in control_kinds(batches[-1])] == [ControlRecordType.SNAPSHOT_FOOTER]

    kinds = [k for k, _, _ in records]
    assert kinds[:3] == ["FeatureLevel"] * 3
    assert records[0][2] == {"name": "metadata.version", "featureLevel": 25}
    assert kinds[3] == "ProducerIds"
    assert records[3][2]["nextProducerId"] == 8 and records[3][2]["brokerId"] == 5
    topics = {d["name"]: d["topicId"] for k, _, d in records if k == "Topic"}
    assert sorted(topics) == ["compacted", "gappy", "orders"]
    for name, topic_id in topics.items():
        for p in range(result.topics[name].partitions.__len__()):
            pm = read_partition_metadata(root / f"{name}-{p}" / "partition.metadata")
            assert pm.topic_id == topic_id
    parts = [(v, d) for k, v, d in records if k == "Partition"]
    assert len(parts) == 2 + 1 + 3
    for version, d in parts:
        assert version == 2
        # No leader: the controller elects the node as it unfences it (see the next test).
        assert d["replicas"] == d["isr"] == [5] and d["leader"] == -1
        assert d["leaderEpoch"] == 0 and d["partitionEpoch"] == 0
        assert d["directories"] == [meta.directory_id]
        assert d["removingReplicas"] == d["addingReplicas"] == []
    configs = {(d["resourceName"], d["name"]): d["value"] for k, _, d in records if k == "Config"}
    assert configs == {
        ("compacted", "cleanup.policy"): "compact",
        ("compacted", "retention.ms"): "-1",
    }
    # Each topic's records: TopicRecord, its configs, its partitions in order.
    i = kinds.index("Topic", 4)
    assert [k for k in kinds[i : i + 4]] == ["Topic", "Config", "Config", "Partition"]

    # The gap (gappy-1) was created empty, with the topic's id.
    assert result.created_partitions == [TopicPartition("gappy", 1)]
    assert (
        read_partition_metadata(root / "gappy-1" / "partition.metadata").topic_id == topics["gappy"]
    )
    # High watermarks at the log end offsets; the clean-shutdown marker is back.
    hw = read_offset_checkpoint(root / "replication-offset-checkpoint")
    assert hw == {
        TopicPartition("orders", 0): 3, TopicPartition("orders", 1): 2,
        TopicPartition("compacted", 0): 0, TopicPartition("gappy", 0): 1,
        TopicPartition("gappy", 1): 0, TopicPartition("gappy", 2): 1,
    }  # fmt: skip
    assert (root / ".kafka_cleanshutdown").exists()


@pytest.mark.parametrize("release", sorted(KAFKA_FEATURES))
def test_feature_records_are_kafkas_bytes(release):
    values = bootstrap_records(RELEASES[release], [], node_id=1, directory_id=uuid.uuid4())
    assert [v.hex() for v in values] == KAFKA_FEATURES[release]


@pytest.mark.parametrize(
    ("release", "leader"),
    [("3.9", 1), ("4.0", -1), ("4.1", 1), ("4.2", 1), ("4.3", 1), ("4.4", 1)],
)
def test_bootstrap_leader_per_release(release, leader):
    """Release 4.0 (no ELR) bootstraps its partitions leaderless: every Kafka 4.x controller
    takes the leadership from a registering broker (ReplicationControlManager
    .handleBrokerShutdown), so naming the node only adds a leader change. Kafka 3.9 keeps it,
    and with ELR (4.1+) a leaderless partition would never be elected (bootable's docstring)."""
    topic = TopicBootstrap("t", uuid.uuid4(), partitions={0: 3})
    values = bootstrap_records(RELEASES[release], [topic], node_id=1, directory_id=uuid.uuid4())
    parts = [d.data for d in map(decode_metadata_record, values) if d.kind == "Partition"]
    assert len(parts) == 1
    assert parts[0]["leader"] == leader and parts[0]["isr"] == parts[0]["replicas"] == [1]
    assert (parts[0]["leaderEpoch"], parts[0]["partitionEpoch"]) == (3, 0)


def test_release_4_4_writes_the_bootstrap_snapshot(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    make_bootable(root, node_id=1)  # 4.0 first: bootstrap.checkpoint
    assert (root / "bootstrap.checkpoint").exists()
    result = make_bootable(root, release_version="4.4.0", now_ms=T0)
    snapshot = root / "__cluster_metadata-0" / BOOTSTRAP_SNAPSHOT_NAME
    assert result.bootstrap_file == snapshot and snapshot.exists()
    assert not (root / "bootstrap.checkpoint").exists()  # one bootstrap only
    batches, records = read_bootstrap(snapshot)
    header = control_kinds(batches[0])[0][1]
    assert header.data["lastContainedLogTimestamp"] == T0
    assert records[0][2] == {"name": "metadata.version", "featureLevel": 33}
    # kafkalog's own metadata reader sees the topics in it.
    image = load_metadata_image(str(root))
    assert {t: sorted(i.partitions) for t, i in image.topics.items()} == {
        "compacted": [0], "gappy": [0, 1, 2], "orders": [0, 1],
    }  # fmt: skip
    assert image.topics["compacted"].configs == {"cleanup.policy": "compact", "retention.ms": "-1"}
    # Back to 4.0: the snapshot (and the directory it alone was in) go.
    make_bootable(root)
    assert (root / "bootstrap.checkpoint").exists()
    assert not (root / "__cluster_metadata-0").exists()


def test_rerun_is_idempotent_and_keeps_ids(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    first = make_bootable(root, node_id=2, now_ms=T0)
    data = first.bootstrap_file.read_bytes()
    again = make_bootable(root, now_ms=T0)  # node id from meta.properties now
    assert again.node_id == 2 and again.cluster_id == first.cluster_id
    assert again.bootstrap_file.read_bytes() == data
    assert again.created_partitions == []


def test_leader_epoch_and_missing_partition_metadata(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    write_leader_epoch_checkpoint(
        root / "orders-1" / "leader-epoch-checkpoint", [EpochEntry(epoch=4, start_offset=0)]
    )
    (root / "orders-0" / "partition.metadata").unlink()
    result = make_bootable(root, node_id=1)
    assert result.topics["orders"].partitions == {0: 0, 1: 4}
    assert result.written_partition_metadata == [TopicPartition("orders", 0)]
    ids = {
        read_partition_metadata(root / f"orders-{p}" / "partition.metadata").topic_id
        for p in (0, 1)
    }
    assert ids == {result.topics["orders"].topic_id}


def test_cluster_id_and_generated_meta_properties(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    (root / "meta.properties").unlink()
    result = make_bootable(root, cluster_id="MkU3OEVBNTcwNTJENDM2Qg")
    meta = read_meta_properties(root / "meta.properties")
    assert (meta.node_id, meta.cluster_id) == (1, "MkU3OEVBNTcwNTJENDM2Qg")
    assert meta.directory_id == result.directory_id and meta.directory_id.int >> 64 != 0
    with pytest.raises(ValueError, match="not a Kafka Uuid"):
        make_bootable(root, cluster_id="not-a-uuid")
    with pytest.raises(ValueError, match="unknown release"):
        make_bootable(root, release_version="2.8")


def test_no_producers_no_producer_ids_record(tmp_path):
    root = tmp_path / "data"
    with LogManager(root, writable=True, create=True) as logs:
        logs.create_topic("plain", 1)
    make_bootable(root)
    _, records = read_bootstrap(root / "bootstrap.checkpoint")
    assert [k for k, _, _ in records] == ["FeatureLevel"] * 3 + ["Topic", "Partition"]


def test_refuses_a_directory_a_broker_ran_on(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    (root / "__cluster_metadata-0").mkdir()
    (root / "__cluster_metadata-0" / "quorum-state").write_text("{}")
    with pytest.raises(KafkalogError, match="a broker has run on this directory"):
        make_bootable(root)


def test_refuses_partitions_of_one_topic_with_different_ids(tmp_path):
    root = tmp_path / "data"
    write_dir(root)
    write_partition_metadata(root / "orders-1" / "partition.metadata", uuid.uuid4())
    with pytest.raises(KafkalogError, match="different topic ids"):
        make_bootable(root)


def test_large_bootstraps_split_into_batches(tmp_path):
    values = [b"\x01\x0c\x00" + bytes(20)] * (2 * MAX_BATCH_RECORDS + 5)
    path = tmp_path / "bootstrap.checkpoint"
    path.write_bytes(encode_bootstrap_snapshot(values, now_ms=T0))
    with FileRecords(str(path)) as records:
        batches = [(b.base_offset, b.last_offset, b.is_control) for b in records.batches()]
    assert batches == [
        (0, 0, True), (1, 1000, False), (1001, 2000, False), (2001, 2005, False),
        (2006, 2006, True),
    ]  # fmt: skip


def test_cli(tmp_path, capsys):
    root = tmp_path / "data"
    write_dir(root)
    assert main(["make-bootable", str(root), "--node-id", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodeId"] == 4 and out["metadataVersion"] == "4.0-IV3"
    assert out["topics"]["gappy"]["partitions"] == 3 and out["createdPartitions"] == ["gappy-1"]
    assert out["nextProducerId"] == 8
    assert main(["make-bootable", str(root)]) == 0
    text = capsys.readouterr().out
    assert "node.id=4" in text and "controller.quorum.voters=4@HOST:PORT" in text
    assert main(["make-bootable", str(root), "--cluster-id", "nope"]) == 2
    assert main(["make-bootable", str(root), "--release-version", "9.9"]) == 2
    (root / "__cluster_metadata-0").mkdir(exist_ok=True)
    (root / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"x")
    assert main(["make-bootable", str(root)]) == 1
    assert "holds a KRaft metadata log" in capsys.readouterr().err
