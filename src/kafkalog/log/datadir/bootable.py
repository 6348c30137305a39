"""Make a data directory kafkalog wrote bootable by a new single-node KRaft broker.

A KRaft broker serves only the partitions its cluster metadata names: at start-up it renames
every partition directory whose topic id (``partition.metadata``) is not in the metadata image,
or whose replicas do not include the node, as a stray. A data directory written offline (``kafkalog
produce``, the Spark writer) has partitions but no metadata, so this module writes what
``kafka-storage format`` writes, plus the topics:

- ``meta.properties`` version 1: ``node.id``, ``cluster.id``, ``directory.id`` (kept if there).
- The bootstrap records, the file ``kafka-storage format`` of the chosen release writes them to:
  ``<dir>/bootstrap.checkpoint`` (Kafka 3.x to 4.3; Kafka 4.4 still reads it when there is no
  bootstrap snapshot) or ``<dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``
  (Kafka 4.4, the KRaft bootstrap snapshot). On its first activation, with an empty metadata
  log, the controller appends every bootstrap record to the metadata log in one metadata
  transaction and replays them (QuorumController / ActivationRecordsGenerator.recordsForEmptyLog:
  Kafka checks only that a metadata.version FeatureLevelRecord is among them; ``kafka-storage
  format --add-scram`` puts SCRAM credentials there the same way). Besides the FeatureLevelRecords
  of the release's defaults (the same bytes its ``kafka-storage format`` writes), they hold one
  TopicRecord per topic (its id: the one in ``partition.metadata``), its ConfigRecords, one
  PartitionRecord per partition (replicas = ISR = [node], leader = -1 for release 4.0 and the
  node for the others (below), leader epoch = the newest in its ``leader-epoch-checkpoint``,
  partition epoch 0, directories = [this directory's id]), and a
  ProducerIdsRecord above every producer id the logs remember, so that the controller never
  hands a producer an id kafkalog's producers used.
- ``replication-offset-checkpoint``: each partition's high watermark at its log end offset, as a
  cleanly stopped single-node broker leaves it; the logs' own checkpoints and the clean-shutdown
  marker are written by closing the :class:`LogManager`.

Leaders at the first start. Kafka creates a topic after its broker registered and unfenced, so
its PartitionRecord (leader = node, epoch 0) is never changed. A bootstrapped node's partitions
exist before it registers, and every Kafka 4.x controller takes them from it then:
ClusterControlManager.registerBroker hands every new incarnation (a random id per process) to
ReplicationControlManager.handleBrokerShutdown (KAFKA-18106, in every 4.x release), which runs
generateLeaderAndIsrUpdates over BrokersToIsrs.partitionsWithBrokerInIsr(node) with the node not
an acceptable leader (brokerToRemove; brokerWithUncleanShutdown when ELR is enabled and the
registration's previousBrokerEpoch is not the stored registration's epoch, -2 for none). The
broker publishes its first metadata image only once caught up past that registration, so it
never leads from the bootstrap image; only a node outside the ISR escapes, and a leader outside
its ISR fails every acks=all produce (NOT_ENOUGH_REPLICAS). What is left to choose:

- leader = node (releases 3.9 and 4.1 to 4.4): the registration moves each partition to epoch
  +1 with no leader, the unfencing (handleBrokerUnfenced, partitionsWithNoLeader) to epoch +2
  with the node: two leader changes, and a coordinator load begun at the bootstrap epoch may be
  cut short (ERROR 'Failed to load metadata ... with epoch 0'). With ELR (4.1+) the first
  registration counts as unclean: ISR [] and lastKnownElr [node], then an UNCLEAN election of
  the last known leader (leaderRecoveryState RECOVERING). Kafka 3.9 itself leaves them alone
  (its handleBrokerUncleanShutdown returns below metadata.version 4.0-IV0): no change at all.
- leader = -1 (release 4.0, the default): the registration changes nothing (no leader to
  remove; without ELR the last ISR member stays), the first image has the node a replica with
  no leader (the coordinators log an ignored unload), and the unfencing elects it at epoch +1:
  one leader change, as at any restart of a single-node Kafka, and no load cut short. With ELR
  enabled this would never elect: the unclean registration empties the ISR and records
  lastKnownElr [-1], so the election at unfencing has no candidate.

The quorum is static (``controller.quorum.voters=<node>@host:port`` in the broker's config):
``kraft.version`` 0 writes no voter records, so no listener name, host or port is in the files.

File layout of both bootstrap files (a KRaft snapshot, RecordsSnapshotWriter)::

    batch  baseOffset 0       control: SnapshotHeaderRecord  key i16 0 | i16 3,
                                       value {version i16 0, lastContainedLogTimestamp i64} + 0 tags
    batch  baseOffset 1..     data: metadata record values, keys null (below), each batch at most
                              ``MAX_BATCH_RECORDS`` records and about ``MAX_BATCH_BYTES`` bytes
    batch  baseOffset n+1     control: SnapshotFooterRecord  key i16 0 | i16 4,
                                       value {version i16 0} + 0 tags

Every batch: magic 2, no compression, CreateTime (now), partitionLeaderEpoch 0, no producer.

A metadata record value (MetadataRecordSerde)::

    uvarint frameVersion (1) | uvarint apiKey | uvarint version | message (flexible versions)

    FeatureLevelRecord  apiKey 12 v0  name compact-string | featureLevel i16 | tags
    TopicRecord         apiKey 2  v0  name compact-string | topicId uuid | tags
    ConfigRecord        apiKey 4  v0  resourceType i8 (2 topic) | resourceName | name |
                                      value (compact nullable string) | tags
    PartitionRecord     apiKey 3  v1 (MV < 4.0) or v2 (MV.isElrSupported, every 4.x release)
                                      partitionId i32 | topicId uuid | replicas []i32 | isr []i32 |
                                      removingReplicas []i32 | addingReplicas []i32 | leader i32 |
                                      leaderEpoch i32 | partitionEpoch i32 | directories []uuid |
                                      tags (leaderRecoveryState, ELR fields: at their defaults)
    ProducerIdsRecord   apiKey 15 v0  brokerId i32 | brokerEpoch i64 | nextProducerId i64 | tags

The message bodies are written by :func:`..format.message.write_message` from the
schemas kafkalog reads them with; only the frame is added here.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import KafkalogError
from ...format.builder import MemoryRecordsBuilder
from ...format.constants import ControlRecordType
from ...format.control import encode_control_key
from ...format.internal.control import SNAPSHOT_FOOTER_RECORD, SNAPSHOT_HEADER_RECORD
from ...format.internal.metadata import metadata_record_schema
from ...format.message import Message, write_message
from ...format.varint import encode_unsigned_varint
from .checkpoints import (
    REPLICATION_OFFSET_CHECKPOINT,
    write_file_atomically,
    write_offset_checkpoint,
)
from .cluster_metadata import CLUSTER_METADATA_DIR
from .kafka_uuid import ZERO_UUID, uuid_from_kafka_string, uuid_to_kafka_string
from .manager import PRODUCER_IDS_FILE_NAME, LogManager
from .meta_properties import (
    META_PROPERTIES_FILE_NAME,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from .naming import TopicPartition, log_dir_name
from .partition_metadata import (
    PARTITION_METADATA_FILE_NAME,
    read_partition_metadata,
    write_partition_metadata,
)

__all__ = [
    "BOOTSTRAP_FILE_NAME",
    "BOOTSTRAP_SNAPSHOT_NAME",
    "DEFAULT_RELEASE",
    "RELEASES",
    "BootableResult",
    "Release",
    "bootstrap_records",
    "encode_bootstrap_snapshot",
    "encode_metadata_record",
    "make_bootable",
]

BOOTSTRAP_FILE_NAME = "bootstrap.checkpoint"  # BootstrapMetadata.BINARY_BOOTSTRAP_FILENAME
BOOTSTRAP_SNAPSHOT_NAME = "00000000000000000000-0000000000.checkpoint"  # Snapshots.BOOTSTRAP_...
METADATA_FRAME_VERSION = 1
TOPIC_RESOURCE_TYPE = 2  # ConfigResource.Type.TOPIC
MAX_BATCH_RECORDS = 1000
MAX_BATCH_BYTES = 1 << 20  # far below KafkaRaftClient's 8 MiB batches
QUORUM_STATE_FILE_NAME = "quorum-state"
_RELEASE_ARG = re.compile(r"\d+\.\d+(?=$|[.-])")

API_TOPIC, API_PARTITION, API_CONFIG, API_FEATURE_LEVEL, API_PRODUCER_IDS = 2, 3, 4, 12, 15


@dataclass(frozen=True, slots=True)
class Release:
    """What ``kafka-storage format --release-version <name>`` bootstraps a cluster with."""

    name: str
    metadata_version: str  # MetadataVersion's name
    metadata_version_level: int  # its feature level (the FeatureLevelRecord's)
    features: tuple[tuple[str, int], ...]  # other finalized features, by name, level > 0
    partition_record_version: int  # MetadataVersion.partitionRecordVersion()
    snapshot_layout: bool  # format writes the bootstrap snapshot, not bootstrap.checkpoint

    @property
    def leaderless_bootstrap(self) -> bool:
        """The PartitionRecords name no leader (-1): the controller elects the node when it
        unfences it. True for metadata.version 4.0 to 4.0-IV3 without ELR (release 4.0); see
        the module's docstring, "Leaders at the first start"."""
        return self.metadata_version_level >= 25 and _ELR not in self.features

    @property
    def file_name(self) -> str:
        return (
            f"{CLUSTER_METADATA_DIR}/{BOOTSTRAP_SNAPSHOT_NAME}"
            if self.snapshot_layout
            else (BOOTSTRAP_FILE_NAME)
        )


_ELR = ("eligible.leader.replicas.version", 1)
_GROUP = ("group.version", 1)
_TXN = ("transaction.version", 2)
_STREAMS = ("streams.version", 1)
_SHARE1 = (_ELR, _GROUP, ("share.version", 1), _STREAMS, _TXN)
# Read from what Kafka 4.4's `kafka-storage format --release-version X` writes (the records it
# prints) and, for 4.2 and 4.3, from those releases' own format; the features are sorted by name,
# after metadata.version, as BootstrapMetadata.fromVersions orders them.
RELEASES: dict[str, Release] = {
    r.name: r
    for r in (
        Release("3.9", "3.9-IV0", 21, (), 1, False),
        Release("4.0", "4.0-IV3", 25, (_GROUP, _TXN), 2, False),
        Release("4.1", "4.1-IV1", 27, (_ELR, _GROUP, _TXN), 2, False),
        Release("4.2", "4.2-IV1", 29, _SHARE1, 2, False),
        Release("4.3", "4.3-IV0", 30, _SHARE1, 2, False),
        Release("4.4", "4.4-IV2", 33, (*_SHARE1[:2], ("share.version", 2), *_SHARE1[3:]), 2, True),
    )
}  # fmt: skip
# Every Kafka 4.x broker accepts 4.0's metadata.version; `kafka-features upgrade
# --release-version` raises it later.
DEFAULT_RELEASE = "4.0"


@dataclass(slots=True)
class TopicBootstrap:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader epoch
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class BootableResult:
    """What :func:`make_bootable` wrote."""

    data_dir: Path
    node_id: int
    cluster_id: str
    directory_id: uuid.UUID
    release: Release
    bootstrap_file: Path
    topics: dict[str, TopicBootstrap]
    next_producer_id: int  # 0: no producer ids in the logs, no ProducerIdsRecord
    created_partitions: list[TopicPartition]  # missing partitions created empty
    written_partition_metadata: list[TopicPartition]  # partition.metadata written anew
    records: int  # bootstrap records

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())

    def server_properties(self, controller: str = "127.0.0.1:9093") -> dict[str, str]:
        """The broker configs that must agree with the files (listeners left to the user)."""
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@{controller}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.data_dir),
        }

    def to_json(self) -> dict:
        return {
            "dataDir": str(self.data_dir),
            "nodeId": self.node_id,
            "clusterId": self.cluster_id,
            "directoryId": uuid_to_kafka_string(self.directory_id),
            "release": self.release.name,
            "metadataVersion": self.release.metadata_version,
            "bootstrapFile": str(self.bootstrap_file),
            "bootstrapRecords": self.records,
            "nextProducerId": self.next_producer_id,
            "topics": {
                t.name: {
                    "topicId": uuid_to_kafka_string(t.topic_id),
                    "partitions": len(t.partitions),
                    "configs": t.configs,
                }
                for t in self.topics.values()
            },
            "createdPartitions": [f"{tp.topic}-{tp.partition}" for tp in self.created_partitions],
        }


# -- encoding ---------------------------------------------------------------------------------


def encode_metadata_record(api_key: int, version: int, data: Mapping) -> bytes:
    """One ``__cluster_metadata`` record value: the frame, then the message at ``version``."""
    frame = encode_unsigned_varint(METADATA_FRAME_VERSION)
    frame += encode_unsigned_varint(api_key) + encode_unsigned_varint(version)
    return frame + write_message(metadata_record_schema(api_key), data, version)


def bootstrap_records(
    release: Release,
    topics: Iterable[TopicBootstrap],
    *,
    node_id: int,
    directory_id: uuid.UUID,
    next_producer_id: int = 0,
) -> list[bytes]:
    """The bootstrap record values: features, producer ids, then per topic its TopicRecord,
    ConfigRecords and PartitionRecords (partition order)."""
    out = [
        encode_metadata_record(
            API_FEATURE_LEVEL, 0,
            {"name": "metadata.version", "featureLevel": release.metadata_version_level},
        )
    ]  # fmt: skip
    for name, level in release.features:
        out.append(
            encode_metadata_record(API_FEATURE_LEVEL, 0, {"name": name, "featureLevel": level})
        )
    if next_producer_id > 0:
        out.append(
            encode_metadata_record(
                API_PRODUCER_IDS, 0,
                {"brokerId": node_id, "brokerEpoch": -1, "nextProducerId": next_producer_id},
            )
        )  # fmt: skip
    for topic in topics:
        out.append(
            encode_metadata_record(API_TOPIC, 0, {"name": topic.name, "topicId": topic.topic_id})
        )
        for key, value in sorted(topic.configs.items()):
            data = {
                "resourceType": TOPIC_RESOURCE_TYPE, "resourceName": topic.name,
                "name": key, "value": value,
            }  # fmt: skip
            out.append(encode_metadata_record(API_CONFIG, 0, data))
        for partition, leader_epoch in sorted(topic.partitions.items()):
            data = {
                "partitionId": partition, "topicId": topic.topic_id,
                "replicas": [node_id], "isr": [node_id],
                "removingReplicas": [], "addingReplicas": [],
                "leader": -1 if release.leaderless_bootstrap else node_id,
                "leaderRecoveryState": 0,
                "leaderEpoch": leader_epoch, "partitionEpoch": 0,
                "directories": [directory_id],
            }  # fmt: skip
            out.append(
                encode_metadata_record(API_PARTITION, release.partition_record_version, data)
            )
    return out


def _control_batch(control_type: ControlRecordType, message: Message, data: Mapping, offset: int,
                   now_ms: int) -> bytes:  # fmt: skip
    builder = MemoryRecordsBuilder(base_offset=offset, is_control=True, partition_leader_epoch=0)
    builder.append(
        timestamp=now_ms,
        key=encode_control_key(control_type),
        value=write_message(message, data, 0),
    )
    return builder.build()


def encode_bootstrap_snapshot(
    values: list[bytes], *, now_ms: int, last_contained_log_timestamp: int = 0
) -> bytes:
    """A KRaft snapshot of ``values``: header, data batches, footer (the layout above)."""
    out = [
        _control_batch(
            ControlRecordType.SNAPSHOT_HEADER, SNAPSHOT_HEADER_RECORD,
            {"version": 0, "lastContainedLogTimestamp": last_contained_log_timestamp}, 0, now_ms,
        )
    ]  # fmt: skip
    offset = 1
    i = 0
    while i < len(values):
        builder = MemoryRecordsBuilder(base_offset=offset, partition_leader_epoch=0)
        size = 0
        while (
            i < len(values) and builder.num_records < MAX_BATCH_RECORDS and size < MAX_BATCH_BYTES
        ):
            builder.append(timestamp=now_ms, value=values[i])
            size += len(values[i])
            i += 1
        out.append(builder.build())
        offset = builder.next_offset
    out.append(
        _control_batch(
            ControlRecordType.SNAPSHOT_FOOTER,
            SNAPSHOT_FOOTER_RECORD,
            {"version": 0},
            offset,
            now_ms,
        )
    )
    return b"".join(out)


# -- the data directory -----------------------------------------------------------------------


def new_cluster_id() -> str:
    """A random Kafka Uuid as Uuid.randomUuid() makes them (its text never starts with '-')."""
    while True:
        text = uuid_to_kafka_string(uuid.uuid4())
        if not text.startswith("-"):
            return text


def _check_no_metadata_log(data_dir: Path) -> None:
    """Refuse a directory a broker already ran on: its topics are in its metadata log."""
    meta_dir = data_dir / CLUSTER_METADATA_DIR
    if not meta_dir.is_dir():
        return
    for entry in meta_dir.iterdir():
        name = entry.name
        ran = name == QUORUM_STATE_FILE_NAME
        ran = ran or (name.endswith(".log") and entry.stat().st_size > 0)
        ran = ran or (name.endswith(".checkpoint") and name != BOOTSTRAP_SNAPSHOT_NAME)
        if ran:
            raise KafkalogError(
                f"{meta_dir} holds a KRaft metadata log ({name}): a broker has run on this "
                f"directory and its topics are in that log; start that broker as it is, or "
                f"remove {CLUSTER_METADATA_DIR} to bootstrap a new cluster from the partitions",
                path=str(entry),
            )


def _kafka_uuid_arg(text: str, what: str) -> str:
    try:
        value = uuid_from_kafka_string(text)
    except ValueError as e:
        raise ValueError(f"{what} {text!r} is not a Kafka Uuid: {e}") from None
    if value == ZERO_UUID:
        raise ValueError(f"{what} must not be the zero Uuid")
    return text


def _next_producer_id(logs: LogManager, data_dir: Path) -> int:
    """One above every producer id the logs remember, and above kafkalog serve's reservations."""
    highest = -1
    for log in logs.logs.values():
        producers = log.producer_state.active_producers
        if producers:
            highest = max(highest, max(producers))
    reserved = 0
    path = data_dir / PRODUCER_IDS_FILE_NAME
    if path.exists():
        try:
            doc = json.loads(path.read_text("utf-8"))
            reserved = int(doc["next_block_start"])
        except (ValueError, KeyError, TypeError) as e:
            raise KafkalogError(f"unreadable producer id blocks: {e}", path=str(path)) from None
    return max(highest + 1, reserved, 0)


def make_bootable(
    data_dir: str | os.PathLike,
    *,
    node_id: int | None = None,
    cluster_id: str | None = None,
    release_version: str = DEFAULT_RELEASE,
    now_ms: int | None = None,
) -> BootableResult:
    """Write what a new single-node KRaft broker (``process.roles=broker,controller``,
    ``node.id`` = ``node_id``, a static ``controller.quorum.voters``) needs to boot from
    ``data_dir`` and serve every partition in it.

    ``node_id`` and ``cluster_id`` default to ``meta.properties``' (else 1 and a new id);
    ``release_version`` picks the metadata.version and features (:data:`RELEASES`) and the
    bootstrap file's place. Missing partitions of a topic (below its highest) are created
    empty; a partition without ``partition.metadata`` gets its topic's id. Refuses a directory
    a broker already ran on (a metadata log), and partitions of one topic with different ids.
    Idempotent: running it again rewrites the same files.
    """
    m = _RELEASE_ARG.match(release_version)  # "4.0", "4.0.1" and "4.0-IV3" name release 4.0
    release = RELEASES.get(m.group(0)) if m else None
    if release is None:
        raise ValueError(f"unknown release {release_version!r} (known: {', '.join(RELEASES)})")
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(2, "No such directory", str(root))
    if node_id is not None and not 0 <= node_id <= 0x7FFFFFFF:
        raise ValueError(f"node id {node_id} is not in [0, 2147483647]")
    if cluster_id is not None:
        _kafka_uuid_arg(cluster_id, "cluster id")
    _check_no_metadata_log(root)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms

    meta_path = root / META_PROPERTIES_FILE_NAME
    old = read_meta_properties(meta_path) if meta_path.exists() else None
    node_id = (
        node_id
        if node_id is not None
        else (old.node_id if old is not None and old.node_id is not None else 1)
    )
    cluster_id = cluster_id or (old.cluster_id if old is not None else None) or new_cluster_id()
    _kafka_uuid_arg(cluster_id, "cluster.id in meta.properties")
    directory_id = old.directory_id if old is not None and old.directory_id else None
    while directory_id is None or directory_id.int >> 64 == 0:  # DirectoryId reserves msb 0
        directory_id = uuid.uuid4()

    topics: dict[str, TopicBootstrap] = {}
    created: list[TopicPartition] = []
    rewritten: list[TopicPartition] = []
    with LogManager(root, writable=True) as logs:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in logs.logs:
            by_topic.setdefault(tp.topic, []).append(tp)
        for topic, tps in sorted(by_topic.items()):
            ids: dict[uuid.UUID, list[int]] = {}
            for tp in tps:
                path = root / log_dir_name(tp) / PARTITION_METADATA_FILE_NAME
                if path.exists():
                    ids.setdefault(read_partition_metadata(path).topic_id, []).append(tp.partition)
            if len(ids) > 1:
                found = "; ".join(
                    f"{uuid_to_kafka_string(i)} in partitions {sorted(ps)}" for i, ps in ids.items()
                )
                raise KafkalogError(
                    f"topic {topic}: its partitions have different topic ids ({found}); a "
                    f"broker serves one id per topic"
                )
            topic_id = next(iter(ids), None) or logs.topic_id(topic) or uuid.uuid4()
            if topic_id in (ZERO_UUID, uuid.UUID(int=1)):
                raise KafkalogError(f"topic {topic}: {topic_id} is a reserved Uuid")
            for tp in tps:
                path = root / log_dir_name(tp) / PARTITION_METADATA_FILE_NAME
                if not path.exists():
                    write_partition_metadata(path, topic_id)
                    rewritten.append(tp)
            count = 1 + max(tp.partition for tp in tps)
            for p in range(count):
                tp = TopicPartition(topic, p)
                if tp not in logs.logs:
                    logs.get_or_create_log(tp)
                    created.append(tp)
            entry = TopicBootstrap(topic, topic_id, configs=logs.config_for(topic).as_strings())
            for p in range(count):
                log = logs.logs[TopicPartition(topic, p)]
                entry.partitions[p] = max(log.leader_epoch_cache.latest_epoch() or 0, 0)
            topics[topic] = entry
        next_pid = _next_producer_id(logs, root)
        high_watermarks = {
            tp: logs.logs[tp].log_end_offset
            for tp in sorted(logs.logs, key=lambda t: (t.topic, t.partition))
        }
        # Written under the directory's lock; closing the logs then writes their checkpoints and
        # the clean-shutdown marker.
        write_offset_checkpoint(root / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
        write_meta_properties(
            meta_path,
            MetaProperties(
                version=1, cluster_id=cluster_id, node_id=node_id, directory_id=directory_id,
                extra=old.extra if old is not None else (),
            ),
        )  # fmt: skip
        values = bootstrap_records(
            release, topics.values(), node_id=node_id, directory_id=directory_id,
            next_producer_id=next_pid,
        )  # fmt: skip
        last_ts = now_ms if release.snapshot_layout else 0  # as each release's format writes
        data = encode_bootstrap_snapshot(
            values, now_ms=now_ms, last_contained_log_timestamp=last_ts
        )
        target = root / release.file_name
        snapshot = root / CLUSTER_METADATA_DIR / BOOTSTRAP_SNAPSHOT_NAME
        other = root / BOOTSTRAP_FILE_NAME if release.snapshot_layout else snapshot
        if other.exists():
            other.unlink()  # one bootstrap only: Kafka 4.4 takes the snapshot's over the file
            if other == snapshot and not any(snapshot.parent.iterdir()):
                snapshot.parent.rmdir()
        target.parent.mkdir(exist_ok=True)
        write_file_atomically(target, data)
    return BootableResult(
        root, node_id, cluster_id, directory_id, release, target, topics, next_pid, created,
        rewritten, len(values),
    )  # fmt: skip
