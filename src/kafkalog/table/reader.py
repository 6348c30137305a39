"""Input partitions and reading them: byte ranges of segments -> Arrow record batches.

An input partition is a byte range of one segment file, cut at batch starts taken from the
offset index (about 128 MB each by default, smaller with minPartitions or
maxRecordsPerPartition), plus the offset range to keep and, for read_committed, the aborted
transactions that overlap it. ``read()`` preads the range in chunks of about 8 MB ending at batch
boundaries, so a task's memory stays bounded whatever the segment size, and decodes each chunk in
pieces of whole batches sized to give Arrow batches of about TARGET_ROWS rows or
TARGET_BATCH_BYTES (:mod:`kafkalog.format.fast`), each yielded as is: no pandas, no per-row
Python object.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecordError
from ..log.naming import TopicPartition
from .options import EARLIEST, LATEST, OptionError, ReadOptions
from .planner import PartitionLog, data_loss, discover, open_partition

if TYPE_CHECKING:
    from ..format.fast import ColumnarDecoder

__all__ = [
    "KafkaInputPartition",
    "OffsetRange",
    "PackedInputPartition",
    "plan_input_partitions",
    "read_partition",
]

SPLIT_BYTES = 128 << 20  # an input partition's target size
CHUNK_BYTES = 8 << 20  # bytes handed to the decoder at a time
TARGET_ROWS = 10_000  # rows per Arrow batch (fewer when rows are big)
TARGET_BATCH_BYTES = 8 << 20
PIECE_BYTES = 1 << 20  # log bytes decoded into one Arrow batch, to start with (then adapted)
MIN_PIECE_BYTES = 64 << 10
PIECE_MAX_ROWS = 4 * TARGET_ROWS  # a piece of highly compressed batches is cut at this many rows
_ENTRY = struct.Struct(">qi")
_MIN_ENTRY = 26  # the smallest message set entry (a v0 message with no key or value)


class KafkaInputPartition:
    """One task's work: bytes ``[start_position, end_position)`` of segment ``path`` of
    ``topic``-``partition``, keeping offsets ``[start_offset, end_offset)``."""

    def __init__(self, topic, partition, path, start_position, end_position, start_offset,
                 end_offset, aborted=(), include_headers=False):  # fmt: skip
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
    found = discover(options.paths)
    selected = {tp: d for tp, d in found.items() if options.selects(tp.topic, tp.partition)}
    if options.assign is not None:
        absent = [
            f"{t}-{p}"
            for t, ps in options.assign.items()
            for p in ps
            if TopicPartition(t, p) not in found
        ]
        if absent:
            data_loss(f"assigned partitions not in the data directory: {', '.join(absent)}",
                      options.fail_on_data_loss)  # fmt: skip
    logs = {}
    try:
        for tp in sorted(selected, key=lambda t: (t.topic, t.partition)):
            logs[tp] = open_partition(tp, selected[tp], fail_on_data_loss=options.fail_on_data_loss)
    except BaseException:
        for log in logs.values():
            log.close()
        raise
    return logs


def _check_all_given(spec_map: dict, logs, what: str) -> None:
    given = set(spec_map)
    assigned = {(tp.topic, tp.partition) for tp in logs}
    if given != assigned:
        raise OptionError(
            f"If {what} contains specific offsets, you must specify all TopicPartitions.\n"
            f"Use -1 for latest, -2 for earliest.\nSpecified: {sorted(given)} "
            f"Assigned: {sorted(assigned)}"
        )


def _resolve(spec, log: PartitionLog, *, start: bool, options: ReadOptions, upper: int) -> int:
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
            raise OptionError(
                f"No offset matched the starting timestamp {ts} for {log.tp} (the newest record "
                f"is older); set startingOffsetsByTimestampStrategy to latest to start at the end"
            )
        return upper
    return min(found, upper)


def resolve_ranges(options: ReadOptions, logs: dict[TopicPartition, PartitionLog], *,
                   streaming: bool = False) -> list[OffsetRange]:  # fmt: skip
    """The offset range of every selected partition (batch: from starting to ending options)."""
    if not streaming:
        for spec, what in (
            (options.starting, "startingOffsets"),
            (options.ending, "endingOffsets"),
        ):
            if spec.kind in ("offsets", "timestamps"):
                _check_all_given(spec.offsets, logs, what.replace("Offsets", "Offsets"))
    ranges = []
    for tp, log in logs.items():
        upper = log.last_stable_offset() if options.read_committed else log.log_end_offset
        start = _resolve(options.starting, log, start=True, options=options, upper=upper)
        end = _resolve(options.ending, log, start=False, options=options, upper=upper)
        fail = options.fail_on_data_loss
        if start < log.log_start_offset:
            data_loss(f"{tp}: starting offset {start} is below the log start offset "
                      f"{log.log_start_offset}", fail)  # fmt: skip
            start = log.log_start_offset
        if end > upper:
            if end > log.log_end_offset:
                data_loss(f"{tp}: ending offset {end} is past the log end offset "
                          f"{log.log_end_offset}", fail)  # fmt: skip
            end = upper
        if start > end:
            if start > log.log_end_offset:
                data_loss(f"{tp}: starting offset {start} is past the log end offset "
                          f"{log.log_end_offset}", fail)  # fmt: skip
                start = end
            else:
                raise OptionError(f"{tp}: starting offset {start} is after ending offset {end}")
        for lo, hi in log.missing:
            if hi < 0 or hi > start:  # a missing segment past the last one hides the end too
                upto = "the end" if hi < 0 else str(hi)
                data_loss(f"{tp}: offsets from {lo} to {upto} are missing (the segment's .log "
                          f"file is gone; its index remains)", fail)  # fmt: skip
        ranges.append(OffsetRange(tp, start, end))
    return ranges


# -- splitting ranges into input partitions ---------------------------------------------------
def split_range(log: PartitionLog, rng: OffsetRange, options: ReadOptions,
                split_bytes: int = SPLIT_BYTES, min_timestamp: int | None = None,
                ) -> list[KafkaInputPartition]:  # fmt: skip
    """Input partitions of one partition's offset range: per segment, cut at index entries.
    With ``min_timestamp`` (pushdown), rolled segments whose time index says every timestamp
    is older are skipped."""
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
            tindex = seg.segment.time_index
            if (
                tindex is not None
                and tindex.entries
                and tindex.last_entry.timestamp < min_timestamp
            ):
                continue
        start_pos = log.position_for(i, lo) if lo > seg.base_offset else 0
        end_pos = seg.end_position
        if rng.end < log.next_base(i):  # stop early: find a batch start past the end offset
            index = seg.segment.offset_index
            if index is not None and index.entries:
                slot = _first_entry_at_or_after(index, rng.end)
                if slot is not None:
                    end_pos = min(end_pos, slot)
        cuts = [start_pos, *log.split_positions(i, start_pos, end_pos, split_bytes), end_pos]
        for a, b in itertools.pairwise(cuts):
            if b > a:
                parts.append(_part(log, seg.path, a, b, lo, hi, aborted, options))
    return parts


def _first_entry_at_or_after(index, offset: int) -> int | None:
    """A batch start past every offset below ``offset``: the position of the entry after the
    first entry whose (last) offset is >= ``offset``; None when there is no such entry."""
    lo, hi = 0, index.entries
    while lo < hi:
        mid = (lo + hi) // 2
        if index.entry(mid).offset < offset:
            lo = mid + 1
        else:
            hi = mid
    return index.entry(lo + 1).position if lo + 1 < index.entries else None


def _part(log, path, a, b, lo, hi, aborted, options) -> KafkaInputPartition:
    mine = [t for t in aborted if t[2] >= lo and t[1] < hi]
    return KafkaInputPartition(log.tp.topic, log.tp.partition, path, a, b, lo, hi, mine,
                               options.include_headers)  # fmt: skip


def _split_offsets(part: KafkaInputPartition, pieces: int) -> list[KafkaInputPartition]:
    span = part.end_offset - part.start_offset
    if pieces <= 1 or span <= 1:
        return [part]
    pieces = min(pieces, span)
    bounds = [part.start_offset + span * k // pieces for k in range(pieces + 1)]
    return [
        KafkaInputPartition(part.topic, part.partition, part.path, part.start_position,
                            part.end_position, a, b, part.aborted, part.include_headers)
        for a, b in itertools.pairwise(bounds) if b > a
    ]  # fmt: skip


class PackedInputPartition:
    """Several small input partitions read by one task (many small segments would otherwise
    cost a task each)."""

    def __init__(self, parts) -> None:
        self.parts = list(parts)
        self.path = self.parts[0].path if self.parts else None

    def __repr__(self) -> str:
        return f"PackedInputPartition({len(self.parts)} ranges)"


PACK_BELOW = 8 << 20  # ranges smaller than this are packed together ...
PACK_UP_TO = 32 << 20  # ... into tasks of up to this many bytes ...
PACK_TASKS_PER_CORE = 2  # ... but into at least this many tasks per core of the driver's machine


def _pack(parts: list[KafkaInputPartition]) -> list:
    small = sum(
        p.end_position - p.start_position
        for p in parts
        if p.end_position - p.start_position < PACK_BELOW
    )
    tasks = PACK_TASKS_PER_CORE * (os.cpu_count() or 1)  # local mode: the executor's cores
    limit = min(PACK_UP_TO, max(PACK_BELOW, -(-small // tasks)))
    out, group, size = [], [], 0
    for p in parts:
        n = p.end_position - p.start_position
        if n >= PACK_BELOW:
            out.append(p)
            continue
        if group and size + n > limit:
            out.append(PackedInputPartition(group) if len(group) > 1 else group[0])
            group, size = [], 0
        group.append(p)
        size += n
    if group:
        out.append(PackedInputPartition(group) if len(group) > 1 else group[0])
    return out


def plan_input_partitions(options: ReadOptions, logs, ranges, *, min_timestamp=None,
                          split_bytes: int = SPLIT_BYTES) -> list:  # fmt: skip
    """Input partitions for ``ranges``; small ones are packed into shared tasks unless
    minPartitions or maxRecordsPerPartition ask for a given split."""
    parts: list[KafkaInputPartition] = []
    for rng in ranges:
        parts.extend(split_range(logs[rng.tp], rng, options, split_bytes, min_timestamp))
    if options.max_records_per_partition:
        limit = options.max_records_per_partition
        out = []
        for p in parts:
            span = p.end_offset - p.start_offset
            out.extend(_split_offsets(p, -(-span // limit)))
        parts = out
    if options.min_partitions and len(parts) < options.min_partitions:
        parts = _spread(parts, options.min_partitions)
    if not options.min_partitions and not options.max_records_per_partition:
        return _pack(parts)
    return parts


def _spread(parts: list[KafkaInputPartition], wanted: int) -> list[KafkaInputPartition]:
    """Split the biggest offset ranges until there are ``wanted`` partitions (Spark's
    minPartitions: shares proportional to size)."""
    total = sum(p.end_offset - p.start_offset for p in parts)
    if total <= 0:
        return parts
    out = []
    for p in parts:
        span = p.end_offset - p.start_offset
        out.extend(_split_offsets(p, max(1, round(wanted * span / total))))
    return out


# -- reading ----------------------------------------------------------------------------------
def _complete_end(buf: memoryview, limit: int, step: int = 0) -> tuple[int, int | None, list[int]]:
    """The end of the last complete entry in ``buf[:limit]``, that entry's offset field (a v2
    batch's base offset, a legacy entry's own offset) and, with ``step``, entry ends about every
    ``step`` bytes (where a chunk can be cut into pieces of whole entries)."""
    pos, last, cuts = 0, None, []
    mark = step if step else limit + 1
    while limit - pos >= 12:
        offset, length = _ENTRY.unpack_from(buf, pos)
        size = 12 + length
        if size < 26 or pos + size > limit:
            break
        pos += size
        last = offset
        if pos >= mark:
            cuts.append(pos)
            mark = pos + step
    return pos, last, cuts


def _chunks(path: str, start: int, end: int, stop_offset: int | None, chunk: int, step: int):
    """(file position, memoryview, cuts) chunks of whole entries; see :func:`iter_chunks`."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    buf = bytearray(min(chunk, max(end - start, 0)) or 1)
    try:
        pos = start
        while pos < end:
            head = os.pread(fd, 12, pos)
            if len(head) < 12:
                return  # the file shrank since planning (a live log truncated under us)
            first = 12 + _ENTRY.unpack_from(head)[1]
            if first < _MIN_ENTRY or first > end - pos:
                # The plan covers only complete entries: unframeable bytes inside it are damage
                # (a torn append can only end the active segment, and the plan stops before it).
                raise CorruptRecordError(
                    f"the entry declares {first} bytes, but "
                    f"{end - pos} bytes of complete entries remain in the planned range: its "
                    f"size field is damaged, and the records from here on cannot be read",
                    position=pos,
                    path=path,
                )
            if first > len(buf):  # one entry bigger than the buffer: grow for it
                buf = bytearray(first)
            want = min(len(buf), end - pos)
            view = memoryview(buf)
            got = os.preadv(fd, [view[:want]], pos)
            usable, last, cuts = _complete_end(view, got, step)
            if usable == 0:  # cannot happen after the check above, unless the file changed
                raise CorruptRecordError(
                    "no complete entry here (the file changed while it was read)",
                    position=pos,
                    path=path,
                )
            yield pos, view[:usable], cuts
            pos += usable
            if stop_offset is not None and last is not None and last >= stop_offset:
                return
    finally:
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
    from ..format import fast

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
    from .schema import ConstantColumns, to_spark_batch

    if not os.path.exists(part.path):
        raise FileNotFoundError(
            f"segment {part.path} is not visible from this executor: the data directory must be "
            f"on a filesystem the driver and every executor share"
        )
    constants = ConstantColumns(part.topic, part.partition)
    sizer = _Sizer()
    chunks = _chunks(part.path, part.start_position, part.end_position, part.end_offset,
                     CHUNK_BYTES, MIN_PIECE_BYTES)  # fmt: skip
    for position, view, cuts in chunks:
        lo = 0
        for hi in _pieces(cuts, len(view), sizer):
            # One Arrow batch per piece, unless its batches decompress to far more rows than
            # the piece was sized for: then several, so memory stays bounded.
            pieces = decoder.iter_batches(
                view[lo:hi], max_rows=PIECE_MAX_ROWS, start_offset=part.start_offset,
                end_offset=part.end_offset, keep_control=False, position_base=position + lo,
                validate_crc=True,  # as Kafka's consumer (check.crcs=true) and Spark's source
            )  # fmt: skip
            read, lo = hi - lo, hi
            for decoded in pieces:
                if decoded.num_rows and part.aborted:
                    drop = _aborted_mask(decoded, part.aborted)
                    if drop is not None:
                        decoded = decoded.filter(pa.array(~drop))
                if decoded.num_rows == 0:
                    continue
                out = to_spark_batch(decoded, constants, part.include_headers)
                del decoded
                sizer.learn(read, out.num_rows, out.nbytes)
                yield out
                del out


def _pieces(cuts: list[int], end: int, sizer: _Sizer) -> Iterator[int]:
    """Ends of pieces of about ``sizer.step`` bytes at the entry ends ``cuts`` (taken about
    every ``MIN_PIECE_BYTES``); the last one is ``end``."""
    start = 0
    for c in cuts:
        if c - start >= sizer.step and end - c >= MIN_PIECE_BYTES // 2:
            yield c
            start = c
    yield end
