"""``kafkalog produce``: append records to a data directory as a producer and broker would.

Input is JSON lines (what ``consume --json`` writes, read back byte for byte) or text lines
(kafka-console-producer's: each line a value, or ``key SEPARATOR value`` with ``--separator``).
Records go to the partition they name, else where Kafka's producer sends them: murmur2 of the
key, or the sticky choice for records without one; a partition the topic lacks is refused, as a
broker answers UNKNOWN_TOPIC_OR_PARTITION. They are encoded in batches (``--codec``,
``--batch-size``) and appended through the log layer as a leader appends a produce request:
Kafka's validation, offset assignment, indexes, producer state and, for ``--transaction``, the
COMMIT or ABORT control batch and the ``.txnindex``. The data directory's ``.lock`` is held while
writing; a missing topic is created (with ``partition.metadata``). Batches are appended when they
are full, when the input pauses (a pipe with nothing more to read yet) and at the end.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from collections.abc import Iterator

from ..errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageError
from .data_errors import guarded
from .failures import report
from .progress import Progress, add_quiet_flag
from .record_json import InputRecord, RecordFormatError, parse_json_record
from .remote import refuse_urls

SUMMARY = "append records from JSON or text lines to a topic in a data directory"
DESCRIPTION = (
    "Append records to a Kafka data directory through the log layer (Kafka's "
    "validation and offset assignment), reading JSON lines (the format 'kafkalog consume "
    "--json' writes) or text lines from stdin or a file. Creates the data directory and "
    "topic when missing."
)
EXAMPLES = """\
examples:
  echo '{"key":"user-1","value":"hello"}' | kafkalog produce data --topic orders
  kafkalog produce data --topic orders --format text --separator : --file orders.txt
  kafkalog consume old --topic orders --json | kafkalog produce new --partitions 3 --codec zstd
  kafkalog produce data --topic payments --partitions 3 --transaction abort < records.jsonl
  kafkalog produce data --topic payments --producer-id 7 --transaction commit < /dev/null

exit status: 0 every record written, 1 a bad input line or a record the log refused (records
before it are written; a transaction is aborted), 2 usage error (also a record for an internal
topic such as __consumer_offsets without --allow-internal-topics), 3 I/O error or the data
directory is locked by another writer
"""

CHUNK = 1 << 16
MAX_SEQUENCE = (1 << 31) - 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data_dir", metavar="DATA_DIR", help="the data directory to write")
    where = parser.add_argument_group("where records go")
    where.add_argument("--topic", "-t", help="the topic of every record (wins over the input's)")
    where.add_argument(
        "--partition", "-p", type=int, metavar="N",
        help="the partition of every record (default: the input's, else Kafka's partitioner)",
    )  # fmt: skip
    where.add_argument(
        "--partitions", type=int, default=1, metavar="N",
        help="partitions of a topic that does not exist yet (default 1)",
    )  # fmt: skip
    where.add_argument(
        "--allow-internal-topics", action="store_true",
        help="write to Kafka's internal topics (__consumer_offsets, __transaction_state, "
        "__cluster_metadata, __share_group_state), which a broker refuses produce requests to "
        "(default: refused, exit status 2)",
    )  # fmt: skip
    where.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE",
        help="a topic config (segment.bytes, cleanup.policy, ...) of a topic created here",
    )  # fmt: skip
    inp = parser.add_argument_group("input")
    inp.add_argument("--file", "-i", metavar="FILE", help="read this file (default: stdin)")
    inp.add_argument(
        "--format", choices=("json", "text"), default="json",
        help="json: one record object per line (blank lines skipped); text: each line a value",
    )  # fmt: skip
    inp.add_argument(
        "--separator", metavar="SEP",
        help="text: each line is KEY SEP VALUE (split at the first SEP)",
    )  # fmt: skip
    inp.add_argument(
        "--null-marker", metavar="STR", help="text: a key or value equal to STR is null"
    )  # fmt: skip
    inp.add_argument(
        "--header", action="append", default=[], metavar="KEY=VALUE",
        help="a header added to every record (repeat; after the input's own headers)",
    )  # fmt: skip
    inp.add_argument(
        "--timestamp", type=int, metavar="MS",
        help="CreateTime of records whose input has none (default: the time it is read)",
    )  # fmt: skip
    enc = parser.add_argument_group("batches")
    enc.add_argument(
        "--codec", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none",
        help="compression of the batches (default none)",
    )  # fmt: skip
    enc.add_argument(
        "--compression-level", type=int, metavar="N",
        help="the codec's level (default Kafka's: gzip 6, lz4 9, zstd 3)",
    )  # fmt: skip
    enc.add_argument(
        "--batch-size", type=int, default=16384, metavar="BYTES",
        help="records per batch, in bytes (Kafka's batch.size, 16384)",
    )  # fmt: skip
    prod = parser.add_argument_group("idempotence and transactions")
    prod.add_argument(
        "--idempotent", action="store_true",
        help="write as an idempotent producer (producer id, epoch and sequence numbers)",
    )  # fmt: skip
    prod.add_argument(
        "--producer-id", type=int, metavar="ID",
        help="the producer id (implies --idempotent; default: one above every id in the dir, "
        "from 2^62 up)",
    )  # fmt: skip
    prod.add_argument(
        "--producer-epoch", type=int, metavar="N",
        help="the producer epoch (default: the id's current epoch, or 0)",
    )  # fmt: skip
    prod.add_argument(
        "--transaction", choices=("commit", "abort", "open"),
        help="write the records in one transaction and end it with a COMMIT or ABORT marker "
        "in every partition written (open: leave it open; a later run with the same "
        "--producer-id may add to it and end it)",
    )  # fmt: skip
    prod.add_argument(
        "--coordinator-epoch", type=int, default=0, metavar="N",
        help="the coordinator epoch written in transaction markers (default 0)",
    )  # fmt: skip
    add_quiet_flag(parser)


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r}: expected KEY=VALUE")
        out.append((key, value))
    return out


def run(args: argparse.Namespace) -> int:
    from ..log.partition import LogConfig
    from .produce_writer import internal_topic_refusal

    try:
        refuse_urls([args.data_dir], does="appends records to logs")
    except UsageError as e:
        report("produce", e)
        return EXIT_USAGE
    try:
        configs = dict(_pairs(args.config, "--config"))
        LogConfig(configs)  # refused before any input is read or any file is made
        headers = tuple((k, v.encode()) for k, v in _pairs(args.header, "--header"))
        for name, value, low in (
            ("--partitions", args.partitions, 1),
            ("--batch-size", args.batch_size, 1),
            ("--partition", args.partition, 0),
            ("--producer-id", args.producer_id, 0),
            ("--producer-epoch", args.producer_epoch, 0),
            ("--timestamp", args.timestamp, -1),
        ):
            if value is not None and value < low:
                raise ValueError(f"{name} must be at least {low}, not {value}")
        if args.separator is not None and args.format != "text":
            raise ValueError("--separator applies to --format text")
        if args.separator == "":
            raise ValueError("--separator must not be empty")
        if args.null_marker is not None and args.null_marker == args.separator:
            raise ValueError("--null-marker and --separator may not be equal")
        refusal = None if args.allow_internal_topics else internal_topic_refusal(args.topic or "")
        if refusal is not None:
            raise ValueError(refusal)
    except ValueError as e:
        report("produce", e)
        return EXIT_USAGE
    return guarded("produce", lambda: _produce(args, configs, headers))


def _produce(args: argparse.Namespace, configs: dict[str, str], extra_headers: tuple) -> int:
    from ..log.datadir import LogManager
    from .produce_writer import PartitionWriter

    stream = open(args.file, "rb") if args.file else sys.stdin.buffer
    try:
        manager = LogManager(args.data_dir, writable=True, create=True)
        try:
            writer = PartitionWriter(manager, args, configs)
            try:
                status = _pump(args, stream, writer, extra_headers)
            except BaseException:
                writer.finish(failed=True)  # an open transaction is aborted, not left hanging
                raise
            writer.finish(failed=status != EXIT_OK)
        finally:
            manager.close()  # a clean shutdown (checkpoints, marker) whatever happened
    finally:
        if args.file:
            stream.close()
    if not args.quiet:
        for line in writer.summary():
            report("produce", line)
    return status


def _pump(args: argparse.Namespace, stream, writer, extra_headers: tuple) -> int:
    """Read records and hand them to ``writer``; a bad line stops reading (exit status 1; 2 for
    a record of an internal topic without --allow-internal-topics)."""
    from .produce_writer import InternalTopicError

    parse = _json_line if args.format == "json" else _text_parser(args)
    try:
        size = os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):
        size = 0
    with Progress(size, "produce", quiet=args.quiet) as bar:
        for number, line, idle in _lines(stream, bar):
            if line is not None:
                try:
                    record = parse(line)
                    if record is not None:
                        writer.send(record, extra_headers)
                except InternalTopicError as e:  # a usage error, as --topic __consumer_offsets
                    writer.flush()
                    report("produce", f"{args.file or 'stdin'} line {number}: {e}")
                    return EXIT_USAGE
                except (RecordFormatError, ValueError) as e:
                    writer.flush()
                    where = args.file or "stdin"
                    report("produce", f"{where} line {number}: {e}")
                    return EXIT_PROBLEMS
            if idle:
                writer.flush()
    writer.flush()
    return EXIT_OK


def _lines(stream, bar) -> Iterator[tuple[int, bytes | None, bool]]:
    """(line number, line without its end, input paused after it) for every line; reads
    whatever is available, so records of a slow pipe are written as they come."""
    fd = stream.fileno()
    pending = b""
    number = 0
    while True:
        chunk = os.read(fd, CHUNK)
        bar.advance(len(chunk))
        if not chunk:
            break
        pending += chunk
        parts = pending.split(b"\n")
        pending = parts.pop()
        for part in parts:
            number += 1
            yield number, part.removesuffix(b"\r"), False
        if not _ready(fd):
            yield number, None, True
    if pending:
        yield number + 1, pending.removesuffix(b"\r"), True


def _ready(fd: int) -> bool:
    try:
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _json_line(line: bytes) -> InputRecord | None:
    if not line.strip():
        return None
    return parse_json_record(line)


def _text_parser(args: argparse.Namespace):
    sep = args.separator.encode() if args.separator is not None else None
    null = args.null_marker.encode() if args.null_marker is not None else None

    def parse(line: bytes) -> InputRecord:
        key = None
        value = line
        if sep is not None:
            key, found, value = line.partition(sep)
            if not found:
                raise RecordFormatError(f"no key separator {args.separator!r} found: {line!r}")
        if null is not None:
            key = None if key == null else key
            value = None if value == null else value
        return InputRecord(None, None, None, key, value, ())

    return parse


def now_ms() -> int:
    return time.time_ns() // 1_000_000
