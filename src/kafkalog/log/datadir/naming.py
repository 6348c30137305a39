"""File and directory names in a Kafka log dir (LogFileUtils.java, LocalLog.scala, Snapshots.java).

Layout of one log dir (``log.dirs`` entry)::

    meta.properties, *-offset-checkpoint, .kafka_cleanshutdown     (root files, see checkpoints.py)
    <topic>-<partition>/                                          a partition's log
        00000000000000000000.log .index .timeindex .txnindex      one segment per base offset
        00000000000000000512.snapshot                             producer state at offset 512
        00000000000000000512.log.cleaned / .swap / .deleted       cleaner and deletion temporaries
        00000000000000001734-0000000001.checkpoint                KRaft snapshot (end offset, epoch)
        leader-epoch-checkpoint, partition.metadata
    <topic>-<partition>.<32 hex>-delete | -future | -stray/       renamed partition dirs

Invariants: segment names are the base offset zero-padded to 20 digits (so ``ls`` sorts them
numerically; Long.MAX has 19 digits, so every offset fits); KRaft snapshot names pad the end
offset to 20 and the epoch to 10 digits. Topic names follow Topic.validate (``[a-zA-Z0-9._-]``,
1..249 characters, not ``.`` or ``..``), which also keeps every name inside its directory: no
``/``, ``\\`` or NUL can appear, and ``.``/``..`` are refused. A topic may contain ``-`` and
``.``: the partition is what follows the *last* ``-``, and the unique id of a renamed dir what
follows the last ``.``.
"""

from __future__ import annotations

import enum
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidFileNameError, InvalidTopicError
from ..storage import as_path

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "CLUSTER_METADATA_TOPIC_NAME",
    "DELETED_FILE_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "GROUP_METADATA_TOPIC_NAME",
    "INDEX_FILE_SUFFIX",
    "INTERNAL_TOPICS",
    "LOG_FILE_SUFFIX",
    "MAX_TOPIC_NAME_LENGTH",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "SHARE_GROUP_STATE_TOPIC_NAME",
    "SNAPSHOT_FILE_SUFFIX",
    "STRAY_DIR_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TRANSACTION_STATE_TOPIC_NAME",
    "TXN_INDEX_FILE_SUFFIX",
    "PartitionDirKind",
    "PartitionDirName",
    "SegmentFileName",
    "SnapshotFileName",
    "TopicPartition",
    "filename_prefix_from_offset",
    "is_index_file",
    "is_log_file",
    "is_valid_topic",
    "log_delete_dir_name",
    "log_dir_name",
    "log_file",
    "log_future_dir_name",
    "log_stray_dir_name",
    "offset_from_file",
    "offset_from_file_name",
    "offset_index_file",
    "parse_partition_dir_name",
    "parse_segment_file_name",
    "parse_snapshot_file_name",
    "producer_snapshot_file",
    "snapshot_file_name",
    "time_index_file",
    "transaction_index_file",
    "validate_partition",
    "validate_topic",
]

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"  # scheduled for deletion (file.delete.delay.ms)
CLEANED_FILE_SUFFIX = ".cleaned"  # being written by the log cleaner
SWAP_FILE_SUFFIX = ".swap"  # cleaned, about to replace the segments it rewrote
SNAPSHOT_FILE_SUFFIX = ".checkpoint"  # KRaft snapshot
_SNAPSHOT_PARTIAL_SUFFIX = ".checkpoint.part"
_SNAPSHOT_DELETED_SUFFIX = ".checkpoint.deleted"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
# Topics whose records only the broker writes (Kafka's Topic.isInternal, the KRaft metadata log,
# KIP-932's share-group state): a broker refuses produce requests to them ("Cannot append to
# internal topic", INVALID_TOPIC_EXCEPTION).
INTERNAL_TOPICS = frozenset(
    {
        GROUP_METADATA_TOPIC_NAME,
        TRANSACTION_STATE_TOPIC_NAME,
        CLUSTER_METADATA_TOPIC_NAME,
        SHARE_GROUP_STATE_TOPIC_NAME,
    }
)

MAX_TOPIC_NAME_LENGTH = 249  # leaves room for "-<partition>.<32 hex>-delete" in 255 bytes
_MAX_FILE_NAME_LENGTH = 255
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_OFFSET_WIDTH = 20
_EPOCH_WIDTH = 10

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_DIGITS = re.compile(r"[0-9]+")
_SEGMENT_NAME = re.compile(
    r"([0-9]+)(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)(\.deleted|\.cleaned|\.swap)?"
)
_SNAPSHOT_NAME = re.compile(
    r"([0-9]{20})-([0-9]{10})"
    r"(?:(\.checkpoint)|(\.checkpoint\.deleted)|(-[^/\\\x00]*\.checkpoint\.part))"
)
_UNIQUE_ID = re.compile(r"[0-9a-fA-F]{32}")


# ---------------------------------------------------------------------------------------------
# Topics and partitions


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """A topic and partition number; ``str()`` is Kafka's ``topic-partition`` form.

    Not validated on construction (checkpoint files may name anything); names built from it for
    the file system are (see :func:`log_dir_name`).
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _invalid_topic_reason(topic: str) -> str | None:
    if not isinstance(topic, str):
        return f"expected a str, got {type(topic).__name__}"
    if topic == "":
        return "the empty string is not allowed"
    if topic == ".":
        return "'.' is not allowed"
    if topic == "..":
        return "'..' is not allowed"
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"the length of {topic[:40]!r}... is {len(topic)}, longer than the max allowed "
            f"length {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        return (
            f"{topic!r} contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def is_valid_topic(topic: str) -> bool:
    """Whether Kafka's Topic.validate accepts ``topic``."""
    return _invalid_topic_reason(topic) is None


def validate_topic(topic: str) -> None:
    """Raise :class:`InvalidTopicError` unless ``topic`` is a legal Kafka topic name.

    The legal characters exclude ``/``, ``\\`` and NUL, and ``.``/``..`` are refused, so a legal
    topic can never name a path outside its log dir. ``a..b`` is legal in Kafka and accepted.
    """
    reason = _invalid_topic_reason(topic)
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")


def validate_partition(partition: int) -> None:
    """Raise :class:`InvalidTopicError` unless ``partition`` is in 0..Int.MAX."""
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidTopicError(f"partition must be an int, got {type(partition).__name__}")
    if not 0 <= partition <= _INT32_MAX:
        raise InvalidTopicError(f"partition {partition} is outside 0..{_INT32_MAX}")


# ---------------------------------------------------------------------------------------------
# Segment files


def filename_prefix_from_offset(offset: int) -> str:
    """The offset zero-padded to 20 digits, the stem of every segment file."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= _INT64_MAX:
        raise ValueError(f"offset must be an int in 0..{_INT64_MAX}, got {offset!r}")
    return f"{offset:020d}"


def _segment_path(directory: str | os.PathLike, offset: int, base_suffix: str, suffix: str) -> Path:
    if suffix not in ("", DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
        raise ValueError(f"unknown segment file suffix {suffix!r}")
    return as_path(directory) / f"{filename_prefix_from_offset(offset)}{base_suffix}{suffix}"


def log_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20-digit offset>.log<suffix>``; ``suffix`` is "", .deleted, .cleaned or .swap."""
    return _segment_path(directory, offset, LOG_FILE_SUFFIX, suffix)


def offset_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20-digit offset>.index<suffix>``."""
    return _segment_path(directory, offset, INDEX_FILE_SUFFIX, suffix)


def time_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20-digit offset>.timeindex<suffix>``."""
    return _segment_path(directory, offset, TIME_INDEX_FILE_SUFFIX, suffix)


def transaction_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20-digit offset>.txnindex<suffix>``."""
    return _segment_path(directory, offset, TXN_INDEX_FILE_SUFFIX, suffix)


def producer_snapshot_file(directory: str | os.PathLike, offset: int) -> Path:
    """``<dir>/<20-digit offset>.snapshot``: producer state up to ``offset`` (exclusive)."""
    return Path(directory) / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def offset_from_file_name(file_name: str) -> int:
    """The offset a segment-style name starts with (Kafka's offsetFromFileName).

    Like Kafka, any number of digits before the first ``.`` is accepted; anything else raises
    :class:`InvalidFileNameError` naming the file.
    """
    stem, dot, _ = file_name.partition(".")
    if not dot or not _DIGITS.fullmatch(stem):
        raise InvalidFileNameError(
            "not a segment file name: expected <digits>.<suffix>, e.g. 00000000000000000000.log",
            path=file_name,
        )
    offset = int(stem)
    if offset > _INT64_MAX:
        raise InvalidFileNameError(f"offset {stem} does not fit in a long", path=file_name)
    return offset


def offset_from_file(path: str | os.PathLike) -> int:
    """:func:`offset_from_file_name` of a path's last component."""
    return offset_from_file_name(Path(path).name)


def is_log_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` ends with ``.log`` (Kafka's isLogFile)."""
    return os.fspath(path).endswith(LOG_FILE_SUFFIX)


def is_index_file(path: str | os.PathLike) -> bool:
    """Whether the name ends with .index, .timeindex or .txnindex (Kafka's isIndexFile)."""
    return Path(path).name.endswith(
        (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentFileName:
    """A parsed segment file name: ``00000000000000000512.index.swap`` ->
    (base_offset=512, suffix=".index", status=".swap")."""

    base_offset: int
    suffix: str  # .log .index .timeindex .txnindex .snapshot
    status: str = ""  # "" or .deleted .cleaned .swap

    @property
    def name(self) -> str:
        return f"{filename_prefix_from_offset(self.base_offset)}{self.suffix}{self.status}"


def parse_segment_file_name(file_name: str) -> SegmentFileName:
    """Parse a segment, index or producer-snapshot file name; :class:`InvalidFileNameError` if it
    is not one (KRaft ``.checkpoint`` snapshots: see :func:`parse_snapshot_file_name`)."""
    match = _SEGMENT_NAME.fullmatch(file_name)
    if match is None:
        raise InvalidFileNameError(
            "not a segment file name: expected <20-digit offset>.log|.index|.timeindex|"
            ".txnindex|.snapshot, optionally followed by .deleted|.cleaned|.swap",
            path=file_name,
        )
    offset = int(match.group(1))
    if offset > _INT64_MAX:
        raise InvalidFileNameError(
            f"offset {match.group(1)} does not fit in a long", path=file_name
        )
    return SegmentFileName(base_offset=offset, suffix=match.group(2), status=match.group(3) or "")


# ---------------------------------------------------------------------------------------------
# KRaft snapshots


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotFileName:
    """A KRaft snapshot id (end offset, epoch) and its state (Kafka's SnapshotPath)."""

    end_offset: int
    epoch: int
    partial: bool = False  # <id>-<random>.checkpoint.part: being written
    deleted: bool = False  # <id>.checkpoint.deleted: marked for deletion


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """``<20-digit end offset>-<10-digit epoch>.checkpoint``."""
    if not 0 <= epoch <= _INT32_MAX:
        raise ValueError(f"epoch must be in 0..{_INT32_MAX}, got {epoch}")
    return (
        f"{filename_prefix_from_offset(end_offset)}-{epoch:0{_EPOCH_WIDTH}d}{SNAPSHOT_FILE_SUFFIX}"
    )


def parse_snapshot_file_name(file_name: str) -> SnapshotFileName | None:
    """Parse a KRaft snapshot name; None if it does not end like one (as Snapshots.parse).

    A name that ends like a snapshot but has a malformed id raises :class:`InvalidFileNameError`.
    """
    if not file_name.endswith(
        (SNAPSHOT_FILE_SUFFIX, _SNAPSHOT_PARTIAL_SUFFIX, _SNAPSHOT_DELETED_SUFFIX)
    ):
        return None
    match = _SNAPSHOT_NAME.fullmatch(file_name)
    if match is None:
        raise InvalidFileNameError(
            "not a KRaft snapshot name: expected <20-digit end offset>-<10-digit epoch>.checkpoint",
            path=file_name,
        )
    offset, epoch = int(match.group(1)), int(match.group(2))
    if offset > _INT64_MAX or epoch > _INT32_MAX:
        raise InvalidFileNameError("snapshot end offset or epoch out of range", path=file_name)
    return SnapshotFileName(
        end_offset=offset,
        epoch=epoch,
        deleted=match.group(4) is not None,
        partial=match.group(5) is not None,
    )


# ---------------------------------------------------------------------------------------------
# Partition directories


class PartitionDirKind(enum.Enum):
    """What a partition directory is, from its name's suffix."""

    LIVE = ""
    DELETE = DELETE_DIR_SUFFIX  # renamed for asynchronous deletion
    FUTURE = FUTURE_DIR_SUFFIX  # replica being moved to this log dir (alter-replica-log-dirs)
    STRAY = STRAY_DIR_SUFFIX  # replica the controller no longer assigns here (KRaft)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDirName:
    """A parsed partition directory name. ``unique_id`` is the 32-hex id of a renamed dir."""

    topic_partition: TopicPartition
    kind: PartitionDirKind = PartitionDirKind.LIVE
    unique_id: str | None = None


def log_dir_name(topic_partition: TopicPartition) -> str:
    """``<topic>-<partition>``, after validating both."""
    validate_topic(topic_partition.topic)
    validate_partition(topic_partition.partition)
    return f"{topic_partition.topic}-{topic_partition.partition}"


def _unique_hex(unique_id: uuid.UUID | None) -> str:
    return (unique_id or uuid.uuid4()).hex


def log_delete_dir_name(topic_partition: TopicPartition, unique_id: uuid.UUID | None = None) -> str:
    """``<topic>-<partition>.<32 hex>-delete``, the topic cut so the name fits 255 characters."""
    return _capped_dir_name(topic_partition, _unique_hex(unique_id), DELETE_DIR_SUFFIX)


def log_stray_dir_name(topic_partition: TopicPartition, unique_id: uuid.UUID | None = None) -> str:
    """``<topic>-<partition>.<32 hex>-stray``, the topic cut so the name fits 255 characters."""
    return _capped_dir_name(topic_partition, _unique_hex(unique_id), STRAY_DIR_SUFFIX)


def log_future_dir_name(topic_partition: TopicPartition, unique_id: uuid.UUID | None = None) -> str:
    """``<topic>-<partition>.<32 hex>-future`` (not cut, as in Kafka)."""
    return f"{log_dir_name(topic_partition)}.{_unique_hex(unique_id)}{FUTURE_DIR_SUFFIX}"


def _capped_dir_name(topic_partition: TopicPartition, unique_hex: str, suffix: str) -> str:
    log_dir_name(topic_partition)  # validates
    full_suffix = f"-{topic_partition.partition}.{unique_hex}{suffix}"
    prefix_length = min(len(topic_partition.topic), _MAX_FILE_NAME_LENGTH - len(full_suffix))
    return topic_partition.topic[:prefix_length] + full_suffix


def parse_partition_dir_name(dir_name: str) -> PartitionDirName:
    """Parse ``<topic>-<partition>`` or ``<topic>-<partition>.<32 hex>-delete|-future|-stray``
    (Kafka's parseTopicPartitionName, plus topic validation so the parts are safe path names).

    Raises :class:`InvalidFileNameError` naming the directory when it is not of that form.
    """

    def fail(why: str) -> InvalidFileNameError:
        return InvalidFileNameError(
            f"not a partition directory ({why}): expected topic-partition or "
            "topic-partition.uniqueId-delete|-future|-stray; Kafka's log directories should only "
            "contain Kafka topic data",
            path=dir_name,
        )

    kind = PartitionDirKind.LIVE
    unique_id = None
    name = dir_name
    for candidate in (PartitionDirKind.DELETE, PartitionDirKind.FUTURE, PartitionDirKind.STRAY):
        if dir_name.endswith(candidate.value):
            kind = candidate
            name, dot, unique_id = dir_name[: -len(candidate.value)].rpartition(".")
            if not dot:
                raise fail(f"no '.uniqueId' before {candidate.value}")
            if not _UNIQUE_ID.fullmatch(unique_id):
                raise fail(f"unique id {unique_id!r} is not 32 hex digits")
            break
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition:
        raise fail("no '-<partition>'")
    if not _DIGITS.fullmatch(partition) or int(partition) > _INT32_MAX:
        raise fail(f"partition {partition!r} is not an int in 0..{_INT32_MAX}")
    reason = _invalid_topic_reason(topic)
    if reason is not None:
        raise fail(f"topic name is invalid: {reason}")
    return PartitionDirName(
        topic_partition=TopicPartition(topic, int(partition)), kind=kind, unique_id=unique_id
    )
