"""Checking one partition directory (part of :mod:`kafkalog.log.verify`; nothing here
writes).

The segments are taken as Kafka's loader would take them (LogLoader): ``.deleted`` and ``.cleaned``
files and the ``.swap`` files of an unfinished clean are leftovers it deletes; the other ``.swap``
files are finished cleans it renames into place, replacing the segments they cover; an index
without its ``.log`` is deleted. Then each segment is checked (:mod:`.verify_segment`), offsets must
increase across segments, and what the partition's files say about offsets is held against the log
end offset: an offset the broker wrote down can only be beyond the end of the log if data that
existed is gone. The recovery point is the one that proves loss (the broker had fsynced up to it);
high watermark, leader epochs, producer snapshots and the log start offset also run ahead of
unflushed data, which an unclean shutdown may lose, and Kafka trims them on startup (warnings).
"""

from __future__ import annotations

import itertools
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import KafkalogError
from ...format import Tail
from ..datadir import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    PARTITION_METADATA_FILE_NAME,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    irregular_reason,
    log_file,
    parse_segment_file_name,
    parse_snapshot_file_name,
    read_json_file,
    read_leader_epoch_checkpoint,
    read_partition_metadata,
)
from ..producer import CorruptSnapshotError, read_snapshot
from ..storage import is_remote
from .index import check_segment
from .report import ERROR, INFO, WARNING, FindingSink, PartitionSummary
from .segment import LogScan, scan_log
from .tail import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "QUORUM_STATE_FILE_NAME",
    "PartitionContext",
    "PartitionResult",
    "check_json_file",
    "check_leader_epoch_file",
    "check_partition",
    "check_partition_metadata",
    "check_snapshot_file",
    "error_text",
    "is_segment_name",
    "log_start_before_segments",
    "lost_segments",
    "lost_span",
    "note_stray_file",
]

QUORUM_STATE_FILE_NAME = "quorum-state"


@dataclass(slots=True, kw_only=True)
class PartitionContext:
    """What the data directory's checkpoints say about one partition (None: no entry)."""

    recovery_point: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    cleaner_offset: int | None = None
    sources: dict[str, str] = field(default_factory=dict)  # which file said each (for messages)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # the topic's: the largest torn append
    # In object storage, the partition's files a manifest of kafkalog's writers commits (None:
    # no manifest): other files belong to a write that died or is under way.
    committed: frozenset[str] | None = None
    # Tiered storage: the offsets below this one are in the remote store (an index local
    # retention left below it is a leftover, not a lost segment). None: no remote segments.
    remote_end: int | None = None


@dataclass(slots=True)
class PartitionResult:
    summary: PartitionSummary
    topic_id: uuid.UUID | None = None  # from partition.metadata, when readable


def check_partition(
    directory: Path, sink: FindingSink, *, deep: bool, context: PartitionContext | None = None
) -> PartitionResult:
    """Every file of one partition directory, the segments as Kafka's loader would take them;
    ``context`` gives the data directory's checkpointed offsets for the partition."""
    start = len(sink.findings)
    summary = PartitionSummary(path=str(directory))
    result = PartitionResult(summary)
    context = context or PartitionContext()
    try:
        files = regular_files(directory, sink)
    except OSError as e:
        sink.io_error(directory, e, "cannot list the directory")
        return result
    if context.committed is not None:
        files = _committed_files(directory, files, context.committed, sink)
    logs, swaps, indexes, snapshots, others = _classify(files, sink)
    segments = _effective_segments(directory, logs, swaps, sink, deep)
    bases = sorted(segments)
    log_start = log_start_before_segments(context.log_start_offset, [p.name for p in others])
    _check_orphans(directory, indexes, logs, swaps, bases, sink, log_start, context.remote_end)

    scans: list[LogScan] = []
    for i, base in enumerate(bases):
        path, suffix = segments[base]
        try:
            scan = check_segment(directory, base, path, sink, deep=deep,
                                 active=i == len(bases) - 1, suffix=suffix,
                                 max_message_bytes=context.max_message_bytes)  # fmt: skip
        except OSError as e:
            sink.io_error(path, e)
            continue
        if scans:
            _check_adjacent(scans[-1], base, scan, sink)
        scans.append(scan)
    summary.segments = len(bases)
    summary.batches = sum(s.batches for s in scans)
    summary.records = sum(s.records for s in scans)
    _report_gaps(directory, scans, bases, sink)

    if bases:
        last = scans[-1] if scans else None
        log_end = last.next_offset if last is not None and last.next_offset is not None else None
        summary.log_end_offset = bases[-1] if log_end is None else log_end
        summary.log_start_offset = max(context.log_start_offset or 0, bases[0])
    else:  # Kafka would start an empty segment at the log start offset
        summary.log_start_offset = summary.log_end_offset = context.log_start_offset or 0
    _check_checkpoints(directory, context, summary, bases, sink)
    _check_leader_epochs(directory / LEADER_EPOCH_CHECKPOINT, summary, sink)
    strays = stray_snapshots([offset for offset, _ in snapshots], bases)
    for offset, path in snapshots:
        check_snapshot_file(path, sink, offset=offset, summary=summary, stray=offset in strays)
    result.topic_id = _check_others(others, sink, deep)
    summary.errors, summary.warnings = sink.count_since(start)
    return result


def regular_files(directory: Path, sink: FindingSink) -> list[Path]:
    """The regular files of ``directory``, sorted; FIFOs, sockets, devices, symlink loops and
    dangling symlinks are reported (``not-regular-file``) and never opened: opening a FIFO blocks
    until a writer comes. So is a directory named like a segment file (``...012.log/``): the
    loader refuses it, and the records it stands for cannot be read. Other subdirectories are
    left to the caller."""
    files = []
    for path in sorted(directory.iterdir()):
        reason = None if is_remote(path) else irregular_reason(path)  # objects are regular
        if reason is None and path.is_dir() and is_segment_name(path.name):
            reason = "not a regular file (a directory)"
        if reason is not None:
            sink.error("not-regular-file", path, f"{reason}; Kafka only writes regular files")
        elif not path.is_dir():
            files.append(path)
    return files


def _committed_files(
    directory: Path, files: list[Path], committed: frozenset[str], sink: FindingSink
) -> list[Path]:
    """``files`` without those the manifest does not commit, which readers skip; they are
    reported once for the partition (info)."""
    kept = [path for path in files if path.name in committed]
    uncommitted = sorted(path.name for path in files if path.name not in committed)
    if uncommitted:
        listed = ", ".join(uncommitted[:5])
        more = f" and {len(uncommitted) - 5} more" if len(uncommitted) > 5 else ""
        sink.info(
            "uncommitted-files", directory,
            f"{listed}{more}: no commit of kafkalog's writers names "
            f"{'them' if len(uncommitted) > 1 else 'it'} (a write that died or is under way): "
            f"readers skip {'them' if len(uncommitted) > 1 else 'it'}, and so does this check",
        )  # fmt: skip
    return kept


def note_stray_file(path: Path, sink: FindingSink, where: str) -> None:
    """A file Kafka does not write ``where``: a leftover ``.tmp`` of an atomic write (Kafka
    ignores it), else an unknown file."""
    if path.name.endswith(".tmp"):
        sink.info(
            "leftover-tmp", path,
            "a temporary file of an interrupted atomic write; Kafka ignores it",
        )  # fmt: skip
    else:
        sink.info("unknown-file", path, f"not a file Kafka writes {where}")


def is_segment_name(name: str) -> bool:
    """Whether ``name`` is a segment file's (``.log``, an index, a producer snapshot, and their
    ``.deleted``/``.cleaned``/``.swap`` forms)."""
    try:
        parse_segment_file_name(name)
    except KafkalogError:
        return False
    return True


def _classify(files: list[Path], sink: FindingSink):
    """Segments, swaps, index files, producer snapshots and the rest; leftovers reported."""
    logs: dict[int, Path] = {}
    swaps: list[tuple[int, Path]] = []
    cleaned: list[int] = []
    indexes: list[tuple[int, Path]] = []
    snapshots: list[tuple[int, Path]] = []
    others: list[Path] = []
    deleted: list[Path] = []
    for path in files:
        try:
            parsed = parse_segment_file_name(path.name)
        except KafkalogError:
            others.append(path)
            continue
        if parsed.status == DELETED_FILE_SUFFIX:
            deleted.append(path)
        elif parsed.status == CLEANED_FILE_SUFFIX:
            cleaned.append(parsed.base_offset)
            sink.warning(
                "leftover-cleaned", path,
                "written by a log clean that did not finish; Kafka's loader deletes it",
            )  # fmt: skip
        elif parsed.status == SWAP_FILE_SUFFIX:
            swaps.append((parsed.base_offset, path))
        elif parsed.suffix == LOG_FILE_SUFFIX:
            logs[parsed.base_offset] = path
        elif parsed.suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
            snapshots.append((parsed.base_offset, path))
        else:
            indexes.append((parsed.base_offset, path))
    for path in deleted:
        sink.warning(
            "leftover-deleted", path,
            "scheduled for deletion by retention or the log cleaner; Kafka's loader deletes it",
        )  # fmt: skip
    min_cleaned = min(cleaned, default=None)
    valid = []
    for base, path in swaps:
        if min_cleaned is not None and base >= min_cleaned:
            sink.warning(
                "leftover-swap", path,
                f"a swap file at or above the unfinished clean's .cleaned offset {min_cleaned}: "
                f"the operation did not finish and Kafka's loader deletes it",
            )  # fmt: skip
        else:
            valid.append((base, path))
    return logs, valid, indexes, snapshots, others


def _effective_segments(directory, logs, swaps, sink, deep) -> dict[int, tuple[Path, str]]:
    """Base offset -> (log file, suffix): finished cleans (.swap) replace what they cover."""
    segments = {base: (path, "") for base, path in logs.items()}
    for base, path in swaps:
        if not path.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
            continue  # an index of a swap segment: renamed with it
        scan = scan_log(path, FindingSink(), deep=False, base_offset=base)
        end = scan.next_offset or base + 1
        replaced = sorted(b for b in segments if base <= b < end and segments[b][1] == "")
        for b in replaced:
            del segments[b]
        segments[base] = (path, SWAP_FILE_SUFFIX)
        covered = ", ".join(str(b) for b in replaced) or "none"
        sink.warning(
            "leftover-swap", path,
            f"a finished clean: Kafka's loader renames it to {log_file(directory, base).name}, "
            f"replacing the segments at {covered}; it is verified in their place",
        )  # fmt: skip
    return segments


def lost_segments(bases, orphans, log_start: int | None) -> list[tuple[int, int | None]]:
    """``(first, next)`` offsets of every segment whose ``.log`` is gone while its indexes remain
    (``orphans``: their base offsets; ``bases``: those of the segments present; ``next`` is the
    next segment's base offset, None past the last): the offsets that every reader reports
    missing (DataLossError). An orphan below the first segment is lost only when the log began
    there: the checkpointed ``log_start`` (None: no entry, 0) is at or below the first orphan's
    base offset; otherwise retention had moved the log past it (Kafka's loader deletes it)."""
    orphans = sorted(set(orphans) - set(bases))
    bases = sorted(bases)
    start = log_start or 0
    lost_below = bool(orphans) and bool(bases) and orphans[0] < bases[0] and start <= orphans[0]
    known = sorted(set(bases) | set(orphans))
    out = []
    for base in orphans:
        if bases and base < bases[0] and not lost_below:
            continue
        later = [b for b in known if b > base]
        out.append((base, later[0] if later else None))
    return out


def lost_span(first: int, following: int | None) -> str:
    """The offsets a lost segment held, in words."""
    if following is None:
        return f"offsets from {first} to the end of the log"
    return (
        f"offsets from {first} to {following - 1} (below the next segment's base offset "
        f"{following})"
    )


def log_start_before_segments(log_start_offset: int | None, names) -> int:
    """Where the log began as far as a partition's files tell (``names``: its file names): its
    checkpointed log start offset (None: no entry), or for a KRaft metadata log its earliest
    snapshot's end offset (KRaft deletes the segments a snapshot covers)."""
    ends = []
    for name in names:
        try:
            parsed = parse_snapshot_file_name(name)
        except KafkalogError:
            continue
        if parsed is not None and not parsed.partial and not parsed.deleted:
            ends.append(parsed.end_offset)
    return max(log_start_offset or 0, min(ends, default=0))


def _check_orphans(
    directory, indexes, logs, swaps, bases, sink: FindingSink, log_start, remote_end=None
) -> None:
    """Indexes without their ``.log``: the segment's offsets are lost (an error naming the
    missing ``.log`` and the offsets, as every reader raises DataLossError for them,
    :func:`lost_segments`) unless the log had already left them (retention), tiered storage
    holds them (below ``remote_end``) or they belong to a finished clean's ``.swap``: Kafka's
    loader deletes such orphan indexes (a warning)."""
    swap_bases = {b for b, _ in swaps}
    names: dict[int, list[str]] = {}
    for base, path in indexes:
        if base not in logs and base not in swap_bases:
            names.setdefault(base, []).append(path.name)
    remote = remote_end is not None and remote_end > log_start
    lost = dict(lost_segments(bases, names, max(log_start, remote_end or 0)))
    for base, path in indexes:
        if base in logs or (base in names and base in lost):
            continue
        where = (
            "beside a finished clean's .swap"
            if base in swap_bases
            else f"below the log's first segment, in offsets tiered storage holds (below "
            f"{remote_end})"
            if remote and base < remote_end
            else f"below the log's first segment and its log start offset {log_start}"
        )
        sink.warning(
            "orphan-index", path,
            f"no {log_file(directory, base).name}: an index left behind {where}; Kafka's loader "
            f"deletes it",
        )  # fmt: skip
    for base, following in sorted(lost.items()):
        sink.error(
            "segment-missing", log_file(directory, base),
            f"{lost_span(base, following)} are missing: the segment's .log file is gone, its "
            f"{', '.join(names[base])} remain; the records it held are lost (Kafka's loader "
            f"deletes the orphan indexes)",
            offset=base,
        )  # fmt: skip


def _check_adjacent(previous: LogScan, base: int, scan: LogScan, sink: FindingSink) -> None:
    if previous.last_offset is not None and previous.last_offset >= base:
        first = scan.first_offset
        at = (
            f"; its first batch (offset {first}) does not follow it"
            if first is not None and first <= previous.last_offset
            else ""
        )
        sink.error(
            "segment-overlap", scan.path,
            f"the previous segment ({os.path.basename(previous.path)}) holds offsets up to "
            f"{previous.last_offset}, not below this segment's base offset {base}{at}",
            position=scan.first_position, offset=base,
        )  # fmt: skip


def _report_gaps(directory: Path, scans: list[LogScan], bases: list[int], sink) -> None:
    gaps = sum(s.gaps for s in scans)
    missing = sum(s.missing_offsets for s in scans)
    first = min((s.first_gap_after for s in scans if s.first_gap_after is not None), default=None)
    for previous, scan in itertools.pairwise(scans):
        if previous.tail != Tail.NONE:
            continue  # its last offsets are in bytes that cannot be read: reported there
        if previous.last_offset is not None and scan.first_offset is not None:
            hole = scan.first_offset - previous.last_offset - 1
            if hole > 0:
                gaps += 1
                missing += hole
                first = previous.last_offset if first is None else min(first, previous.last_offset)
    if gaps:
        sink.info(
            "offset-gaps", directory,
            f"{gaps} places where offsets jump ({missing} offsets absent), the first after offset "
            f"{first}: normal for a compacted topic, whose cleaner removes records",
            offset=first,
        )  # fmt: skip


# The bounds of the data directory's checkpointed offsets: (checkpoint, bound, severity, what it
# means). Each may not pass the log end offset (finding ``<checkpoint>-beyond-log-end``) nor fall
# below its lower bound (``<checkpoint>-below-log-start``); Kafka corrects it on startup. Only the
# first bound a checkpoint breaks is reported.
_CHECKPOINT_BOUNDS = (
    ("recovery_point", "log_end", ERROR,
     ": the broker had flushed records up to {value} that are no longer in the log"),
    ("recovery_point", "first", INFO, "; Kafka raises it to the log start offset"),
    ("log_start_offset", "log_end", WARNING, "; Kafka starts the log afresh at {value}"),
    ("high_watermark", "log_end", WARNING,
     ": committed records that were never flushed are gone (an unclean shutdown, or a copy taken "
     "while the broker ran); Kafka lowers it to the log end offset"),
    ("cleaner_offset", "log_end", WARNING, "; the log cleaner resets it to the log start offset"),
    ("cleaner_offset", "log_start", INFO, "; the log cleaner starts from the log start offset"),
)  # fmt: skip
_BOUND_NAMES = {
    "log_end": "log end offset",
    "log_start": "log start offset",
    "first": "first segment's base offset",
}


def _check_checkpoints(directory, context, summary, bases, sink: FindingSink) -> None:
    bounds = {
        "log_end": summary.log_end_offset,
        "log_start": summary.log_start_offset,
        "first": bases[0] if bases else summary.log_start_offset,
    }
    broken: set[str] = set()
    for checkpoint, bound, severity, meaning in _CHECKPOINT_BOUNDS:
        value, limit, upper = getattr(context, checkpoint), bounds[bound], bound == "log_end"
        if value is None or checkpoint in broken or (value <= limit if upper else value >= limit):
            continue
        broken.add(checkpoint)
        code = checkpoint.replace("_", "-") + ("-beyond-log-end" if upper else "-below-log-start")
        message = (
            f"{directory.name}: {checkpoint.replace('_', ' ')} {value} is "
            f"{'past' if upper else 'below'} the {_BOUND_NAMES[bound]} {limit}"
            f"{meaning.format(value=value)}"
        )
        where = context.sources.get(checkpoint, str(directory))
        sink.add(severity, code, where, message, offset=value)


def _check_leader_epochs(path: Path, summary: PartitionSummary, sink: FindingSink) -> None:
    if not path.exists():
        return
    entries = check_leader_epoch_file(path, sink)
    for entry in entries:
        if entry.start_offset > summary.log_end_offset:
            sink.warning(
                "leader-epoch-beyond-log-end", path,
                f"epoch {entry.epoch} starts at offset {entry.start_offset}, past the log end "
                f"offset {summary.log_end_offset}: records written in it were lost (not flushed "
                f"before an unclean shutdown, or a .log is missing); Kafka drops the entry",
                offset=entry.start_offset,
            )  # fmt: skip


def check_leader_epoch_file(path: Path, sink: FindingSink) -> list:
    """Parse a leader-epoch-checkpoint; epochs must increase, start offsets never fall."""
    sink.files_checked += 1
    try:
        entries = read_leader_epoch_checkpoint(path)
    except KafkalogError as e:
        sink.error("checkpoint-corrupt", path, error_text(e))
        return []
    except OSError as e:
        sink.io_error(path, e)
        return []
    for n, (a, b) in enumerate(itertools.pairwise(entries), start=1):
        if b.epoch <= a.epoch or b.start_offset < a.start_offset or b.start_offset < 0:
            sink.error(
                "leader-epoch-not-monotonic", path,
                f"line {n + 3}: epoch {b.epoch} starting at {b.start_offset} does not follow "
                f"epoch {a.epoch} starting at {a.start_offset} (both must increase)",
                offset=b.start_offset,
            )  # fmt: skip
    return entries


def check_snapshot_file(
    path: Path,
    sink: FindingSink,
    *,
    offset: int,
    summary: PartitionSummary | None = None,
    stray: bool = False,
) -> None:
    """A producer snapshot: its CRC and layout, and (given the log's ``summary``) whether Kafka's
    loader keeps it. ``stray``: removeStraySnapshots deletes it (not at a segment base, and not
    the latest snapshot above every segment, which a clean shutdown writes)."""
    sink.files_checked += 1
    try:
        read_snapshot(path)
    except CorruptSnapshotError as e:
        sink.error(
            "snapshot-corrupt", path,
            f"{e.message}; Kafka deletes it and rebuilds producer state from the log",
        )  # fmt: skip
        return
    except OSError as e:
        sink.io_error(path, e)
        return
    if summary is None:
        return
    log_end, log_start = summary.log_end_offset, summary.log_start_offset
    if offset > log_end:
        sink.warning(
            "snapshot-beyond-log-end", path,
            f"producer state as of offset {offset}, past the log end offset {log_end}: records "
            f"below it were lost (not flushed before an unclean shutdown, or a .log is missing); "
            f"Kafka's loader deletes the snapshot",
            offset=offset,
        )  # fmt: skip
    elif stray or offset <= log_start:
        why = (
            "not at a segment's base offset and not the latest snapshot (removeStraySnapshots)"
            if stray
            else f"at or below the log start offset {log_start}"
        )
        sink.info("snapshot-stray", path, f"{why}: Kafka's loader deletes it", offset=offset)


def stray_snapshots(offsets: list[int], bases: list[int]) -> set[int]:
    """The snapshots Kafka's removeStraySnapshots deletes: those without a segment of that base
    offset, except the latest of them when it is above every segment's base offset."""
    strays = sorted(o for o in offsets if o not in set(bases))
    doomed = set(strays[:-1])
    if strays and bases and strays[-1] < max(bases):
        doomed.add(strays[-1])
    return doomed


def _check_others(others: list[Path], sink: FindingSink, deep: bool) -> uuid.UUID | None:
    topic_id = None
    for path in others:
        name = path.name
        if name == LEADER_EPOCH_CHECKPOINT:
            continue  # checked against the log end offset
        if name == PARTITION_METADATA_FILE_NAME:
            topic_id = check_partition_metadata(path, sink)
        elif name == QUORUM_STATE_FILE_NAME:
            check_json_file(path, sink, "quorum-state-corrupt")
        elif _is_kraft_snapshot(path, sink):
            continue
        else:
            note_stray_file(path, sink, "in a partition directory")
    for path in others:
        if _kraft_snapshot_name(path) == "complete":
            scan_log(path, sink, deep=deep, snapshot=True)
    return topic_id


def _kraft_snapshot_name(path: Path) -> str | None:
    try:
        parsed = parse_snapshot_file_name(path.name)
    except KafkalogError:
        return "invalid"
    if parsed is None:
        return None
    return "partial" if parsed.partial else "deleted" if parsed.deleted else "complete"


def _is_kraft_snapshot(path: Path, sink: FindingSink) -> bool:
    kind = _kraft_snapshot_name(path)
    if kind == "partial":
        sink.warning(
            "leftover-partial-snapshot", path,
            "a KRaft snapshot being written when the broker stopped; Kafka deletes it",
        )  # fmt: skip
    elif kind == "deleted":
        sink.warning(
            "leftover-deleted", path, "a KRaft snapshot marked for deletion; Kafka deletes it"
        )
    elif kind == "invalid":
        sink.info("unknown-file", path, "ends like a KRaft snapshot but its name is malformed")
    return kind is not None


def check_partition_metadata(path: Path, sink: FindingSink) -> uuid.UUID | None:
    """The topic id of partition.metadata, or None (reported) when it cannot be read."""
    sink.files_checked += 1
    try:
        return read_partition_metadata(path).topic_id
    except KafkalogError as e:
        sink.error("partition-metadata-corrupt", path, error_text(e))
    except OSError as e:
        sink.io_error(path, e)
    return None


def error_text(e: KafkalogError) -> str:
    """An error's message with its line (the path is the finding's own field)."""
    line = getattr(e, "line", None)
    return e.message if line is None else f"line {line}: {e.message}"


def check_json_file(path: Path, sink: FindingSink, code: str) -> None:
    sink.files_checked += 1
    try:
        read_json_file(path)  # bounded: size, nesting (never RecursionError)
    except OSError as e:
        sink.io_error(path, e)
    except KafkalogError as e:
        sink.error(code, path, f"not valid JSON: {error_text(e)}")
