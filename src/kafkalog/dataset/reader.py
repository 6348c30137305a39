"""Input partitions and reading them: offset ranges of topic-partitions -> Arrow record batches.

Tasks are planned as Spark's Kafka source plans them (:func:`spark_offset_ranges`): one per
topic-partition offset range, divided by offsets only for minPartitions or
maxRecordsPerPartition. A task is the byte ranges of the segments holding its offsets
(:class:`KafkaInputPartition`, several in a :class:`PackedInputPartition`), each starting at a
batch start taken from verified offset-index hints, plus the offset range to keep and, for
read_committed, the aborted transactions that overlap it. ``read()`` preads each byte range in
chunks of about 8 MB ending at batch boundaries, so a task's memory stays bounded whatever the
segment size, and decodes each chunk in pieces of whole batches sized to give Arrow batches of
about TARGET_ROWS rows or TARGET_BATCH_BYTES (:mod:`kafkalog.format.columnar`), each yielded as is:
no pandas, no per-row Python object.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecordError, KafkalogError
from ..format.columnar import kernels
from ..format.constants import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, RECORD_OVERHEAD_V0
from ..format.entries import ENTRY_HEADER as _ENTRY
from ..format.entries import frame_entry
from ..log.datadir import TopicPartition
from ..log.storage import RemoteFile, is_remote
from ..log.tiered import read_remote_log_metadata
from .options import EARLIEST, LATEST, OptionError, ReadOptions
from .planner import PartitionLog, data_loss, discover, notice, open_partition

if TYPE_CHECKING:
    from ..format.columnar import ColumnarDecoder

__all__ = [
    "KafkaInputPartition",
    "OffsetRange",
    "PackedInputPartition",
    "plan_input_partitions",
    "read_partition",
    "spark_offset_ranges",
]

CHUNK_BYTES = 8 << 20  # bytes handed to the decoder at a time
TARGET_ROWS = 10_000  # rows per Arrow batch (fewer when rows are big)
TARGET_BATCH_BYTES = 8 << 20
PIECE_BYTES = 1 << 20  # log bytes decoded into one Arrow batch, to start with (then adapted)
MIN_PIECE_BYTES = 64 << 10
PIECE_MAX_ROWS = 4 * TARGET_ROWS  # a piece of highly compressed batches is cut at this many rows


class KafkaInputPartition:
    """One task's work: bytes ``[start_position, end_position)`` of segment ``path`` of
    ``topic``-``partition``, keeping offsets ``[start_offset, end_offset)``."""

    def __init__(self, topic, partition, path, start_position, end_position, start_offset,
                 end_offset, aborted=(), include_headers=False,
                 fail_on_data_loss=True, end_damage=None, data_loss_log=None,
                 segment_end=None):  # fmt: skip
        self.fail_on_data_loss = fail_on_data_loss
        # Every offset of the segment is below this (the next segment's base offset, or the
        # log end offset): an entry at or past it is damage, not the end of the range.
        self.segment_end = segment_end
        self.data_loss_log = data_loss_log  # the option dataLossLog
        self.end_damage = end_damage  # raised after the range is read (see PartitionLog)
        self.topic = topic
        self.partition = partition
        self.path = path
        self.start_position = start_position
        self.end_position = end_position
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.aborted = tuple(aborted)
        self.include_headers = include_headers

    def __repr__(self) -> str:
        return (f"KafkaInputPartition({self.topic}-{self.partition} {os.path.basename(self.path)}"
                f" bytes [{self.start_position}, {self.end_position}) offsets "
                f"[{self.start_offset}, {self.end_offset}))")  # fmt: skip


@dataclass(frozen=True)
class OffsetRange:
    tp: TopicPartition
    start: int
    end: int


# -- resolving the offset range of each partition ---------------------------------------------
def open_selected(options: ReadOptions) -> dict[TopicPartition, PartitionLog]:
    found = discover(options.paths, report=True)
    selected = {tp: d for tp, d in found.items() if options.selects(tp.topic, tp.partition)}
    _report_selection(options, found, selected)
    if options.assign is not None:
        absent = [
            f"{t}-{p}"
            for t, ps in options.assign.items()
            for p in ps
            if TopicPartition(t, p) not in found
        ]
        if absent:
            data_loss(f"assigned partitions not in the data directory: {', '.join(absent)}",
                      options.fail_on_data_loss, log_dir=options.data_loss_log)  # fmt: skip
    logs = {}
    limits = _TopicLimits()
    # Each local data directory's remote log metadata (tiered storage), read once per plan.
    remote_metadata = {
        root: read_remote_log_metadata(root)
        for root in {d.parent for d in selected.values() if not is_remote(d)}
    }
    try:
        for tp in sorted(selected, key=lambda t: (t.topic, t.partition)):
            directory = selected[tp]
            logs[tp] = open_partition(
                tp, directory, fail_on_data_loss=options.fail_on_data_loss,
                data_loss_log=options.data_loss_log,
                max_message_bytes=functools.partial(limits.max_message_bytes, directory, tp.topic),
                remote_storage=options.remote_storage,
                remote_metadata=remote_metadata.get(directory.parent),
            )  # fmt: skip
    except BaseException:
        for log in logs.values():
            log.close()
        raise
    return logs


class _TopicLimits:
    """Topics' ``max.message.bytes``, read from each data directory's topic configs (KRaft
    metadata, kafkalog's topics file) the first time a partition there asks: only a torn tail
    needs it, and reading a metadata log for every plan would cost what most plans never use.
    Kafka's default where the configs cannot be read."""

    def __init__(self) -> None:
        self._configs: dict = {}  # data directory -> TopicConfigs, or None (unreadable)

    def max_message_bytes(self, partition_dir, topic: str) -> int:
        from ..log.datadir import topic_configs
        from ..log.verify import DEFAULT_MAX_MESSAGE_BYTES

        data_dir = partition_dir.parent
        if data_dir not in self._configs:
            self._configs[data_dir] = topic_configs(data_dir)
        found = self._configs[data_dir]
        return found.config_for(topic)["max.message.bytes"] if found else DEFAULT_MAX_MESSAGE_BYTES


def _report_selection(options: ReadOptions, found, selected) -> None:
    """Warn about subscribed topics that are not there (Spark's Kafka source reads no rows for
    them, and so does kafkalog) and about a pattern that matches no topic."""
    topics = sorted({tp.topic for tp in found})
    where = ", ".join(options.paths)
    present = ", ".join(topics[:20]) + (" ..." if len(topics) > 20 else "") or "none"
    if options.subscribe is not None:
        missing = [t for t in options.subscribe if t not in topics]
        if missing:
            notice(
                f"subscribed topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} not "
                f"found in {where}: no rows for {'them' if len(missing) > 1 else 'it'} (as "
                f"Spark's Kafka source reads none for a topic that does not exist); topics "
                f"found: {present}"
            )
    elif options.subscribe_pattern is not None and found and not selected:
        notice(
            f"subscribePattern {options.subscribe_pattern!r} matches no topic in {where} "
            f"(it must match whole names; internal topics such as __consumer_offsets are left "
            f"out of patterns, as by Kafka's consumer): no rows; topics found: {present}"
        )


def check_all_given(spec_map: dict, logs, what: str, *, streaming: bool = False) -> None:
    given = set(spec_map)
    assigned = {(tp.topic, tp.partition) for tp in logs}
    if given == assigned:
        return
    listing = f"Specified: {_tp_set(given)} Assigned: {_tp_set(assigned)}"
    if what.endswith("ByTimestamp"):  # timestamps only: no -1/-2 to stand for latest/earliest
        raise OptionError(
            f"If {what} contains specific timestamps, you must specify all TopicPartitions "
            f"(this option takes a timestamp for each; give {what.replace('OffsetsBy', '')} "
            f"instead for one timestamp for every partition). {listing}"
        )
    care = ", if you don't care" if streaming else ""
    raise OptionError(
        f"If {what} contains specific offsets, you must specify all TopicPartitions.\n"
        f"Use -1 for latest, -2 for earliest{care}.\n{listing}"
    )


def _tp_set(tps) -> str:
    return "{" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "}"


def resolve_spec(spec, log: PartitionLog, *, start: bool, options: ReadOptions, upper: int) -> int:
    key = (log.tp.topic, log.tp.partition)
    if spec.kind == "earliest":
        return log.log_start_offset
    if spec.kind == "latest":
        return upper
    if spec.kind == "offsets":
        value = spec.offsets.get(key, EARLIEST if start else LATEST)
        if value == EARLIEST:
            return log.log_start_offset
        if value == LATEST:
            return upper
        return value
    ts = spec.timestamp if spec.kind == "timestamp" else spec.offsets.get(key)
    if ts is None:
        return log.log_start_offset if start else upper
    found = log.offset_for_timestamp(ts)
    if found is None:
        if start and options.timestamp_strategy == "error":
            why = (
                "the partition holds no records"
                if log.log_start_offset >= log.log_end_offset
                else "every record is older"
            )
            raise OptionError(
                f"No offset matched from request of topic-partition {log.tp} and timestamp "
                f"{ts} ({why}); set startingOffsetsByTimestampStrategy to latest to start at "
                f"the end instead"
            )
        return upper
    return min(found, upper)


def resolve_ranges(options: ReadOptions, logs: dict[TopicPartition, PartitionLog], *,
                   streaming: bool = False) -> list[OffsetRange]:  # fmt: skip
    """The offset range of every selected partition (batch: from starting to ending options)."""
    if not streaming:
        for spec, what in ((options.starting, "starting"), (options.ending, "ending")):
            if spec.kind == "offsets":
                check_all_given(spec.offsets, logs, f"{what}Offsets")
            elif spec.kind == "timestamps":
                check_all_given(spec.offsets, logs, f"{what}OffsetsByTimestamp")
    ranges = []
    for tp, log in logs.items():
        upper = log.last_stable_offset() if options.read_committed else log.log_end_offset
        start = resolve_spec(options.starting, log, start=True, options=options, upper=upper)
        end = resolve_spec(options.ending, log, start=False, options=options, upper=upper)
        fail = options.fail_on_data_loss
        loss = functools.partial(data_loss, log_dir=options.data_loss_log)
        if start < log.log_start_offset:
            loss(f"{tp}: starting offset {start} is below the log start offset "
                      f"{log.log_start_offset}", fail)  # fmt: skip
            start = log.log_start_offset
        if end > upper:
            if end > log.log_end_offset:
                loss(f"{tp}: ending offset {end} is past the log end offset "
                          f"{log.log_end_offset}", fail)  # fmt: skip
            end = upper
        if start > end:
            if start > log.log_end_offset:
                loss(f"{tp}: starting offset {start} is past the log end offset "
                          f"{log.log_end_offset}", fail)  # fmt: skip
                start = end
            else:
                raise OptionError(f"{tp}: starting offset {start} is after ending offset {end}")
        for lo, hi in log.missing:
            if hi < 0 or hi > start:  # a missing segment past the last one hides the end too
                upto = "the end" if hi < 0 else str(hi)
                gone = log.directory / f"{lo:020d}.log"
                loss(f"{tp}: offsets from {lo} to {upto} are missing ({gone} is gone; its "
                     f"index remains)", fail)  # fmt: skip
        ranges.append(OffsetRange(tp, start, end))
    return ranges


# -- splitting ranges into input partitions ---------------------------------------------------
def spark_offset_ranges(ranges, min_partitions: int | None = None,
                        max_records: int | None = None) -> list[OffsetRange]:  # fmt: skip
    """The offset ranges Spark's Kafka source gives its tasks (spark-sql-kafka-0-10's
    ``KafkaOffsetRangeCalculator.getRanges``): empty ranges are dropped; with neither option,
    or with ``minPartitions`` at most the number of ranges and no range above
    ``maxRecordsPerPartition``, one range per topic-partition; ranges above
    ``maxRecordsPerPartition`` are divided into ``ceil(size / max)`` parts; then, while there
    are fewer than ``minPartitions`` ranges, the large ones are divided in proportion to their
    size: a range whose share ``round(size / total * minPartitions)`` is 1 stays whole (so does
    every range of its topic-partition, as in Spark), the others share ``minPartitions`` minus
    the number of whole ones. Division is by offsets, the last part taking the remainder."""
    offset_ranges = [r for r in ranges if r.end - r.start > 0]
    too_few = min_partitions is not None and len(offset_ranges) < min_partitions
    too_big = max_records is not None and any(r.end - r.start > max_records for r in offset_ranges)
    if not too_few and not too_big:
        return offset_ranges
    divided = offset_ranges
    if max_records is not None:
        divided = [
            piece
            for r in offset_ranges
            for piece in _divide(r, -(-(r.end - r.start) // max_records))
        ]
    if min_partitions is None or min_partitions <= len(divided):
        return divided
    total = sum(r.end - r.start for r in divided)
    unsplit = [r for r in divided if _part_count(r.end - r.start, total, min_partitions) == 1]
    split_total = total - sum(r.end - r.start for r in unsplit)
    unsplit_tps = {r.tp for r in unsplit}
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in divided:
        parts = 1 if r.tp in unsplit_tps else _part_count(r.end - r.start, split_total, split_min)
        out.extend(_divide(r, parts))
    return out


def _part_count(size: int, total: int, parts: int) -> int:
    """Spark's ``math.max(math.round(size.toDouble / totalSize * minParts), 1)`` (Scala's round
    is half up)."""
    return max(math.floor(size / total * parts + 0.5), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Spark's ``getDividedPartition``: ``parts`` consecutive ranges, integer division, the
    later ones taking the round-off; empty ones dropped."""
    out, remaining, start = [], r.end - r.start, r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        if end > start:
            out.append(OffsetRange(r.tp, start, end))
        start = end
    return out


def split_range(log: PartitionLog, rng: OffsetRange, options: ReadOptions,
                split_bytes: int | None = None, min_timestamp: int | None = None,
                ) -> list[KafkaInputPartition]:  # fmt: skip
    """The byte ranges that hold one offset range of a partition: one per segment it touches
    (starting at a verified index hint at or before its first offset, ending at one past its
    last), each cut about every ``split_bytes`` bytes at verified index entries when given.
    With ``min_timestamp`` (pushdown), rolled segments whose time index says every timestamp
    is older are skipped."""
    parts = _split_range(log, rng, options, split_bytes, min_timestamp)
    if log.end_damage is not None and rng.end >= log.log_end_offset:
        if not parts:  # nothing to read before the damage: it is the answer
            raise log.end_damage
        parts[-1].end_damage = log.end_damage
    return parts


def _split_range(log, rng, options, split_bytes, min_timestamp) -> list[KafkaInputPartition]:
    parts: list[KafkaInputPartition] = []
    if rng.start >= rng.end or not log.segments:
        return parts
    aborted = log.aborted_transactions(rng.start, rng.end) if options.read_committed else []
    first = log.segment_index(rng.start)
    for i in range(first, len(log.segments)):
        seg = log.segments[i]
        if seg.base_offset >= rng.end:
            break
        lo = max(rng.start, seg.base_offset)
        hi = min(rng.end, log.next_base(i))
        if i + 1 < len(log.segments) and lo >= hi:
            continue
        if min_timestamp is not None and i + 1 < len(log.segments):
            if seg.times.older_than(min_timestamp):
                continue
        start_pos = log.position_for(i, lo) if lo > seg.base_offset else 0
        end_pos = seg.end_position
        if rng.end < log.next_base(i):  # stop early: find a batch start past the end offset
            slot = seg.hints.past(rng.end)
            if slot is not None:
                end_pos = min(end_pos, slot)
        cuts = [start_pos, end_pos]
        if split_bytes:
            cuts[1:1] = log.split_positions(i, start_pos, end_pos, split_bytes)
        for a, b in itertools.pairwise(cuts):
            if b > a:
                part = _part(log, seg.path, a, b, lo, hi, aborted, options)
                part.segment_end = log.next_base(i)
                parts.append(part)
    return parts


def _part(log, path, a, b, lo, hi, aborted, options) -> KafkaInputPartition:
    mine = [t for t in aborted if t[2] >= lo and t[1] < hi]
    return KafkaInputPartition(log.tp.topic, log.tp.partition, path, a, b, lo, hi, mine,
                               options.include_headers, options.fail_on_data_loss,
                               data_loss_log=options.data_loss_log)  # fmt: skip


class PackedInputPartition:
    """One task's byte ranges, read in order by one decoder: the segments (or pieces of
    segments) holding one offset range of one topic-partition."""

    def __init__(self, parts, rng: OffsetRange | None = None) -> None:
        self.parts = list(parts)
        self.path = self.parts[0].path if self.parts else None
        first = self.parts[0] if self.parts else None
        self.topic = rng.tp.topic if rng else getattr(first, "topic", None)
        self.partition = rng.tp.partition if rng else getattr(first, "partition", None)
        self.start_offset = rng.start if rng else getattr(first, "start_offset", None)
        self.end_offset = rng.end if rng else getattr(self.parts[-1], "end_offset", None)

    def __repr__(self) -> str:
        return (f"PackedInputPartition({self.topic}-{self.partition} offsets "
                f"[{self.start_offset}, {self.end_offset}): {len(self.parts)} ranges)")  # fmt: skip


def plan_input_partitions(options: ReadOptions, logs, ranges, *, min_timestamp=None,
                          split_bytes: int | None = None) -> list:  # fmt: skip
    """Spark's Kafka source's tasks for ``ranges``: one per topic-partition offset range, or
    more with minPartitions or maxRecordsPerPartition (:func:`spark_offset_ranges`). A task is
    the byte ranges of the segments holding its offsets (a :class:`PackedInputPartition` when
    there are several), starting and ending at batch starts taken from verified index hints.
    ``split_bytes`` also cuts each segment's range about every that many bytes (the Arrow scan,
    for even progress); Spark's tasks are never cut by bytes."""
    for rng in ranges:  # an empty range Spark drops, but damage at the end is still the answer
        log = logs[rng.tp]
        if rng.end <= rng.start and log.end_damage is not None and rng.end >= log.log_end_offset:
            raise log.end_damage
    tasks: list = []
    for rng in spark_offset_ranges(
        ranges, options.min_partitions, options.max_records_per_partition
    ):
        pieces = split_range(logs[rng.tp], rng, options, split_bytes, min_timestamp)
        if len(pieces) == 1:
            tasks.append(pieces[0])
        elif pieces:
            tasks.append(PackedInputPartition(pieces, rng))
    return tasks


# -- reading ----------------------------------------------------------------------------------
_SMALLEST_ENTRY = LOG_OVERHEAD + RECORD_OVERHEAD_V0  # what a window of N bytes holds at most


def _frame_rows(size: int) -> np.ndarray:
    """A ``frame_run`` output for every entry a window of ``size`` bytes can hold."""
    return np.empty(2 * (size // _SMALLEST_ENTRY + 1), np.int64)


def _complete_end(
    buf: memoryview, limit: int, step: int, past: int | None, rows: np.ndarray
) -> tuple[int, int | None, list[int], bool]:
    """The end of the last complete entry in ``buf[:limit]`` (framed by the one entry walk; a
    corrupt entry ends it too: the next chunk starts there and reports it), that entry's offset
    field (a v2 batch's base offset, a legacy entry's own offset), with ``step`` entry ends about
    every ``step`` bytes (where a chunk can be cut into pieces of whole entries), and whether
    the walk stopped at an entry whose offset field is ``past`` or beyond (damage: see
    :func:`_chunks`). ``rows`` (:func:`_frame_rows` of ``len(buf)`` or more) takes the
    framing kernel's output, one call for the window."""
    _, n = kernels.frame_run(buf, 0, limit, rows)
    ends, offsets = rows[0 : 2 * n : 2], rows[1 : 2 * n : 2]
    beyond = False
    if past is not None:
        at = np.flatnonzero(offsets >= past)
        if len(at):
            n, beyond = int(at[0]), True
            ends, offsets = ends[:n], offsets[:n]
    if not n:
        return 0, None, [], beyond
    cuts: list[int] = []
    if step:  # the first end at or past each mark, the next mark a step past that end
        i = int(np.searchsorted(ends, step))
        while i < n:
            cuts.append(int(ends[i]))
            i = int(np.searchsorted(ends, cuts[-1] + step, "left"))
    return int(ends[-1]), int(offsets[-1]), cuts, beyond


def _frame_at(pread, path: str, pos: int, end: int) -> int:
    """The size of the entry at ``pos``, which must lie whole within ``end``: the plan covers
    complete entries only, so anything else there is damage (a torn append can only end the
    active segment, and the plan stops before it)."""
    head = pread(HEADER_SIZE_UP_TO_MAGIC, pos)
    if len(head) < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(
            f"only {len(head)} bytes remain here where the planned range holds {end - pos} "
            f"(the file shrank while it was read)",
            position=pos,
            path=path,
        )
    size = LOG_OVERHEAD + _ENTRY.unpack_from(head)[1]
    try:
        frame_entry(head, 0, max(size, HEADER_SIZE_UP_TO_MAGIC + 1))
    except KafkalogError as e:
        e.position = pos
        raise e.located(path=path) from None
    if size > end - pos:
        raise CorruptRecordError(
            f"the entry declares {size} bytes, but {end - pos} bytes of complete entries remain "
            f"in the planned range: its size field is damaged, and the records from here on "
            f"cannot be read",
            position=pos,
            path=path,
        )
    return size


def _chunks(path: str, start: int, end: int, stop_offset: int | None, chunk: int, step: int,
            segment_end: int | None = None):  # fmt: skip
    """(file position, memoryview, cuts) chunks of whole entries; see :func:`iter_chunks`.
    With ``segment_end`` (every offset of the segment is below it), an entry whose offset is at
    or past it is damage (a baseOffset the CRC does not cover): the chunk before it is yielded,
    then CorruptRecordError; ``stop_offset`` then ends the reading early only below it."""
    if is_remote(path):  # an object: ranged reads of the same chunks
        remote: RemoteFile | None = RemoteFile(path)
        fd, pread = -1, remote.read_at
    else:
        remote = None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        pread = functools.partial(os.pread, fd)
    buf = bytearray(min(chunk, max(end - start, 0)) or 1)
    rows = _frame_rows(len(buf))
    if segment_end is not None and stop_offset is not None and stop_offset >= segment_end:
        stop_offset = None  # the range reads to the segment's end: every entry is checked
    try:
        pos = start
        while pos < end:
            first = _frame_at(pread, path, pos, end)
            if first > len(buf):  # one entry bigger than the buffer: grow for it
                buf = bytearray(first)
                rows = _frame_rows(len(buf))
            want = min(len(buf), end - pos)
            view = memoryview(buf)
            if remote is not None:
                got = remote.readinto(view[:want], pos)
            else:
                got = os.preadv(fd, [view[:want]], pos)
            usable, last, cuts, beyond = _complete_end(view, got, step, segment_end, rows)
            if usable:
                yield pos, view[:usable], [c for c in cuts if c < usable]
            if beyond:
                offset = _ENTRY.unpack_from(view, usable)[0]
                raise CorruptRecordError(
                    f"Batch offset {offset} is not below {segment_end}, where the next segment "
                    f"begins or the log ends: a segment's offsets lie below the next one's base "
                    f"offset (the baseOffset field, which the CRC does not cover, is damaged)",
                    position=pos + usable,
                    offset=offset,
                    path=path,
                )
            if usable == 0:  # cannot happen after the check above, unless the file changed
                raise CorruptRecordError(
                    "no complete entry here (the file changed while it was read)",
                    position=pos,
                    path=path,
                )
            pos += usable
            if stop_offset is not None and last is not None and last >= stop_offset:
                return
    finally:
        if remote is not None:
            remote.close()
        else:
            os.close(fd)


def iter_chunks(path: str, start: int, end: int, stop_offset: int | None = None,
                chunk: int = CHUNK_BYTES):  # fmt: skip
    """(file position, memoryview) chunks of whole entries covering ``[start, end)``, ending
    after the chunk whose last entry's offset reaches ``stop_offset`` (every later entry is past
    it). One buffer is reused: a chunk is valid until the next is produced."""
    for pos, view, _ in _chunks(path, start, end, stop_offset, chunk, 0):
        yield pos, view


def _aborted_mask(batch: pa.RecordBatch, aborted) -> np.ndarray | None:
    """Rows of aborted transactions (read_committed drops them)."""
    tx = np.asarray(batch.column(9)).astype(bool)
    if not tx.any():
        return None
    offsets = np.asarray(batch.column(0))
    pids = np.asarray(batch.column(6))
    drop = np.zeros(len(offsets), dtype=bool)
    for pid, first, last in aborted:
        drop |= (pids == pid) & (offsets >= first) & (offsets <= last)
    drop &= tx
    return drop if drop.any() else None


def read_partition(part) -> Iterator[pa.RecordBatch]:
    """Arrow batches in Spark's Kafka layout for one input partition (control records never
    appear; aborted transactional records are dropped when ``part.aborted`` lists them)."""
    from ..format import columnar as fast

    # One decoder for the ranges of a packed partition: its arrays are reused. Spark's worker
    # holds the previous batch (and its struct-wrapped copy) while it asks for the next, which
    # the decoder's pool of array sets allows for.
    decoder = fast.ColumnarDecoder()
    for p in part.parts if isinstance(part, PackedInputPartition) else (part,):
        yield from _read_one(p, decoder)


class _Sizer:
    """Bytes of log entries per Arrow batch: starts at ``PIECE_BYTES`` and follows the rows and
    Arrow bytes that the last piece gave towards TARGET_ROWS and TARGET_BATCH_BYTES (compressed
    batches give more rows per byte read)."""

    def __init__(self) -> None:
        self.step = PIECE_BYTES

    def learn(self, read: int, rows: int, arrow_bytes: int) -> None:
        if rows <= 0 or read <= 0:
            return
        scale = min(TARGET_ROWS / rows, TARGET_BATCH_BYTES / max(arrow_bytes, 1))
        self.step = int(min(CHUNK_BYTES, max(MIN_PIECE_BYTES, read * scale)))


def _read_one(part: KafkaInputPartition, decoder: ColumnarDecoder) -> Iterator[pa.RecordBatch]:
    """One input partition's records. Damaged bytes (a CRC mismatch, an entry that cannot be
    framed, records that do not decode) stop the read with the error, file and position, after
    the records before them; with failOnDataLoss=false they are skipped with a warning instead:
    a damaged entry whose frame holds is stepped over, and a frame that does not hold ends the
    range (nothing after it can be found)."""
    if not is_remote(part.path) and not os.path.exists(part.path):
        raise FileNotFoundError(
            f"segment {part.path} is not visible from this executor: the data directory must be "
            f"on a filesystem the driver and every executor share"
        )
    reading = _RangeReader(part, decoder)
    start: int | None = part.start_position
    while start is not None:
        start = yield from reading.read_from(start)
    if part.end_damage is not None:
        raise part.end_damage


class _RangeReader:
    def __init__(self, part: KafkaInputPartition, decoder: ColumnarDecoder) -> None:
        from .schema import ConstantColumns

        self.part = part
        self.decoder = decoder
        self.constants = ConstantColumns(part.topic, part.partition)
        self.sizer = _Sizer()
        self.next_offset = part.start_offset  # offsets below this were handed out

    def read_from(self, start: int):
        """Read from ``start`` to the range's end; return where to go on after a skipped
        damaged entry, or None when the range is done."""
        part = self.part
        chunks = _chunks(part.path, start, part.end_position, part.end_offset, CHUNK_BYTES,
                         MIN_PIECE_BYTES, part.segment_end)  # fmt: skip
        try:
            for position, view, cuts in chunks:
                lo = 0
                for hi in _pieces(cuts, len(view), self.sizer):
                    try:
                        yield from self._decode(view[lo:hi], position + lo, hi - lo)
                    except KafkalogError as e:
                        found = self._first_damaged(view, lo, hi, position)
                        if found is None:  # (not expected: the piece failed as a whole)
                            return self._damaged(e.located(path=part.path), None)
                        bad_start, bad_end, error = found
                        if bad_start > lo:  # the records before the damaged entry first
                            yield from self._decode(view[lo:bad_start], position + lo, 0)
                        error.position = position + bad_start
                        return self._damaged(error.located(path=part.path), position + bad_end)
                    lo = hi
        except KafkalogError as e:  # an entry out of place, or one that cannot be framed
            e.located(path=part.path)
            return self._damaged(e, _after_entry(part.path, e.position, part.end_position))
        finally:
            chunks.close()
        return None

    def _first_damaged(self, view: memoryview, lo: int, hi: int, position: int):
        """(start, end, error) in ``view`` of the first entry of ``view[lo:hi]`` that the
        decoder refuses, with what it raised: the shortest failing run of whole entries from
        ``lo``, found by bisection (a rule across batches, such as offsets going back, fails
        only with the entries before it). None when the entries cannot be walked."""
        ends, pos = [], lo
        while pos < hi:
            try:
                framed = frame_entry(view, pos, hi)
            except KafkalogError:
                framed = None
            if framed is None:
                break
            pos += LOG_OVERHEAD + framed[0]
            ends.append(pos)
        failed: KafkalogError | None = None
        a, b = 0, len(ends)  # the first failing run ends at ends[k] for some k in [a, b)
        while a < b:
            k = (a + b) // 2
            error = self._fails(view[lo : ends[k]], position + lo)
            if error is None:
                a = k + 1
            else:
                b, failed = k, error
        if failed is None or a >= len(ends):
            return None
        return (ends[a - 1] if a else lo), ends[a], failed

    def _fails(self, piece: memoryview, position: int) -> KafkalogError | None:
        try:
            for _ in self.decoder.iter_batches(
                piece, max_rows=PIECE_MAX_ROWS, start_offset=self.next_offset,
                end_offset=self.part.end_offset, keep_control=False, position_base=position,
                validate_crc=True,
            ):  # fmt: skip
                pass
        except KafkalogError as e:
            return e
        return None

    def _decode(self, piece: memoryview, position: int, read: int):
        from .schema import to_spark_batch

        part = self.part
        # One Arrow batch per piece, unless its batches decompress to far more rows than the
        # piece was sized for: then several, so memory stays bounded.
        decoded_pieces = self.decoder.iter_batches(
            piece, max_rows=PIECE_MAX_ROWS, start_offset=self.next_offset,
            end_offset=part.end_offset, keep_control=False, position_base=position,
            validate_crc=True,  # as Kafka's consumer (check.crcs=true) and Spark's source
        )  # fmt: skip
        for decoded in decoded_pieces:
            if decoded.num_rows:
                self.next_offset = int(decoded.column(0)[-1].as_py()) + 1
            if decoded.num_rows and part.aborted:
                drop = _aborted_mask(decoded, part.aborted)
                if drop is not None:
                    decoded = decoded.filter(pa.array(~drop))
            if decoded.num_rows == 0:
                continue
            out = to_spark_batch(decoded, self.constants, part.include_headers)
            del decoded
            if read:
                self.sizer.learn(read, out.num_rows, out.nbytes)
            yield out
            del out

    def _damaged(self, error: KafkalogError, resume: int | None) -> int | None:
        part = self.part
        if part.fail_on_data_loss:
            raise error
        after = (
            f"read on from position {resume}"
            if resume is not None and resume < part.end_position
            else f"the rest of this segment's planned range (to position {part.end_position}) "
            f"is skipped"
        )
        data_loss(
            f"{part.topic}-{part.partition}: a damaged entry ({error.message}); {after}",
            False,
            cause=error,
            log_dir=part.data_loss_log,
        )
        return resume if resume is not None and resume < part.end_position else None


def _after_entry(path: str, position: int | None, end: int) -> int | None:
    """Where the entry at ``position`` ends when its frame holds within ``end`` (the read can
    go on after it), else None (nothing after it can be found)."""
    if position is None:
        return None
    if is_remote(path):
        with RemoteFile(path) as f:
            head = f.read_at(HEADER_SIZE_UP_TO_MAGIC, position)
    else:
        with open(path, "rb") as f:
            head = os.pread(f.fileno(), HEADER_SIZE_UP_TO_MAGIC, position)
    try:
        framed = frame_entry(head, 0, end - position)
    except KafkalogError:
        return None
    return None if framed is None else position + LOG_OVERHEAD + framed[0]


def _pieces(cuts: list[int], end: int, sizer: _Sizer) -> Iterator[int]:
    """Ends of pieces of about ``sizer.step`` bytes at the entry ends ``cuts`` (taken about
    every ``MIN_PIECE_BYTES``); the last one is ``end``."""
    start = 0
    for c in cuts:
        if c - start >= sizer.step and end - c >= MIN_PIECE_BYTES // 2:
            yield c
            start = c
    yield end
