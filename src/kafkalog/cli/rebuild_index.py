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

from .operate import (
    EXIT_OK,
    EXIT_PROBLEMS,
    Target,
    UsageError,
    guarded,
    open_logs,
    relative,
    write_json,
)
from .progress import Progress, add_quiet_flag

EXAMPLES = """\
examples:
  kafkalog rebuild-index /var/lib/kafka/data/orders-0          # all segments, dry run
  kafkalog rebuild-index orders-0/00000000000000000039.index   # one segment
  kafkalog rebuild-index --apply orders-0/00000000000000000039.log

exit status: 0 done (or would be done) without cutting the log, 1 the log has invalid bytes the
rebuild cuts, 2 usage error, 3 I/O error or the data directory is locked by a running broker
"""

_INDEX_KINDS = (".index", ".timeindex", ".txnindex")


@dataclass(slots=True)
class _Segment:
    base: int
    log: Path
    states: dict[str, dict]  # index suffix -> its state before the rebuild
    valid_bytes: int = 0
    size: int = 0
    cut_reason: str | None = None
    after: dict[str, int] | None = None  # index suffix -> entries after the rebuild


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "rebuild-index",
        help="rebuild segments' .index/.timeindex/.txnindex from the log (dry run unless --apply)",
        description="Rebuild the offset, time and transaction indexes of every segment of a "
        "partition directory, or of the one segment a .log/.index/.timeindex/.txnindex file "
        "names, from the segment's log, as Kafka does when an index is missing or corrupt.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PARTITION_DIR|SEGMENT_FILE", help="what to rebuild")
    parser.add_argument(
        "--apply", action="store_true", help="change the files (default: a dry run)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_quiet_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return guarded("rebuild-index", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from ..log.naming import LOG_FILE_SUFFIX, offset_from_file_name
    from ..log.verify import is_partition_dir

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
    logs = sorted(directory.glob("*" + LOG_FILE_SUFFIX))
    bases = [offset_from_file_name(p.name) for p in logs if p.name[:20].isdigit()]
    if only is not None and only not in bases:
        raise UsageError(f"{path}: its segment's .log ({only:020d}.log) is not in {directory}")
    chosen = [b for b in bases if only is None or b == only]
    sizes = {b: (directory / f"{b:020d}.log").stat().st_size for b in chosen}
    segments = []
    with Progress(sum(sizes.values()), "rebuild-index", quiet=args.quiet) as progress:
        for base in chosen:
            segments.append(_inspect(directory, base))
            progress.advance(sizes[base])
    if args.apply:
        _apply(directory, segments)
    _report(directory, segments, args)
    return EXIT_PROBLEMS if any(s.cut_reason for s in segments) else EXIT_OK


def _inspect(directory: Path, base: int) -> _Segment:
    from ..log.clock import SystemClock
    from ..log.config import LogConfig
    from ..log.recovery_plan import segment_valid_prefix
    from ..log.segment import LogSegment

    segment = _Segment(base, directory / f"{base:020d}.log", {})
    for suffix in _INDEX_KINDS:
        segment.states[suffix] = _index_state(directory / f"{base:020d}{suffix}", base)
    opened = LogSegment.open(directory, base, LogConfig(), SystemClock(), writable=False)
    try:
        prefix = segment_valid_prefix(opened)
    finally:
        opened.close()
    segment.valid_bytes, segment.size, segment.cut_reason = (
        prefix.valid_bytes,
        prefix.size,
        prefix.reason,
    )
    return segment


def _index_state(path: Path, base: int) -> dict:
    """``{"state": "ok"|"missing"|"absent"|"corrupt", "entries", "message"}`` of one index."""
    from ..errors import CorruptIndexError
    from ..log.offset_index import OffsetIndex
    from ..log.time_index import TimeIndex
    from ..log.txn_index import TransactionIndex

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
    from ..log.quarantine import Quarantine
    from .operate import resolve_target

    def move_old_indexes(partition: Path) -> None:
        quarantine = Quarantine(partition)
        for s in segments:
            for suffix in _INDEX_KINDS:
                old = partition / f"{s.base:020d}{suffix}"
                if old.exists():
                    quarantine.move_file(old, "replaced by kafkalog rebuild-index")

    target: Target = resolve_target(str(directory))
    with open_logs(target, writable=True, prepare=move_old_indexes):
        pass  # opening rebuilds the missing indexes; closing trims and flushes them
    for s in segments:
        s.after = {}
        for suffix, size in ((".index", 8), (".timeindex", 12), (".txnindex", 34)):
            file = directory / f"{s.base:020d}{suffix}"
            s.after[suffix] = file.stat().st_size // size if file.exists() else 0


def _report(directory: Path, segments: list[_Segment], args: argparse.Namespace) -> None:
    if args.json:
        for s in segments:
            write_json(
                {
                    "type": "segment",
                    "path": str(s.log),
                    "baseOffset": s.base,
                    "indexes": {k.lstrip("."): v for k, v in s.states.items()},
                    "size": s.size,
                    "validBytes": s.valid_bytes,
                    "cutReason": s.cut_reason,
                    "applied": args.apply,
                    "entriesAfter": None
                    if s.after is None
                    else {k.lstrip("."): v for k, v in s.after.items()},
                }
            )
        return
    lines = []
    for s in segments:
        states = ", ".join(f"{k.lstrip('.')} {_describe(v)}" for k, v in s.states.items())
        lines.append(f"{relative(s.log, directory.parent)}: {states}")
        if s.cut_reason:
            lines.append(
                f"  the log is cut at position {s.valid_bytes} ({s.size - s.valid_bytes} bytes): "
                f"{s.cut_reason}"
            )
        if s.after is not None:
            after = ", ".join(f"{k.lstrip('.')} {v} entries" for k, v in s.after.items())
            lines.append(f"  rebuilt: {after}")
    verb = "rebuilt" if args.apply else "would rebuild"
    lines.append(
        f"{verb} the indexes of {len(segments)} segment{'' if len(segments) == 1 else 's'}"
        + ("" if args.apply else "; run with --apply to change the files")
    )
    sys.stdout.write("\n".join(lines) + "\n")
