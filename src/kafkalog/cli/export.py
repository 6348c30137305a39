"""``kafkalog export``: a data directory's records to Parquet, JSON lines or CSV, without Spark.

Built on :mod:`kafkalog.arrow`: the selection and range options mean what the Spark source's do,
and the columns are Spark's Kafka source schema. Parquet and CSV are written by pyarrow's
writers, batch by batch (memory stays bounded); JSON lines are ``consume --json``'s records, so
``produce`` loads them back. The output appears under its name only when complete: it is written
to a temporary file beside it and renamed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import EXIT_OK, EXIT_USAGE
from .data_errors import guarded
from .failures import report
from .progress import Progress, add_quiet_flag
from .remote import is_url
from .selection import (
    add_data_dirs,
    add_decoders,
    add_read_policy,
    add_topic_choice,
    read_policy_options,
)

SUMMARY = "write a data directory's records to Parquet, JSON lines or CSV"
DESCRIPTION = (
    "Export records of a Kafka data directory with Spark's Kafka source columns "
    "(key, value, topic, partition, offset, timestamp, timestampType, and headers with "
    "--include-headers) to Parquet, JSON lines or CSV. Selection and ranges take the Spark "
    "source's meanings (docs/spark.md); control records are never exported."
)
EXAMPLES = """\
examples:
  kafkalog export /var/lib/kafka/data --to parquet orders.parquet --topic orders
  kafkalog export data --to jsonl - --topic orders --starting-offsets '{"orders":{"0":100}}'
  kafkalog export data --to csv orders.csv --topic orders --value-decoder utf8 \\
      --starting-timestamp 2026-01-01T00:00:00Z --ending-timestamp 2026-02-01T00:00:00Z
  kafkalog export data --to parquet all.parquet --include '.*' --include-headers \\
      --isolation-level read_committed

exit status: 0 written, 1 data problems (corrupt records, offsets that are gone, a value the
chosen decoder refuses), 2 usage error, 3 I/O error
"""

FORMATS = ("parquet", "jsonl", "csv")
PARQUET_CODECS = ("snappy", "zstd", "gzip", "lz4", "brotli", "none")
# Where the export starts and stops (the Spark source's options of these names): the flag, its
# metavar and help. An ``-offsets`` value is earliest/latest, an offset or JSON; a
# ``-timestamp`` one milliseconds or an ISO-8601 date.
RANGES = (
    (
        "--starting-offsets", "earliest|N|JSON",
        'where to start: earliest (default), one offset for every partition, or Spark\'s '
        'JSON {"topic":{"0":23}} (-2 earliest; partitions not named start at earliest)',
    ),
    (
        "--ending-offsets", "latest|N|JSON",
        "where to stop (exclusive): latest (default), an offset, or JSON (-1 latest)",
    ),
    ("--starting-timestamp", "MS|ISO-8601", "start at the first record at or after this time"),
    ("--ending-timestamp", "MS|ISO-8601", "stop before the first record at or after this time"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dirs(parser)
    parser.add_argument(
        "--to", nargs=2, required=True, metavar=("FORMAT", "OUT"),
        help="parquet, jsonl or csv, and the file to write ('-' for stdout: jsonl, csv)",
    )  # fmt: skip
    which = parser.add_argument_group("what to export")
    add_topic_choice(
        which,
        topic_help="a topic (repeat, or a,b); default: every topic not starting with __",
        partition_help="only these partition numbers of each topic (repeat)",
    )
    for flag, metavar, text in RANGES:
        which.add_argument(flag, metavar=metavar, help=text)
    add_read_policy(
        which,
        data_loss_help="skip offsets that are gone and damaged batches with a warning "
        "naming file and position, instead of failing after the records before them",
    )
    which.add_argument(
        "--option", action="append", default=[], metavar="NAME=VALUE",
        help="any other option of the Spark source by its Spark name (repeat)",
    )  # fmt: skip
    out = parser.add_argument_group("output")
    out.add_argument("--include-headers", action="store_true", help="add the headers column")
    add_decoders(
        out,
        help_template="jsonl and csv: how {what}s are written ({names}; csv default base64, "
        "jsonl default utf8 when valid else base64)",
    )
    out.add_argument(
        "--compression", choices=PARQUET_CODECS, default="snappy",
        help="parquet: the column codec (default snappy)",
    )  # fmt: skip
    add_quiet_flag(parser)


def _offsets_arg(text: str | None, what: str):
    if text is None:
        return None
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return low
    if low.lstrip("-").isdigit():
        return int(low)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: not earliest/latest, an offset or JSON ({e})") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError(f'{what}: JSON must look like {{"topic":{{"0":23}}}}')
    try:
        return {t: {int(p): o for p, o in ps.items()} for t, ps in doc.items()}
    except ValueError:
        raise ValueError(f"{what}: partitions must be numbers") from None


def run(args: argparse.Namespace) -> int:
    from .consume import parse_timestamp

    fmt, out = args.to
    try:
        if fmt not in FORMATS:
            raise ValueError(f"--to {fmt!r}: choose one of {', '.join(FORMATS)}")
        if is_url(out):
            raise ValueError(
                f"--to {fmt} {out}: the command line only reads object storage; export to a "
                f"local file (or '-') and upload it"
            )
        if out == "-" and fmt == "parquet":
            raise ValueError("parquet needs a file (not '-'): its footer is written last")
        options = read_policy_options(args)
        for item in args.option:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise ValueError(f"--option {item!r}: expected NAME=VALUE")
            options[name] = value
        plan = {
            "topics": [t for arg in args.topic for t in arg.split(",")] if args.topic else None,
            "topic_pattern": args.include,
            "partitions": args.partition,
            "isolation_level": args.isolation_level,
            "include_headers": args.include_headers,
            "fail_on_data_loss": args.fail_on_data_loss,
            "options": options,
        }
        for flag, _, _ in RANGES:
            name = flag[2:].replace("-", "_")
            text = getattr(args, name)
            if name.endswith("_offsets"):
                plan[name] = _offsets_arg(text, flag)
            else:
                plan[name] = parse_timestamp(text) if text else None
    except ValueError as e:
        report("export", e)
        return EXIT_USAGE
    return guarded("export", lambda: _export(args, fmt, out, plan))


def _export(args: argparse.Namespace, fmt: str, out: str, plan: dict) -> int:
    from ..arrow.scan import plan_scan
    from .consume import warn_unindexed_aborts
    from .export_writers import WRITERS

    scan = plan_scan(args.data_dirs, **plan)
    if args.isolation_level == "read_committed":
        warn_unindexed_aborts("export", args.data_dirs, scan.ranges, set())
    writer_class = WRITERS[fmt]
    target = sys.stdout.buffer if out == "-" else None
    temporary = None if target else _temporary_name(out)
    records = 0
    try:
        with Progress(scan.total_bytes, "export", quiet=args.quiet) as bar:
            writer = writer_class(target or temporary, scan.schema, args)
            try:
                for batch in scan.batches(bar.advance):
                    writer.write(batch)
                    records += batch.num_rows
            finally:
                writer.close()
        if temporary:
            os.replace(temporary, out)
            temporary = None
    finally:
        if temporary and os.path.exists(temporary):
            os.unlink(temporary)
    if not args.quiet:
        where = "stdout" if out == "-" else out
        report("export", f"{records} records of {len(scan.ranges)} partitions written to {where}")
    return EXIT_OK


def _temporary_name(out: str) -> str:
    directory, name = os.path.split(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, "no such directory", directory)
    return os.path.join(directory, f".{name}.kafkalog-{os.getpid()}.tmp")
