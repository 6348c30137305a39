"""Every exception kafkalog raises on purpose, Kafka's error codes, and the commands' exit codes.

One module, below every layer, so that a caller catches by meaning without importing the layer that
raised: each :class:`KafkalogError` carries the Kafka error code a broker answers with, and
:func:`code_of` maps any exception to one. Bad bytes raise :class:`CorruptRecordError` or
:class:`InvalidRecordError` (both ``ValueError``), naming where (file, byte position, offset) and
which rule was broken; ``struct.error`` and codec library exceptions never escape the format layer.
A private exception that only carries a result out of nested calls of one module, and never
leaves it, stays beside the loop it ends.
"""

from __future__ import annotations

import errno

__all__ = [
    "EXIT_IO",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "CleaningAborted",
    "CloseConnection",
    "ConcurrentCommitError",
    "ConfigError",
    "CoordinatorLoadError",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "DataDirLockedError",
    "DataLossError",
    "FrameTooLargeError",
    "IndexOffsetOverflowError",
    "InternalTopicError",
    "InvalidFileNameError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRequestError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "KafkalogError",
    "ListenerError",
    "MarkerError",
    "NotRegularFileError",
    "OffsetOutOfRangeError",
    "OptionError",
    "OutOfOrderSequenceError",
    "PartitionOutOfRangeError",
    "ProtocolError",
    "RecordFormatError",
    "RecordOffsetError",
    "RecordTooLargeError",
    "RecordValidationError",
    "RemoteSegmentMissingError",
    "RemoteSegmentTruncatedError",
    "RemoteStorageError",
    "RequestRefused",
    "SaslFailed",
    "TieredOffsetGapError",
    "TieredStorageError",
    "TlsError",
    "TransactionCoordinatorFencedError",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedVersionError",
    "UsageError",
    "ValueDecodeError",
    "ValueEncodeError",
    "VarintRangeError",
    "WriteSchemaError",
    "code_of",
]


# Every command's exit status: done; done, but the data has problems (damage found, records
# skipped); bad usage (arguments, options); the environment failed (I/O, permissions, missing
# files).
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


# -- Kafka's error codes (clients/.../common/protocol/Errors.java) ---------------------------------
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
SASL_AUTHENTICATION_FAILED = 58
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_RECORD = 87
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_TOPIC_ID = 103
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_SERVER_ERROR = -1


def code_of(error: BaseException) -> int:
    """The code a KafkalogError carries (every one has Kafka's), else UNKNOWN_SERVER_ERROR."""
    if isinstance(error, KafkalogError):
        return error.code
    if isinstance(error, OSError):
        return KAFKA_STORAGE_ERROR
    return UNKNOWN_SERVER_ERROR


# -- the root --------------------------------------------------------------------------------------
class KafkalogError(Exception):
    """Base of every error kafkalog raises on purpose."""

    code: int = UNKNOWN_SERVER_ERROR

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

    def _where(self) -> list[str]:
        """The location parts ``__str__`` puts before the message."""
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return where

    def __str__(self) -> str:
        where = self._where()
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


# -- records and batches (kafkalog.format) ---------------------------------------------------------
class CorruptRecordError(KafkalogError, ValueError):
    """Bytes that cannot be a record or batch: bad size, CRC, varint or compressed data."""

    code = CORRUPT_MESSAGE


class RecordOffsetError(CorruptRecordError):
    """A record whose offset delta goes back, or past its batch's lastOffsetDelta, in a batch
    whose CRC matches (:mod:`kafkalog.format.offsets_rule`)."""


class InvalidRecordError(KafkalogError, ValueError):
    """Well-framed bytes that break a record rule (count mismatch, header sizes, magic rules)."""

    code = INVALID_RECORD


class UnsupportedCompressionTypeError(InvalidRecordError):
    """A codec id Kafka does not define, or one the magic does not allow (zstd below magic 2)."""

    code = UNSUPPORTED_COMPRESSION_TYPE


class VarintRangeError(InvalidRecordError):
    """A value to encode that its varint does not hold: ``bits`` is 32 (varint, unsigned varint)
    or 64 (varlong: in a record, only the timestamp delta is one)."""

    def __init__(self, message: str, *, bits: int) -> None:
        super().__init__(message)
        self.bits = bits


class RecordTooLargeError(KafkalogError, ValueError):
    """A batch over the configured size limit."""

    code = MESSAGE_TOO_LARGE


class RecordValidationError(KafkalogError, ValueError):
    """Records the append validation rejects one by one: ``errors`` lists ``(record index in
    batch, message)``, as Kafka's RecordValidationException answers a producer."""

    code = INVALID_RECORD

    def __init__(self, message: str, *, errors: list[tuple[int, str]], **where) -> None:
        super().__init__(message, **where)
        self.errors = errors


class InvalidTimestampError(RecordValidationError):
    """At least one record's timestamp is out of the topic's range (or typed LogAppendTime)."""

    code = INVALID_TIMESTAMP


class UnsupportedForMessageFormatError(KafkalogError, ValueError):
    """Idempotent or transactional batches for a topic whose message format is below magic 2."""

    code = UNSUPPORTED_FOR_MESSAGE_FORMAT


# -- the log's files (kafkalog.log) ----------------------------------------------------------------
class CorruptIndexError(KafkalogError, ValueError):
    """An offset, time or transaction index whose contents break the index rules."""

    code = CORRUPT_MESSAGE


class CorruptCheckpointError(KafkalogError, ValueError):
    """A checkpoint or metadata file (offset checkpoints, leader-epoch-checkpoint,
    partition.metadata, meta.properties, .kafka_cleanshutdown) that breaks its format: ``line``
    is the 1-based line of a text file that broke it.

    Kafka raises an IOException here, surfaced to clients as KAFKA_STORAGE_ERROR.
    """

    code = KAFKA_STORAGE_ERROR

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message, path=path)
        self.line = line

    def _where(self) -> list[str]:
        where = [] if self.path is None else [str(self.path)]
        return where if self.line is None else [*where, f"line {self.line}"]


class InvalidTopicError(KafkalogError, ValueError):
    """A topic name Kafka's Topic.validate rejects (or a partition number out of range)."""

    code = INVALID_TOPIC_EXCEPTION


class InternalTopicError(KafkalogError, ValueError):
    """An append by a client (or ``produce`` without ``--allow-internal-topics``) to one of
    Kafka's internal topics, which only the broker writes."""

    code = INVALID_TOPIC_EXCEPTION


class InvalidFileNameError(KafkalogError, ValueError):
    """A file or directory name that is not one Kafka writes (segment, snapshot, partition dir)."""


class InvalidOffsetError(KafkalogError, ValueError):
    """An index append whose offset is not above the last one (Kafka's InvalidOffsetException)."""


class IndexOffsetOverflowError(KafkalogError, ValueError):
    """``offset - base_offset`` does not fit the 4-byte relative offset (0..Int.MAX)."""


class MarkerError(KafkalogError, ValueError):
    """A COMMIT/ABORT marker of a producer that does not decode: no recovery gets past it."""

    code = INVALID_RECORD


class OffsetOutOfRangeError(KafkalogError, ValueError):
    """A read or truncation at an offset outside the log's range (start to end offset)."""

    code = OFFSET_OUT_OF_RANGE


class ConfigError(KafkalogError, ValueError):
    """A topic config name Kafka does not know, or a value outside its valid range."""

    code = INVALID_CONFIG


class CorruptSnapshotError(KafkalogError, ValueError):
    """A snapshot file that cannot be loaded (Kafka's CorruptSnapshotException): the broker then
    deletes it and rebuilds producer state from an older snapshot or the log."""

    code = UNKNOWN_SERVER_ERROR  # a KafkaException


class InvalidProducerEpochError(KafkalogError, ValueError):
    """A batch or marker from an older producer epoch than the one already seen."""

    code = INVALID_PRODUCER_EPOCH


class OutOfOrderSequenceError(KafkalogError, ValueError):
    """A batch whose first sequence does not follow the producer's last one."""

    code = OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidTxnStateError(KafkalogError, ValueError):
    """A non-transactional batch from a producer with an open transaction."""

    code = INVALID_TXN_STATE


class TransactionCoordinatorFencedError(KafkalogError, ValueError):
    """A transaction marker from a coordinator epoch older than the last one seen."""

    code = TRANSACTION_COORDINATOR_FENCED


class RemoteStorageError(OSError):
    """A call to object storage failed (after the retries, when the failure looked transient):
    ``path`` is the object's URL and ``position`` the byte position read. An ``OSError``, as a
    failed local read is, and not a KafkalogError: it is never taken for damaged data, which
    failOnDataLoss=false would skip (the read stops)."""

    def __init__(self, message: str, *, path: str, position: int | None = None) -> None:
        super().__init__(errno.EIO, message, path)
        self.message = message
        self.path = path
        self.position = position

    def __str__(self) -> str:
        where = self.path if self.position is None else f"{self.path}, position {self.position}"
        return f"{where}: {self.message}"

    def __reduce__(self):  # pickled across processes (Spark tasks) with its location
        return (_rebuild_remote_storage_error, (self.message, self.path, self.position))


def _rebuild_remote_storage_error(
    message: str, path: str, position: int | None
) -> RemoteStorageError:
    return RemoteStorageError(message, path=path, position=position)


class DataDirLockedError(KafkalogError):
    """Another process holds the data directory's ``.lock`` (a broker, or another kafkalog)."""


class NotRegularFileError(OSError):
    """A path of a data directory that is not a regular file (FIFO, socket, device, directory,
    symlink loop): ``filename`` names it, ``strerror`` says what it is."""


# -- datasets (kafkalog.dataset) -------------------------------------------------------------------
class OptionError(KafkalogError, ValueError):
    """An unknown option, a bad value or options that contradict each other."""


class WriteSchemaError(OptionError, TypeError):
    """A sink column missing or of a type the sink does not take: ``column`` names it and
    ``rule`` says what it must be."""

    def __init__(self, message: str, *, column: str, rule: str) -> None:
        super().__init__(message)
        self.column = column
        self.rule = rule


class PartitionOutOfRangeError(KafkalogError, ValueError):
    """A row's ``partition`` is not a partition of its topic (negative, or at least the topic's
    partition count), as Kafka's producer refuses it."""

    def __init__(self, topic: str, partition: int, partitions: int) -> None:
        super().__init__(
            f"partition {partition} of topic {topic!r} does not exist (the topic has "
            f"{partitions} partitions)"
        )
        self.topic = topic
        self.partition = partition
        self.partitions = partitions


class DataLossError(KafkalogError):
    """Offsets asked for are not in the data directory (retention, a missing segment, a
    checkpoint past the data, damaged bytes); with failOnDataLoss=false they are skipped with a
    warning."""


class ConcurrentCommitError(KafkalogError):
    """Another write committed to the data directory after this one started: this one is not
    committed (nothing of it is visible), and may be run again."""


# -- tiered storage (kafkalog.log.tiered): why a partition cannot be read past an offset; each
# names the offset and the file or object (or the metadata) that says so, and the records before
# it are read, none after it.
class TieredStorageError(DataLossError):
    """A tiered partition's log stops being readable at ``offset``."""


class RemoteSegmentMissingError(TieredStorageError):
    """The metadata says a remote segment was copied, but a file of it is not in the store."""


class RemoteSegmentTruncatedError(TieredStorageError):
    """A remote segment's ``.log`` ends before the end offset its metadata gives."""


class TieredOffsetGapError(TieredStorageError):
    """No remote segment holds the offsets between the log start (or the last remote segment)
    and the next remote segment or the local log start."""


# -- the wire protocol (kafkalog.protocol) ---------------------------------------------------------
class ProtocolError(KafkalogError, ValueError):
    """Bytes that are not a valid Kafka request or response: the client's fault, which costs only
    its own connection; the message says which API and version, field and byte of the body."""

    code = INVALID_REQUEST


class InvalidRequestError(ProtocolError):
    """A request body that breaks its schema: truncated, a negative size, bad UTF-8, ..."""


class UnsupportedVersionError(ProtocolError):
    """An API key we do not serve, or a version of it we do not speak."""

    code = UNSUPPORTED_VERSION


class FrameTooLargeError(ProtocolError):
    """A size prefix larger than the server accepts (``socket.request.max.bytes``)."""


# -- the server (kafkalog.server) ------------------------------------------------------------------
class CoordinatorLoadError(KafkalogError):
    """An internal topic partition that cannot be read back: the coordinator's state would be
    wrong without it, so the server does not start on it (as Kafka would not lead it)."""

    code = COORDINATOR_NOT_AVAILABLE


class RequestRefused(Exception):
    """A request a coordinator refuses with Kafka error ``code``: raised from nested checks and
    caught by the handler that answers with the code (no message: the code is the answer)."""

    def __init__(self, code: int) -> None:
        self.code = code


class CloseConnection(Exception):
    """Raised by a handler that must end the connection without answering.

    Kafka does this for a Produce with acks=0 that failed: the producer, which reads no answer,
    sees the connection close and refreshes its metadata.
    """


class CleaningAborted(Exception):
    """The log was deleted (or replaced) during its clean, or the server is stopping."""


class SaslFailed(Exception):
    """An authentication exchange failed. ``client_message``: what the client is told; None for
    Kafka's generic "invalid credentials" message (a mechanism's own detail, which may say whether
    the user exists, stays in the server's log)."""

    def __init__(self, message: str, client_message: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.client_message = client_message


class TlsError(ValueError):
    """TLS settings that cannot make a server context (missing or unreadable files)."""


class ListenerError(ValueError):
    """A listener, advertised listener or protocol map that cannot be read."""


# -- the command line (kafkalog.cli) ---------------------------------------------------------------
class UsageError(Exception):
    """The command line asks for something that cannot be done (exit 2)."""


class RecordFormatError(ValueError):
    """A record that cannot be shown as asked, or an input line that is not a record."""


class ValueDecodeError(ValueError):
    """Raised when bytes do not fit the chosen decoder (the caller adds file and offset)."""


class ValueEncodeError(ValueError):
    """Raised when a value does not fit the encoding it claims (the caller adds the line)."""
