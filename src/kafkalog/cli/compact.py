"""``kafkalog compact``: run Kafka's log cleaner on compacted topics now.

A dry run by default: the cleaner's decisions on the log as it is (which records go and why,
the bytes before and after), changing nothing. ``--apply`` cleans, crash-safe as Kafka does
(``.cleaned`` -> ``.swap`` -> final names), under the data directory's ``.lock``, and moves the
cleaner-offset-checkpoint. Like Kafka's cleaner, a log is cleaned only when its dirty ratio
exceeds min.cleanable.dirty.ratio or a segment waited past max.compaction.lag.ms; ``--force``
cleans whatever is cleanable.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import KafkalogError
from .failures import UsageError, guarded
from .operate import (
    PartitionProblems,
    add_apply_flag,
    add_now_option,
    cleanup_policy,
    logs_in_progress,
    now_ms,
    operator_arguments,
    resolve_target,
)
from .output import write_json

SUMMARY = "run the log cleaner on compacted topics now (dry run unless --apply)"
DESCRIPTION = (
    "Compact the logs of topics with cleanup.policy=compact (or compact,delete) "
    "with Kafka's log cleaner rules: the latest record of each key is kept, older ones, "
    "expired tombstones, aborted transactions' records and finished transactions' markers "
    "go. Retention of compact,delete topics is `kafkalog retention`."
)
EXAMPLES = """\
examples:
  kafkalog compact /var/lib/kafka/data                   # what the cleaner would remove now
  kafkalog compact --force --topic users /var/lib/kafka/data
  kafkalog compact --verbose /var/lib/kafka/data/users-0   # every removed record, and why
  kafkalog compact --apply /var/lib/kafka/data           # clean (stop the broker first)

exit status: 0 done, 1 a partition could not be read or cleaned, 2 usage error, 3 I/O error or
the data directory is locked by a running broker
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with operator_arguments(parser):
        add_apply_flag(parser, does="clean the logs")
        parser.add_argument(
            "--force",
            action="store_true",
            help="clean whatever is cleanable, whatever the dirty ratio "
            "(min.cleanable.dirty.ratio)",
        )
        add_now_option(parser, used_for="the time tombstone and lag rules use")
        parser.add_argument(
            "--verbose", action="store_true", help="list every removed record (up to 1000 a log)"
        )


@guarded("compact")
def run(args: argparse.Namespace) -> int:
    from ..log.cleaner import clean
    from ..log.datadir import CONFIG_FROM_DEFAULTS

    target = resolve_target(args.path, topics=args.topic, internal=False)
    now = now_ms(args)
    problems = PartitionProblems("compact")
    results, skipped = [], []
    with logs_in_progress("compact", args, target, writable=args.apply) as (progress, logs):
        for entry in problems.opened(logs):
            log = entry.log
            if not log.config.compact:
                policy = cleanup_policy(log.config)
                if entry.config_source == CONFIG_FROM_DEFAULTS:
                    policy += " (Kafka's default, assumed: nothing records this topic's configs)"
                skipped.append((entry.directory, policy))
            elif problems.indexes_trusted(entry):
                try:
                    result = clean(log, now_ms=now, force=args.force, dry_run=not args.apply)
                except KafkalogError as e:  # this partition's data: the others go on
                    problems.add_error(entry.directory, e)
                except OSError as e:
                    if args.apply:
                        raise
                    problems.add(
                        entry.directory,
                        f"reading failed ({e.strerror or e}): an index entry that points "
                        f"outside its log? kafkalog verify locates it, rebuild-index repairs it",
                    )
                else:
                    results.append((entry.directory, result))
            progress.advance(log.size_in_bytes())
    if not target.is_data_dir and skipped:
        directory, policy = skipped[0]
        raise UsageError(f"{directory}: not a compacted topic (cleanup.policy={policy})")
    _report(target, results, skipped, args)
    return problems.status


def _report(target, results, skipped, args: argparse.Namespace) -> None:
    if args.json:
        for directory, r in results:
            write_json(
                {
                    "type": "partition",
                    "partition": directory.name,
                    "path": str(directory),
                    "applied": args.apply,
                    "cleaned": r.cleaned,
                    "reason": r.reason or None,
                    "firstDirtyOffset": r.first_dirty_offset,
                    "firstUncleanableOffset": r.first_uncleanable_offset,
                    "newCleanerOffset": r.end_offset,
                    "recordsRead": r.stats.messages_read,
                    "recordsKept": r.records_kept,
                    "recordsRemoved": r.records_removed,
                    "removedByReason": dict(r.stats.removed_by_reason),
                    "bytesRead": r.bytes_read,
                    "bytesWritten": r.bytes_written,
                    "segmentsBefore": r.segments_before,
                    "segmentsAfter": r.segments_after,
                    "messages": r.messages if args.verbose else [],
                }
            )
        write_json(_summary(target, results, skipped, args))
        return
    lines = []
    for directory, r in results:
        dirty = r.first_uncleanable_offset > r.first_dirty_offset
        head = f"{directory.name}: " + (
            f"dirty offsets {r.first_dirty_offset}-{r.first_uncleanable_offset - 1}"
            if dirty
            else f"no dirty offsets (cleaner offset {r.first_dirty_offset})"
        )
        if not r.cleaned:
            lines.append(f"{head}: not cleaned: {r.reason}")
            continue
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(r.stats.removed_by_reason.items()))
        lines.append(
            f"{head}: {r.records_removed} of "
            f"{r.stats.messages_read + r.stats.batch_records_removed} records removed"
            f"{f' ({reasons})' if reasons else ''}; {r.bytes_read} -> {r.bytes_written} bytes "
            f"in {len(r.segments_before)} -> {len(r.segments_after)} segments; cleaner offset "
            f"-> {r.end_offset}"
        )
        if args.verbose:
            lines.extend(f"  {m}" for m in r.messages)
    for directory, policy in skipped:
        lines.append(f"{directory.name}: skipped: cleanup.policy={policy}")
    s = _summary(target, results, skipped, args)
    lines.append(
        f"{'cleaned' if args.apply else 'dry run: would clean'} {s['partitionsCleaned']} of "
        f"{s['partitions']} compacted partitions, removing {s['recordsRemoved']} records "
        f"({s['bytesRead'] - s['bytesWritten']} bytes)"
        + ("; run with --apply to clean" if not args.apply and s["partitionsCleaned"] else "")
    )
    sys.stdout.write("\n".join(lines) + "\n")


def _summary(target, results, skipped, args) -> dict:
    cleaned = [r for _, r in results if r.cleaned]
    return {
        "type": "summary",
        "path": str(target.path),
        "dryRun": not args.apply,
        "partitions": len(results),
        "partitionsSkipped": len(skipped),
        "partitionsCleaned": len(cleaned),
        "recordsRemoved": sum(r.records_removed for r in cleaned),
        "bytesRead": sum(r.bytes_read for r in cleaned),
        "bytesWritten": sum(r.bytes_written for r in cleaned),
    }
