"""``kafkalog dump``: what kafka-dump-log prints for log files, and a JSON-lines contract.

Text output reproduces kafka-dump-log's lines (DumpLogSegments) byte for byte, including its quirks
(the stray ``}`` after a legacy record's crc), so scripts written for it keep working; problems that
kafka-dump-log would crash on or ignore are reported on stderr instead. ``--json`` writes one object
per line, documented in docs/cli.md: readers ignore unknown types and fields; fields are only ever
added, never renamed, removed or retyped.
"""

from __future__ import annotations

import argparse
import base64
import json
import mmap
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from ..errors import InvalidRecordError, KafkalogError
from ..format import Batch, ControlRecordType, RecordsScan, Tail, TimestampType, fast
from ..format.constants import MAGIC_VALUE_V0, MAGIC_VALUE_V2
from ..format.control import decode_control_type, decode_end_txn_marker
from ..format.internal import decode_control_value, to_json_safe
from ..format.record import Header, Record

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3

# Files holding record batches: segments, the cleaner's and retention's leftovers, KRaft snapshots.
LOG_SUFFIXES = (".log", ".log.swap", ".log.cleaned", ".log.deleted", ".checkpoint")

EXAMPLES = """\
examples:
  kafkalog dump /var/lib/kafka/orders-0/00000000000000000000.log
  kafkalog dump --deep-iteration --print-data-log orders-0/*.log
  kafkalog dump --json --deep-iteration --files a.log,b.log | jq 'select(.type=="error")'

exit status: 0 clean, 1 data problems found, 2 usage error, 3 I/O error
"""


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "dump",
        help="print the batches and records of log segment files, like kafka-dump-log",
        description="Print the batches (and with --deep-iteration the records) of Kafka log "
        "segment files: .log, KRaft .checkpoint, and .log.swap/.cleaned/.deleted leftovers.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", metavar="FILE", help="files to dump")
    parser.add_argument(
        "--files", default="", metavar="A,B", help="comma-separated files (as kafka-dump-log)"
    )
    parser.add_argument(
        "--deep-iteration", action="store_true", help="print every record, not only batches"
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print keys and payloads as UTF-8 (implies --deep-iteration)",
    )
    parser.add_argument(
        "--skip-record-metadata", action="store_true", help="omit per-record metadata"
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="read at most N bytes of each file",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.set_defaults(run=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def run(args: argparse.Namespace) -> int:
    files = list(args.paths) + [f for f in args.files.split(",") if f]
    if not files:
        print("kafkalog dump: no files given (positional FILE or --files)", file=sys.stderr)
        return EXIT_USAGE
    deep = args.deep_iteration or args.print_data_log
    status = EXIT_OK
    for path in files:
        name = os.path.basename(path)
        if not name.endswith(LOG_SUFFIXES):
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            continue
        dumper = JsonDumper(path, deep) if args.json else TextDumper(path, deep, args)
        try:
            with _open_buffer(path) as buf:
                view = buf if args.max_bytes is None else buf[: args.max_bytes]
                problems = dumper.dump(view, truncated=args.max_bytes is not None)
                del view
        except BrokenPipeError:
            raise
        except OSError as e:
            print(f"kafkalog dump: {path}: {e.strerror or e}", file=sys.stderr)
            return EXIT_IO
        if problems:
            status = EXIT_PROBLEMS
    sys.stdout.flush()
    return status


class _open_buffer:
    """The file's bytes as a read-only memoryview over an mmap (empty files as an empty view)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._mmap: mmap.mmap | None = None

    def __enter__(self) -> memoryview:
        with open(self._path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return memoryview(b"")
            self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(self._mmap)

    def __exit__(self, *exc) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass  # a view is still referenced (an exception traceback); the GC unmaps it


def records_of(batch: Batch) -> Iterator[Record]:
    """A batch's records, decoded through the columnar fast path.

    Legacy messages keep the reference decoder: their per-message CRCs, which kafka-dump-log
    prints, are not a column of the fast path.
    """
    if batch.magic < MAGIC_VALUE_V2:
        yield from batch.records()
        return
    columns = fast.decode_columnar(
        batch.buffer, keep_control=True, position_base=batch.position
    ).to_pydict()
    for i, offset in enumerate(columns["offset"]):
        yield Record(
            offset=offset,
            timestamp=columns["timestamp"][i],
            timestamp_type=TimestampType(columns["timestampType"][i]),
            key=columns["key"][i],
            value=columns["value"][i],
            headers=tuple(Header(h["key"], h["value"]) for h in columns["headers"][i]),
            sequence=columns["sequence"][i],
            is_control=columns["isControl"][i],
        )


def segment_start_offset(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


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


class _Dumper:
    def __init__(self, path: str, deep: bool) -> None:
        self.path = path
        self.deep = deep
        self.errors: list[KafkalogError] = []

    def dump(self, view: memoryview, *, truncated: bool) -> bool:
        """Dump one file; returns True when data problems were found."""
        self.begin()
        scan = RecordsScan(view)
        batches = records = 0
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
            self.batch(batch, base_offset, count)
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
            elif self.deep:
                try:
                    for record in records_of(batch):
                        self.record(batch, record)
                except KafkalogError as e:
                    self.error(e.located(position=batch.position, offset=base_offset))
        # A tail cut by --max-bytes is where we stopped reading, not a problem of the file.
        if scan.error is not None and not (truncated and scan.tail == Tail.PARTIAL):
            self.error(scan.error)
        self.end(scan, batches, records, truncated)
        return bool(self.errors)

    def begin(self) -> None: ...
    def batch(self, batch: Batch, base_offset: int, count: int) -> None: ...
    def record(self, batch: Batch, record: Record) -> None: ...
    def end(self, scan: RecordsScan, batches: int, records: int, truncated: bool) -> None: ...

    def error(self, error: KafkalogError) -> None:
        self.errors.append(error)


class JsonDumper(_Dumper):
    def _emit(self, obj: dict) -> None:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def begin(self) -> None:
        self._emit({"type": "file", "path": self.path})

    def batch(self, batch: Batch, base_offset: int, count: int) -> None:
        self._emit(batch_object(batch, base_offset, count))

    def record(self, batch: Batch, record: Record) -> None:
        self._emit(record_object(batch, record))

    def error(self, error: KafkalogError) -> None:
        super().error(error)
        self._emit(
            {
                "type": "error",
                "position": error.position,
                "offset": error.offset,
                "message": error.message,
            }
        )

    def end(self, scan: RecordsScan, batches: int, records: int, truncated: bool) -> None:
        self._emit(
            {
                "type": "summary",
                "batches": batches,
                "records": records,
                "validBytes": scan.valid_bytes,
                "invalidBytes": scan.invalid_bytes,
                "tail": scan.tail,
                "error": self.errors[0].message if self.errors else None,
            }
        )


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
    """The ``record`` object of the JSON contract (docs/cli.md)."""
    control_type = coordinator_epoch = None
    if batch.is_control:
        type_id, control_type, coordinator_epoch = control_fields(record)
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


class TextDumper(_Dumper):
    """kafka-dump-log's lines on stdout; what it would crash on goes to stderr."""

    def __init__(self, path: str, deep: bool, args: argparse.Namespace) -> None:
        super().__init__(path, deep)
        self.print_data = args.print_data_log
        self.skip_metadata = args.skip_record_metadata
        self.last_offset = -1
        self.non_consecutive: list[tuple[int, int]] = []
        self.out: TextIO = sys.stdout

    def begin(self) -> None:
        out = self.out
        out.write(f"Dumping {self.path}\n")
        name = os.path.basename(self.path)
        if name == "bootstrap.checkpoint":
            out.write("KRaft bootstrap snapshot\n")
        elif name.endswith(".checkpoint"):
            offset, _, epoch = name[: -len(".checkpoint")].partition("-")
            if offset.isdigit() and epoch.isdigit():
                out.write(f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}\n")
        else:
            start = segment_start_offset(name)
            if start is not None:
                out.write(f"Log starting offset: {start}\n")

    def batch(self, batch: Batch, base_offset: int, count: int) -> None:
        self.out.write(batch_line(batch, base_offset, count) + "\n")

    def record(self, batch: Batch, record: Record) -> None:
        if self.last_offset != -1 and record.offset != self.last_offset + 1:
            self.non_consecutive.append((self.last_offset, record.offset))
        self.last_offset = record.offset
        self.out.write(
            record_line(
                batch,
                record,
                print_data=self.print_data,
                skip_metadata=self.skip_metadata,
            )
            + "\n"
        )

    def error(self, error: KafkalogError) -> None:
        super().error(error)
        where = f"position {error.position}" if error.position is not None else "?"
        if error.offset is not None:
            where += f" (offset {error.offset})"
        self.out.flush()
        print(f"Error in {self.path} at {where}: {error.message}", file=sys.stderr)

    def end(self, scan: RecordsScan, batches: int, records: int, truncated: bool) -> None:
        if scan.invalid_bytes > 0 and not truncated:
            name = os.path.basename(self.path)
            self.out.write(f"Found {scan.invalid_bytes} invalid bytes at the end of {name}\n")
        if self.non_consecutive:
            self.out.flush()
            print(f"Non-consecutive offsets in {os.path.abspath(self.path)}", file=sys.stderr)
            for first, second in reversed(self.non_consecutive):
                print(f"  {first} is followed by {second}", file=sys.stderr)


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
            f"isControl: {_bool(batch.is_control)} deleteHorizonMs: "
            + ("OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]")
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {batch.compression.label} crc: {batch.crc} "
        f"isvalid: {_bool(batch.is_valid)}"
    )


def _utf8(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def record_line(
    batch: Batch, record: Record, *, print_data: bool = False, skip_metadata: bool = False
) -> str:
    """One ``| offset: ...`` record line exactly as kafka-dump-log prints it."""
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
            parts.append(f" isValid: {_bool(record.is_valid)} crc: {record.crc}}}")
        if batch.is_control:
            parts.append(_control_text(record))
    if print_data and not batch.is_control:
        if record.key is not None:
            parts.append(f"{prefix}key: {_utf8(record.key)}")
            prefix = " "
        if record.value is not None:
            parts.append(f" payload: {_utf8(record.value)}")
    return "".join(parts)


def _control_text(record: Record) -> str:
    type_id, name, coordinator_epoch = control_fields(record)
    if coordinator_epoch is not None:
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    label = _QUORUM_RECORD_LABELS.get(type_id)
    if label is not None:
        decoded = decode_control_value(type_id, record.value)
        if decoded.error is not None:
            raise InvalidRecordError(f"{name} control record does not decode: {decoded.error}")
        body = json.dumps(to_json_safe(decoded.data), separators=(",", ":"))
        return f" {label} {body}"
    return f" controlType: {name}({type_id})"


# kafka-dump-log prints these KRaft control records as JSON after a label.
_QUORUM_RECORD_LABELS = {
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}
