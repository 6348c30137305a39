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

import functools
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecordError, KafkalogError
from ..format.constants import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD
from ..format.entries import ENTRY_HEADER as _ENTRY
from ..format.entries import frame_entry
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


class KafkaInputPartition:
    """One task's work: bytes ``[start_position, end_position)`` of segment ``path`` of
    ``topic``-``partition``, keeping offsets ``[start_offset, end_offset)``."""

    def __init__(self, topic, partition, path, start_position, end_position, start_offset,
                 end_offset, aborted=(), include_headers=False,
                 fail_on_data_loss=True, end_damage=None, data_loss_log=None):  # fmt: skip
        self.fail_on_data_loss = fail_on_data_loss
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
                      options.fail_on_data_loss, log_dir=options.data_loss_log)  # fmt: skip
    logs = {}
    try:
        for tp in sorted(selected, key=lambda t: (t.topic, t.partition)):
            logs[tp] = open_partition(
                tp, selected[tp], fail_on_data_loss=options.fail_on_data_loss,
                data_loss_log=options.data_loss_log,
            )  # fmt: skip
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
                loss(f"{tp}: offsets from {lo} to {upto} are missing (the segment's .log "
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
        cuts = [start_pos, *log.split_positions(i, start_pos, end_pos, split_bytes), end_pos]
        for a, b in itertools.pairwise(cuts):
            if b > a:
                parts.append(_part(log, seg.path, a, b, lo, hi, aborted, options))
    return parts


def _part(log, path, a, b, lo, hi, aborted, options) -> KafkaInputPartition:
    mine = [t for t in aborted if t[2] >= lo and t[1] < hi]
    return KafkaInputPartition(log.tp.topic, log.tp.partition, path, a, b, lo, hi, mine,
                               options.include_headers, options.fail_on_data_loss,
                               data_loss_log=options.data_loss_log)  # fmt: skip


def _split_offsets(part: KafkaInputPartition, pieces: int) -> list[KafkaInputPartition]:
    span = part.end_offset - part.start_offset
    if pieces <= 1 or span <= 1:
        return [part]
    pieces = min(pieces, span)
    bounds = [part.start_offset + span * k // pieces for k in range(pieces + 1)]
    return [
        KafkaInputPartition(part.topic, part.partition, part.path, part.start_position,
                            part.end_position, a, b, part.aborted, part.include_headers,
                            part.fail_on_data_loss,
                            part.end_damage if b == part.end_offset else None,
                            part.data_loss_log)
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
    """The end of the last complete entry in ``buf[:limit]`` (framed by the one entry walk; a
    corrupt entry ends it too: the next chunk starts there and reports it), that entry's offset
    field (a v2 batch's base offset, a legacy entry's own offset) and, with ``step``, entry ends
    about every ``step`` bytes (where a chunk can be cut into pieces of whole entries)."""
    pos, last, cuts = 0, None, []
    mark = step if step else limit + 1
    while True:
        try:
            framed = frame_entry(buf, pos, limit)
        except KafkalogError:
            framed = None
        if framed is None:
            break
        last = _ENTRY.unpack_from(buf, pos)[0]
        pos += LOG_OVERHEAD + framed[0]
        if pos >= mark:
            cuts.append(pos)
            mark = pos + step
    return pos, last, cuts


def _frame_at(fd: int, path: str, pos: int, end: int) -> int:
    """The size of the entry at ``pos``, which must lie whole within ``end``: the plan covers
    complete entries only, so anything else there is damage (a torn append can only end the
    active segment, and the plan stops before it)."""
    head = os.pread(fd, HEADER_SIZE_UP_TO_MAGIC, pos)
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


def _chunks(path: str, start: int, end: int, stop_offset: int | None, chunk: int, step: int):
    """(file position, memoryview, cuts) chunks of whole entries; see :func:`iter_chunks`."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    buf = bytearray(min(chunk, max(end - start, 0)) or 1)
    try:
        pos = start
        while pos < end:
            first = _frame_at(fd, path, pos, end)
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
    """One input partition's records. Damaged bytes (a CRC mismatch, an entry that cannot be
    framed, records that do not decode) stop the read with the error, file and position, after
    the records before them; with failOnDataLoss=false they are skipped with a warning instead:
    a damaged entry whose frame holds is stepped over, and a frame that does not hold ends the
    range (nothing after it can be found)."""
    if not os.path.exists(part.path):
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
                         MIN_PIECE_BYTES)  # fmt: skip
        try:
            for position, view, cuts in chunks:
                lo = 0
                for hi in _pieces(cuts, len(view), self.sizer):
                    try:
                        yield from self._decode(view[lo:hi], position + lo, hi - lo)
                    except KafkalogError as e:
                        e.located(path=part.path)
                        entry = _entry_around(view, lo, hi, position, e.position)
                        if entry is not None:  # the records before the damaged entry first
                            yield from self._decode(
                                view[lo : entry[0] - position], position + lo, 0
                            )
                        return self._damaged(e, None if entry is None else entry[1])
                    lo = hi
        except KafkalogError as e:  # an entry that cannot be framed: nothing after it is found
            e.located(path=part.path)
            return self._damaged(e, None)
        finally:
            chunks.close()
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


def _entry_around(view: memoryview, lo: int, hi: int, base: int, position: int | None):
    """(start, end) file positions of the entry of ``view[lo:hi]`` holding file position
    ``position`` (None when the entries cannot be walked to it)."""
    if position is None:
        return None
    pos = lo
    while pos < hi:
        try:
            framed = frame_entry(view, pos, hi)
        except KafkalogError:
            return None
        if framed is None:
            return None
        end = pos + LOG_OVERHEAD + framed[0]
        if base + pos <= position < base + end:
            return base + pos, base + end
        pos = end
    return None


def _pieces(cuts: list[int], end: int, sizer: _Sizer) -> Iterator[int]:
    """Ends of pieces of about ``sizer.step`` bytes at the entry ends ``cuts`` (taken about
    every ``MIN_PIECE_BYTES``); the last one is ``end``."""
    start = 0
    for c in cuts:
        if c - start >= sizer.step and end - c >= MIN_PIECE_BYTES // 2:
            yield c
            start = c
    yield end
