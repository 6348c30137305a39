"""Values and errors of the broker's append validation (LogValidator's config, result, errors).

Kept apart from :mod:`kafkalog.format.validate.log_validator` so the log layer and the edges can
name them without the validation logic. Error codes are Kafka's (Errors.java).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import (
    InvalidTimestampError,
    RecordValidationError,
    UnsupportedForMessageFormatError,
)
from ..codecs import CompressionType
from ..constants import MAGIC_VALUE_V2, TimestampType

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "LONG_MAX",
    "PRODUCER",
    "AppendOrigin",
    "InvalidTimestampError",
    "LogValidatorConfig",
    "RecordValidationError",
    "RecordValidationStats",
    "UnsupportedForMessageFormatError",
    "ValidationResult",
]

LONG_MAX = (1 << 63) - 1
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # max.message.bytes (LogConfig)
PRODUCER = "producer"  # compression.type that keeps the producer's codec


class AppendOrigin(enum.Enum):
    """Who sends the entries; only clients get the full set of batch checks (AppendOrigin)."""

    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogValidatorConfig:
    """The topic settings LogValidator reads; defaults are Kafka's (LogConfig)."""

    magic: int = MAGIC_VALUE_V2  # message format of the topic (RecordVersion)
    compression: CompressionType | str = PRODUCER
    compression_level: int | None = None  # None: the codec's default
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    compacted: bool = False


@dataclass(frozen=True, slots=True)
class RecordValidationStats:
    """What a rebuild cost: bytes of records held uncompressed, records written anew."""

    temporary_memory_bytes: int = 0
    num_converted_records: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationResult:
    """The entries to append and what the log, its indexes and the producer need to know.

    ``validated_parts`` are the entries to append, in pieces to write one after the other: an
    in-place assignment patches a copy of the batch header and keeps the records section as a
    view of the input (so a bytearray input must not change until the parts are written);
    ``validated_records`` joins them. ``shallow_offset_of_max_timestamp`` is the last offset of
    the batch holding ``max_timestamp`` (what the time index records); ``log_append_time_ms`` is
    ``now_ms`` for a LogAppendTime topic and -1 otherwise (what the produce response reports);
    ``message_size_maybe_changed`` is true when the entries were rebuilt, so batch sizes must be
    checked again (done here).
    """

    validated_parts: tuple[bytes | memoryview, ...]
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time_ms: int
    message_size_maybe_changed: bool
    record_validation_stats: RecordValidationStats

    @property
    def validated_records(self) -> bytes:
        """The entries to append, as one bytes object (a copy when there are several parts)."""
        parts = self.validated_parts
        if len(parts) == 1 and isinstance(parts[0], bytes):
            return parts[0]
        return b"".join(parts)

    @property
    def validated_size(self) -> int:
        return sum(len(part) for part in self.validated_parts)
