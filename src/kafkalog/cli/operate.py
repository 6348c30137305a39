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
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_IO, EXIT_PROBLEMS, EXIT_USAGE, KafkalogError
from .progress import Progress, add_quiet_flag, total_bytes

if TYPE_CHECKING:  # the log layer is imported when a command runs, not when the CLI starts
    from ..log.partition import Log


__all__ = [
    "PartitionLog",
    "Target",
    "UsageError",
    "add_apply_flag",
    "add_now_option",
    "add_target_arguments",
    "bounded_int",
    "checkpoint_problems",
    "cleanup_policy",
    "command_parser",
    "format_time",
    "guarded",
    "index_problem",
    "logs_in_progress",
    "now_ms",
    "open_logs",
    "operator_parser",
    "partition_offsets",
    "plural",
    "relative",
    "resolve_target",
    "write_json",
]


class UsageError(Exception):
    """The command line asks for something that cannot be done (exit 2)."""


@dataclass(slots=True)
class Target:
    """The partitions one command acts on."""

    path: Path
    data_dir: Path  # checkpoints, marker, topic configs and .lock live here
    partitions: list[Path]
    is_data_dir: bool
    filtered: bool = False  # --topic chose some of a data directory's partitions


@dataclass(slots=True)
class PartitionLog:
    """One opened partition: its directory, and its Log or why it could not be opened."""

    directory: Path
    log: Log | None
    error: str | None = None
    # Where the topic's configs came from (kafkalog.log.datadir.manager's CONFIG_FROM_* values).
    config_source: str = "defaults"


def add_target_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    parser.add_argument("path", metavar="DATA_DIR|PARTITION_DIR", help=what)
    parser.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="only this topic's partitions (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def command_parser(
    commands: argparse._SubParsersAction,
    name: str,
    *,
    summary: str,
    description: str,
    epilog: str,
) -> argparse.ArgumentParser:
    """A command's parser: ``summary`` in the command list, ``description`` and the ``epilog``
    of examples (its line breaks kept) in its own ``--help``."""
    return commands.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_apply_flag(parser: argparse.ArgumentParser, *, does: str) -> None:
    """``--apply``: a changing command is a dry run without it; ``does`` says what it changes."""
    parser.add_argument("--apply", action="store_true", help=f"{does} (default: a dry run)")


def add_now_option(parser: argparse.ArgumentParser, *, used_for: str) -> None:
    """``--now-ms``, the time :func:`now_ms` gives (``used_for`` says which rules judge by it)."""
    parser.add_argument("--now-ms", type=bounded_int(0), metavar="MS", help=used_for)


@contextlib.contextmanager
def operator_parser(
    commands: argparse._SubParsersAction,
    name: str,
    *,
    body: Callable[[argparse.Namespace], int],
    summary: str,
    description: str,
    epilog: str,
) -> Iterator[argparse.ArgumentParser]:
    """The parser of a command that walks a data directory's partitions: the target arguments
    first, the command's own options (added inside the ``with``), then ``--quiet``; ``body``
    runs under :func:`guarded`, which turns expected failures into exit statuses."""
    parser = command_parser(commands, name, summary=summary, description=description, epilog=epilog)
    add_target_arguments(parser, what="a data directory or a partition directory")
    yield parser
    add_quiet_flag(parser)
    parser.set_defaults(run=lambda args: guarded(name, lambda: body(args)))


def bounded_int(low: int, high: int = (1 << 63) - 1) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``low..high`` (a Java long by default): a
    value out of range is a usage error (exit 2), not a surprise later."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    return parse


def resolve_target(path: str, *, topics: list[str] | None = None, internal: bool = True) -> Target:
    """The partition directories ``path`` names (``internal``: with ``__cluster_metadata-0``).

    Raises FileNotFoundError for a missing path and UsageError for a file or a directory that is
    neither a data directory nor a partition directory."""
    from ..log.datadir import CLUSTER_METADATA_DIR, PartitionDirKind, parse_partition_dir_name
    from ..log.verify import is_partition_dir

    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(2, "No such file or directory", str(root))
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory (give a data directory or a partition one)")
    if is_partition_dir(root):
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
    if topics:
        wanted = set(topics)
        target.partitions = [p for p in target.partitions if _topic_of(p) in wanted]
        target.filtered = True
        if not target.partitions:
            raise UsageError(f"{root}: no partition of {', '.join(sorted(wanted))}")
    return target


def _topic_of(directory: Path) -> str | None:
    from ..log.datadir import parse_partition_dir_name

    try:
        return parse_partition_dir_name(directory.name).topic_partition.topic
    except KafkalogError:
        return None


def guarded(command: str, run: Callable[[], int]) -> int:
    """Run a command body; expected failures become a message on stderr and an exit status."""
    from ..log.datadir import DataDirLockedError

    prefix = f"kafkalog {command}"
    try:
        return run()
    except BrokenPipeError:
        raise  # the reader of our output went away: main() handles it
    except UsageError as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except DataDirLockedError as e:
        print(f"{prefix}: {e.message}", file=sys.stderr)
        return EXIT_IO
    except KafkalogError as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"{prefix}: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_IO


def _topic_configs(data_dir: Path):
    """A LogManager that opens no log: topic configs (KRaft metadata, topics file, defaults)."""
    from ..log.datadir import TopicConfigs

    return TopicConfigs(data_dir)


def _checkpoints(data_dir: Path) -> dict[str, dict]:
    """The data directory's recovery points and log start offsets, as a broker's startup reads
    them: a malformed file counts as empty (see :func:`checkpoint_problems`)."""
    return {name: offsets for name, (offsets, _) in _read_checkpoints(data_dir).items()}


def _read_checkpoints(data_dir: Path) -> dict[str, tuple[dict, Exception | None]]:
    from ..log.datadir import (
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        read_offset_checkpoint_or_reset,
    )

    return {
        name: read_offset_checkpoint_or_reset(data_dir / name)
        for name in (RECOVERY_POINT_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT)
    }


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
    whole = target.is_data_dir and not target.filtered and not full_recovery and not skip_recovery
    if writable and whole:
        with _open_data_dir(target, clock, prepare) as logs:
            yield logs
        return
    from ..log.datadir import DataDirLocks, real_data_dirs, require_regular_entries
    from ..log.error_location import locate_in_partition
    from ..log.partition import Log

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
                    require_regular_entries(directory)  # a FIFO named like a segment blocks
                    log = Log.open(
                        directory,
                        config=configs.config_for(_topic_of(directory) or ""),
                        clock=clock,
                        writable=writable,
                        log_start_offset=log_start,
                        recovery_point=0 if full_recovery else recovery_point,
                        had_clean_shutdown=skip_recovery or (clean and not full_recovery),
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


def now_ms(args: argparse.Namespace) -> int:
    """``--now-ms`` when given, else the wall clock: the time retention and expiry rules use."""
    return args.now_ms if args.now_ms is not None else int(time.time() * 1000)


def _describe(e: Exception) -> str:
    from ..log.datadir import LEADER_EPOCH_CHECKPOINT

    if isinstance(e, OSError) and not isinstance(e, KafkalogError):
        return f"{e.filename or 'reading'}: {e.strerror or e}"
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


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_time(ms: int | None) -> str:
    """A timestamp for tables: ISO 8601 UTC to the second, ``-`` when there is none."""
    if ms is None or ms < 0:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def write_json(obj: dict) -> None:
    """One compact JSON object per line, as ``dump --json`` and ``consume --json`` write."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def relative(path: str | os.PathLike, root: Path) -> str:
    """``path`` relative to the target directory when it is under it."""
    rel = os.path.relpath(path, root)
    return str(path) if rel.startswith("..") else rel
