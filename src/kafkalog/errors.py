"""The project's exceptions, each carrying the Kafka error code it corresponds to.

Bad bytes raise :class:`CorruptRecordError` or :class:`InvalidRecordError` (both ``ValueError``),
naming where (file, byte position, offset) and which rule was broken; ``struct.error`` and codec
library exceptions never escape the format layer.
"""

from __future__ import annotations

__all__ = [
    "EXIT_IO",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidRecordError",
    "KafkalogError",
    "RecordOffsetError",
    "RecordTooLargeError",
    "UnsupportedCompressionTypeError",
    "VarintRangeError",
]


# Every command's exit status: done; done, but the data has problems (damage found, records
# skipped); bad usage (arguments, options); the environment failed (I/O, permissions, missing
# files).
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


class KafkalogError(Exception):
    """Base of every error kafkalog raises on purpose."""

    code: int = -1  # Kafka's UNKNOWN_SERVER_ERROR

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        offset: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.offset = offset
        self.path = path

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def located(
        self, *, position: int | None = None, offset: int | None = None, path: str | None = None
    ) -> KafkalogError:
        """Fill in location fields the raiser did not know (outer callers know more)."""
        if self.position is None and position is not None:
            self.position = position
        if self.offset is None and offset is not None:
            self.offset = offset
        if self.path is None and path is not None:
            self.path = path
        return self


class CorruptRecordError(KafkalogError, ValueError):
    """Bytes that cannot be a record or batch: bad size, CRC, varint or compressed data."""

    code = 2  # CORRUPT_MESSAGE


class RecordOffsetError(CorruptRecordError):
    """A record whose offset delta goes back, or past its batch's lastOffsetDelta, in a batch
    whose CRC matches (:mod:`kafkalog.format.offsets_rule`)."""


class InvalidRecordError(KafkalogError, ValueError):
    """Well-framed bytes that break a record rule (count mismatch, header sizes, magic rules)."""

    code = 87  # INVALID_RECORD


class UnsupportedCompressionTypeError(InvalidRecordError):
    """A codec id Kafka does not define, or one the magic does not allow (zstd below magic 2)."""

    code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class VarintRangeError(InvalidRecordError):
    """A value to encode that its varint does not hold: ``bits`` is 32 (varint, unsigned varint)
    or 64 (varlong: in a record, only the timestamp delta is one)."""

    def __init__(self, message: str, *, bits: int) -> None:
        super().__init__(message)
        self.bits = bits


class RecordTooLargeError(KafkalogError, ValueError):
    """A batch over the configured size limit."""

    code = 10  # MESSAGE_TOO_LARGE


class CorruptIndexError(KafkalogError, ValueError):
    """An offset, time or transaction index whose contents break the index rules."""

    code = 2
