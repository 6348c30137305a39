"""A partition's ``partition.metadata`` file: its topic id (PartitionMetadataFile.java, KIP-516).

Layout, exactly (UTF-8, no final line end)::

    version: 0
    topic_id: <Kafka base64 Uuid, 22 characters>

Kafka reads any version >= 0 (so a downgraded broker still reads a newer file) and refuses the
all-zero topic id; lines may end with ``\\n``, ``\\r\\n`` or ``\\r``, and keys are separated from
values by ``:`` and at least one blank. Breaks raise :class:`CorruptCheckpointError` with the line.
Writes are atomic (see :func:`~kafkalog.log.datadir.checkpoints.write_file_atomically`).
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass

from ..errors import CorruptCheckpointError
from .checkpoints import parse_java_int, read_text_file, split_lines, write_file_atomically
from .kafka_uuid import ZERO_UUID, uuid_from_kafka_string, uuid_to_kafka_string

__all__ = [
    "CURRENT_VERSION",
    "PARTITION_METADATA_FILE_NAME",
    "PartitionMetadata",
    "read_partition_metadata",
    "write_partition_metadata",
]

PARTITION_METADATA_FILE_NAME = "partition.metadata"
CURRENT_VERSION = 0

_KEY_VALUE = re.compile(r":[ \t\x0b\f]+")  # Java's ":\s+"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadata:
    """The contents of partition.metadata."""

    topic_id: uuid.UUID
    version: int = CURRENT_VERSION

    def encode(self) -> str:
        """The file's exact text."""
        return f"version: {self.version}\ntopic_id: {uuid_to_kafka_string(self.topic_id)}"


def _field(lines: list[str], index: int, key: str, where: str) -> str:
    if index >= len(lines):
        raise CorruptCheckpointError(f"missing line '{key}: ...'", path=where, line=index + 1)
    parts = _KEY_VALUE.split(lines[index])
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if len(parts) != 2 or parts[0] != key:
        raise CorruptCheckpointError(
            f"malformed line {lines[index]!r}: expected '{key}: <value>'",
            path=where,
            line=index + 1,
        )
    return parts[1]


def read_partition_metadata(path: str | os.PathLike) -> PartitionMetadata:
    """Parse partition.metadata (lines after the second are ignored, as Kafka does)."""
    where = os.fspath(path)
    lines = split_lines(read_text_file(path))
    version = parse_java_int(_field(lines, 0, "version", where), what="version", path=where, line=1)
    if version < CURRENT_VERSION:
        raise CorruptCheckpointError(
            f"unrecognised version {version} (expected >= {CURRENT_VERSION})", path=where, line=1
        )
    text = _field(lines, 1, "topic_id", where)
    try:
        topic_id = uuid_from_kafka_string(text)
    except ValueError as e:
        raise CorruptCheckpointError(f"invalid topic_id: {e}", path=where, line=2) from None
    if topic_id == ZERO_UUID:
        raise CorruptCheckpointError(
            "invalid topic_id: the zero Uuid is not a topic id", path=where, line=2
        )
    return PartitionMetadata(topic_id=topic_id, version=version)


def write_partition_metadata(
    path: str | os.PathLike, topic_id: uuid.UUID, *, version: int = CURRENT_VERSION
) -> None:
    """Atomically write partition.metadata for ``topic_id``."""
    if topic_id == ZERO_UUID:
        raise ValueError("the zero Uuid is not a topic id")
    if version < 0:
        raise ValueError(f"version must be >= 0, got {version}")
    data = PartitionMetadata(topic_id=topic_id, version=version).encode().encode("utf-8")
    write_file_atomically(path, data)
