"""Where a RemoteStorageManager keeps a remote segment's files: the one seam per remote store.

Kafka leaves the remote layout to each RemoteStorageManager; the metadata only names segments
(partition, segment uuid, offsets). A :class:`RemoteStorageLayout` turns a segment's metadata
into the path or URL of each of its files; everything after that (reading ``.log`` and index
files, local or through :mod:`kafkalog.log.storage` for ``s3://`` and the like) is the code that
reads local segments. A store that keeps a segment's bytes as Kafka wrote them fits by writing
one ``segment_file``; one that transforms them (chunks, compression, encryption) needs a reader
of its own first.
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path
from typing import Protocol

from ...format.internal.result import uuid_to_kafka_string
from .metadata import RemoteLogSegmentMetadata, TopicIdPartition

__all__ = ["LocalTieredStorageLayout", "RemoteFileType", "RemoteStorageLayout"]


class RemoteFileType(enum.Enum):
    """The files of a remote segment (Kafka's LogSegmentData), by LocalTieredStorage's suffix."""

    SEGMENT = ".log"
    OFFSET_INDEX = ".index"
    TIME_INDEX = ".timeindex"
    TRANSACTION_INDEX = ".txnindex"  # optional: absent when the segment aborted nothing
    PRODUCER_SNAPSHOT = ".snapshot"
    LEADER_EPOCH_CHECKPOINT = ".leader_epoch_checkpoint"


class RemoteStorageLayout(Protocol):
    """Maps a remote segment's files to paths (or object-storage URLs) kafkalog can open."""

    def segment_file(
        self, segment: RemoteLogSegmentMetadata, file_type: RemoteFileType
    ) -> str | os.PathLike: ...


class LocalTieredStorageLayout:
    """Kafka's LocalTieredStorage (kafka-storage's test jar), rooted at its ``dir`` config
    (``rsm.config.dir``)::

        DIR/kafka-tiered-storage/TOPIC-PARTITION-TOPICID/OFFSET-SEGMENTID.SUFFIX

    TOPICID and SEGMENTID in Kafka's Uuid text form, OFFSET the segment's start offset in 20
    digits, SUFFIX one of :class:`RemoteFileType`'s (RemoteLogSegmentFileset).
    """

    STORAGE_DIR = "kafka-tiered-storage"
    _FILE_NAME = re.compile(r"(\d{20})-[A-Za-z0-9_-]{22}\.[a-z_]+")

    @classmethod
    def start_offset_of(cls, file_name: str) -> int | None:
        """The start offset a remote segment file's name gives (``OFFSET-SEGMENTID.SUFFIX``),
        None for another name: what a segment's base offset is to a local file's name."""
        found = cls._FILE_NAME.fullmatch(file_name)
        return None if found is None else int(found.group(1))

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def partition_dir(self, tip: TopicIdPartition) -> Path:
        name = f"{tip.topic}-{tip.partition}-{uuid_to_kafka_string(tip.topic_id)}"
        return self.root / self.STORAGE_DIR / name

    def segment_file(self, segment: RemoteLogSegmentMetadata, file_type: RemoteFileType) -> Path:
        stem = f"{segment.start_offset:020d}-{uuid_to_kafka_string(segment.segment_id)}"
        return self.partition_dir(segment.topic_id_partition) / (stem + file_type.value)

    def __repr__(self) -> str:
        return f"LocalTieredStorageLayout({str(self.root)!r})"
