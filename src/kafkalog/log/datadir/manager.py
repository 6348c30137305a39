"""Data directories (Kafka's log.dirs) and the partitions in them: Kafka's LogManager.

A data directory holds one folder per partition (``<topic>-<partition>``) and, at its root, the
checkpoint files (recovery points, log start offsets, cleaner offsets), ``meta.properties``, the
``.lock`` that one writing process holds, and ``.kafka_cleanshutdown`` while nothing is writing.

Opening is read-only unless ``writable=True``: a dead broker's disk is never changed. Writable
opening takes every directory's lock (a second writer gets :class:`DataDirLockedError`), removes
the clean-shutdown marker (recovering every log if it was missing), and :meth:`LogManager.close`
writes the checkpoints and the marker back, as a broker's clean shutdown does.

Topic configs come from the newest KRaft ``__cluster_metadata`` records when a directory holds
them, else from kafkalog's own ``kafkalog-topics.json`` at the directory's root (documented in
docs/log.md), else, for Kafka's internal topics, the configs Kafka creates them with, else
Kafka's defaults (:meth:`LogManager.config_source` says which). A new partition goes to the
directory holding the fewest.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ...errors import KafkalogError
from ..clock import Clock, SystemClock
from ..error_location import locate_in_partition
from ..errors import CorruptCheckpointError, InvalidFileNameError
from ..partition import LOG_CONFIG_DEFS, Log, LogConfig
from ..storage import as_path, is_remote
from .bounded_json import nesting_guard, read_json_file
from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    read_offset_checkpoint_or_reset,
    write_file_atomically,
    write_offset_checkpoint,
)
from .clean_shutdown import CLEAN_SHUTDOWN_FILE_NAME, read_clean_shutdown, write_clean_shutdown
from .cluster_metadata import CLUSTER_METADATA_DIR, MetadataImage, load_metadata_image
from .dir_lock import DataDirLock, DataDirLockedError
from .kafka_uuid import uuid_to_kafka_string
from .meta_properties import (
    META_PROPERTIES_FILE_NAME,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from .naming import (
    PartitionDirKind,
    TopicPartition,
    log_delete_dir_name,
    log_dir_name,
    parse_partition_dir_name,
    validate_partition,
    validate_topic,
)
from .partition_metadata import (
    PARTITION_METADATA_FILE_NAME,
    read_partition_metadata,
    write_partition_metadata,
)
from .regular_file import require_regular_entries

__all__ = [
    "CONFIG_FROM_DEFAULTS",
    "CONFIG_FROM_INTERNAL_TOPIC",
    "CONFIG_FROM_METADATA",
    "CONFIG_FROM_TOPICS_FILE",
    "INTERNAL_TOPIC_CONFIGS",
    "PRODUCER_IDS_FILE_NAME",
    "TOPICS_FILE_NAME",
    "DataDirLockedError",
    "LogManager",
    "TopicConfigs",
    "topic_configs",
]

# Topic configs kafkalog understands; KRaft may carry others for a topic (quotas, tiering).
_KNOWN = frozenset(LOG_CONFIG_DEFS)
TOPICS_FILE_NAME = "kafkalog-topics.json"
TOPICS_FILE_VERSION = 1
# Where kafkalog's server reserves producer id blocks, so ids never repeat across restarts.
PRODUCER_IDS_FILE_NAME = "kafkalog-producer-ids.json"

# What Kafka creates its internal topics with (GroupCoordinatorService.groupMetadataTopicConfigs,
# TransactionCoordinator.transactionStateTopicConfigs, with the brokers' default
# offsets.topic.segment.bytes and transaction.state.log.segment.bytes): a data directory copied
# without its cluster's metadata still holds compacted logs there, never ones to expire.
INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(100 << 20),
    },
    "__transaction_state": {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "segment.bytes": str(100 << 20),
    },
}
# Where a topic's configs came from (LogManager.config_source).
CONFIG_FROM_METADATA = "metadata"  # the KRaft __cluster_metadata log
CONFIG_FROM_TOPICS_FILE = "topicsFile"  # kafkalog-topics.json
CONFIG_FROM_INTERNAL_TOPIC = "internalTopic"  # INTERNAL_TOPIC_CONFIGS
CONFIG_FROM_DEFAULTS = "defaults"  # nothing recorded: Kafka's defaults assumed


class LogManager:
    """Every partition log of one or several data directories."""

    def __init__(
        self,
        data_dirs: str | os.PathLike | Iterable[str | os.PathLike],
        *,
        writable: bool = False,
        create: bool = False,
        clock: Clock | None = None,
        prepare: Callable[[Path], None] | None = None,
        topic_defaults: Mapping[str, str] | None = None,
        interval_flushes: bool = True,
    ) -> None:
        """``prepare``, if given, is called with each partition directory just before its log
        is opened, under the lock when writable (a repair tool fixes what opening would fail
        on). ``topic_defaults``: topic configs a broker setting gives every topic without its
        own (``retention.ms`` from ``log.retention.hours``, see
        :func:`kafkalog.log.partition.topic_defaults`). ``interval_flushes=False``: the logs
        leave the flushes ``flush.messages`` and ``flush.ms`` call for to their owner
        (:attr:`Log.interval_flushes`)."""
        self.interval_flushes = interval_flushes
        dirs = [data_dirs] if isinstance(data_dirs, (str, os.PathLike)) else list(data_dirs)
        self.data_dirs = [as_path(d) for d in dirs]  # a URL: a RemotePath (object storage)
        remote = next((d for d in self.data_dirs if is_remote(d)), None)
        if remote is not None and (writable or create):
            raise PermissionError(f"{remote}: object storage is only read")
        self.topic_defaults = dict(topic_defaults or {})
        LogConfig(defaults=self.topic_defaults)  # checked before any log opens with them
        self.writable = writable
        self.clock = clock or SystemClock()
        self.logs: dict[TopicPartition, Log] = {}
        self.log_dir_of: dict[TopicPartition, Path] = {}
        self._prepare = prepare
        self.skipped: list[tuple[Path, str]] = []  # directories that are not live partitions
        # What opening tolerated as a broker does (a malformed checkpoint reset), to report.
        self.warnings: list[str] = []
        self._locks: list[DataDirLock] = []
        self._locked: set[Path] = set()  # the real directories whose locks are held
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        # the broker epoch of each data directory's clean-shutdown marker, kept for close()
        self._broker_epochs: dict[Path, int | None] = {}
        for d in self.data_dirs:
            if not d.is_dir():
                if not create:
                    raise FileNotFoundError(f"data directory {d} does not exist")
                d.mkdir(parents=True)
        try:
            if writable:
                for d in self.data_dirs:
                    self._lock(d)
            self._load_topics_files()
            self.metadata: MetadataImage | None = load_metadata_image(
                [str(d) for d in self.data_dirs]
            )
            self._discover()
        except BaseException:
            self._unlock()
            raise

    # -- opening -----------------------------------------------------------------------------------
    def _lock(self, directory: Path) -> None:
        """Take ``directory``'s lock, once per real directory (symlinks resolved)."""
        real = Path(os.path.realpath(directory))
        if real in self._locked:
            return
        lock = DataDirLock(directory)
        lock.__enter__()
        self._locks.append(lock)
        self._locked.add(real)

    def _unlock(self) -> None:
        for lock in self._locks:
            lock.__exit__(None, None, None)
        self._locks.clear()
        self._locked.clear()

    def _load_topics_files(self) -> None:
        for d in self.data_dirs:
            path = d / TOPICS_FILE_NAME
            if not path.exists():
                continue
            try:
                doc = read_json_file(path)  # bounded: size, nesting (never RecursionError)
                if not isinstance(doc, dict):
                    raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
                if doc.get("version") != TOPICS_FILE_VERSION:
                    raise ValueError(f"unsupported version {doc.get('version')!r}")
                for topic, entry in doc.get("topics", {}).items():
                    configs = {str(k): str(v) for k, v in entry.get("configs", {}).items()}
                    LogConfig(configs)  # validate now, with the file named on error
                    self._topic_configs[topic] = configs
                    if entry.get("topicId"):
                        self._topic_ids[topic] = uuid.UUID(entry["topicId"])
            except CorruptCheckpointError as e:
                raise KafkalogError(f"invalid topics file: {e.message}", path=str(path)) from None
            except (ValueError, AttributeError, TypeError, KafkalogError) as e:
                raise KafkalogError(f"invalid topics file: {e}", path=str(path)) from None

    def _discover(self) -> None:
        for d in self.data_dirs:
            had_clean_shutdown = True
            marker = d / CLEAN_SHUTDOWN_FILE_NAME
            if self.writable:
                # A new or empty directory has nothing to recover.
                had_clean_shutdown = marker.exists() or not any(p.is_dir() for p in d.iterdir())
                if marker.exists():
                    # Kafka's LogManager goes by the marker's existence alone; its broker epoch
                    # is read apart, and a malformed one only logged: a warning here. The epoch
                    # is written back on close: a KRaft broker registers with it, and without
                    # it the controller takes the restart for an unclean one (KIP-966).
                    try:
                        with nesting_guard(marker):
                            self._broker_epochs[d] = read_clean_shutdown(marker)
                    except KafkalogError as e:
                        self.warnings.append(f"{e}: the marker counts (a clean shutdown)")
                    os.unlink(marker)
                self._ensure_meta_properties(d)
            recovery_points = self._read_checkpoint(d / RECOVERY_POINT_OFFSET_CHECKPOINT)
            start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            for child in sorted(d.iterdir()):
                if not child.is_dir() or child.name == CLUSTER_METADATA_DIR:
                    continue
                try:
                    parsed = parse_partition_dir_name(child.name)
                except (InvalidFileNameError, KafkalogError) as e:
                    self.skipped.append((child, f"not a partition directory: {e}"))
                    continue
                if parsed.kind != PartitionDirKind.LIVE:
                    self.skipped.append((child, f"{parsed.kind.name.lower()} partition directory"))
                    continue
                tp = parsed.topic_partition
                if tp in self.logs:
                    raise KafkalogError(
                        f"Duplicate log directories for {tp} are found in both "
                        f"{self.log_dir_of[tp]} and {d}. It is likely because log directory "
                        f"failure happened while broker was replacing current replica with "
                        f"future replica. Recover broker from this failure by manually deleting "
                        f"one of the two directories for this partition.",
                        path=str(child),
                    )
                if self.writable:
                    # A symlinked partition lives in another data directory: hold that one's
                    # lock too (a broker serving it holds it), not only this directory's.
                    self._lock(Path(os.path.realpath(child)).parent)
                if self._prepare is not None:
                    self._prepare(child)
                require_regular_entries(child)  # a FIFO named like a segment: never opened
                try:
                    opened = Log.open(
                        child,
                        config=self.config_for(tp.topic),
                        clock=self.clock,
                        writable=self.writable,
                        log_start_offset=start_offsets.get(tp, 0),
                        recovery_point=recovery_points.get(tp, 0),
                        had_clean_shutdown=had_clean_shutdown,
                    )
                except KafkalogError as e:
                    raise locate_in_partition(e, child) from None
                self.register(tp, opened, d)

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        offsets, problem = read_offset_checkpoint_or_reset(path)
        if problem is not None:
            reset = (
                "recovery points reset to 0"
                if path.name == RECOVERY_POINT_OFFSET_CHECKPOINT
                else "log start offsets reset to the first segments' base offsets"
            )
            self.warnings.append(f"{problem}: {reset}, as a broker's startup does")
        return offsets

    def _ensure_meta_properties(self, directory: Path) -> None:
        path = directory / META_PROPERTIES_FILE_NAME
        if path.exists():
            return
        cluster_id = next(
            (m.cluster_id for m in self._existing_meta() if m.cluster_id), None
        ) or uuid_to_kafka_string(uuid.uuid4())
        write_meta_properties(
            path,
            MetaProperties(version=1, cluster_id=cluster_id, node_id=0, directory_id=uuid.uuid4()),
        )

    def _existing_meta(self) -> list[MetaProperties]:
        found = []
        for d in self.data_dirs:
            path = d / META_PROPERTIES_FILE_NAME
            if path.exists():
                found.append(read_meta_properties(path))
        return found

    # -- topics ------------------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        """KRaft metadata first, then kafkalog's topics file, then the configs Kafka gives its
        internal topics, then Kafka's defaults."""
        source = self.config_source(topic)
        defaults = self.topic_defaults
        if source == CONFIG_FROM_METADATA:
            known = {k: v for k, v in self.metadata.topics[topic].configs.items() if k in _KNOWN}
            return LogConfig(known, stored=True, defaults=defaults)
        if source == CONFIG_FROM_INTERNAL_TOPIC:
            return LogConfig(INTERNAL_TOPIC_CONFIGS[topic], defaults=defaults)
        return LogConfig(self._topic_configs.get(topic, {}), defaults=defaults)

    def config_source(self, topic: str) -> str:
        """Where :meth:`config_for` finds ``topic``'s configs: one of the ``CONFIG_FROM_*``
        values. ``CONFIG_FROM_DEFAULTS`` means nothing records them: a tool about to delete
        data by them should not trust them blindly."""
        image = getattr(self, "metadata", None)
        if image is not None and topic in image.topics:
            return CONFIG_FROM_METADATA
        if topic in self._topic_configs:
            return CONFIG_FROM_TOPICS_FILE
        if topic in INTERNAL_TOPIC_CONFIGS:
            return CONFIG_FROM_INTERNAL_TOPIC
        return CONFIG_FROM_DEFAULTS

    def topic_id(self, topic: str) -> uuid.UUID | None:
        if self.metadata is not None and topic in self.metadata.topics:
            return self.metadata.topics[topic].topic_id
        for tp, d in self.log_dir_of.items():
            if tp.topic == topic:
                meta = d / log_dir_name(tp) / PARTITION_METADATA_FILE_NAME
                if meta.exists():
                    return read_partition_metadata(meta).topic_id
        return self._topic_ids.get(topic)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in sorted(self.logs, key=lambda t: (t.topic, t.partition)):
            out.setdefault(tp.topic, []).append(tp.partition)
        return out

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def create_topic(
        self, topic: str, num_partitions: int, configs: Mapping[str, str] | None = None
    ) -> list[Log]:
        """Create ``num_partitions`` partitions (and record the configs in the topics file)."""
        self._check_writable()
        validate_topic(topic)
        if any(tp.topic == topic for tp in self.logs):
            raise KafkalogError(f"Topic '{topic}' already exists.")
        configs = {str(k): str(v) for k, v in (configs or {}).items()}
        LogConfig(configs)
        topic_id = uuid.uuid4()
        self._topic_configs[topic] = configs
        self._topic_ids[topic] = topic_id
        self._write_topics_file()
        return [self.get_or_create_log(TopicPartition(topic, p)) for p in range(num_partitions)]

    def set_topic_defaults(self, topic_defaults: Mapping[str, str]) -> None:
        """Make ``topic_defaults`` every topic's defaults from now on (a broker's dynamic
        config changed): checked first, then applied to the open logs."""
        defaults = dict(topic_defaults)
        LogConfig(defaults=defaults)
        self.topic_defaults = defaults
        for tp, partition_log in self.logs.items():
            partition_log.config = self.config_for(tp.topic)

    def alter_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace ``topic``'s overrides (validated first), record them in the topics file and
        apply them to its open logs (segments already written keep the sizes they rolled at)."""
        self._check_writable()
        configs = {str(k): str(v) for k, v in configs.items()}
        new = LogConfig(configs, defaults=self.topic_defaults)
        self._topic_configs[topic] = configs
        self._write_topics_file()
        for tp, partition_log in self.logs.items():
            if tp.topic == topic:
                partition_log.config = new

    def delete_topic(self, topic: str) -> int:
        """Close and remove every partition of ``topic``; the number of partitions removed.

        As Kafka does, a partition directory is first renamed ``<tp>.<uuid>-delete`` (a crash
        midway never leaves a half-deleted live partition; the loader skips such directories),
        then removed."""
        self._check_writable()
        removed = 0
        for tp in [tp for tp in self.logs if tp.topic == topic]:
            partition_log = self.logs.pop(tp)
            directory = self.log_dir_of.pop(tp)
            partition_log.close()
            doomed = directory / log_delete_dir_name(tp)
            (directory / log_dir_name(tp)).rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)  # what is left is only ever a -delete dir
            removed += 1
        self._topic_configs.pop(topic, None)
        self._topic_ids.pop(topic, None)
        self._write_topics_file()
        self.checkpoint()
        return removed

    def register(self, tp: TopicPartition, log: Log, log_dir: Path) -> None:
        """Make ``log``, opened in data directory ``log_dir``, the manager's log of ``tp``
        (with the manager's :attr:`interval_flushes`)."""
        log.interval_flushes = self.interval_flushes
        self.logs[tp] = log
        self.log_dir_of[tp] = log_dir

    def get_or_create_log(self, tp: TopicPartition) -> Log:
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        self._check_writable()
        validate_topic(tp.topic)
        validate_partition(tp.partition)
        counts = {d: 0 for d in self.data_dirs}
        for d in self.log_dir_of.values():
            counts[d] += 1
        target = min(self.data_dirs, key=lambda d: counts[d])  # the emptiest, in listed order
        path = target / log_dir_name(tp)
        log = Log.open(
            path, config=self.config_for(tp.topic), clock=self.clock, writable=True, create=True
        )
        topic_id = self.topic_id(tp.topic) or self._topic_ids.setdefault(tp.topic, uuid.uuid4())
        write_partition_metadata(path / PARTITION_METADATA_FILE_NAME, topic_id)
        self.register(tp, log, target)
        return log

    def _write_topics_file(self) -> None:
        doc = {
            "version": TOPICS_FILE_VERSION,
            "topics": {
                t: {
                    "topicId": str(self._topic_ids[t]) if t in self._topic_ids else None,
                    "configs": c,
                }
                for t, c in sorted(self._topic_configs.items())
            },
        }
        data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        for d in self.data_dirs:
            write_file_atomically(d / TOPICS_FILE_NAME, data)

    def _check_writable(self) -> None:
        if not self.writable:
            raise PermissionError("the data directories are open read-only")

    # -- checkpoints and closing -------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Write every directory's recovery-point and log-start-offset checkpoints atomically."""
        self._check_writable()
        for d in self.data_dirs:
            logs = {tp: log for tp, log in self.logs.items() if self.log_dir_of[tp] == d}
            write_offset_checkpoint(
                d / RECOVERY_POINT_OFFSET_CHECKPOINT,
                {tp: log.recovery_point for tp, log in logs.items()},
            )
            write_offset_checkpoint(
                d / LOG_START_OFFSET_CHECKPOINT,
                {tp: log.log_start_offset for tp, log in logs.items()},
            )

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()

    def close(self) -> None:
        """Clean shutdown when writable: flush, checkpoint, marker; then release the locks."""
        try:
            if self.writable:
                self.flush()
            for log in self.logs.values():
                log.close()
            if self.writable:
                for d in self.data_dirs:
                    epoch = self._broker_epochs.get(d)
                    write_clean_shutdown(d / CLEAN_SHUTDOWN_FILE_NAME, epoch)
        finally:
            self._unlock()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TopicConfigs(LogManager):
    """The topic configs of data directories as a LogManager finds them (KRaft metadata,
    kafkalog's topics file, internal topics, Kafka's defaults), no log opened: for readers that
    open partitions on their own and need a topic's limits (``max.message.bytes`` tells a torn
    append from a damaged size field)."""

    def _discover(self) -> None:
        pass


def topic_configs(data_dir: str | os.PathLike) -> TopicConfigs | None:
    """:class:`TopicConfigs` of ``data_dir``, or None when its metadata or topics file cannot be
    read (a reader then assumes Kafka's defaults; ``kafkalog verify`` reports such files)."""
    try:
        return TopicConfigs(data_dir)
    except (KafkalogError, OSError, ValueError):
        return None
