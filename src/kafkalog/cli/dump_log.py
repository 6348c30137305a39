"""Dumps of files holding record batches: segments, their leftovers, KRaft snapshots.

Text output reproduces kafka-dump-log's lines (DumpLogSegments.dumpLog, Kafka 4.4) byte for byte,
so scripts written for it keep working.
JSON output is one object per batch and record (docs/cli.md holds the contract).
"""

from __future__ import annotations

import base64
import itertools
import os
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError, InvalidRecordError, KafkalogError
from ..format import Batch, ControlRecordType, RecordsScan, Tail, TimestampType
from ..format import columnar as fast
from ..format.constants import MAGIC_VALUE_V0, MAGIC_VALUE_V2
from ..format.control import decode_control_type, decode_end_txn_marker
from ..format.record import Header, Record
from ..log.datadir import parse_snapshot_file_name
from ..log.errors import InvalidFileNameError
from ..log.verify import hidden_records_problem, partial_tail_problem
from .dump_common import FileDump, open_buffer, optional_long, segment_start_offset
from .dump_kafka_json import java_json
from .dump_payload import Parsed, control_json
from .progress import Progress

__all__ = [
    "LogDump",
    "batch_line",
    "batch_object",
    "control_fields",
    "metadata_lines",
    "record_line",
    "record_object",
    "records_of",
]


_COLUMNAR_MIN_RECORDS = 16
_LINES_MIN_RECORDS = 16  # metadata_lines' threshold
_ENTRY_OFFSET = struct.Struct(">q")


def records_of(batch: Batch, decoder: fast.ColumnarDecoder | None = None) -> list[Record]:
    """A batch's records, decoded through the columnar fast path.

    Legacy messages keep the reference decoder: their per-message CRCs, which kafka-dump-log
    prints, are not a column of the fast path. So do small batches (KRaft logs hold one record
    per batch), for which building columns costs more than it saves.
    """
    if batch.magic < MAGIC_VALUE_V2 or batch.count < _COLUMNAR_MIN_RECORDS:
        return list(batch.records())
    columns = _columns(batch, decoder).to_pydict()
    return [
        Record(
            offset=offset,
            timestamp=columns["timestamp"][i],
            timestamp_type=TimestampType(columns["timestampType"][i]),
            key=columns["key"][i],
            value=columns["value"][i],
            headers=tuple(Header(h["key"], h["value"]) for h in columns["headers"][i]),
            sequence=columns["sequence"][i],
            is_control=columns["isControl"][i],
        )
        for i, offset in enumerate(columns["offset"])
    ]


def metadata_lines(
    batch: Batch, decoder: fast.ColumnarDecoder | None = None
) -> tuple[list[int], str] | None:
    """The offsets and ``| offset: ...`` lines (each ending in a newline) of a magic 2 data
    batch's records, as :func:`record_line` writes them without data, formatted from the fast
    path's columns: no Record per record (a million records printed 4-13x faster, see
    docs/benchmarks.md). None for control batches, legacy entries and batches of a few
    records."""
    if batch.magic < MAGIC_VALUE_V2 or batch.is_control or batch.count < _LINES_MIN_RECORDS:
        return None
    rows = _columns(batch, decoder)
    offsets = rows.column("offset").to_pylist()
    sizes = [
        pc.fill_null(pc.binary_length(rows.column(name)), -1).to_pylist()
        for name in ("key", "value")
    ]
    headers = rows.column("headers")
    header_keys = headers.flatten().field("key").to_pylist()
    if header_keys:
        ends = headers.offsets.to_pylist()
        joined = [",".join(header_keys[a:b]) for a, b in itertools.pairwise(ends)]
    else:
        joined = [""] * len(offsets)
    ts_type = str(batch.timestamp_type)
    text = "".join(
        [
            f"| offset: {o} {ts_type}: {t} keySize: {k} valueSize: {v} sequence: {s} "
            f"headerKeys: [{h}]\n"
            for o, t, k, v, s, h in zip(
                offsets,
                rows.column("timestamp").to_pylist(),
                *sizes,
                rows.column("sequence").to_pylist(),
                joined,
            )
        ]
    )
    return offsets, text


_WINDOW_BYTES = 4 << 20
_TS_TYPES = {int(t): str(t) for t in TimestampType}


class MetadataLineWindows:
    """:func:`metadata_lines` for a whole file, a window of consecutive magic 2 batches (up to
    4 MiB) decoded in one call and its columns converted once: one decoder call and one
    conversion a batch was most of a deep dump's time. A window the decoder refuses, or that
    holds anything but magic 2 batches, leaves its batches to :func:`metadata_lines` one at a
    time (which says what is wrong)."""

    def __init__(self, view: memoryview, decoder: fast.ColumnarDecoder) -> None:
        self._view = view
        self._decoder = decoder
        self._rows: dict[int, tuple[int, int]] = {}  # batch position -> its rows in the window
        self._offsets: list[int] = []
        self._lines: list[str] = []  # a line per row, or:
        self._text, self._ends = b"", []  # all the lines, where each ends (no header keys)
        self._end = 0  # the loaded window ends here

    def lines(self, batch: Batch) -> tuple[list[int], str] | None:
        """As :func:`metadata_lines`, for any data batch of magic 2; None where it cannot."""
        if batch.magic < MAGIC_VALUE_V2 or batch.is_control:
            return None
        if batch.position >= self._end:
            self._load(batch.position)
        span = self._rows.get(batch.position)
        if span is None:
            return None
        a, b = span
        if self._lines:
            return self._offsets[a:b], "".join(self._lines[a:b])
        return self._offsets[a:b], self._text[self._ends[a] : self._ends[b]].decode("ascii")

    def _load(self, start: int) -> None:
        view, end = self._view, len(self._view)
        self._rows, self._offsets, self._lines, self._text, self._ends = {}, [], [], b"", []
        spans, pos, rows = {}, start, 0
        while pos + 61 <= end and pos - start < _WINDOW_BYTES and view[pos + 16] == MAGIC_VALUE_V2:
            size = 12 + struct.unpack_from(">i", view, pos + 8)[0]
            count = struct.unpack_from(">i", view, pos + 57)[0]
            if size < 61 or pos + size > end or count < 0:
                break
            spans[pos] = (rows, rows + count)
            rows += count
            pos += size
        self._end = max(pos, start + 1)
        if not spans:
            return
        try:
            rb = self._decoder.decode(view[start:pos], keep_control=True, check_offset_order=False,
                                      position_base=start)  # fmt: skip
        except KafkalogError:
            return  # each batch on its own: the one at fault is reported precisely
        if rb.num_rows != rows:
            return
        self._offsets = rb.column("offset").to_pylist()
        sizes = [_sizes(rb.column(name)) for name in ("key", "value")]
        headers = rb.column("headers")
        header_keys = headers.flatten().field("key").to_pylist()
        self._rows = spans
        if not header_keys:  # the kernels write the lines
            columns = [_ints(rb.column(name)) for name in ("offset", "timestampType", "timestamp")]
            columns += [*sizes, _ints(rb.column("sequence"))]
            ends = np.empty(rows + 1, np.int64)
            self._text = fast.kernels.dump_lines(*columns, ends)
            self._ends = ends.tolist()
            return
        ends = headers.offsets.to_pylist()
        joined = [",".join(header_keys[a:b]) for a, b in itertools.pairwise(ends)]
        ts_types = [_TS_TYPES[t] for t in rb.column("timestampType").to_pylist()]
        sizes = [x.tolist() for x in sizes]
        self._lines = [
            f"| offset: {o} {tt}: {t} keySize: {k} valueSize: {v} sequence: {q} headerKeys: [{h}]\n"
            for o, tt, t, k, v, q, h in zip(
                self._offsets,
                ts_types,
                rb.column("timestamp").to_pylist(),
                *sizes,
                rb.column("sequence").to_pylist(),
                joined,
            )
        ]


def _ints(column: pa.Array) -> np.ndarray:
    """An integer column (no nulls) as int64s, read through its buffer."""
    n, at = len(column), column.offset
    values = np.frombuffer(column.buffers()[1], np.dtype(f"<i{column.type.bit_width // 8}"))
    return values[at : at + n].astype(np.int64)


def _sizes(column: pa.Array) -> np.ndarray:
    """Each item's length, -1 for a null (kafka-dump-log's keySize/valueSize), from the
    column's offsets and validity buffers, as int64s."""
    n, at = len(column), column.offset
    offsets = np.frombuffer(column.buffers()[1], np.int32)[at : at + n + 1]
    sizes = np.diff(offsets)
    if column.null_count:
        bits = np.frombuffer(column.buffers()[0], np.uint8)
        valid = np.unpackbits(bits, bitorder="little")[at : at + n].astype(bool)
        sizes[~valid] = -1
    return sizes.astype(np.int64)


def _columns(batch: Batch, decoder: fast.ColumnarDecoder | None) -> pa.RecordBatch:
    """The batch's records as columns; through ``decoder`` when given, whose arrays a file's
    dump reuses batch after batch (a new decoder per 1 MB batch page-faults fresh arrays:
    0.39 s against 0.05 s for a million records)."""
    if decoder is None:
        decoder = fast.ColumnarDecoder()
    return decoder.decode(batch.buffer, keep_control=True, position_base=batch.position)


def control_fields(record: Record) -> tuple[int, str, int | None]:
    """``(type id, ControlRecordType name, coordinatorEpoch or None)`` of a control record."""
    type_id = decode_control_type(record.key)
    try:
        control_type = ControlRecordType(type_id)
    except ValueError:
        return type_id, "UNKNOWN", None
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return type_id, control_type.name, decode_end_txn_marker(record.value)[1]
    return type_id, control_type.name, None


class LogDump(FileDump):
    """One ``.log`` (or ``.checkpoint``) file: a header line, batches, records, trailing bytes."""

    _cut_inside_entry = False  # --max-bytes stopped inside an entry that the file holds whole

    def dump(self, progress: Progress) -> None:
        with open_buffer(self.path) as buf:
            limit = self.options.max_bytes
            view = buf if limit is None else buf[:limit]
            try:
                self._dump(view, buf, truncated=limit is not None, progress=progress)
            finally:
                del view

    @property
    def _metadata_lines_only(self) -> bool:
        """Text with each record's metadata line and nothing else (no data, no decoders)."""
        o = self.options
        return not (o.json or o.print_data or o.skip_metadata or o.decoded)

    def _dump(
        self, view: memoryview, whole: memoryview, *, truncated: bool, progress: Progress
    ) -> None:
        self.begin()
        scan = RecordsScan(view)
        decoder = fast.ColumnarDecoder()  # one for the file: its arrays are reused
        windows = MetadataLineWindows(view, decoder) if self._metadata_lines_only else None
        batches = records = 0
        done = 0
        last_offset = -1
        for batch in scan:
            batches += 1
            # A legacy wrapper's first offset and count need its decompressed inner messages.
            try:
                base_offset, count = batch.base_offset, batch.count
                inner_error = None
            except KafkalogError as e:
                base_offset, count = batch.last_offset, 0
                inner_error = e.located(position=batch.position, offset=batch.last_offset)
            records += count
            try:
                self.batch(batch, base_offset, count)
            except KafkalogError as e:
                # A header Kafka cannot read (a codec id no version defines, 5-7 in magic 2,
                # 4-7 in magic 1): reported like other damage, the dump goes on.
                self.error(e.located(position=batch.position, offset=base_offset))
                size = batch.size_in_bytes
                done += size
                progress.advance(size)
                continue
            if not batch.is_valid:
                stored, computed = batch.crc, batch.compute_checksum()
                self.error(
                    KafkalogError(
                        f"Record is corrupt (stored crc = {stored}, computed crc = {computed})",
                        position=batch.position,
                        offset=base_offset,
                    )
                )
            if inner_error is not None:
                self.error(inner_error)
            elif self.options.deep and count == 0 and batch.is_compressed and batch.is_valid:
                hidden = hidden_records_problem(batch)  # records Kafka's readers never return
                if hidden is not None:
                    self.error(
                        InvalidRecordError(hidden[1], position=batch.position, offset=base_offset)
                    )
            elif self.options.deep:
                lines = None
                try:
                    if windows is not None:
                        lines = windows.lines(batch) or metadata_lines(batch, decoder)
                    batch_records = [] if lines is not None else records_of(batch, decoder)
                except KafkalogError as e:
                    self.error(e.located(position=batch.position, offset=base_offset))
                    batch_records = []
                if lines is not None:
                    offsets, text = lines
                    for offset in offsets:  # as in the loop below
                        if offset != last_offset + 1:
                            self.reports.add(
                                self.reports.non_consecutive, self.path, (last_offset, offset)
                            )
                        last_offset = offset
                    self.out.write(text)
                for record in batch_records:
                    # kafka-dump-log's rule (4.3+): the first record of a file follows -1, so
                    # a file whose records do not start at offset 0 (any segment but the first,
                    # a cleaned one) begins with "-1 is followed by FIRST".
                    if record.offset != last_offset + 1:
                        self.reports.add(
                            self.reports.non_consecutive, self.path, (last_offset, record.offset)
                        )
                    last_offset = record.offset
                    try:
                        self.record(batch, record)
                    except KafkalogError as e:
                        self.error(e.located(position=batch.position, offset=record.offset))
            size = batch.size_in_bytes
            done += size
            progress.advance(size)
        progress.advance(len(view) - done)
        problem = self._tail_problem(scan, whole, truncated)
        if problem is not None:
            self.error(problem)
        self.end(scan, batches, records, truncated)

    def _tail_problem(
        self, scan: RecordsScan, whole: memoryview, truncated: bool
    ) -> KafkalogError | None:
        """What is wrong where the walk stopped, judged on the whole file: where --max-bytes
        cut an entry, the bytes read so far may look like a torn or zero tail but are not."""
        at = scan.valid_bytes
        if truncated and scan.tail in (Tail.PARTIAL, Tail.ZEROS) and at < len(whole):
            peek = RecordsScan(whole[at:], position_base=at)
            if next(iter(peek), None) is not None:
                self._cut_inside_entry = True
                return None  # a complete entry of the file starts where --max-bytes cut
            scan = peek
        if scan.tail == Tail.PARTIAL:
            damage = partial_tail_problem(
                whole,
                at,
                max_batch_size=self.options.max_message_size,
                limit_name="--max-message-size",
            )
            if damage is None:
                return None  # a torn append: kafka-dump-log's "Found N invalid bytes" line
            offset = _ENTRY_OFFSET.unpack_from(whole, at)[0]
            return CorruptRecordError(damage, position=at, offset=offset)
        return scan.error

    # -- output ---------------------------------------------------------------------------------

    def begin(self) -> None:
        if self.options.json:
            return
        name = os.path.basename(self.path)
        if name == "bootstrap.checkpoint":
            self.line("KRaft bootstrap snapshot")
        elif name.endswith((".checkpoint", ".checkpoint.deleted")):
            try:
                snapshot = parse_snapshot_file_name(name)
            except InvalidFileNameError:
                snapshot = None  # kafka-dump-log fails here; the records can still be read
            if snapshot is not None:
                self.line(f"Snapshot end offset: {snapshot.end_offset}, epoch: {snapshot.epoch}")
        else:
            start = segment_start_offset(name)
            if start is not None:
                self.line(f"Log starting offset: {start}")

    def batch(self, batch: Batch, base_offset: int, count: int) -> None:
        if self.options.json:
            self.emit(batch_object(batch, base_offset, count))
        else:
            self.line(batch_line(batch, base_offset, count))

    def _parsed(self, batch: Batch, record: Record, wanted: bool) -> Parsed | None:
        if not wanted or batch.is_control:
            return None
        parsed = self.options.parser.parse(record)
        if parsed.problem is not None:
            self.error(parsed.problem.located(position=batch.position, offset=record.offset))
        return parsed

    def record(self, batch: Batch, record: Record) -> None:
        opts = self.options
        if batch.is_control:
            problem = control_problem(record)
            if problem is not None:
                self.error(problem.located(position=batch.position, offset=record.offset))
        if opts.json:
            obj = record_object(batch, record)
            parsed = self._parsed(batch, record, opts.decoded)
            obj["decodedKey"] = None if parsed is None else parsed.key_json
            obj["decodedValue"] = None if parsed is None else parsed.value_json
            obj["decodeError"] = None if parsed is None else parsed.note
            obj["controlData"] = _control_data(record) if batch.is_control else None
            self.emit(obj)
            return
        parsed = self._parsed(batch, record, opts.print_data)
        self.line(record_line(batch, record, skip_metadata=opts.skip_metadata, parsed=parsed))

    def end(self, scan: RecordsScan, batches: int, records: int, truncated: bool) -> None:
        if self.options.json:
            self.emit(
                {
                    "type": "summary",
                    "batches": batches,
                    "records": records,
                    "validBytes": scan.valid_bytes,
                    "invalidBytes": scan.invalid_bytes,
                    "tail": Tail.PARTIAL if self._cut_inside_entry else scan.tail,
                    "error": self.errors[0].message if self.errors else None,
                }
            )
        elif scan.invalid_bytes > 0 and not truncated:
            name = os.path.basename(self.path)
            self.line(f"Found {scan.invalid_bytes} invalid bytes at the end of {name}")


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def batch_object(batch: Batch, base_offset: int, count: int) -> dict:
    """The ``batch`` object of the JSON contract (docs/cli.md)."""
    return {
        "type": "batch",
        "position": batch.position,
        "size": batch.size_in_bytes,
        "baseOffset": base_offset,
        "lastOffset": batch.last_offset,
        "count": count,
        "magic": batch.magic,
        "compression": batch.compression.label,
        "crc": batch.crc,
        "isValid": batch.is_valid,
        "timestampType": str(batch.timestamp_type),
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "deleteHorizonMs": batch.delete_horizon_ms,
    }


def record_object(batch: Batch, record: Record) -> dict:
    """The ``record`` object of the JSON contract (docs/cli.md), without the decoder fields."""
    control_type = coordinator_epoch = None
    if batch.is_control:
        try:
            type_id, control_type, coordinator_epoch = control_fields(record)
        except KafkalogError:  # reported by control_problem
            type_id, control_type = -1, "UNKNOWN"
        if control_type == "UNKNOWN":
            control_type = f"UNKNOWN({type_id})"
    return {
        "type": "record",
        "offset": record.offset,
        "timestamp": None if batch.magic == MAGIC_VALUE_V0 else record.timestamp,
        "timestampType": str(record.timestamp_type),
        "keySize": record.key_size,
        "valueSize": record.value_size,
        "key": _b64(record.key),
        "value": _b64(record.value),
        "headers": [[h.key, _b64(h.value)] for h in record.headers],
        "sequence": record.sequence,
        "isControl": batch.is_control,
        "controlType": control_type,
        "coordinatorEpoch": coordinator_epoch,
    }


def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: Batch, base_offset: int, count: int) -> str:
    """One batch line exactly as kafka-dump-log prints it."""
    if batch.magic >= MAGIC_VALUE_V2:
        horizon = batch.delete_horizon_ms
        head = (
            f"baseOffset: {base_offset} lastOffset: {batch.last_offset} count: {count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_bool(batch.is_transactional)} "
            f"isControl: {_bool(batch.is_control)} deleteHorizonMs: {optional_long(horizon)}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {batch.compression.label} crc: {batch.crc} "
        f"isvalid: {_bool(batch.is_valid)}"
    )


def record_line(
    batch: Batch,
    record: Record,
    *,
    print_data: bool = False,
    skip_metadata: bool = False,
    parsed: Parsed | None = None,
) -> str:
    """One ``| offset: ...`` record line exactly as kafka-dump-log prints it.

    ``parsed`` is the key and payload text to print (``print_data`` without ``parsed`` prints
    them as lenient UTF-8, kafka-dump-log's default); control records never print them.
    """
    parts: list[str] = []
    prefix = "| "
    if not skip_metadata:
        ts_type: TimestampType = batch.timestamp_type
        parts.append(
            f"{prefix}offset: {record.offset} {ts_type}: {record.timestamp} "
            f"keySize: {record.key_size} valueSize: {record.value_size}"
        )
        prefix = " "
        if batch.magic >= MAGIC_VALUE_V2:
            keys = ",".join(h.key for h in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        else:
            parts.append(f" isValid: {_bool(record.is_valid)} crc: {record.crc}")  # 4.3+: no "}"
        if batch.is_control:
            parts.append(_control_text(record))
    if parsed is None and print_data and not batch.is_control:
        key = None if record.key is None else bytes(record.key).decode("utf-8", "replace")
        value = None if record.value is None else bytes(record.value).decode("utf-8", "replace")
        parsed = Parsed(key, value)
    if parsed is not None and not batch.is_control:
        if parsed.key_text is not None:
            parts.append(f"{prefix}key: {parsed.key_text}")
            prefix = " "
        if parsed.value_text is not None:  # "| payload:" when it comes first (Kafka 4.3+)
            parts.append(f"{prefix}payload: {parsed.value_text}")
    return "".join(parts)


def control_problem(record: Record) -> KafkalogError | None:
    """Why a control record's key or value does not decode, or None."""
    try:
        type_id, _, _ = control_fields(record)
        control_json(type_id, record.value)
    except KafkalogError as e:
        return e
    return None


def _control_data(record: Record) -> dict | None:
    try:
        quorum = control_json(decode_control_type(record.key), record.value)
    except KafkalogError:
        return None  # reported by control_problem
    return None if quorum is None else quorum[1]


def _control_text(record: Record) -> str:
    """What kafka-dump-log appends for a control record; an undecodable one (reported by
    control_problem) gets what can still be said of it."""
    try:
        type_id, name, coordinator_epoch = control_fields(record)
    except KafkalogError:
        return " controlType: UNKNOWN(?)"
    if coordinator_epoch is not None:
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    try:
        quorum = control_json(type_id, record.value)
    except KafkalogError:
        quorum = None
    if quorum is not None:
        label, body = quorum
        return f" {label} {java_json(body)}"
    return f" controlType: {name}({type_id})"
