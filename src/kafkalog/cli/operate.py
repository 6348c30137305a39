"""What the operator commands (recover, rebuild-index, compact, retention, stats, transactions)
share: which partitions a path names, opening their logs as a broker would, and exit statuses.

A path is a data directory (a ``log.dirs`` entry) or a partition directory (one that directly
holds ``*.log`` files, see :func:`kafkalog.log.verify.data_dir.is_partition_dir`). A partition
directory's parent is taken as its data directory: its checkpoints, clean-shutdown marker, topic
configs and ``.lock`` apply.

Changing commands hold the data directory's ``.lock`` as a broker does (exit 3 when a broker or
another kafkalog holds it). Opening a whole data directory for writing is a broker's startup and
clean shutdown (:class:`~kafkalog.log.datadir.manager.LogManager`): it recovers every partition
after an unclean shutdown and writes the checkpoints and the clean-shutdown marker when done.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_OK, EXIT_PROBLEMS, KafkalogError
from .arguments import add_json_flag, bounded_int
from .failures import UsageError, os_error_text, report
from .progress import Progress, add_quiet_flag, total_bytes
from .remote import check_urls, is_url, refuse_urls

if TYPE_CHECKING:  # the log layer is imported when a command runs, not when the CLI starts
    from ..dataset import Manifest
    from ..log.partition import Log
    from ..log.segment import LogSegment


__all__ = [
    "PartitionLog",
    "PartitionProblems",
    "Target",
    "add_apply_flag",
    "add_now_option",
    "add_target_arguments",
    "checkpoint_problems",
    "cleanup_policy",
    "index_problem",
    "logs_in_progress",
    "now_ms",
    "open_log",
    "open_logs",
    "operator_arguments",
    "partition_offsets",
    "read_segments",
    "resolve_target",
]


@dataclass(slots=True)
class Target:
    """The partitions one command acts on."""

    path: Path
    data_dir: Path  # checkpoints, marker, topic configs and .lock live here
    partitions: list[Path]
    is_data_dir: bool
    filtered: bool = False  # --topic chose some of a data directory's partitions
    # A data directory in object storage that kafkalog's writers committed to: its newest
    # manifest (kafkalog.log.datadir.manifest), which names every segment read.
    manifest: Manifest | None = None

    def committed_bases(self, directory: Path) -> set[int] | None:
        """The segments of partition ``directory`` its manifest commits (None: no manifest,
        every segment listed is read)."""
        if self.manifest is None:
            return None
        from ..log.datadir import parse_partition_dir_name

        tp = parse_partition_dir_name(directory.name).topic_partition
        return self.manifest.bases(tp) or set()

    def committed_files(self, directory: Path) -> frozenset[str] | None:
        """The names of partition ``directory``'s files its manifest commits (None: no
        manifest)."""
        if self.manifest is None:
            return None
        from ..log.datadir import parse_partition_dir_name

        tp = parse_partition_dir_name(directory.name).topic_partition
        return self.manifest.files(tp) or frozenset()


@dataclass(slots=True)
class PartitionLog:
    """One opened partition: its directory, and its Log or why it could not be opened."""

    directory: Path
    log: Log | None
    error: str | None = None
    # Where the topic's configs came from (kafkalog.log.datadir.manager's CONFIG_FROM_* values).
    config_source: str = "defaults"


class PartitionProblems:
    """The partitions a command could not read or change, each reported on stderr when met
    (``kafkalog COMMAND: PARTITION: why``) while the others go on; ``status`` is the exit
    status so far."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.status = EXIT_OK

    def add(self, directory: Path | None, message: object) -> None:
        """Report ``message``, about ``directory``'s partition when given: exit status 1."""
        report(self.command, message if directory is None else f"{directory.name}: {message}")
        self.status = EXIT_PROBLEMS

    def add_error(self, directory: Path, error: KafkalogError) -> None:
        """A data error of ``directory``'s partition, naming its file when the raiser did not."""
        from ..log.error_location import locate_in_partition

        self.add(directory, locate_in_partition(error, directory))

    def opened(self, logs: Iterable[PartitionLog]) -> Iterator[PartitionLog]:
        """The entries whose log opened; why the others could not be opened is reported."""
        for entry in logs:
            if entry.log is None:
                self.add(None, entry.error)
            else:
                yield entry

    def indexes_trusted(self, entry: PartitionLog) -> bool:
        """Whether ``entry``'s indexes can be trusted for lookups (:func:`index_problem`); why
        not is reported."""
        problem = index_problem(entry.log)
        if problem is not None:
            self.add(entry.directory, problem)
        return problem is None


def add_target_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    parser.add_argument("path", metavar="DATA_DIR|PARTITION_DIR", help=what)
    parser.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="only this topic's partitions (repeatable)",
    )
    add_json_flag(parser)


def add_apply_flag(parser: argparse.ArgumentParser, *, does: str) -> None:
    """``--apply``: a changing command is a dry run without it; ``does`` says what it changes."""
    parser.add_argument("--apply", action="store_true", help=f"{does} (default: a dry run)")


def add_now_option(parser: argparse.ArgumentParser, *, used_for: str) -> None:
    """``--now-ms``, the time :func:`now_ms` gives (``used_for`` says which rules judge by it)."""
    parser.add_argument("--now-ms", type=bounded_int(0), metavar="MS", help=used_for)


@contextlib.contextmanager
def operator_arguments(parser: argparse.ArgumentParser) -> Iterator[None]:
    """The frame of the options of a command that walks a data directory's partitions: the
    target arguments first, the command's own options (added inside the ``with``), then
    ``--quiet``. Its ``run`` goes through :func:`.failures.guarded`."""
    add_target_arguments(parser, what="a data directory or a partition directory")
    yield
    add_quiet_flag(parser)


def resolve_target(path: str, *, topics: list[str] | None = None, internal: bool = True) -> Target:
    """The partition directories ``path`` names (``internal``: with ``__cluster_metadata-0``).

    Raises FileNotFoundError for a missing path and UsageError for a file or a directory that is
    neither a data directory nor a partition directory."""
    from ..log.datadir import CLUSTER_METADATA_DIR, PartitionDirKind, parse_partition_dir_name
    from ..log.storage import as_path
    from ..log.verify import is_partition_dir

    check_urls([path])
    root = as_path(path)  # a URL: a prefix in object storage, read as a directory is
    if not root.exists():
        raise FileNotFoundError(2, "No such file or directory", str(root))
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory (give a data directory or a partition one)")
    if is_partition_dir(root) and is_url(root):
        target = Target(root, root.parent, [root], False)
    elif is_partition_dir(root):
        # A symlinked partition directory belongs to the data directory it really lives in:
        # its checkpoints are there, and so is the .lock a running broker holds.
        real_parent = Path(os.path.realpath(root)).parent
        same = Path(os.path.realpath(root.parent)) == real_parent
        target = Target(root, root.parent if same else real_parent, [root], False)
    else:
        partitions = []
        for child in sorted(root.iterdir()):
            if not child.is_dir() or (child.name == CLUSTER_METADATA_DIR and not internal):
                continue
            try:
                parsed = parse_partition_dir_name(child.name)
            except KafkalogError:
                continue
            if parsed.kind == PartitionDirKind.LIVE:
                partitions.append(child)
        target = Target(root, root, partitions, True)
    if is_url(root):
        _honour_manifest(target)
    if topics:
        wanted = set(topics)
        target.partitions = [p for p in target.partitions if _topic_of(p) in wanted]
        target.filtered = True
        if not target.partitions:
            raise UsageError(f"{root}: no partition of {', '.join(sorted(wanted))}")
    return target


def _honour_manifest(target: Target) -> None:
    """A data directory in object storage with kafkalog's manifests: only the partitions and
    segments the newest commits are read, as the Arrow and Spark readers read them (a write
    that died or is under way leaves objects no commit names)."""
    from ..dataset import newest_manifest
    from ..log.datadir import parse_partition_dir_name

    target.manifest = newest_manifest(target.data_dir)
    if target.manifest is not None:
        committed = target.manifest.partitions
        target.partitions = [
            p for p in target.partitions
            if parse_partition_dir_name(p.name).topic_partition in committed
        ]  # fmt: skip


def _topic_of(directory: Path) -> str | None:
    from ..log.datadir import parse_partition_dir_name

    try:
        return parse_partition_dir_name(directory.name).topic_partition.topic
    except KafkalogError:
        return None


def _topic_configs(data_dir: Path):
    """A LogManager that opens no log: topic configs (KRaft metadata, topics file, defaults),
    read from object storage too."""
    from ..log.datadir import TopicConfigs

    return TopicConfigs(data_dir)


def _checkpoints(data_dir: Path) -> dict[str, dict]:
    """The data directory's recovery points and log start offsets, as a broker's startup reads
    them: a malformed file counts as empty (see :func:`checkpoint_problems`)."""
    return {name: offsets for name, (offsets, _) in _read_checkpoints(data_dir).items()}


def _read_checkpoints(data_dir: Path) -> dict[str, tuple[dict, Exception | None]]:
    from ..log.datadir import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT

    return {
        name: _read_offset_checkpoint(data_dir / name)
        for name in (RECOVERY_POINT_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT)
    }


def _read_offset_checkpoint(path: Path) -> tuple[dict, Exception | None]:
    """An offset checkpoint as a broker's startup reads it (missing: no entries; malformed: no
    entries, and the error); an object's is looked for in object storage, not on the disk."""
    from ..errors import CorruptCheckpointError
    from ..log.datadir import read_offset_checkpoint, read_offset_checkpoint_or_reset

    if not is_url(path):
        return read_offset_checkpoint_or_reset(path)
    if not path.exists():
        return {}, None
    try:
        return read_offset_checkpoint(path), None
    except CorruptCheckpointError as e:
        return {}, e


def checkpoint_problems(target: Target) -> list[tuple[Path, str]]:
    """The data directory's malformed offset checkpoints, each with what a broker's startup
    does about it (Kafka's LogManager warns and resets rather than refusing to start)."""
    from ..log.datadir import RECOVERY_POINT_OFFSET_CHECKPOINT

    found = []
    for name, (_, problem) in _read_checkpoints(target.data_dir).items():
        if problem is None:
            continue
        line = getattr(problem, "line", None)
        reset = (
            "recovery points count as 0 (an unclean shutdown re-checks every segment)"
            if name == RECOVERY_POINT_OFFSET_CHECKPOINT
            else "log start offsets count as the first segments' base offsets"
        )
        at = f" (line {line})" if line is not None else ""
        found.append(
            (
                target.data_dir / name,
                f"{problem.message}{at}: {reset}, as a broker's startup does; "
                f"--apply rewrites the file",
            )
        )
    return found


def partition_offsets(target: Target, directory: Path) -> tuple[int, int, bool]:
    """(recovery point, log start offset, had clean shutdown) from the data directory."""
    from ..log.datadir import (
        CLEAN_SHUTDOWN_FILE_NAME,
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        parse_partition_dir_name,
    )

    checkpoints = _checkpoints(target.data_dir)
    try:
        tp = parse_partition_dir_name(directory.name).topic_partition
    except KafkalogError:
        tp = None
    recovery_point = checkpoints[RECOVERY_POINT_OFFSET_CHECKPOINT].get(tp, 0)
    log_start = checkpoints[LOG_START_OFFSET_CHECKPOINT].get(tp, 0)
    clean = (target.data_dir / CLEAN_SHUTDOWN_FILE_NAME).exists()
    return recovery_point, log_start, clean


@contextlib.contextmanager
def open_logs(
    target: Target,
    *,
    writable: bool,
    clock=None,
    full_recovery: bool = False,
    prepare: Callable[[Path], None] | None = None,
    skip_recovery: bool = False,
) -> Iterator[list[PartitionLog]]:
    """The target's partitions as Logs. Read-only: each opened alone (one that cannot be opened
    carries its error). Writable: a data directory through LogManager (a broker's startup and
    clean shutdown), a partition directory (or the partitions of chosen topics) under the data
    directory's lock, their checkpoint entries brought up to date on closing.
    ``full_recovery`` re-checks every segment; ``skip_recovery`` re-checks none, even after an
    unclean shutdown (only missing or corrupt indexes are rebuilt: the recovery point stays for
    the next opening to honour); ``prepare`` is called with each partition directory under the
    lock, before it is opened."""
    if full_recovery and skip_recovery:
        raise ValueError("full_recovery and skip_recovery exclude each other")
    if writable:
        refuse_urls([target.path], does="changes files")
    whole = target.is_data_dir and not target.filtered and not full_recovery and not skip_recovery
    if writable and whole:
        with _open_data_dir(target, clock, prepare) as logs:
            yield logs
        return
    from ..log.datadir import DataDirLocks, real_data_dirs
    from ..log.error_location import locate_in_partition

    configs = _topic_configs(target.data_dir)
    # The lock of the data directory that really holds each partition (symlinks resolved): a
    # symlink to a live partition must not let a writer lock another directory's .lock.
    locks = real_data_dirs([target.data_dir], target.partitions) if writable else []
    with DataDirLocks(locks):
        opened: list[PartitionLog] = []
        try:
            for directory in target.partitions:
                recovery_point, log_start, clean = partition_offsets(target, directory)
                if prepare is not None:
                    prepare(directory)
                try:
                    log = open_log(
                        directory,
                        config=configs.config_for(_topic_of(directory) or ""),
                        clock=clock,
                        writable=writable,
                        log_start_offset=log_start,
                        recovery_point=0 if full_recovery else recovery_point,
                        had_clean_shutdown=skip_recovery or (clean and not full_recovery),
                        committed_bases=target.committed_bases(directory),
                    )
                except (KafkalogError, ValueError, OSError) as e:
                    if isinstance(e, KafkalogError):
                        locate_in_partition(e, directory)  # the file, when the raiser had none
                    if writable:
                        raise
                    opened.append(PartitionLog(directory, None, _describe(e)))
                    continue
                topic = _topic_of(directory) or ""
                opened.append(PartitionLog(directory, log, None, configs.config_source(topic)))
            yield opened
        finally:
            for entry in opened:
                if entry.log is not None:
                    entry.log.close()
            if writable:
                _update_checkpoints(target, [e.log for e in opened if e.log is not None])


def open_log(
    directory: Path,
    *,
    log_class: type[Log] | None = None,
    committed_bases: set[int] | None = None,
    **options,
) -> Log:
    """``Log.open(directory, **options)`` (or ``log_class``'s), refusing what a partition
    directory must not hold; a partition in object storage opened read-only from its objects
    (:func:`kafkalog.log.partition.open_remote_log`: nothing to recover there), only the
    segments ``committed_bases`` names when a manifest commits them."""
    from ..log.clock import SystemClock
    from ..log.datadir import require_regular_entries
    from ..log.partition import Log

    log_class = log_class or Log
    if is_url(directory):
        from ..log.partition import open_remote_log

        return open_remote_log(
            log_class, directory, options["config"], options.get("clock") or SystemClock(),
            log_start_offset=options.get("log_start_offset", 0), bases=committed_bases,
        )  # fmt: skip
    require_regular_entries(directory)  # a FIFO named like a segment blocks
    return log_class.open(directory, **options)


@contextlib.contextmanager
def logs_in_progress(
    command: str, args: argparse.Namespace, target: Target, *, writable: bool = False, clock=None
) -> Iterator[tuple[Progress, list[PartitionLog]]]:
    """The target's logs opened (see :func:`open_logs`) with a progress bar over their bytes:
    the frame of every command that walks a data directory's partitions."""
    total = total_bytes([str(p) for p in target.partitions])
    with (
        Progress(total, command, quiet=args.quiet) as progress,
        open_logs(target, writable=writable, clock=clock) as logs,
    ):
        yield progress, logs


def read_segments(
    segments: Iterable[LogSegment],
    read: Callable[[LogSegment], None],
    progress: Progress | None = None,
) -> str | None:
    """``read`` each segment in turn, its bytes counted on ``progress`` (also when reading
    fails). The first data error ends the walk: its text, naming the segment's file when the
    raiser did not, is returned (None: every segment was read)."""
    for segment in segments:
        try:
            read(segment)
        except KafkalogError as e:
            return str(e.located(path=str(segment.log.path)))
        finally:
            if progress is not None:
                progress.advance(segment.size())
    return None


def now_ms(args: argparse.Namespace) -> int:
    """``--now-ms`` when given, else the wall clock: the time retention and expiry rules use."""
    return args.now_ms if args.now_ms is not None else int(time.time() * 1000)


def _describe(e: Exception) -> str:
    from ..log.datadir import LEADER_EPOCH_CHECKPOINT

    if isinstance(e, OSError) and not isinstance(e, KafkalogError):
        return os_error_text(e, "reading")  # an object's failed read: its URL and position
    if isinstance(e, KafkalogError) and str(e.path or "").endswith(LEADER_EPOCH_CHECKPOINT):
        return f"{e} (kafkalog recover --apply rebuilds it from the batches)"
    return str(e)


def index_problem(log) -> str | None:
    """Why ``log``'s indexes cannot be trusted for lookups (Kafka rebuilds such an index when it
    opens the log; a read-only open does not), or None."""
    from ..errors import CorruptIndexError

    for segment in log.segments:
        try:
            for index in (segment.offset_index, segment.time_index):
                if index is not None:
                    index.sanity_check()
        except CorruptIndexError as e:
            return f"{e} (kafkalog rebuild-index or recover repairs it)"
    return None


@contextlib.contextmanager
def _open_data_dir(target: Target, clock, prepare) -> Iterator[list[PartitionLog]]:
    from ..log.datadir import LogManager

    with LogManager(target.data_dir, writable=True, clock=clock, prepare=prepare) as manager:
        wanted = set(target.partitions)
        yield [
            PartitionLog(log.dir, log, None, manager.config_source(tp.topic))
            for tp, log in sorted(manager.logs.items(), key=lambda i: (i[0].topic, i[0].partition))
            if log.dir in wanted
        ]


def _update_checkpoints(target: Target, logs: list) -> None:
    """After changing partitions alone, their recovery points and log start offsets in the data
    directory's checkpoints (the other partitions' entries are kept)."""
    from ..log.datadir import (
        CLUSTER_METADATA_DIR,
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        write_offset_checkpoint,
    )

    # The KRaft metadata log keeps its offsets itself, never in these checkpoints.
    logs = [log for log in logs if log.topic_partition is not None
            and log.dir.name != CLUSTER_METADATA_DIR]  # fmt: skip
    if not logs:
        return
    current = _checkpoints(target.data_dir)
    for name, value in (
        (RECOVERY_POINT_OFFSET_CHECKPOINT, lambda log: log.recovery_point),
        (LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset),
    ):
        path = target.data_dir / name
        if not path.exists() and not target.is_data_dir:
            continue  # a lone partition directory: do not create a broker's files beside it
        offsets = dict(current[name])
        for log in logs:
            offsets[log.topic_partition] = value(log)
        write_offset_checkpoint(path, offsets)


def cleanup_policy(config) -> str:
    """A LogConfig's cleanup.policy as Kafka writes it (``compact,delete``)."""
    return ",".join(config["cleanup.policy"])
