"""``kafkalog verify``: check a data directory, a partition directory or one file, read-only.

Text output is for people: a table per partition, then the findings, errors first. ``--json``
writes one object per line, documented in docs/cli.md with the same contract as ``dump --json``:
readers ignore unknown types and fields; fields are only ever added. The exit status is the
verdict: 0 no error (warnings allowed), 1 errors found, 2 usage error, 3 I/O error.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from ..errors import EXIT_IO, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageError
from ..log.verify import ERROR, INFO, WARNING, VerifyReport
from .arguments import add_json_flag
from .failures import os_error_text, report
from .output import plural, write_json
from .progress import Progress, total_bytes
from .remote import check_urls, is_url
from .selection import add_remote_storage

SUMMARY = "check a data directory, partition directory or file against Kafka's rules"
DESCRIPTION = (
    "Check Kafka log files without changing them: batch CRCs and framing, "
    "records, offsets within and across segments, indexes against the log, checkpoints, "
    "producer snapshots and leftovers. Accepts a broker data directory, a partition "
    "directory, or one .log/.index/.timeindex/.txnindex/.snapshot/checkpoint file."
)
EXAMPLES = """\
examples:
  kafkalog verify /var/lib/kafka/data
  kafkalog verify --no-deep /var/lib/kafka/data/orders-0
  kafkalog verify orders-0/00000000000000000000.index
  kafkalog verify --json /var/lib/kafka/data | jq 'select(.severity=="error")'
  kafkalog verify --remote-storage /var/lib/kafka/tiered /var/lib/kafka/data

exit status: 0 no errors (warnings allowed), 1 errors found, 2 usage error, 3 I/O error
"""

_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", metavar="DATA_DIR|PARTITION_DIR|FILE", help="what to verify (a path or a URL)"
    )
    add_json_flag(parser)
    parser.add_argument(
        "--no-deep",
        dest="deep",
        action="store_false",
        help="do not decode records (batch CRCs, framing and offsets are still checked)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print only errors (with --json: errors and summary), and no progress bar",
    )
    add_remote_storage(
        parser,
        effect="the remote segments the data directory's __remote_log_metadata lists are "
        "verified as part of each partition's log",
        without="they are named, not verified",
    )


def run(args: argparse.Namespace) -> int:
    from ..log.verify import (
        verify,  # imported here: other commands need not load the log layer
    )

    remote = args.remote_storage
    try:
        check_urls([args.path])
        if remote is not None and is_url(remote):
            raise UsageError(f"--remote-storage {remote}: a local directory (LocalTieredStorage's)")
    except UsageError as e:
        report("verify", e)
        return EXIT_USAGE
    if remote is not None and not os.path.isdir(remote):
        report("verify", f"--remote-storage {remote}: no such directory")
        return EXIT_IO
    try:
        total = total_bytes([args.path]) if is_url(args.path) or os.path.exists(args.path) else 0
        total += total_bytes([remote]) if remote is not None else 0
        with Progress(total, "verify", quiet=args.quiet) as progress:
            verdict = verify(args.path, deep=args.deep, on_bytes=progress.advance,
                             remote_storage=remote)  # fmt: skip
    except ValueError as e:  # a file kind verify does not know
        report("verify", e)
        return EXIT_USAGE
    except OSError as e:  # a missing path is named as given
        named = None if isinstance(e, FileNotFoundError) else e.filename
        report("verify", os_error_text(e) if named else f"{args.path}: {e.strerror or e}")
        return EXIT_IO
    if args.json:
        _print_json(verdict, quiet=args.quiet)
    else:
        _print_text(verdict, quiet=args.quiet)
    sys.stdout.flush()
    return EXIT_OK if verdict.ok else EXIT_PROBLEMS


def _sorted_findings(report: VerifyReport, quiet: bool):
    found = [f for f in report.findings if not quiet or f.severity == ERROR]
    return sorted(found, key=lambda f: _ORDER[f.severity])  # stable: discovery order within


def _print_json(report: VerifyReport, *, quiet: bool) -> None:
    if not quiet:
        for summary in report.partitions:
            write_json({"type": "partition", **summary.to_dict()})
    for finding in _sorted_findings(report, quiet):
        write_json({"type": "finding", **finding.to_dict()})
    write_json({"type": "summary", **report.summary_dict()})


def _print_text(report: VerifyReport, *, quiet: bool) -> None:
    """Table, blank line, findings, blank line, one summary line (``quiet``: errors only)."""
    findings = [f"{_relative(f.path, report.path)}: {_describe(f)}" for f in
                _sorted_findings(report, quiet)]  # fmt: skip
    if quiet:
        blocks = [findings]
    else:
        totals, counts = report.summary_dict(), report.counts
        summary = (
            f"verified {report.path}: {totals['partitions']} partitions, {totals['segments']} "
            f"segments, {totals['batches']} batches, {totals['records']} records in "
            f"{report.files_checked} files ({'deep' if report.deep else 'no record decoding'}): "
            f"{plural(counts[ERROR], 'error')}, {plural(counts[WARNING], 'warning')}, "
            f"{counts[INFO]} info"
        )
        blocks = [_table(report), findings, [summary]]
    text = "\n\n".join("\n".join(block) for block in blocks if block)
    sys.stdout.write(text + "\n" if text else "")


def _table(report: VerifyReport) -> list[str]:
    if not report.partitions:
        return []
    names = [_relative(p.path, report.path) for p in report.partitions]
    width = max(9, *(len(n) for n in names))
    columns = ("SEGMENTS", "BATCHES", "RECORDS", "ERRORS", "WARNINGS")
    lines = [f"{'PARTITION':<{width}}  " + "  ".join(f"{c:>8}" for c in columns)]
    for name, p in zip(names, report.partitions):
        values = (p.segments, p.batches, p.records, p.errors, p.warnings)
        lines.append(f"{name:<{width}}  " + "  ".join(f"{v:>8}" for v in values))
    return lines


def _describe(finding) -> str:
    where = []
    if finding.position is not None:
        where.append(f"position {finding.position}")
    if finding.offset is not None:
        where.append(f"offset {finding.offset}")
    at = f" ({', '.join(where)})" if where else ""
    return f"{finding.severity.upper()} {finding.code}{at}: {finding.message}"


@functools.cache
def _is_dir(path: str) -> bool:
    if is_url(path):
        from ..log.storage import as_path

        return as_path(path).is_dir()
    return os.path.isdir(path)


def _relative(path: str, root: str) -> str:
    """Paths under a verified directory are shown relative to it (a file stays as given)."""
    if not _is_dir(root):
        return path
    if is_url(root):  # a prefix: its objects' URLs start with it
        if path == root:
            return path.rsplit("/", 1)[-1]
        return path[len(root) + 1 :] if path.startswith(root + "/") else path
    relative = os.path.relpath(path, root)
    if not relative.startswith(".."):
        return os.path.basename(path) if relative == "." else relative
    return path
