"""``kafkalog dump``: what kafka-dump-log prints for every file it knows, and a JSON-lines contract.

Text output reproduces kafka-dump-log's lines (DumpLogSegments, Kafka 3.9-4.2) byte for byte, so
scripts written for it keep working; problems that kafka-dump-log would crash on or ignore are
reported on stderr instead, and the dump goes on. ``--json`` writes one object per line,
documented in docs/cli.md: readers ignore unknown types and fields; fields are only ever added,
never renamed, removed or retyped.

The work per kind of file lives in :mod:`.segments` (segments, KRaft snapshots), :mod:`.indexes`
and :mod:`.producer_snapshots`; what a batch or record prints as in :mod:`.batches` (through
:mod:`.columnar` for whole batches), the key and value decoders in :mod:`.message_parsers`.
"""

from __future__ import annotations

import argparse
import os
import sys

from ...errors import EXIT_IO, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, KafkalogError, UsageError
from ...log.datadir import require_regular_file
from ..arguments import add_json_flag
from ..failures import os_error_text, report
from ..progress import Progress, add_quiet_flag, total_bytes
from ..remote import check_urls, is_url
from ..value_decoders import DECODER_NAMES
from .file_dump import DEFAULT_MAX_MESSAGE_SIZE, LEFTOVER_SUFFIXES, DumpOptions, FileDump
from .indexes import OffsetIndexDump, TimeIndexDump, TxnIndexDump
from .message_parsers import make_parser
from .producer_snapshots import ProducerSnapshotDump
from .reports import DumpReports
from .segments import LogDump

__all__ = ["DESCRIPTION", "EXAMPLES", "SUMMARY", "add_arguments", "file_kind", "run"]

# What each file name suffix holds, and who dumps it.
KINDS: dict[str, tuple[str, type[FileDump]]] = {
    ".log": ("log", LogDump),
    ".checkpoint": ("kraft-snapshot", LogDump),
    ".index": ("index", OffsetIndexDump),
    ".timeindex": ("timeindex", TimeIndexDump),
    ".txnindex": ("txnindex", TxnIndexDump),
    ".snapshot": ("producer-snapshot", ProducerSnapshotDump),
}

SUMMARY = "print the contents of Kafka's log files, like kafka-dump-log"
DESCRIPTION = (
    "Print the contents of Kafka's log files, as kafka-dump-log does: segments "
    "(.log and the .swap/.cleaned/.deleted leftovers), KRaft snapshots (.checkpoint, "
    "bootstrap.checkpoint), offset and time indexes (.index, .timeindex, checked against "
    "their .log), transaction indexes (.txnindex) and producer snapshots (.snapshot)."
)
EXAMPLES = """\
examples:
  kafkalog dump /var/lib/kafka/orders-0/00000000000000000000.log
  kafkalog dump --deep-iteration --print-data-log orders-0/*.log
  kafkalog dump --value-decoder json --key-decoder int64 orders-0/00000000000000000000.log
  kafkalog dump --verify-index-only orders-0/*.index orders-0/*.timeindex
  kafkalog dump --offsets-decoder __consumer_offsets-7/00000000000000000000.log
  kafkalog dump --cluster-metadata-decoder __cluster_metadata-0/*.checkpoint
  kafkalog dump --json --deep-iteration --files a.log,b.log | jq 'select(.type=="error")'

exit status: 0 clean, 1 data problems found, 2 usage error, 3 I/O error
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="FILE", help="files to dump (paths, or s3://... URLs)"
    )
    parser.add_argument(
        "--files", default="", metavar="A,B", help="comma-separated files (as kafka-dump-log)"
    )
    parser.add_argument(
        "--deep-iteration", action="store_true", help="print every record, not only batches"
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print keys and payloads (UTF-8 unless a decoder is chosen; implies "
        "--deep-iteration; implied by every decoder option)",
    )
    parser.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="print only keys and payloads of records (control records become empty lines)",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check .index/.timeindex entries against the log without printing them",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the check a broker runs on .index/.timeindex files at startup",
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="read at most N bytes of each .log or .checkpoint file",
    )
    parser.add_argument(
        "--max-message-size",
        type=_positive_int,
        default=DEFAULT_MAX_MESSAGE_SIZE,
        metavar="N",
        help="largest batch an index entry may point at (default %(default)s)",
    )
    internal = parser.add_mutually_exclusive_group()
    internal.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode records as __consumer_offsets (offset commits, group metadata)",
    )
    internal.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode records as __transaction_state (transaction metadata)",
    )
    internal.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="decode records as KRaft cluster metadata (__cluster_metadata, snapshots)",
    )
    for part in ("key", "value"):
        parser.add_argument(
            f"--{part}-decoder",
            choices=DECODER_NAMES,
            default=None,
            metavar="NAME",
            help=f"show {part}s as {', '.join(DECODER_NAMES)}",
        )
    add_json_flag(parser)
    add_quiet_flag(parser)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def file_kind(name: str) -> tuple[str, type[FileDump]] | None:
    """What a file name holds: by its last suffix, as kafka-dump-log decides, after dropping a
    leftover suffix (``.swap``, ``.cleaned``, ``.deleted``), which kafka-dump-log ignores."""
    for leftover in LEFTOVER_SUFFIXES:
        if name.endswith(leftover):
            name = name[: -len(leftover)]
            break
    dot = name.rfind(".")
    return None if dot < 0 else KINDS.get(name[dot:])


def _is_dir(path: str) -> bool:
    if is_url(path):
        from ...log.storage import as_path

        return as_path(path).is_dir()
    return os.path.isdir(path)


def _internal_decoder(args: argparse.Namespace) -> bool:
    """Whether one of the internal topics' decoders was chosen (they exclude the others)."""
    return bool(
        args.offsets_decoder or args.transaction_log_decoder or args.cluster_metadata_decoder
    )


def options_of(args: argparse.Namespace) -> DumpOptions:
    decoded = bool(_internal_decoder(args) or args.key_decoder or args.value_decoder)
    print_data = args.print_data_log or decoded
    return DumpOptions(
        deep=args.deep_iteration or print_data,
        print_data=print_data,
        skip_metadata=args.skip_record_metadata,
        max_bytes=args.max_bytes,
        max_message_size=args.max_message_size,
        verify_only=args.verify_index_only,
        sanity_only=args.index_sanity_check,
        json=args.json,
        decoded=decoded,
        parser=make_parser(
            offsets=args.offsets_decoder,
            transaction_log=args.transaction_log_decoder,
            cluster_metadata=args.cluster_metadata_decoder,
            key_decoder=args.key_decoder,
            value_decoder=args.value_decoder,
        ),
    )


def run(args: argparse.Namespace) -> int:
    files = list(args.paths) + [f for f in args.files.split(",") if f]
    if not files:
        report("dump", "no files given (positional FILE or --files)")
        return EXIT_USAGE
    try:
        check_urls(files)
        directories = [path for path in files if _is_dir(path)]
    except UsageError as e:
        report("dump", e)
        return EXIT_USAGE
    except OSError as e:
        report("dump", os_error_text(e))
        return EXIT_IO
    if directories:
        report(
            "dump",
            f"{directories[0]} is a directory; dump reads files (give them, e.g. "
            f"{os.path.join(directories[0], '*.log')}), 'kafkalog verify' or 'kafkalog stats' "
            f"read whole directories",
        )
        return EXIT_USAGE
    if _internal_decoder(args) and (args.key_decoder or args.value_decoder):
        report(
            "dump",
            "--key-decoder/--value-decoder cannot be combined with "
            "--offsets-decoder, --transaction-log-decoder or --cluster-metadata-decoder",
        )
        return EXIT_USAGE
    options = options_of(args)
    reports = DumpReports()
    status = EXIT_OK
    out = sys.stdout
    with Progress(total_bytes(files), "dump", quiet=args.quiet) as progress:
        for path in files:
            if not options.json:
                out.write(f"Dumping {path}\n")
            kind = file_kind(os.path.basename(path))
            if kind is None:
                out.flush()
                print(f"Ignoring unknown file {path}", file=sys.stderr)
                progress.advance(total_bytes([path]))
                continue
            name, dumper_class = kind
            dumper = dumper_class(path, options, reports)
            if options.json:
                dumper.emit({"type": "file", "path": path, "kind": name})
            try:
                if not is_url(path):  # an object is never a FIFO
                    require_regular_file(path)  # a FIFO would block the open: never opened
                dumper.dump(progress)
            except BrokenPipeError:
                raise
            except KafkalogError as e:
                # Any typed error the dumpers did not report where they met it: reported as
                # they report damage (the file, position and offset), and the run goes on.
                out.flush()
                dumper.error(e)
                status = max(status, EXIT_PROBLEMS)
                continue
            except OSError as e:
                out.flush()
                report("dump", os_error_text(e, path))  # e's file: an index's .log, perhaps
                if options.json:
                    message = f"{e.strerror or e}"
                    if e.filename and e.filename != path:
                        message = f"{e.filename}: {message}"
                    position = getattr(e, "position", None)  # an object's failed read
                    dumper.emit(
                        {"type": "error", "position": position, "offset": None, "message": message}
                    )
                status = max(status, EXIT_IO)
                continue
            if dumper.errors:
                status = max(status, EXIT_PROBLEMS)
    out.flush()
    reports.write(sys.stderr)
    return status
