"""``kafkalog recover``: Kafka's log recovery on a data directory or one partition directory.

By default a dry run: it prints what a broker starting on these files would truncate, rebuild
and delete (:mod:`kafkalog.log.partition.recovery_plan`), and changes nothing. ``--apply`` does it,
under the data directory's ``.lock``, with kafkalog's loader: what Kafka deletes is moved to each
partition's ``kafkalog-quarantine/`` folder instead, with a NOTE.txt saying why. Its report is the
same plan, but what re-checking segments found (cuts, dropped segments, the log end) comes from
the recovery's own walk of them: the segments are read once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import EXIT_OK, EXIT_PROBLEMS
from .failures import guarded, report
from .operate import (
    Target,
    add_apply_flag,
    checkpoint_problems,
    open_logs,
    operator_arguments,
    partition_offsets,
    resolve_target,
)
from .output import plural, relative, write_json
from .progress import Progress, total_bytes
from .remote import refuse_urls

SUMMARY = "run Kafka's log recovery (dry run unless --apply)"
DESCRIPTION = (
    "Work out what Kafka's log recovery would do to a data directory or a "
    "partition directory: delete leftovers of retention and the log cleaner, finish or "
    "undo interrupted cleans, rebuild indexes that are missing or fail Kafka's sanity "
    "check (size, last entry), and (after an unclean shutdown, or with --full) re-check "
    "every segment from the recovery point on, cutting the log at the first invalid batch. "
    "As in Kafka, an index whose entries are wrong but well-formed passes the sanity check "
    "and is kept: kafkalog verify finds it, kafkalog rebuild-index rewrites it. A malformed "
    "leader-epoch-checkpoint (Kafka cannot open the partition) is rebuilt from the "
    "batches, and malformed recovery-point or log-start-offset checkpoints are reset as a "
    "broker's startup does. Nothing changes without --apply; with it, what Kafka deletes "
    "is moved to the partition's kafkalog-quarantine/ folder."
)
EXAMPLES = """\
examples:
  kafkalog recover /var/lib/kafka/data              # what a broker's startup would change
  kafkalog recover --full /var/lib/kafka/data/orders-0   # re-check every segment
  kafkalog recover --apply /var/lib/kafka/data      # do it (stop the broker first)
  kafkalog recover --json /var/lib/kafka/data | jq 'select(.action=="truncate")'

exit status: 0 nothing lost (index rebuilds and leftovers only), 1 recovery cuts records (dry run:
would cut) or a log cannot be opened without --full, 2 usage error, 3 I/O error or the directory
is locked by a running broker
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with operator_arguments(parser):
        add_apply_flag(parser, does="change the files")
        parser.add_argument(
            "--full",
            action="store_true",
            help="re-check every segment, as after an unclean shutdown with no recovery point "
            "(default: what Kafka does, which trusts a clean shutdown and the recovery points)",
        )


@guarded("recover")
def run(args: argparse.Namespace) -> int:
    # A data directory's KRaft metadata log is the controller's to recover, as in a broker's
    # LogManager; name its partition directory to recover it.
    refuse_urls([args.path], does="repairs files in place (its dry run plans those repairs)")
    target = resolve_target(args.path, topics=args.topic, internal=False)
    # --apply plans without walking the segments it re-checks: its recovery walks them once,
    # and what it finds there completes the report (finish_recovery_plan).
    plans = _plans(target, args, walk=not args.apply)
    dir_actions = _checkpoint_actions(target)
    unreadable = [Path(p.directory).name for p in plans if p.unreadable]
    if args.apply and unreadable and not args.full:
        args.apply = False  # report the plan as the dry run it stays
        plans = _plans(target, args, walk=True)
        report(
            "recover",
            f"not applied: {', '.join(unreadable)} cannot be opened (the end "
            f"of the last segment is unreadable; a broker's startup fails there too): run with "
            f"--full to re-check every segment and cut the log at the damage",
        )
    if args.apply:
        notes = _apply(target, args, plans)
    problems = any(p.bytes_cut or p.unreadable for p in plans)
    if args.json:
        for action in dir_actions:
            write_json({"type": "action", "partition": None, "applied": args.apply,
                        **action.to_dict()})  # fmt: skip
        for plan in plans:
            write_json(
                {
                    "type": "partition",
                    "partition": Path(plan.directory).name,
                    "path": plan.directory,
                    "logEndOffset": plan.log_end_offset,
                    "recoveredFrom": plan.recovered_from,
                    "changes": plan.changes,
                    "bytesCut": plan.bytes_cut,
                }
            )
            for action in plan.actions:
                write_json(
                    {
                        "type": "action",
                        "partition": Path(plan.directory).name,
                        "applied": args.apply,
                        **action.to_dict(),
                    }
                )
        if args.apply:
            for name, note in notes:
                write_json({"type": "note", "partition": name, "message": note})
        write_json(_summary(target, plans, dir_actions, args))
    else:
        _print_text(target, plans, dir_actions, args, notes if args.apply else [])
    sys.stdout.flush()
    return EXIT_PROBLEMS if problems else EXIT_OK


def _plans(target: Target, args: argparse.Namespace, *, walk: bool) -> list:
    """Each partition's recovery plan (with ``walk``: the segments to re-check walked, as a dry
    run reports them; a progress bar over their bytes)."""
    from ..errors import KafkalogError
    from ..log.datadir import require_regular_entries
    from ..log.error_location import locate_in_partition
    from ..log.partition import plan_recovery

    plans = []
    total = total_bytes([str(p) for p in target.partitions]) if walk else 0
    with Progress(total, "recover", quiet=args.quiet or not walk) as progress:
        for directory in target.partitions:
            require_regular_entries(directory)  # a FIFO named like a segment: never opened
            recovery_point, log_start, clean = partition_offsets(target, directory)
            try:
                plan = plan_recovery(
                    directory,
                    recovery_point=0 if args.full else recovery_point,
                    had_clean_shutdown=clean and not args.full,
                    log_start_offset=log_start,
                    walk=walk,
                )
            except KafkalogError as e:
                raise locate_in_partition(e, directory) from None  # name the file
            plans.append(plan)
            if walk:
                progress.advance(total_bytes([str(directory)]))
    return plans


def _checkpoint_actions(target: Target) -> list:
    """The data directory's malformed offset checkpoints, rewritten by --apply."""
    from ..log.partition import REWRITE_CHECKPOINT, RecoveryAction

    return [
        RecoveryAction(action=REWRITE_CHECKPOINT, path=str(path), reason=why)
        for path, why in checkpoint_problems(target)
    ]


def _apply(target: Target, args: argparse.Namespace, plans: list) -> list[tuple[str, str]]:
    """Recover; what the loader did, and where it put what it took out, per partition. The
    plans (made without walking what recovery re-checks) are completed with what the
    recovery's own walks found."""
    from ..log.partition import (
        describe_epochs,
        finish_recovery_plan,
        rebuild_leader_epoch_checkpoint,
    )

    before = _quarantines(target)
    notes: list[tuple[str, str]] = []
    ends: dict[str, int] = {}
    found: dict[str, object] = {}  # what each partition's recovery recorded, by real path

    def repair(directory: Path) -> None:
        progress.advance(total_bytes([str(directory)]))
        # Opening fails on a malformed leader-epoch-checkpoint: rebuild it first.
        entries, moved = rebuild_leader_epoch_checkpoint(directory)
        if moved is not None:
            notes.append((directory.name, f"leader-epoch-checkpoint rebuilt from the batches: "
                                          f"{describe_epochs(entries)}"))  # fmt: skip

    total = total_bytes([str(p) for p in target.partitions])
    with Progress(total, "recover", quiet=args.quiet) as progress:
        with open_logs(target, writable=True, full_recovery=args.full, prepare=repair) as logs:
            for entry in logs:
                notes.extend((entry.directory.name, note) for note in entry.log.load_notes)
                key = os.path.realpath(entry.directory)
                ends[key] = entry.log.log_end_offset
                found[key] = entry.log.recovery_record
    for plan in plans:
        key = os.path.realpath(plan.directory)
        finish_recovery_plan(plan, found.get(key), ends.get(key))
    for folder in sorted(_quarantines(target) - before):
        notes.append((folder.parent.parent.name, f"what was taken out is kept in {folder}"))
    return notes


def _quarantines(target: Target) -> set[Path]:
    from ..log.partition import QUARANTINE_DIR_NAME

    return {
        folder
        for partition in target.partitions
        if (partition / QUARANTINE_DIR_NAME).is_dir()
        for folder in (partition / QUARANTINE_DIR_NAME).iterdir()
    }


def _summary(target: Target, plans, dir_actions, args) -> dict:
    return {
        "type": "summary",
        "path": str(target.path),
        "dryRun": not args.apply,
        "full": args.full,
        "partitions": len(plans),
        "partitionsChanged": sum(p.changes for p in plans),
        "actions": len(dir_actions) + sum(len(p.actions) for p in plans),
        "bytesCut": sum(p.bytes_cut for p in plans),
    }


def _action_lines(plan, target: Target) -> list[str]:
    """One line per action, except that segments re-checked after an unclean shutdown are
    counted on one line, and a dropped segment's index files ride on its .log's line."""
    from ..log.partition import DROP_SEGMENT, REBUILD_INDEXES

    def rechecked(a) -> bool:
        return (
            a.action == REBUILD_INDEXES
            and plan.recovered_from is not None
            and a.offset is not None
            and a.offset >= plan.recovered_from
        )

    lines = []
    count = sum(rechecked(a) for a in plan.actions)
    if count:
        lines.append(
            f"  re-check {plural(count, 'segment')} from offset {plan.recovered_from}: batches "
            f"CRC-checked, indexes rebuilt (after an unclean shutdown, or --full)"
        )
    for a in plan.actions:
        if rechecked(a) or (a.action == DROP_SEGMENT and not a.path.endswith(".log")):
            continue
        where = []
        if a.position is not None:
            where.append(f"at position {a.position}")
        if a.offset is not None:
            where.append(f"offset {a.offset}")
        if a.bytes is not None:
            where.append(f"{a.bytes} bytes")
        if a.records is not None:
            at_least = "" if a.records_exact else "at least "
            where.append(f"{at_least}{plural(a.records, 'record')}")
        if a.action == DROP_SEGMENT:
            where.append("with its indexes")
        at = f" ({', '.join(where)})" if where else ""
        lines.append(f"  {a.action} {relative(a.path, target.path)}{at}: {a.reason}")
    return lines


def _print_text(target: Target, plans, dir_actions, args, notes) -> None:
    out = [f"{relative(a.path, target.path)}: {a.action}: {a.reason}" for a in dir_actions]
    for plan in plans:
        if not plan.actions:
            continue
        name = Path(plan.directory).name
        end = (
            "no segment" if plan.log_end_offset is None else f"log end offset {plan.log_end_offset}"
        )
        out.append(f"{name}: {end} after recovery")
        out.extend(_action_lines(plan, target))
    if notes:
        out.append("")
        out.append("done:")
        out.extend(f"  {name}: {note}" for name, note in notes)
    s = _summary(target, plans, dir_actions, args)
    verb = "would change" if not args.apply else "changed"
    out.append(
        f"{'dry run: ' if not args.apply else ''}{s['partitionsChanged']} of {s['partitions']} "
        f"partitions {verb}, {s['actions']} actions, {s['bytesCut']} bytes cut"
        + ("; run with --apply to change the files" if not args.apply and s["actions"] else "")
    )
    sys.stdout.write("\n".join(out) + "\n")
