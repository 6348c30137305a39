"""``kafkalog rebuild-index``: write a segment's ``.index``, ``.timeindex`` and ``.txnindex``
anew from its ``.log``, as Kafka does for a missing or corrupt index.

A dry run by default: it shows each index's state and what the rebuild would find in the log.
``--apply`` moves the old index files to the partition's ``kafkalog-quarantine/`` and lets
kafkalog's loader rebuild them, under the data directory's ``.lock``; as in Kafka, the rebuild
walks the log and cuts it at the first invalid batch (the cut bytes are quarantined too).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_OK, EXIT_PROBLEMS
from .arguments import add_json_flag
from .failures import UsageError, guarded, report
from .operate import Target, add_apply_flag, open_logs
from .output import plural, relative, write_json
from .progress import Progress, add_quiet_flag
from .remote import refuse_urls

SUMMARY = "rebuild segments' .index/.timeindex/.txnindex from the log (dry run unless --apply)"
DESCRIPTION = (
    "Rebuild the offset, time and transaction indexes of every segment of a "
    "partition directory, or of the one segment a .log/.index/.timeindex/.txnindex file "
    "names, from the segment's log, as Kafka does when an index is missing or corrupt. "
    "Kafka's rebuild cuts the log at the first invalid batch and drops the segments after "
    "it; kafkalog does so only with --truncate (the cut data goes to the partition's "
    "kafkalog-quarantine/): without it, segments whose log is damaged are left alone, "
    "and --apply refuses when a damaged segment's own index must be rebuilt. Segments "
    "are not re-checked as after an unclean shutdown: that is `kafkalog recover`."
)
EXAMPLES = """\
examples:
  kafkalog rebuild-index /var/lib/kafka/data/orders-0          # all segments, dry run
  kafkalog rebuild-index orders-0/00000000000000000039.index   # one segment
  kafkalog rebuild-index --apply orders-0/00000000000000000039.log

exit status: 0 done (or would be done) without cutting the log, 1 the log has invalid bytes the
rebuild cuts, 2 usage error, 3 I/O error or the data directory is locked by a running broker
"""

_INDEX_KINDS = (".index", ".timeindex", ".txnindex")
# What happens to a segment.
REBUILD = "rebuild"  # its indexes are written anew; its log is kept whole
TRUNCATE = "truncate"  # its log is cut at the first invalid batch (with --truncate)
DROP = "drop"  # it follows a cut: the log ends before it, so it goes to the quarantine
SKIP = "skip"  # its log is damaged and its indexes can stay: left alone without --truncate


@dataclass(slots=True)
class _Segment:
    base: int
    log: Path
    states: dict[str, dict]  # index suffix -> its state before the rebuild
    chosen: bool = True  # named on the command line (else rebuilt because its index is broken)
    valid_bytes: int = 0
    size: int = 0
    cut_reason: str | None = None
    cut_records: int = 0  # records in the bytes a cut takes (by their headers)
    cut_records_exact: bool = True  # False: the framing breaks, more may go than counted
    action: str = REBUILD
    after: dict[str, int] | None = None  # index suffix -> entries after the rebuild

    @property
    def broken(self) -> bool:
        """Opening the log rebuilds this segment's indexes whatever was named."""
        return any(self.states[k]["state"] in ("missing", "corrupt") for k in _INDEX_KINDS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PARTITION_DIR|SEGMENT_FILE", help="what to rebuild")
    add_apply_flag(parser, does="change the files")
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="let the rebuild cut the log at the first invalid batch and drop the segments "
        "after it, as Kafka does (default: only indexes change)",
    )
    add_json_flag(parser)
    add_quiet_flag(parser)


@guarded("rebuild-index")
def run(args: argparse.Namespace) -> int:
    from ..errors import KafkalogError
    from ..log.datadir import LOG_FILE_SUFFIX, offset_from_file_name, require_regular_entries
    from ..log.error_location import locate_in_partition
    from ..log.verify import is_partition_dir

    refuse_urls([args.path], does="writes index files (its dry run plans that)")
    path = Path(args.path)
    segment_name = path.name.endswith((LOG_FILE_SUFFIX, *_INDEX_KINDS)) and path.name[:20].isdigit()
    if path.is_dir():
        if not is_partition_dir(path):
            raise UsageError(f"{path}: not a partition directory (it holds no .log file)")
        directory, only = path, None
    elif segment_name and path.parent.is_dir():  # a missing index may be named: it is rebuilt
        directory, only = path.parent, offset_from_file_name(path.name)
    elif not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    else:
        raise UsageError(f"{path}: not a segment's .log, .index, .timeindex or .txnindex")
    require_regular_entries(directory)  # a FIFO named like a segment: never opened
    logs = sorted(directory.glob("*" + LOG_FILE_SUFFIX))
    bases = [offset_from_file_name(p.name) for p in logs if p.name[:20].isdigit()]
    if only is not None and only not in bases:
        raise UsageError(f"{path}: its segment's .log ({only:020d}.log) is not in {directory}")
    try:
        segments = _plan(directory, bases, only, args)
    except KafkalogError as e:
        raise locate_in_partition(e, directory) from None  # the file, when the raiser had none
    refused = any(s.action == TRUNCATE for s in segments) and not args.truncate
    if args.apply and refused:
        report(
            "rebuild-index",
            "not applied: a segment whose log is damaged has a missing "
            "or corrupt index, and rebuilding it cuts the log (see above); run with --apply "
            "--truncate to cut it as Kafka would (the cut data is quarantined), or see "
            "kafkalog verify and kafkalog recover",
        )
    applied = args.apply and not refused
    if applied:
        _apply(directory, segments)
    _report(directory, segments, args, applied)
    return EXIT_PROBLEMS if any(s.cut_reason for s in segments) else EXIT_OK


def _plan(directory: Path, bases: list[int], only: int | None, args) -> list[_Segment]:
    """Every segment the rebuild touches, in offset order, with what happens to it: the named
    ones, those whose index opening rebuilds anyway, and (with a cut) the ones dropped."""
    sizes = {b: (directory / f"{b:020d}.log").stat().st_size for b in bases}
    found = []
    with Progress(sum(sizes.values()), "rebuild-index", quiet=args.quiet) as progress:
        for base in bases:
            segment = _Segment(base, directory / f"{base:020d}.log", {})
            for suffix in _INDEX_KINDS:
                segment.states[suffix] = _index_state(directory / f"{base:020d}{suffix}", base)
            segment.chosen = only is None or base == only
            segment.size = sizes[base]
            if segment.chosen or segment.broken:
                _inspect(directory, segment)
                progress.advance(sizes[base])
                found.append(segment)
    plan, cut = [], None
    for segment in found:
        if segment.cut_reason is not None and not args.truncate and not segment.broken:
            segment.action = SKIP  # its indexes stay as they are: nothing is cut
        elif segment.cut_reason is not None and cut is None:
            segment.action, cut = TRUNCATE, segment.base
        plan.append(segment)
        if cut is not None:
            break
    if cut is not None:  # the log ends in the cut segment: every later one goes
        for base in (b for b in bases if b > cut):
            dropped = _Segment(base, directory / f"{base:020d}.log", {}, action=DROP)
            dropped.size = sizes[base]
            dropped.cut_records, dropped.cut_records_exact = _records(directory, base, 0)
            plan.append(dropped)
    return plan


def _inspect(directory: Path, segment: _Segment) -> None:
    from ..log.clock import SystemClock
    from ..log.partition import LogConfig, segment_valid_prefix
    from ..log.segment import LogSegment

    opened = LogSegment.open(directory, segment.base, LogConfig(), SystemClock(), writable=False)
    try:
        prefix = segment_valid_prefix(opened)
    finally:
        opened.close()
    segment.cut_records, segment.cut_records_exact = prefix.records_cut, prefix.records_cut_exact
    segment.valid_bytes, segment.size, segment.cut_reason = (
        prefix.valid_bytes,
        prefix.size,
        prefix.reason,
    )


def _records(directory: Path, base: int, position: int) -> tuple[int, bool]:
    from ..log.clock import SystemClock
    from ..log.partition import LogConfig, records_from
    from ..log.segment import LogSegment

    opened = LogSegment.open(directory, base, LogConfig(), SystemClock(), writable=False)
    try:
        return records_from(opened, position)
    finally:
        opened.close()


def _index_state(path: Path, base: int) -> dict:
    """``{"state": "ok"|"missing"|"absent"|"corrupt", "entries", "message"}`` of one index."""
    from ..errors import CorruptIndexError
    from ..log.segment import OffsetIndex, TimeIndex, TransactionIndex

    if not path.exists():
        # Kafka writes a .txnindex only for a segment holding an aborted transaction.
        state = "absent" if path.suffix == ".txnindex" else "missing"
        return {"state": state, "entries": None, "message": None}
    kind = {".index": OffsetIndex, ".timeindex": TimeIndex}.get(path.suffix)
    index = (
        kind(path, base, skip_zero_tail=True) if kind is not None else TransactionIndex(path, base)
    )
    try:
        index.sanity_check()
        count = len(index.all_aborted_txns()) if kind is None else index.entries
        return {"state": "ok", "entries": count, "message": None}
    except CorruptIndexError as e:
        return {"state": "corrupt", "entries": None, "message": e.message}
    finally:
        index.close()


def _describe(state: dict) -> str:
    if state["state"] == "ok":
        return f"{state['entries']} entries"
    if state["state"] == "corrupt":
        return f"corrupt ({state['message']})"
    return state["state"]


def _apply(directory: Path, segments: list[_Segment]) -> None:
    from ..log.partition import Quarantine
    from .operate import resolve_target

    rebuilt = [s for s in segments if s.action in (REBUILD, TRUNCATE)]

    def move_old_indexes(partition: Path) -> None:
        quarantine = Quarantine(partition)
        for s in rebuilt:
            for suffix in _INDEX_KINDS:
                old = partition / f"{s.base:020d}{suffix}"
                if old.exists():
                    quarantine.move_file(old, "replaced by kafkalog rebuild-index")

    target: Target = resolve_target(str(directory))
    # Opening rebuilds the moved indexes (cutting a damaged log only where --truncate allowed
    # it, as planned); closing trims and flushes them. No re-check as after an unclean
    # shutdown: that is recover's job, and would cut what was not announced.
    with open_logs(target, writable=True, prepare=move_old_indexes, skip_recovery=True):
        pass
    for s in rebuilt:
        s.after = {}
        for suffix, size in ((".index", 8), (".timeindex", 12), (".txnindex", 34)):
            file = directory / f"{s.base:020d}{suffix}"
            s.after[suffix] = file.stat().st_size // size if file.exists() else 0


def _records_text(s: _Segment) -> str:
    return f"{'' if s.cut_records_exact else 'at least '}{plural(s.cut_records, 'record')}"


def _report(directory: Path, segments: list[_Segment], args, applied: bool) -> None:
    if args.json:
        for s in segments:
            write_json(
                {
                    "type": "segment",
                    "path": str(s.log),
                    "baseOffset": s.base,
                    "action": s.action,
                    "named": s.chosen and s.action != DROP,
                    "indexes": {k.lstrip("."): v for k, v in s.states.items()} or None,
                    "size": s.size,
                    "validBytes": s.valid_bytes if s.action != DROP else 0,
                    "cutReason": s.cut_reason,
                    "recordsCut": s.cut_records if s.action in (TRUNCATE, DROP, SKIP) else 0,
                    "recordsCutExact": s.cut_records_exact,
                    "applied": applied and s.action != SKIP,
                    "entriesAfter": None
                    if s.after is None
                    else {k.lstrip("."): v for k, v in s.after.items()},
                }
            )
        return
    lines = []
    for s in segments:
        name = relative(s.log, directory.parent)
        if s.action == DROP:
            lines.append(
                f"{name}: drop segment ({s.size} bytes, {_records_text(s)}): it follows the cut, "
                f"and the log ends there"
            )
            continue
        states = ", ".join(f"{k.lstrip('.')} {_describe(v)}" for k, v in s.states.items())
        lines.append(f"{name}: {states}" + ("" if s.chosen else " (rebuilt too: a broken index)"))
        cut = (
            f"at position {s.valid_bytes} ({s.size - s.valid_bytes} bytes, {_records_text(s)}): "
            f"{s.cut_reason}"
        )
        if s.action == TRUNCATE:
            lines.append(f"  truncate segment {cut}")
        elif s.action == SKIP:
            lines.append(
                f"  skipped: its log is damaged {cut}; rebuilding its indexes would cut it there "
                f"(--truncate)"
            )
        if s.after is not None:
            after = ", ".join(f"{k.lstrip('.')} {v} entries" for k, v in s.after.items())
            lines.append(f"  rebuilt: {after}")
    lines.append(_summary_line(segments, args, applied))
    sys.stdout.write("\n".join(lines) + "\n")


def _summary_line(segments: list[_Segment], args, applied: bool) -> str:
    rebuilt = [s for s in segments if s.action in (REBUILD, TRUNCATE)]
    gone = [s for s in segments if s.action in (TRUNCATE, DROP)]
    line = f"{'rebuilt' if applied else 'would rebuild'} the indexes of " + plural(
        len(rebuilt), "segment"
    )
    if gone:
        cut = gone[0]
        records = sum(s.cut_records for s in gone)
        exact = "" if all(s.cut_records_exact for s in gone) else "at least "
        dropped = sum(s.action == DROP for s in gone)
        line += f", cutting segment {cut.base} at position {cut.valid_bytes}"
        if dropped:
            line += f" and dropping {plural(dropped, 'later segment')}"
        line += f" ({exact}{plural(records, 'record')} lost)"
    skipped = sum(s.action == SKIP for s in segments)
    if skipped:
        line += f"; {plural(skipped, 'damaged segment')} left alone"
    if not applied and not args.apply:
        line += (
            "; run with --apply to change the files"
            if not gone or args.truncate
            else "; run with --apply --truncate to cut the log"
        )
    return line
