"""Errors of the log layer's files: checkpoints, names, index appends.

Each names the file (``path``) and, for text files, the 1-based ``line`` that broke a rule, so a
reader of a dead broker's disk learns what is wrong where without a traceback. All are also
``ValueError`` (bad data, never a bare ``ValueError``/``IndexError`` escaping from parsing).
Corrupt index *contents* use :class:`kafkalog.errors.CorruptIndexError`.
"""

from __future__ import annotations

from ..errors import KafkalogError

__all__ = [
    "CorruptCheckpointError",
    "IndexOffsetOverflowError",
    "InvalidFileNameError",
    "InvalidOffsetError",
    "InvalidTopicError",
]


class CorruptCheckpointError(KafkalogError, ValueError):
    """A checkpoint or metadata file (offset checkpoints, leader-epoch-checkpoint,
    partition.metadata, meta.properties, .kafka_cleanshutdown) that breaks its format.

    Kafka raises an IOException here, surfaced to clients as KAFKA_STORAGE_ERROR.
    """

    code = 56  # KAFKA_STORAGE_ERROR

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message, path=path)
        self.line = line

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.line is not None:
            where.append(f"line {self.line}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class InvalidTopicError(KafkalogError, ValueError):
    """A topic name Kafka's Topic.validate rejects (or a partition number out of range)."""

    code = 17  # INVALID_TOPIC_EXCEPTION


class InvalidFileNameError(KafkalogError, ValueError):
    """A file or directory name that is not one Kafka writes (segment, snapshot, partition dir)."""


class InvalidOffsetError(KafkalogError, ValueError):
    """An index append whose offset is not above the last one (Kafka's InvalidOffsetException)."""


class IndexOffsetOverflowError(KafkalogError, ValueError):
    """``offset - base_offset`` does not fit the 4-byte relative offset (0..Int.MAX)."""
