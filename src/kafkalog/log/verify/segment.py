"""Walking one file of batches, a segment's ``.log`` or a KRaft snapshot (part of
:mod:`kafkalog.log.verify`; nothing here writes).

The log is walked once, as Kafka's recovery would (FileRecords/RecordsScan): every batch's CRC,
its header rules and, deep, every record; offsets must increase from the segment's base offset. How
the file ends matters: a partial last batch is what a live broker's active segment has while it
appends (a warning there, an error in a rolled segment, which Kafka completed before rolling),
unless its size field is damaged (:mod:`.verify_tail`: an error wherever it is); a
zero-filled tail is preallocated space never written, left by an unclean shutdown (a torn tail:
a warning at the end of the active segment, which recovery truncates; an error in a rolled
segment); bytes that cannot be a batch header are corrupt (an error). A v2 batch's header must
agree with itself (:func:`kafkalog.format.offsets_rule.check_batch_header`).
Index checks ride along the walk as observers (:mod:`.verify_index`), so no batch is held.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...errors import CorruptRecordError, InvalidRecordError, KafkalogError, RecordOffsetError
from ...format import Batch, ControlRecordType, RecordsScan, Tail
from ...format.codecs import decompress
from ...format.columnar import v2_compressed_columns, v2_record_columns
from ...format.constants import (
    CONTROL_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    MAGIC_VALUE_V2,
    MIN_V2_RECORD_SIZE,
    RECORDS_OFFSET,
)
from ...format.control import decode_control_type
from ...format.offsets_rule import check_batch_header
from ...format.validate import V2Header
from ...format.varint import decode_varint
from ..datadir import open_regular
from ..storage import as_path, is_remote
from .report import FindingSink
from .tail import DEFAULT_MAX_MESSAGE_BYTES, partial_tail_problem

__all__ = [
    "BatchFacts",
    "LogScan",
    "ReadOnlyMap",
    "check_records",
    "hidden_records_problem",
    "scan_log",
]

_INT32_MAX = 2**31 - 1
_HEADER = struct.Struct(">qi")  # offset, size: the start of every log entry
_DECODE_ERRORS = (CorruptRecordError, InvalidRecordError)
_COLUMNAR_MIN_RECORDS = 16


class ReadOnlyMap:
    """A file's bytes as a memoryview over a read-only mmap (never changes the file), or an
    object's bytes."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._path = path
        self._mmap: mmap.mmap | None = None
        self._view = memoryview(b"")

    def __enter__(self) -> memoryview:
        if is_remote(self._path):  # an object: fetched whole (nothing to map)
            self._view = memoryview(as_path(self._path).read_bytes())
            return self._view
        with open_regular(self._path) as f:
            if os.fstat(f.fileno()).st_size:
                self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                self._view = memoryview(self._mmap)
        return self._view

    def __exit__(self, *exc: object) -> None:
        if self._mmap is not None:
            try:
                self._view.release()
                self._mmap.close()
            except BufferError:
                pass  # a batch view is still referenced (a traceback); the GC unmaps it


@dataclass(slots=True)
class LogScan:
    """What walking one file of batches learned."""

    path: str
    size: int = 0
    valid_bytes: int = 0
    tail: str = Tail.NONE
    batches: int = 0
    records: int = 0
    first_offset: int | None = None  # first batch's base offset (its last when unknown)
    first_position: int | None = None  # where the first batch starts
    last_offset: int | None = None  # last batch's last offset
    gaps: int = 0  # places where a batch does not start right after the previous one
    missing_offsets: int = 0
    first_gap_after: int | None = None
    abort_markers: dict[int, int] = field(default_factory=dict)  # marker offset -> producer id

    @property
    def next_offset(self) -> int | None:
        return None if self.last_offset is None else self.last_offset + 1


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """The few facts the index checks need about a batch (so no batch view is kept)."""

    position: int
    base_offset: int | None  # None: a legacy wrapper that cannot be decompressed
    last_offset: int
    max_timestamp: int


def scan_log(
    path: str | os.PathLike,
    sink: FindingSink,
    *,
    deep: bool,
    base_offset: int | None = None,
    active: bool = False,
    snapshot: bool = False,
    observers: Iterable = (),
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> LogScan:
    """Walk a file of batches (a segment, or with ``snapshot`` a KRaft snapshot) and report;
    ``max_message_bytes`` (the topic's) bounds a torn append at its end."""
    path = os.fspath(path)
    scan = LogScan(path)
    observers = list(observers)
    sink.files_checked += 1
    with ReadOnlyMap(path) as view:
        scan.size = len(view)
        records = RecordsScan(view)
        prev_last: int | None = None
        batch = None
        for batch in records:
            facts = _check_batch(batch, scan, sink, deep=deep)
            key = facts.base_offset if facts.base_offset is not None else facts.last_offset
            _check_order(facts, key, prev_last, scan, sink, base_offset)
            for observer in observers:
                observer.on_batch(facts, prev_last)
            prev_last = facts.last_offset
            scan.last_offset = facts.last_offset
            if scan.first_offset is None:
                scan.first_offset, scan.first_position = key, facts.position
        del batch
        scan.valid_bytes, scan.tail = records.valid_bytes, records.tail
        floor = prev_last  # a batch after the last complete one must start above this
        if floor is None and base_offset is not None:
            floor = base_offset - 1
        _check_tail(view, records, scan, sink, floor, active=active and not snapshot,
                    max_message_bytes=max_message_bytes)  # fmt: skip
        del records
    for observer in observers:
        observer.finish(scan)
    sink.scanned(scan.size)
    return scan


def _check_batch(batch: Batch, scan: LogScan, sink: FindingSink, *, deep: bool) -> BatchFacts:
    scan.batches += 1
    if batch.magic == MAGIC_VALUE_V2:
        return _check_v2(batch, scan, sink, deep=deep)
    path, position, last = scan.path, batch.position, batch.offset
    crc_ok = _check_crc(batch, batch.crc, last, scan, sink)
    base = last if not batch.is_compressed else None
    if crc_ok and (deep or batch.is_compressed):
        try:
            inner = batch.records()  # a wrapper's count needs its inner messages
        except _DECODE_ERRORS as e:
            _record_corrupt(e, sink, path, position, last)
            scan.records += 1
            return BatchFacts(position, base, last, batch.max_timestamp)
        scan.records += len(inner)
        if batch.is_compressed:
            base = inner[0].offset
            if deep:
                _check_legacy_inner(inner, last, sink, path, position)
    else:
        scan.records += 1
    return BatchFacts(position, base, last, batch.max_timestamp)


def _check_crc(batch: Batch, stored: int, offset: int, scan: LogScan, sink: FindingSink) -> bool:
    computed = batch.compute_checksum()
    if stored != computed:
        sink.error(
            "crc-mismatch", scan.path,
            f"Record is corrupt (stored crc = {stored}, computed crc = {computed}) in the "
            f"{batch.size_in_bytes}-byte batch; its records are not decoded",
            position=batch.position, offset=offset,
        )  # fmt: skip
    return stored == computed


def _check_v2(batch: Batch, scan: LogScan, sink: FindingSink, *, deep: bool) -> BatchFacts:
    """Header rules (those the CRC covers only when it matches), then the records."""
    header = batch.header()
    base, _, _, _, stored, attributes, delta, _, max_ts, producer_id, _, _, count = header
    last, position = base + delta, batch.position
    scan.records += max(count, 0)
    if _check_crc(batch, stored, base, scan, sink):
        problem = None
        try:
            check_batch_header(base, delta, count, batch.size_in_bytes, batch.is_compressed,
                               position=position)  # fmt: skip
        except _DECODE_ERRORS as e:
            problem = e.message
        if problem is not None:
            sink.error("batch-header", scan.path, problem, position=position, offset=base)
        elif count == 0 and batch.is_compressed:
            if deep or attributes & CONTROL_FLAG_MASK:
                _check_empty_compressed(batch, base, scan, sink)
        elif attributes & CONTROL_FLAG_MASK:
            _decode_v2(batch, base, True, producer_id, scan, sink)
        elif deep and not _records_decode(batch, header):
            _decode_v2(batch, base, False, producer_id, scan, sink)
    return BatchFacts(position, base, last, max_ts)


def _check_empty_compressed(batch: Batch, base: int, scan: LogScan, sink: FindingSink) -> None:
    problem = hidden_records_problem(batch)
    if problem is not None:
        code, message = problem
        sink.error(code, scan.path, message, position=batch.position, offset=base)


def hidden_records_problem(batch: Batch) -> tuple[str, str] | None:
    """For a compressed magic 2 batch whose header says 0 records: ``(finding code, message)``
    when its compressed section holds records (or does not decompress), else None.

    Kafka's readers return no record for such a batch without decompressing it
    (DefaultRecordBatch's iterator stops at count 0), so the records are hidden from every
    consumer; Kafka's rule for records left after ``count`` of them is InvalidRecordException
    "Incorrect declared batch size, records still remaining". Only their framing is read.
    """
    if batch.magic != MAGIC_VALUE_V2 or batch.count != 0:
        return None
    payload = batch.buffer[RECORDS_OFFSET:]
    if len(payload) == 0:
        return None
    try:
        data = decompress(batch.compression_id, payload, magic=MAGIC_VALUE_V2)
    except _DECODE_ERRORS as e:
        return (
            "record-corrupt",
            f"records count 0, and the {len(payload)}-byte compressed records section does not "
            f"decompress: {e.message}",
        )
    if not data:
        return None
    found, complete = _count_record_frames(data)
    what = f"{found} records" if complete else f"at least {found} records (then damage)"
    return (
        "batch-records-count",
        f"Incorrect declared batch size, records still remaining: the header's records count is "
        f"0, but the compressed records section decompresses to {len(data)} bytes holding "
        f"{what}; Kafka's readers skip them (an empty batch)",
    )


def _count_record_frames(data: bytes) -> tuple[int, bool]:
    """How many length-prefixed records ``data`` holds, and whether they end exactly at its
    end (record bodies are not decoded: only their framing)."""
    pos = found = 0
    while pos < len(data):
        try:
            length, body = decode_varint(data, pos)
        except CorruptRecordError:
            return found, False
        if length < MIN_V2_RECORD_SIZE - 1 or body + length > len(data):
            return found, False
        pos = body + length
        found += 1
    return found, True


def _records_decode(batch: Batch, header: tuple) -> bool:
    """True when the fast path's kernels decode every record of the batch (the same rules as
    the record-at-a-time decoder, the offset rule's included: offsets increase inside the
    batch's range; without a Python object per record: a million records in a fraction of a
    second instead of seconds). False for anything else, and for batches of a few records
    (where the kernels' set-up costs more than it saves): the record-at-a-time check then says
    what."""
    base, size, leader_epoch, _, *rest = header
    count = header[-1]
    if count < _COLUMNAR_MIN_RECORDS:
        return False
    view = batch.buffer
    if batch.is_compressed:
        h = V2Header(batch.position, size + 12, base, leader_epoch, *rest)
        decoded = v2_compressed_columns(view, h)
        columns = None if decoded is None else decoded[0]
    else:
        columns = v2_record_columns(view, count, copy=False)
    return columns is not None


def check_records(batch: Batch) -> None:
    """Decode every record of ``batch`` (whose CRC and header were checked) as a consumer does,
    raising the decoder's error, none of its records kept: the columnar kernels where they
    serve, the record-at-a-time decoder for the rest and to word an error."""
    if batch.magic >= MAGIC_VALUE_V2:
        if not _records_decode(batch, batch.header()):
            for _ in batch.records():
                pass
        return
    if not batch.is_compressed:
        batch.records()  # its key and value frame (its CRC was checked)
        return
    previous = None
    for record in batch.records():  # a consumer checks each inner message's CRC too
        if not record.is_valid:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {record.crc}): an inner message of the "
                f"compressed wrapper at position {batch.position}",
                position=batch.position,
                offset=record.offset,
            )
        if previous is not None and record.offset <= previous:
            raise CorruptRecordError(
                f"inner offset {record.offset} does not follow {previous} in the compressed "
                f"wrapper at position {batch.position}",
                position=batch.position,
                offset=record.offset,
            )
        previous = record.offset


def _decode_v2(batch: Batch, base: int, is_control: bool, producer_id: int, scan, sink) -> None:
    """Decode every record (the decoder holds offsets inside [base, last], increasing); note
    ABORT markers.

    A control batch of a producer holds COMMIT/ABORT markers (producer state replays them: one
    that does not decode stops Kafka's recovery); one without a producer id (the control bit set
    on a plain batch) is skipped by Kafka's consumers and producer state alike, so records that
    are not control records there hide data (a warning), they do not break the log."""
    hidden = 0
    try:
        for record in batch.records():
            if not is_control:
                continue
            try:
                control_type = decode_control_type(record.key)
            except _DECODE_ERRORS:
                if producer_id >= 0:
                    raise
                hidden += 1
                continue
            if control_type == ControlRecordType.ABORT:
                scan.abort_markers[record.offset] = producer_id
    except RecordOffsetError as e:
        sink.error("batch-record-offsets", scan.path, e.message,
                   position=e.position, offset=e.offset)  # fmt: skip
        return
    except _DECODE_ERRORS as e:
        _record_corrupt(e, sink, scan.path, batch.position, base)
        return
    if hidden:
        sink.warning(
            "control-batch-records", scan.path,
            f"a control batch without a producer id holds {hidden} records that are not control "
            f"records: Kafka's consumers skip a control batch's records, so they are hidden",
            position=batch.position, offset=base,
        )  # fmt: skip


def _check_legacy_inner(inner, last: int, sink: FindingSink, path: str, position: int) -> None:
    previous = None
    for record in inner:
        if not record.is_valid:
            sink.error(
                "crc-mismatch", path,
                f"inner message at offset {record.offset} of the compressed wrapper has a CRC "
                f"that does not match (stored crc = {record.crc})",
                position=position, offset=record.offset,
            )  # fmt: skip
        if previous is not None and record.offset <= previous:
            sink.error(
                "batch-record-offsets", path,
                f"inner offset {record.offset} does not follow {previous}",
                position=position, offset=record.offset,
            )  # fmt: skip
            return
        previous = record.offset
    if previous != last:
        sink.error(
            "batch-record-offsets", path,
            f"the wrapper's offset {last} is not its last inner offset {previous}",
            position=position, offset=last,
        )  # fmt: skip


def _record_corrupt(e: KafkalogError, sink, path: str, position: int, offset: int) -> None:
    sink.error(
        "record-corrupt", path, e.message,
        position=e.position if e.position is not None else position,
        offset=e.offset if e.offset is not None else offset,
    )  # fmt: skip


def _check_order(
    facts: BatchFacts, key: int, prev_last: int | None, scan: LogScan, sink, base_offset
) -> None:
    path, position = scan.path, facts.position
    if prev_last is None:
        if base_offset is not None and key < base_offset:
            sink.error(
                "segment-base-offset", path,
                f"the first batch starts at offset {key}, below the segment's base offset "
                f"{base_offset} (its file name)",
                position=position, offset=key,
            )  # fmt: skip
    elif key <= prev_last:
        sink.error(
            "offset-order", path,
            f"batch offsets {key}..{facts.last_offset} do not follow the previous batch's last "
            f"offset {prev_last}",
            position=position, offset=key,
        )  # fmt: skip
    elif key > prev_last + 1 and facts.base_offset is not None:
        scan.gaps += 1
        scan.missing_offsets += key - prev_last - 1
        if scan.first_gap_after is None:
            scan.first_gap_after = prev_last
    if base_offset is not None and facts.last_offset - base_offset > _INT32_MAX:
        sink.warning(
            "offset-overflow", path,
            f"offset {facts.last_offset} is more than Int.MAX past the segment's base offset "
            f"{base_offset}: indexes cannot hold it (Kafka rolls before this; its loader splits "
            f"such a segment of an old log, while kafkalog's recovery cuts it there and keeps the "
            f"cut bytes in its quarantine)",
            position=position, offset=facts.last_offset,
        )  # fmt: skip


def _check_tail(
    view, records: RecordsScan, scan: LogScan, sink, floor, *, active: bool, max_message_bytes: int
) -> None:
    """How the file ends; ``floor``: the offset a next batch must be above (None: unknown)."""
    path, at, left = scan.path, records.valid_bytes, records.invalid_bytes
    if records.tail == Tail.ZEROS:
        what = (
            f"the last {left} bytes are zeros: preallocated space never written, left by an "
            f"unclean shutdown"
        )
        if active:  # a torn tail: what Kafka's recovery cuts, and every reader ends the log at
            sink.warning(
                "zero-tail", path,
                f"{what}; the log ends here (Kafka's recovery truncates the file here)",
                position=at,
            )  # fmt: skip
        else:
            sink.error(
                "zero-tail", path,
                f"{what}, in a file Kafka had completed (a rolled segment or a snapshot): "
                f"Kafka's recovery truncates the file here and deletes the segments after it",
                position=at,
            )  # fmt: skip
    elif records.tail == Tail.CORRUPT:
        sink.error(
            "corrupt-framing", path,
            f"{records.error.message}; the {left} bytes from here on cannot be read as batches "
            f"(Kafka's recovery would truncate the file here)",
            position=at, offset=records.error.offset,
        )  # fmt: skip
    elif records.tail == Tail.PARTIAL:
        offset, size, magic = _peek_header(view, at)
        # Kafka's FileLogInputStream reads no header from 17 bytes or fewer, and stops at an
        # entry longer than what is left before looking at its magic: both are torn appends to
        # Kafka's recovery, unless the size field is damaged (verify_tail).
        header_read = left > HEADER_SIZE_UP_TO_MAGIC
        plausible = not header_read or (
            (magic is None or magic <= MAGIC_VALUE_V2)
            and (offset is None or floor is None or offset > floor)
        )
        if header_read:
            what = f"an incomplete last batch: {left} of its {size + 12 if size else '?'} bytes"
        else:
            what = f"{left} bytes at the end, too few for a batch header"
        if not plausible:
            what += (
                f" (its header is not what a broker writes next: offset {offset}, size {size}, "
                f"magic {magic}; Kafka's recovery truncates it all the same)"
            )
        damage = partial_tail_problem(view, at, max_batch_size=max_message_bytes)
        if damage is not None:
            sink.error(
                "corrupt-framing", path,
                f"{damage} (Kafka's recovery would truncate the file here)",
                position=at, offset=offset,
            )  # fmt: skip
        elif active:
            sink.warning(
                "torn-tail", path,
                f"{what}: normal while a broker appends to its active segment; Kafka's "
                f"recovery truncates it after an unclean shutdown",
                position=at, offset=offset,
            )  # fmt: skip
        else:
            sink.error(
                "torn-tail", path,
                f"{what}, in a file Kafka had completed (a rolled segment or a snapshot)",
                position=at, offset=offset,
            )  # fmt: skip


def _peek_header(view, at: int) -> tuple[int | None, int | None, int | None]:
    left = len(view) - at
    if left < _HEADER.size:
        return None, None, None
    offset, size = _HEADER.unpack_from(view, at)
    return offset, size, view[at + 16] if left > 16 else None
