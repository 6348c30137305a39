"""``kafkalog consume``: read records of a data directory as a Kafka consumer would see them.

From an offset or a timestamp, read_uncommitted or read_committed (aborted records dropped with
the ``.txnindex``, reading stopped at the last stable offset, as Kafka's fetch does), as text in
kafka-console-consumer's layout or as JSON lines that ``kafkalog produce`` reads back byte for
byte. ``--follow`` tails a log another process is writing: every poll plans a new read from
where the previous one ended (new partitions start at their beginning); a batch still being
written is read at a later poll. SIGINT or SIGTERM stop it cleanly with exit status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from ..errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from .arguments import add_json_flag
from .data_errors import guarded
from .failures import report
from .progress import Progress, add_quiet_flag
from .record_json import (
    TIMESTAMP_TYPE_NAMES,
    RecordFormatError,
    Row,
    iter_rows,
    record_line,
)
from .remote import is_url
from .selection import (
    add_data_dirs,
    add_decoders,
    add_read_policy,
    add_topic_choice,
    read_policy_options,
)
from .value_decoders import DECODERS, ValueDecodeError, shown

SUMMARY = "print records of a data directory (from an offset or a time; --follow to tail)"
DESCRIPTION = (
    "Read records of a Kafka data directory as a consumer sees them: text in "
    "kafka-console-consumer's layout (value only unless --print-* options say more) or JSON "
    "lines (--json) that 'kafkalog produce' reads back byte for byte. Control records are "
    "never shown. Records are read in partition order, then offset order."
)
EXAMPLES = """\
examples:
  kafkalog consume /var/lib/kafka/data --topic orders
  kafkalog consume data --topic orders --partition 0 --offset 1200 --max-records 10 \\
      --print-offset --print-key
  kafkalog consume data --topic orders --timestamp 2026-01-31T00:00:00Z --json
  kafkalog consume data --topic payments --isolation-level read_committed --follow
  kafkalog consume data --topic orders --json | kafkalog produce copy --partitions 3

exit status: 0 done (also when --follow is stopped with Ctrl-C), 1 data problems (corrupt
records, offsets that are gone, a record the chosen decoder refuses), 2 usage error,
3 I/O error
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dirs(parser)
    which = parser.add_argument_group("what to read")
    add_topic_choice(
        which,
        topic_help="a topic to read (repeat, or a,b); default: every topic not starting with __",
        partition_help="read only these partition numbers (repeat)",
    )
    start = which.add_mutually_exclusive_group()
    start.add_argument(
        "--offset", default="earliest", metavar="earliest|latest|N",
        help="where each partition starts (default: earliest)",
    )  # fmt: skip
    start.add_argument(
        "--timestamp", metavar="MS|ISO-8601",
        help="start at the first record whose timestamp is at or after this (milliseconds "
        "since the epoch, or a date like 2026-01-31T12:00:00Z); none: start at the end",
    )  # fmt: skip
    which.add_argument("--max-records", type=int, metavar="N", help="stop after N records")
    add_read_policy(
        which,
        data_loss_help="skip offsets that are gone (a missing segment) and damaged batches (a CRC "
        "mismatch, a bad size, offsets that go back) with a warning naming file and position, "
        "instead of failing after the records before them (docs/reading.md)",
    )
    follow = parser.add_argument_group("following a live log")
    follow.add_argument("--follow", "-f", action="store_true", help="wait for new records")
    follow.add_argument(
        "--poll-interval", type=float, default=0.5, metavar="SECONDS",
        help="time between looks for new records (default 0.5)",
    )  # fmt: skip
    follow.add_argument(
        "--timeout-ms", type=int, metavar="MS",
        help="with --follow, stop when no record arrived for this long",
    )  # fmt: skip
    out = parser.add_argument_group("output")
    add_json_flag(out, help="one JSON object per record")
    add_decoders(
        out,
        help_template="how to show {what}s: {names} (text default: the raw bytes; JSON "
        "default: utf8 when valid, else base64)",
    )
    for what in ("timestamp", "partition", "offset", "headers", "key"):
        out.add_argument(f"--print-{what}", action="store_true", help=f"text: print the {what}")
    out.add_argument("--key-separator", default="\t", help="text: between fields (a tab)")
    out.add_argument("--null-literal", default="null", help="text: a null key or value (null)")
    add_quiet_flag(parser)


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from digits or an ISO-8601 date (UTC unless it says)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--timestamp {text!r}: give milliseconds since the epoch or an ISO-8601 date"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _offset_arg(text: str) -> str | int:
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return low
    try:
        value = int(low)
    except ValueError:
        raise ValueError(f"--offset {text!r}: give earliest, latest or an offset") from None
    if value < 0:
        raise ValueError(f"--offset {value}: offsets are not negative")
    return value


def _topics(args: argparse.Namespace) -> list[str] | None:
    if not args.topic:
        return None
    return [t.strip() for arg in args.topic for t in arg.split(",") if t.strip()]


class TextFormatter:
    """kafka-console-consumer's DefaultMessageFormatter: chosen fields, then the value."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sep = args.key_separator.encode()
        self.null = args.null_literal.encode()
        self.key = self._renderer(args.key_decoder, "key")
        self.value = self._renderer(args.value_decoder, "value")

    def _renderer(self, name: str | None, what: str) -> Callable[[Row, bytes | None], bytes]:
        decode = DECODERS[name] if name else None

        def render(row: Row, data: bytes | None) -> bytes:
            if data is None:
                return self.null
            if decode is None:
                return data
            try:
                value = decode(data)
            except ValueDecodeError as e:
                raise RecordFormatError(
                    f"{row.topic}-{row.partition} offset {row.offset}: {what}: {e}"
                ) from None
            return shown(value).encode("utf-8")

        return render

    def line(self, row: Row) -> bytes:
        a = self.args
        fields: list[bytes] = []
        if a.print_timestamp:
            name = TIMESTAMP_TYPE_NAMES.get(row.timestamp_type)
            stamp = "NO_TIMESTAMP" if row.timestamp_type == -1 else f"{name}:{row.timestamp}"
            fields.append(stamp.encode())
        if a.print_partition:
            fields.append(b"Partition:%d" % row.partition)
        if a.print_offset:
            fields.append(b"Offset:%d" % row.offset)
        if a.print_headers:
            fields.append(
                b",".join(
                    k.encode() + b":" + (self.null if v is None else v) for k, v in row.headers
                )
                or b"NO_HEADERS"
            )
        if a.print_key:
            fields.append(self.key(row, row.key))
        fields.append(self.value(row, row.value))
        return self.sep.join(fields) + b"\n"


class JsonFormatter:
    def __init__(self, args: argparse.Namespace) -> None:
        self.key_encoding = args.key_decoder
        self.value_encoding = args.value_decoder

    def line(self, row: Row) -> bytes:
        return (record_line(row, self.key_encoding, self.value_encoding) + "\n").encode()


class _Stop(Exception):
    """SIGTERM while following: stop as for Ctrl-C."""


def run(args: argparse.Namespace) -> int:
    if args.max_records is not None and args.max_records < 0:
        report("consume", "--max-records must not be negative")
        return EXIT_USAGE
    if args.poll_interval <= 0:
        report("consume", "--poll-interval must be positive")
        return EXIT_USAGE
    try:
        start = parse_timestamp(args.timestamp) if args.timestamp else _offset_arg(args.offset)
    except ValueError as e:
        report("consume", e)
        return EXIT_USAGE
    return guarded("consume", lambda: _consume(args, start, sys.stdout.buffer))


def _consume(args: argparse.Namespace, start: str | int, out: BinaryIO) -> int:
    from ..arrow.scan import plan_scan

    formatter = JsonFormatter(args) if args.json else TextFormatter(args)
    common = {
        "topics": _topics(args),
        "topic_pattern": args.include,
        "partitions": args.partition,
        "isolation_level": args.isolation_level,
        "include_headers": True,
        "fail_on_data_loss": args.fail_on_data_loss,
    }
    options = read_policy_options(args)
    if args.timestamp:
        first = {
            "starting_timestamp": start,
            "options": {**options, "startingOffsetsByTimestampStrategy": "latest"},
        }
    else:
        first = {"starting_offsets": start, "options": options}
    remaining = args.max_records
    next_offsets: dict | None = None
    warned: set[Path] = set()
    if args.follow:
        previous = signal.signal(signal.SIGTERM, _raise_stop)
    last_record = time.monotonic()
    try:
        while remaining is None or remaining > 0:
            if next_offsets is None:
                scan = plan_scan(args.data_dirs, **common, **first)
            else:
                scan = plan_scan(
                    args.data_dirs, **common, starting_offsets=next_offsets, strict_offsets=False,
                    options=options,
                )  # fmt: skip
            if args.isolation_level == "read_committed":
                warn_unindexed_aborts("consume", args.data_dirs, scan.ranges, warned)
            written = 0
            with Progress(scan.total_bytes, "consume", quiet=args.quiet or args.follow) as bar:
                for batch in scan.batches(bar.advance):
                    if remaining is not None and batch.num_rows > remaining:
                        batch = batch.slice(0, remaining)
                    lines = [formatter.line(row) for row in iter_rows(batch)]
                    out.write(b"".join(lines))
                    written += len(lines)
                    if remaining is not None:
                        remaining -= len(lines)
                        if remaining <= 0:
                            break
            out.flush()
            if not args.follow:
                break
            next_offsets = {(tp.topic, tp.partition): end for tp, (_, end) in scan.ranges.items()}
            now = time.monotonic()
            if written:
                last_record = now
            elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
            time.sleep(args.poll_interval)
    except RecordFormatError as e:
        out.flush()
        report("consume", e)
        return EXIT_PROBLEMS
    except (KeyboardInterrupt, _Stop):
        out.flush()
        return EXIT_OK if args.follow else 130
    finally:
        if args.follow:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def warn_unindexed_aborts(
    command: str, data_dirs: list[str], ranges: dict, warned: set[Path]
) -> None:
    """Warn, once per segment, where read_committed returns aborted records because a
    segment's ``.txnindex`` is missing (Kafka's fetch reads only the index, so do we)."""
    from ..dataset import discover
    from ..log.verify import unindexed_aborts

    directories = discover(data_dirs)
    for tp, (start, end) in ranges.items():
        directory = directories.get(tp)
        if directory is None or start >= end or is_url(directory):
            continue  # finding markers there would fetch whole segments: local files only
        for found in unindexed_aborts(directory, start, end):
            if found.log in warned:
                continue
            warned.add(found.log)
            markers = found.markers
            report(
                command,
                f"warning: {found.log} holds {len(markers)} ABORT marker"
                f"{'s' if len(markers) != 1 else ''} (the first at offset {markers[0]}) but "
                f"its .txnindex is missing: read_committed returns the aborted records as if "
                f"committed, as Kafka would (kafkalog rebuild-index --apply {found.log.parent} "
                f"writes it)",
            )


def _raise_stop(signum, frame) -> None:
    raise _Stop()
