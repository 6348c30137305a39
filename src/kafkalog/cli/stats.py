"""``kafkalog stats``: what a data directory holds, per topic-partition, read-only.

Sizes, segments, batches and records, offsets and time ranges, codecs and record format
versions, producers (idempotent, transactional, control batches) and compaction state. Every
batch's CRC, header rule and offsets are checked (:mod:`kafkalog.format.offsets_rule`) and, unless
``--no-deep``, its records decoded as a consumer decodes them (none kept), so a count never
includes a record no consumer can read; ``--no-deep`` counts from the batch headers alone. Every
segment's end is judged, so numbers never silently stop short: damage is an error naming file
and position (exit 1), as is a segment whose ``.log``
is gone while its indexes remain, or a directory named like a segment; a torn or zero-filled end
of the active segment is a warning. Indexes are hints: one that cannot be used is set aside and
positions come from walking the log. A table, ``--json`` lines, or ``--plot FILE.png``: records
and bytes over time per partition. With ``--remote-storage``, a partition whose old segments
tiered storage moved to a remote store is counted whole, its remote segments (the readers' plan,
:func:`kafkalog.log.tiered.open_tiered_partition`) before its local ones.
"""

from __future__ import annotations

import argparse
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EXIT_OK, EXIT_PROBLEMS, CorruptRecordError, KafkalogError
from ..format import TimestampType
from ..format.constants import MAGIC_VALUE_V2
from ..format.offsets_rule import check_batch_header, check_entry_offsets
from .failures import UsageError, guarded, report
from .operate import (
    cleanup_policy,
    logs_in_progress,
    operator_arguments,
    partition_offsets,
    read_segments,
    resolve_target,
)
from .output import format_time, write_json
from .selection import add_remote_storage

SUMMARY = "sizes, records, offsets, times, codecs, producers per topic-partition"
DESCRIPTION = (
    "Summarise a data directory (or one partition directory) per "
    "topic-partition, read-only: sizes, segments, batches and records, offsets and time "
    "ranges, codecs and format versions, producers, and compaction state. Every batch's "
    "CRC is checked and its records decoded, as Kafka's consumers do: damaged data is "
    "reported where it starts."
)
EXAMPLES = """\
examples:
  kafkalog stats /var/lib/kafka/data
  kafkalog stats --topic orders --json /var/lib/kafka/data | jq .records
  kafkalog stats --plot growth.png /var/lib/kafka/data
  kafkalog stats --no-deep /var/lib/kafka/data   # batch headers only, records not decoded
  kafkalog stats --remote-storage /var/lib/kafka/tiered /var/lib/kafka/data

exit status: 0 every partition read, 1 a partition has unreadable data (its numbers stop there),
2 usage error, 3 I/O error
"""

_NO_TIMESTAMP = -1


@dataclass(slots=True)
class PartitionStats:
    """One partition's numbers (timestamps in ms; None when the log has no batch)."""

    path: Path
    topic: str | None
    partition: int | None
    cleanup_policy: str = "delete"
    configs_assumed: bool = False  # nothing records the topic's configs: Kafka's defaults
    size: int = 0  # bytes of .log files
    files_size: int = 0  # bytes of every file in the directory
    segments: int = 0
    batches: int = 0
    records: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: Counter = field(default_factory=Counter)  # batches per codec
    magics: Counter = field(default_factory=Counter)  # batches per magic
    producer_ids: set = field(default_factory=set)
    idempotent_batches: int = 0
    transactional_batches: int = 0
    control_batches: int = 0
    offset_gaps: int = 0  # places where a batch does not start right after the previous one
    cleaner_offset: int | None = None
    dirty_ratio: float | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)  # torn or zero-filled end of the log
    # --plot: per batch (max timestamp, records, bytes), in log order
    timeline: tuple[array, array, array] | None = None
    # The part read from tiered storage's remote segments (None: none): its numbers, as JSON.
    remote: dict | None = None

    def to_dict(self) -> dict:
        return {
            "type": "partition",
            "path": str(self.path),
            "topic": self.topic,
            "partition": self.partition,
            "sizeBytes": self.size,
            "filesBytes": self.files_size,
            "segments": self.segments,
            "batches": self.batches,
            "records": self.records,
            "logStartOffset": self.log_start_offset,
            "logEndOffset": self.log_end_offset,
            "firstOffset": self.first_offset,
            "lastOffset": self.last_offset,
            "minTimestamp": self.min_timestamp,
            "maxTimestamp": self.max_timestamp,
            "codecs": dict(sorted(self.codecs.items())),
            "magics": {str(k): v for k, v in sorted(self.magics.items())},
            "producers": len(self.producer_ids),
            "idempotentBatches": self.idempotent_batches,
            "transactionalBatches": self.transactional_batches,
            "controlBatches": self.control_batches,
            "offsetGaps": self.offset_gaps,
            "cleanupPolicy": self.cleanup_policy,
            "configsAssumed": self.configs_assumed,
            "cleanerOffset": self.cleaner_offset,
            "dirtyRatio": self.dirty_ratio,
            "error": self.error,
            "warnings": self.warnings,
            **({} if self.remote is None else {"remote": self.remote}),
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with operator_arguments(parser):
        parser.add_argument(
            "--plot", metavar="FILE.png", help="draw records and bytes over time per partition"
        )
        parser.add_argument(
            "--no-deep",
            dest="deep",
            action="store_false",
            help="count records from batch headers without decoding them (faster; a batch whose "
            "CRC matches but whose records do not decode is then counted, not reported)",
        )
        add_remote_storage(
            parser,
            effect="the remote segments the data directory's __remote_log_metadata lists are "
            "counted as part of each partition's log",
            without="they are named in a warning, not counted",
        )


@guarded("stats")
def run(args: argparse.Namespace) -> int:
    if args.plot:
        from .stats_plot import check_plot_path

        check_plot_path(args.plot)
    from ..log.datadir import CONFIG_FROM_DEFAULTS

    target = resolve_target(args.path, topics=args.topic)
    remote = _RemoteStore(target, args.remote_storage)
    results: list[PartitionStats] = []
    log_starts = _log_start_checkpoint(target)
    with logs_in_progress("stats", args, target) as (progress, logs):
        for entry in logs:
            stats = _new(entry.directory)
            log, source = entry.log, entry.config_source
            if log is None:  # an index the open trusted, perhaps: again, walking the log
                log, source = _open_without_index_hints(target, entry.directory)
            stats.configs_assumed = source == CONFIG_FROM_DEFAULTS
            if log is None:
                stats.error = entry.error
                results.append(stats)
                continue
            log_start = log_starts.get((stats.topic, stats.partition))
            tiered = remote.open(entry.directory, stats, log_start)
            try:
                collect(log, stats, timeline=bool(args.plot), progress=progress,
                        log_start_checkpoint=remote.floor(entry.directory, log_start),
                        deep=args.deep,
                        committed=target.committed_files(entry.directory),
                        tiered=tiered)  # fmt: skip
                remote.note_not_read(entry.directory, stats, log_start)
            finally:
                if log is not entry.log:
                    log.close()
                if tiered is not None:
                    tiered.close()
            results.append(stats)
    if args.plot:
        from .stats_plot import plot

        plot(results, args.plot)
    if args.json:
        for stats in results:
            write_json(stats.to_dict())
        write_json(_summary(target.path, results))
    else:
        _print_table(target.path, results)
    for stats in results:
        for warning in stats.warnings:
            report("stats", f"warning: {warning}")
        if stats.error:
            report("stats", f"{stats.path}: {stats.error}")
    return EXIT_PROBLEMS if any(s.error for s in results) else EXIT_OK


class _RemoteStore:
    """Tiered storage: the remote store given (``--remote-storage``) and the data directory's
    remote log metadata, read once (none in object storage, where brokers keep none)."""

    def __init__(self, target, remote_storage: str | None) -> None:
        from .remote import is_url

        if remote_storage is not None:
            if is_url(remote_storage):
                raise UsageError(
                    f"--remote-storage {remote_storage}: a local directory (LocalTieredStorage's)"
                )
            if not Path(remote_storage).is_dir():
                raise FileNotFoundError(2, "No such directory (--remote-storage)", remote_storage)
        self.path = remote_storage
        self.metadata = {}
        self._copied: dict[Path, tuple[int, int] | None] = {}
        if not is_url(target.data_dir):
            from ..log.tiered import read_remote_log_metadata

            try:
                self.metadata = read_remote_log_metadata(target.data_dir)
            except KafkalogError:
                if remote_storage is not None:
                    raise  # what the remote store holds cannot be told: the error names why
                # without the remote store, the local numbers are what they always were

    def copied(self, directory: Path) -> tuple[int, int] | None:
        """The offsets of the partition's copied remote segments (None: it has none)."""
        if not self.metadata:
            return None
        if directory not in self._copied:
            from ..log.tiered import copied_remote_offsets

            try:
                found = copied_remote_offsets(directory, metadata=self.metadata)
            except (KafkalogError, OSError):
                found = None  # no readable partition.metadata: the local walk says what is wrong
            self._copied[directory] = found
        return self._copied[directory]

    def floor(self, directory: Path, log_start: int | None) -> int | None:
        """Where a partition's local offsets can begin: its checkpointed log start, or past
        the copied remote segments, whose offsets an index left below the local log by local
        retention does not make lost (the remote store holds them)."""
        copied = self.copied(directory)
        return log_start if copied is None else max(log_start or 0, copied[1] + 1)

    def open(self, directory: Path, stats: PartitionStats, log_start: int | None):
        """The partition's tiered plan when it has copied remote segments and the remote store
        was given (None otherwise, or when it cannot be made: ``stats.error`` says why)."""
        if self.path is None or self.copied(directory) is None:
            return None
        from ..log.tiered import open_tiered_partition

        try:
            return open_tiered_partition(directory, self.path, metadata=self.metadata,
                                         log_start_offset=log_start)  # fmt: skip
        except (KafkalogError, OSError) as e:
            stats.error = f"cannot be read with its remote segments: {e}"
            return None

    def note_not_read(self, directory: Path, stats: PartitionStats, log_start: int | None):
        """Without the remote store, the offsets it holds below the local log are named in a
        warning (numbers never stop short in silence)."""
        copied = None if self.path is not None else self.copied(directory)
        if copied is None:
            return
        first = max(copied[0], log_start or 0)
        if first < stats.log_start_offset:
            stats.warnings.append(
                f"{directory}: offsets {first} to {stats.log_start_offset - 1} are in tiered "
                f"storage (copied remote segments in the remote log metadata): not counted, "
                f"give --remote-storage to count them"
            )


def _new(directory: Path) -> PartitionStats:
    from ..log.datadir import parse_partition_dir_name

    try:
        tp = parse_partition_dir_name(directory.name).topic_partition
        return PartitionStats(directory, tp.topic, tp.partition)
    except KafkalogError:
        return PartitionStats(directory, None, None)


def _log_start_checkpoint(target) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the data directory's log-start-offset-checkpoint entry."""
    from ..log.datadir import LOG_START_OFFSET_CHECKPOINT
    from .operate import _checkpoints

    offsets = _checkpoints(target.data_dir).get(LOG_START_OFFSET_CHECKPOINT, {})
    return {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}


def _open_without_index_hints(target, directory: Path):
    """``(log, config source)`` of a partition whose read-only open failed, opened again with
    every offset index set aside (positions from walking the log, as Kafka rebuilds an index it
    cannot trust: an entry pointing outside the segment makes the open fail); ``(None,
    defaults)`` when it fails again (the first error is the one reported)."""
    from ..log.datadir import CONFIG_FROM_DEFAULTS, parse_partition_dir_name
    from ..log.partition import Log
    from .operate import _topic_configs, open_log

    class WalkedLog(Log):
        def _read_log_end_offset(self) -> int:
            for segment in self.segments:
                _set_aside_offset_index(segment)
            return super()._read_log_end_offset()

    try:
        topic = parse_partition_dir_name(directory.name).topic_partition.topic
    except KafkalogError:
        topic = ""
    try:
        configs = _topic_configs(target.data_dir)
        recovery_point, log_start, clean = partition_offsets(target, directory)
        log = open_log(
            directory,
            log_class=WalkedLog,
            config=configs.config_for(topic),
            writable=False,
            log_start_offset=log_start,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
            committed_bases=target.committed_bases(directory),
        )
    except (KafkalogError, ValueError, OSError):
        return None, CONFIG_FROM_DEFAULTS
    return log, configs.config_source(topic)


def _set_aside_offset_index(segment) -> None:
    """Read ``segment`` from its start from now on: its offset index is not used."""
    index = segment.offset_index
    if index is not None:
        segment.offset_index = None
        index.close()


def collect(
    log,
    stats: PartitionStats,
    *,
    timeline: bool = False,
    progress=None,
    log_start_checkpoint: int | None = None,
    deep: bool = True,
    committed: frozenset[str] | None = None,
    tiered=None,
) -> None:
    """Fill ``stats`` from ``log`` (a read-only Log): batch headers, and with ``deep`` every
    record decoded (none kept). ``log_start_checkpoint``: the partition's
    log-start-offset-checkpoint entry (None: none), which says whether offsets below the first
    segment were lost or left by retention. ``committed``: the partition's files a manifest
    commits in object storage (None: no manifest); other files there belong to no commit and
    are neither counted nor taken for lost segments. ``tiered``: the partition's tiered plan
    (a :class:`kafkalog.log.tiered.TieredPartition`), whose remote segments are walked first,
    each for the offsets the plan reads from it; the numbers stop where its readable prefix
    ends, as every reader's records do."""
    stats.cleanup_policy = cleanup_policy(log.config)
    stats.segments = len(log.segments)
    stats.log_start_offset, stats.log_end_offset = log.log_start_offset, log.log_end_offset
    remote = [] if tiered is None else [p for p in tiered.segments if p.remote is not None]
    if tiered is not None:  # an index local retention left below the local log is no loss
        log_start_checkpoint = max(log_start_checkpoint or 0, tiered.local_log_start_offset)
        stats.segments += len(remote)
        stats.log_start_offset = tiered.log_start_offset
    files = [p for p in log.dir.iterdir() if p.is_file()]
    if committed is not None:
        files = [p for p in files if p.name in committed]
    stats.files_size = sum(p.stat().st_size for p in files)
    if timeline:
        stats.timeline = (array("q"), array("q"), array("q"))
    # base offset -> error, in offset order (a commit names every segment: none is lost)
    gone = [] if committed is not None else _lost_files(log, log_start_checkpoint)
    # The walk stops at the first segment with lost offsets below it.
    walked = [s for s in log.segments if not gone or s.base_offset <= gone[0][0]]
    if tiered is not None and tiered.problem is not None:
        walked = []  # the readable prefix ends in the remote part
    pieces = {id(p.segment): p for p in remote}
    previous_last = None
    end = None  # where the last segment's valid batches end

    def read(segment) -> None:
        nonlocal previous_last, end
        stats.size += segment.size()
        piece = pieces.get(id(segment))
        if piece is not None:
            try:
                previous_last = _walk_remote(stats, piece, previous_last, log.config, deep=deep)
            finally:  # what was read of it, also when the numbers stop there
                stats.remote = _remote_part(stats, remote, tiered.local_log_start_offset)
            return
        last = segment is log.segments[-1]
        previous_last, end = _walk_segment(
            stats, segment, previous_last, last, log.config, deep=deep
        )

    error = read_segments([*(p.segment for p in remote), *walked], read, progress)
    if error is not None:
        stats.error = error
    elif tiered is not None and tiered.problem is not None:
        stats.error = str(tiered.problem)
    elif gone:
        stats.error = gone[0][1]
    elif log.segments:  # the end the batches say (an index may point elsewhere)
        active = log.segments[-1].base_offset
        stats.log_end_offset = active if previous_last is None else max(
            previous_last + 1, active)  # fmt: skip
    if log.config.compact and stats.error is None and log.segments:
        _compaction_state(log, stats, end)


def _walk_remote(stats: PartitionStats, piece, previous_last, config, *, deep: bool):
    """Add a remote segment's batches for the offsets the tiered plan reads from it (a rolled
    segment: bytes after its last batch are damage), then hold its end to its metadata's (a
    segment short of it lost records: the error says so, also when it ends inside a batch).
    The last offset seen."""
    segment = piece.segment
    whole = segment.log
    first, stop = piece.byte_range()
    segment.log = whole.slice(first, stop - first)
    try:
        previous_last, end = _walk_segment(stats, segment, previous_last, False, config,
                                           deep=deep)  # fmt: skip
    except CorruptRecordError as e:
        seen = stats.last_offset
        next_offset = piece.start if seen is None else max(piece.start, seen + 1)
        truncated = piece.truncation(next_offset, position=e.position)
        if truncated is None:
            raise
        raise truncated from None
    finally:
        segment.log = whole
    next_offset = piece.start if previous_last is None else previous_last + 1
    truncated = piece.truncation(next_offset, position=end)
    if truncated is not None:
        raise truncated
    return previous_last


def _remote_part(stats: PartitionStats, remote: list, local_start: int) -> dict:
    """The numbers of the remote part, walked first: what ``stats`` holds once it is read."""
    return {
        "segments": len(remote),
        "sizeBytes": sum(p.segment.size() for p in remote),
        "batches": stats.batches,
        "records": stats.records,
        "firstOffset": stats.first_offset,
        "lastOffset": stats.last_offset,
        "minTimestamp": stats.min_timestamp,
        "maxTimestamp": stats.max_timestamp,
        "localLogStartOffset": local_start,
    }


def _lost_files(log, log_start_checkpoint: int | None) -> list[tuple[int, str]]:
    """Errors for what the readers cannot read in the partition directory, by base offset: a
    segment whose ``.log`` is gone while its index remains (the offsets it held are lost: every
    reader raises DataLossError), and a directory named like a segment file."""
    from ..log.datadir import (
        INDEX_FILE_SUFFIX,
        TIME_INDEX_FILE_SUFFIX,
        parse_segment_file_name,
    )
    from ..log.verify import log_start_before_segments, lost_segments, lost_span

    bases = [s.base_offset for s in log.segments]
    orphans: set[int] = set()
    found: list[tuple[int, str]] = []
    paths = sorted(log.dir.iterdir())
    log_start = log_start_before_segments(log_start_checkpoint, [p.name for p in paths])
    for path in paths:
        try:
            parsed = parse_segment_file_name(path.name)
        except KafkalogError:
            continue
        if path.is_dir():
            found.append((parsed.base_offset, f"{path}: not a regular file (a directory)"))
        elif not parsed.status and parsed.suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
            orphans.add(parsed.base_offset)
    for base, following in lost_segments(bases, orphans - set(bases), log_start):
        path = log.dir / f"{base:020d}.log"
        found.append((base, f"{path}: {lost_span(base, following)} are missing (the segment's "
                            f".log file is gone; its index remains)"))  # fmt: skip
    return sorted(found, key=lambda item: item[0])


def _compaction_state(log, stats: PartitionStats, end: int | None) -> None:
    """The cleaner offset and dirty ratio, over the log as Kafka's recovery leaves it: the active
    segment ends at its last complete batch (a torn tail is not read), and an offset index that
    cannot be used is set aside."""
    from ..log.cleaner import log_to_clean, read_cleaner_checkpoint
    from ..log.error_location import locate_in_partition

    active = log.segments[-1]
    whole = active.log
    if end is not None and end < whole.end:
        active.log = whole.slice(whole.start, end - whole.start)
    try:
        for attempt in range(2):
            try:
                stats.cleaner_offset = read_cleaner_checkpoint(log)
                stats.dirty_ratio = round(log_to_clean(log).cleanable_ratio, 4)
                return
            except (KafkalogError, OSError) as e:
                if attempt == 0 and any(s.offset_index is not None for s in log.segments):
                    for segment in log.segments:  # an index pointing outside its segment
                        _set_aside_offset_index(segment)
                    continue
                if isinstance(e, KafkalogError):
                    locate_in_partition(e, log.dir)
                stats.error = f"compaction state: {e}"
                return
    finally:
        active.log = whole


def _walk_segment(
    stats: PartitionStats, segment, previous_last, last: bool, config, *, deep: bool
) -> tuple[int | None, int]:
    """Add one segment's batches, CRCs, header rule and offsets checked (and with ``deep``
    their records decoded); its tail judged. The last offset seen, and where the segment's
    valid batches end."""
    from ..log.partition import zero_filled
    from ..log.verify import check_records, hidden_records_problem

    path = str(segment.log.path)
    end = segment.log.start
    batches = segment.log.batches()
    while True:
        try:
            batch = next(batches, None)
        except CorruptRecordError:  # a header no batch has: damage, unless all zeros
            if not zero_filled(segment, end, segment.log.end):
                raise
            batch = None
        if batch is None:
            _check_tail(stats, segment, end, last=last, config=config)
            return previous_last, end
        try:
            batch.ensure_valid()  # Kafka's consumers check CRCs: count what they read
            if batch.magic >= MAGIC_VALUE_V2:
                base, count = batch.base_offset, batch.count
                check_batch_header(
                    base,
                    batch.last_offset - base,
                    count,
                    batch.size_in_bytes,
                    batch.is_compressed,
                    position=batch.position,
                )
            else:
                base = batch.last_offset  # a legacy entry's offset: its last (inner) one
            check_entry_offsets(base, batch.last_offset, previous_last, position=batch.position)
            if deep:
                check_records(batch)
                if (problem := hidden_records_problem(batch)) is not None:
                    raise CorruptRecordError(problem[1], position=batch.position, offset=base)
        except KafkalogError as e:
            raise e.located(path=path) from None
        _add_batch(stats, batch, previous_last)
        previous_last = batch.last_offset
        end = batch.position + batch.size_in_bytes


def _check_tail(stats: PartitionStats, segment, end: int, *, last: bool, config) -> None:
    """Bytes after a segment's last complete batch: in the active segment a torn append or a
    zero-filled tail (recovery trims them: a warning), else damage that hides records."""
    from ..log.partition import zero_filled
    from ..log.verify import partial_tail_problem

    size = segment.log.end
    if end >= size:
        return
    path, left = str(segment.log.path), size - end
    if zero_filled(segment, end, size):
        if last:
            stats.warnings.append(
                f"{path}: position {end}: {left} zero bytes at the end (preallocated space left "
                f"by an unclean shutdown; recovery trims them)"
            )
            return
        raise CorruptRecordError(
            f"{left} zero bytes after the last complete batch of a rolled segment, which Kafka "
            f"had completed",
            path=path,
            position=end,
        )
    max_batch = config["max.message.bytes"]
    if left <= max_batch:  # a torn append is shorter than its batch, which Kafka bounds so
        problem = partial_tail_problem(segment.log.read(end, left), 0, max_batch_size=max_batch)
    else:
        problem = (
            f"{left} bytes after the last complete batch cannot be read as batches: records "
            f"may be hidden there"
        )
    if problem is None and last:
        stats.warnings.append(
            f"{path}: position {end}: an incomplete last batch ({left} bytes), as a broker "
            f"appending when it stopped leaves (recovery trims it)"
        )
        return
    if problem is None:
        problem = (
            f"{left} bytes after the last complete batch of a rolled segment, which Kafka had "
            f"completed: records may be hidden there"
        )
    raise CorruptRecordError(problem, path=path, position=end)


def _add_batch(stats: PartitionStats, batch, previous_last: int | None) -> None:
    records = batch.count  # a legacy compressed wrapper decompresses for this
    last = batch.last_offset
    first = batch.base_offset
    stats.batches += 1
    stats.records += records
    if stats.first_offset is None:
        stats.first_offset = first
    stats.last_offset = last
    if previous_last is not None and first != previous_last + 1:
        stats.offset_gaps += 1
    stats.codecs[batch.compression.name.lower()] += 1
    stats.magics[batch.magic] += 1
    if batch.producer_id >= 0:
        stats.producer_ids.add(batch.producer_id)
        if batch.is_transactional:
            stats.transactional_batches += 1
        else:
            stats.idempotent_batches += 1
    if batch.is_control:
        stats.control_batches += 1
    high = batch.max_timestamp
    low = high  # legacy messages and LogAppendTime batches: one timestamp for every record
    if batch.magic >= 2 and batch.timestamp_type != TimestampType.LOG_APPEND_TIME:
        low = batch.base_timestamp  # the first record's; with CreateTime the smallest, usually
    if high != _NO_TIMESTAMP:
        stats.max_timestamp = (
            high if stats.max_timestamp is None else max(stats.max_timestamp, high)
        )
    if low != _NO_TIMESTAMP:
        stats.min_timestamp = low if stats.min_timestamp is None else min(stats.min_timestamp, low)
    if stats.timeline is not None and high != _NO_TIMESTAMP:
        for column, value in zip(stats.timeline, (high, records, batch.size_in_bytes)):
            column.append(value)


def _summary(path: Path, results: list[PartitionStats]) -> dict:
    return {
        "type": "summary",
        "path": str(path),
        "partitions": len(results),
        "topics": len({s.topic for s in results}),
        "sizeBytes": sum(s.size for s in results),
        "segments": sum(s.segments for s in results),
        "batches": sum(s.batches for s in results),
        "records": sum(s.records for s in results),
        "errors": sum(bool(s.error) for s in results),
        **_remote_summary(results),
    }


def _remote_summary(results: list[PartitionStats]) -> dict:
    """The remote parts' totals (nothing when no partition has one)."""
    parts = [s.remote for s in results if s.remote is not None]
    if not parts:
        return {}
    return {"remote": {key: sum(p[key] for p in parts)
                       for key in ("segments", "sizeBytes", "batches", "records")}}  # fmt: skip


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def _print_table(root: Path, results: list[PartitionStats]) -> None:
    header = (
        "PARTITION",
        "SEGMENTS",
        "SIZE",
        "RECORDS",
        "START",
        "END",
        "FIRST TIME",
        "LAST TIME",
        "CODECS",
        "PRODUCERS",
        "POLICY",
    )
    tiered = any(s.remote is not None for s in results)
    if tiered:  # which offsets were read from remote segments
        header = (*header[:6], "REMOTE", *header[6:])
    rows = []
    for s in results:
        codecs = ",".join(sorted(s.codecs)) or "-"
        policy = s.cleanup_policy + ("?" if s.configs_assumed else "")
        if s.dirty_ratio is not None:
            policy += f" (dirty {s.dirty_ratio:.2f})"
        row = (
            s.path.name,
            str(s.segments),
            _size(s.size),
            str(s.records),
            str(s.log_start_offset),
            str(s.log_end_offset),
            format_time(s.min_timestamp),
            format_time(s.max_timestamp),
            codecs,
            str(len(s.producer_ids)),
            policy,
        )
        if tiered:
            part = s.remote
            remote = (
                "-" if part is None else f"{s.log_start_offset}-{part['localLogStartOffset'] - 1}"
            )
            row = (*row[:6], remote, *row[6:])
        rows.append(row)
    summary = _summary(root, results)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {1, 2, 3, 4, 5, 10} if tiered else {1, 2, 3, 4, 5, 9}
    lines = []
    for row in [header, *rows]:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append(
        f"{summary['partitions']} partitions of {summary['topics']} topics: "
        f"{summary['segments']} segments, {_size(summary['sizeBytes'])}, {summary['batches']} "
        f"batches, {summary['records']} records"
    )
    if tiered:
        part = summary["remote"]
        lines[-1] += (
            f" (remote: {part['segments']} segments, {_size(part['sizeBytes'])}, "
            f"{part['batches']} batches, {part['records']} records)"
        )
        lines.append(
            "REMOTE: the offsets read from tiered storage's remote segments (--remote-storage), "
            "from the log start up to the local log start"
        )
    if any(s.configs_assumed for s in results):
        lines.append(
            "POLICY?: nothing records the topic's configs here (no KRaft metadata, no "
            "kafkalog-topics.json entry): Kafka's defaults assumed"
        )
    sys.stdout.write("\n".join(lines) + "\n")
