"""Kafka's remote log metadata: the ``__remote_log_metadata`` topic's records, folded per partition.

TopicBasedRemoteLogMetadataManager (Kafka's default RemoteLogMetadataManager) writes one record
per event of a remote segment or partition, keyless, to the metadata partition its user partition
hashes to, so each partition's events are in order in one log. A value is framed as KRaft's
records are (AbstractApiMessageSerde)::

    uvarint frameVersion (1) | uvarint apiKey | uvarint version | message (flexible encoding)

apiKey 0 RemoteLogSegmentMetadataRecord (a segment's copy started: offsets, epochs, size), 1
RemoteLogSegmentMetadataUpdateRecord (its state moves on: copy finished, delete started or
finished), 2 RemotePartitionDeleteMetadataRecord (the whole partition is being deleted). The
fold is RemoteLogMetadataCache's: a segment is readable once COPY_SEGMENT_FINISHED and until a
delete starts.
"""

from __future__ import annotations

import enum
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ...errors import CorruptRecordError
from ...format.internal.metadata import decode_framed_record
from ...format.internal.result import DecodedMessage
from . import _schemas as s

__all__ = [
    "REMOTE_LOG_METADATA_RECORD_TYPES",
    "REMOTE_LOG_METADATA_TOPIC",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteState",
    "RemotePartitionMetadata",
    "TopicIdPartition",
    "decode_remote_log_metadata",
    "fold_remote_log_metadata",
    "read_remote_log_metadata",
]

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
_SCHEMAS = {
    0: s.REMOTE_LOG_SEGMENT_METADATA_RECORD,
    1: s.REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD,
    2: s.REMOTE_PARTITION_DELETE_METADATA_RECORD,
}
#: apiKey -> record type name as Kafka's schema names it, without the "Record" suffix.
REMOTE_LOG_METADATA_RECORD_TYPES: Mapping[int, str] = MappingProxyType(
    {key: msg.name.removesuffix("Record") for key, msg in _SCHEMAS.items()}
)


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's RemoteLogSegmentState ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class RemotePartitionDeleteState(enum.IntEnum):
    """Kafka's RemotePartitionDeleteState ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True, kw_only=True)
class RemoteLogSegmentMetadata:
    """One remote segment as the metadata tells it (Kafka's RemoteLogSegmentMetadata): offsets
    ``start_offset`` to ``end_offset`` inclusive, leader epoch -> first offset, latest state."""

    topic_id_partition: TopicIdPartition
    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    segment_leader_epochs: dict[int, int]
    segment_size_in_bytes: int
    state: RemoteLogSegmentState
    # True when the segment aborted nothing; None when the record does not say (Kafka before
    # 4.0 has no such field, and 4.x leaves it out when false).
    txn_index_empty: bool | None
    custom_metadata: bytes | None = None
    broker_id: int = -1
    event_timestamp_ms: int = -1


@dataclass(slots=True)
class RemotePartitionMetadata:
    """Every remote segment of one partition (by segment id) and its deletion state, if any."""

    topic_id_partition: TopicIdPartition
    segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = field(default_factory=dict)
    delete_state: RemotePartitionDeleteState | None = None

    def copied_segments(self) -> list[RemoteLogSegmentMetadata]:
        """The readable segments (COPY_SEGMENT_FINISHED; none once the partition's deletion is
        marked), by start offset."""
        if self.delete_state is not None:
            return []
        done = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        found = [m for m in self.segments.values() if m.state == done]
        return sorted(found, key=lambda m: (m.start_offset, m.end_offset))


def decode_remote_log_metadata(value: bytes) -> DecodedMessage:
    """Decode one ``__remote_log_metadata`` record value; never raises on bad bytes (an unknown
    frame, apiKey or version comes back ``raw``, bad bytes with ``error``)."""
    return decode_framed_record(
        value, _SCHEMAS, REMOTE_LOG_METADATA_RECORD_TYPES, short_header=False
    )


def _tip(entry: dict) -> TopicIdPartition:
    return TopicIdPartition(entry["id"], entry["name"], entry["partition"])


def fold_remote_log_metadata(
    values: Iterable[tuple[int, bytes | None]], *, path: str | None = None
) -> dict[TopicIdPartition, RemotePartitionMetadata]:
    """Fold ``(offset, value)`` pairs of the metadata topic, in log order, into each
    partition's remote segments. A value that cannot be read is an error naming its offset
    (skipping it could leave a segment looking readable after its deletion started)."""
    out: dict[TopicIdPartition, RemotePartitionMetadata] = {}
    for offset, value in values:
        if value is None:
            continue
        d = decode_remote_log_metadata(value)
        if d.data is None:
            why = d.error or f"an unknown {d.kind} record (apiKey {d.api_key}, v{d.version})"
            raise CorruptRecordError(f"remote log metadata: {why}", offset=offset, path=path)
        data = d.data
        if d.api_key == 2:
            tip = _tip(data["topicIdPartition"])
            part = out.setdefault(tip, RemotePartitionMetadata(tip))
            part.delete_state = RemotePartitionDeleteState(data["remotePartitionDeleteState"])
            continue
        tip = _tip(data["remoteLogSegmentId"]["topicIdPartition"])
        segment_id = data["remoteLogSegmentId"]["id"]
        part = out.setdefault(tip, RemotePartitionMetadata(tip))
        state = RemoteLogSegmentState(data["remoteLogSegmentState"])
        if d.api_key == 0:
            part.segments[segment_id] = RemoteLogSegmentMetadata(
                topic_id_partition=tip,
                segment_id=segment_id,
                start_offset=data["startOffset"],
                end_offset=data["endOffset"],
                max_timestamp_ms=data["maxTimestampMs"],
                segment_leader_epochs={
                    e["leaderEpoch"]: e["offset"] for e in data["segmentLeaderEpochs"]
                },
                segment_size_in_bytes=data["segmentSizeInBytes"],
                state=state,
                txn_index_empty=data["txnIndexEmpty"],
                custom_metadata=data["customMetadata"],
                broker_id=data["brokerId"],
                event_timestamp_ms=data["eventTimestampMs"],
            )
        elif segment_id in part.segments:
            seg = part.segments[segment_id]
            seg.state, seg.event_timestamp_ms = state, data["eventTimestampMs"]
            if data["customMetadata"] is not None:
                seg.custom_metadata = data["customMetadata"]
        # An update of a segment never announced is dropped, as RemoteLogMetadataCache does.
    return out


def read_remote_log_metadata(
    data_dir: str | os.PathLike,
) -> dict[TopicIdPartition, RemotePartitionMetadata]:
    """The remote segments of every partition, from the ``__remote_log_metadata-N`` partitions
    of a broker's data directory (an empty dict when it has none: no tiered storage there)."""
    from ..partition import Log

    out: dict[TopicIdPartition, RemotePartitionMetadata] = {}
    for directory in sorted(Path(data_dir).glob(f"{REMOTE_LOG_METADATA_TOPIC}-*")):
        if not directory.name.rsplit("-", 1)[1].isdigit() or not directory.is_dir():
            continue
        with Log.open(directory) as log:
            values = (
                (record.offset, record.value)
                for batch in log.batches()
                if not batch.is_control
                for record in batch.records()
            )
            out.update(fold_remote_log_metadata(values, path=str(directory)))
    return out
