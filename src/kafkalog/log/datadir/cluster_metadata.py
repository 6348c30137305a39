"""What a KRaft ``__cluster_metadata`` log says about topics: ids, partitions and configs.

A KRaft broker keeps the cluster's metadata as a log of records (TopicRecord, PartitionRecord,
ConfigRecord, RemoveTopicRecord, ...) plus periodic snapshots (``<offset>-<epoch>.checkpoint``
holding the whole state as of offset - 1). The image is the newest snapshot replayed, then every
log record from the snapshot's end offset on. Records between BeginTransaction and
AbortTransaction are dropped, as the controller does (KIP-868). Nothing here writes.

A damaged or truncated metadata log does not stop a reader of a dead broker's disk: replay stops at
the damage and the image lists what it could not read in ``problems``.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field

from ...errors import KafkalogError
from ...format.internal import decode_metadata_record
from ..segment import FileRecords
from ..storage import as_path

__all__ = ["CLUSTER_METADATA_DIR", "MetadataImage", "TopicImage", "load_metadata_image"]

CLUSTER_METADATA_DIR = "__cluster_metadata-0"
TOPIC_RESOURCE_TYPE = 2  # ConfigResource.Type.TOPIC
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_SEGMENT = re.compile(r"^(\d{20})\.log$")


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: set[int] = field(default_factory=set)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class MetadataImage:
    """Topics by name, as of ``offset`` (the last metadata offset applied; -1 if none)."""

    topics: dict[str, TopicImage] = field(default_factory=dict)
    offset: int = -1
    problems: list[str] = field(default_factory=list)
    _by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self._by_id.get(topic_id)

    def _apply(self, kind: str, data: dict, pending_configs: dict[str, dict[str, str | None]]):
        if kind == "Topic":
            topic = TopicImage(data["name"], data["topicId"])
            configs = pending_configs.pop(topic.name, {})
            topic.configs.update({k: v for k, v in configs.items() if v is not None})
            self.topics[topic.name] = topic
            self._by_id[topic.topic_id] = topic
        elif kind == "Partition":
            topic = self._by_id.get(data["topicId"])
            if topic is not None:
                topic.partitions.add(data["partitionId"])
        elif kind == "RemoveTopic":
            topic = self._by_id.pop(data["topicId"], None)
            if topic is not None:
                self.topics.pop(topic.name, None)
        elif kind == "Config" and data["resourceType"] == TOPIC_RESOURCE_TYPE:
            name, key, value = data["resourceName"], data["name"], data["value"]
            topic = self.topics.get(name)
            if topic is None:  # configs may precede the topic in a snapshot
                pending_configs.setdefault(name, {})[key] = value
            elif value is None:
                topic.configs.pop(key, None)
            else:
                topic.configs[key] = value


def _replay(records: FileRecords, image: MetadataImage, from_offset: int, source: str) -> None:
    pending_configs: dict[str, dict[str, str | None]] = {}
    in_txn: list[tuple[str, dict]] | None = None
    try:
        for batch in records.batches():
            if batch.is_control or batch.last_offset < from_offset:
                continue
            for record in batch.records():
                if record.offset < from_offset or record.value is None:
                    continue
                decoded = decode_metadata_record(record.value)
                if decoded.error is not None:
                    image.problems.append(f"{source}: offset {record.offset}: {decoded.error}")
                    continue
                if decoded.data is None:
                    continue  # a record type or version newer than we know
                kind = decoded.kind
                if kind == "BeginTransaction":
                    in_txn = []
                elif kind == "EndTransaction":
                    for item in in_txn or ():
                        image._apply(*item, pending_configs)
                    in_txn = None
                elif kind == "AbortTransaction":
                    in_txn = None
                elif in_txn is not None:
                    in_txn.append((kind, decoded.data))
                else:
                    image._apply(kind, decoded.data, pending_configs)
                image.offset = record.offset
    except KafkalogError as e:
        image.problems.append(f"{source}: replay stopped: {e}")


def load_metadata_image(data_dirs: list[str] | str) -> MetadataImage | None:
    """The image of the first data dir holding ``__cluster_metadata-0``, or None when none does;
    a data directory in object storage (a URL) is read by listing and ranged reads."""
    for data_dir in [data_dirs] if isinstance(data_dirs, str) else data_dirs:
        path = as_path(data_dir) / CLUSTER_METADATA_DIR
        if path.is_dir():
            return _load(path)
    return None


def _load(path: os.PathLike) -> MetadataImage:
    names = [child.name for child in path.iterdir()]
    snapshots = sorted((int(m.group(1)), name) for name in names if (m := _SNAPSHOT.match(name)))
    segments = sorted((int(m.group(1)), name) for name in names if (m := _SEGMENT.match(name)))
    image = MetadataImage()
    start = 0
    if snapshots:
        end_offset, name = snapshots[-1]
        with FileRecords(path / name) as records:
            _replay(records, image, 0, name)
        start = end_offset
        image.offset = max(image.offset, end_offset - 1)
    for base, name in segments:
        next_base = next((b for b, _ in segments if b > base), None)
        if next_base is not None and next_base <= start:
            continue  # wholly before the snapshot
        with FileRecords(path / name) as records:
            _replay(records, image, start, name)
    return image
