"""``kafkalog retention``: apply topics' retention now (retention.ms, retention.bytes, the log
start offset), as a broker's periodic retention check would.

A dry run by default: the segments that would go, and why
(:mod:`kafkalog.log.partition.retention_plan`). ``--apply`` deletes them as Kafka does (renamed
``.deleted``, then removed), under the data directory's ``.lock``, and moves the log start offset
up.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import KafkalogError
from .failures import guarded
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
from .output import format_time, plural, relative, write_json

SUMMARY = "delete segments past their topic's retention now (dry run unless --apply)"
DESCRIPTION = (
    "Apply each topic's retention now: segments below the log start offset, "
    "and for cleanup.policy=delete (or compact,delete) the oldest segments whose newest "
    "record is older than retention.ms and those beyond retention.bytes. The topic's "
    "configs come from the KRaft metadata log, kafkalog-topics.json, the configs Kafka "
    "creates its internal topics with (__consumer_offsets and __transaction_state are "
    "compacted), or else Kafka's defaults, flagged as assumed: --apply deletes nothing by "
    "assumed configs without --assume-defaults."
)
EXAMPLES = """\
examples:
  kafkalog retention /var/lib/kafka/data                     # what would be deleted now
  kafkalog retention --topic clicks /var/lib/kafka/data
  kafkalog retention --now-ms 1767225600000 /var/lib/kafka/data   # as of another time
  kafkalog retention --apply /var/lib/kafka/data/clicks-0   # delete (stop the broker first)
  kafkalog retention --apply --assume-defaults /var/lib/kafka/data   # configs not recorded

exit status: 0 done, 1 a partition could not be read (or --apply refused to delete by assumed
configs), 2 usage error, 3 I/O error or the data directory is locked by a running broker
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with operator_arguments(parser):
        add_apply_flag(parser, does="delete the segments")
        add_now_option(parser, used_for="evaluate retention.ms as of this time")
        parser.add_argument(
            "--assume-defaults",
            action="store_true",
            help="let --apply delete segments of topics whose configs nothing records (Kafka's "
            "defaults: cleanup.policy=delete, retention.ms=7 days)",
        )


@guarded("retention")
def run(args: argparse.Namespace) -> int:
    from ..log.clock import MockClock, SystemClock
    from ..log.datadir import CONFIG_FROM_DEFAULTS
    from ..log.partition import plan_retention

    target = resolve_target(args.path, topics=args.topic, internal=False)
    now = now_ms(args)
    clock = MockClock(now_ms=now) if args.now_ms is not None else SystemClock()
    problems = PartitionProblems("retention")
    results = []
    with logs_in_progress("retention", args, target, writable=args.apply, clock=clock) as (
        progress,
        logs,
    ):
        for entry in problems.opened(logs):
            log = entry.log
            if not problems.indexes_trusted(entry):
                continue
            assumed = entry.config_source == CONFIG_FROM_DEFAULTS
            applied = args.apply
            try:
                plan = plan_retention(log, now_ms=now)
                if args.apply and plan.deletions and assumed and not args.assume_defaults:
                    applied = False
                    problems.add(
                        entry.directory,
                        f"not applied: nothing records topic {log.topic_partition.topic}'s "
                        f"configs here (no KRaft metadata, no kafkalog-topics.json entry), so "
                        f"Kafka's defaults are assumed ({_policy(log.config)}); run with "
                        f"--assume-defaults to delete by them",
                    )
                elif args.apply and plan.deletions:
                    log.delete_old_segments()
            except KafkalogError as e:  # this partition's data: the others go on
                problems.add_error(entry.directory, e)
                continue
            results.append(_Result(entry.directory, log.config, plan, assumed, applied))
            progress.advance(log.size_in_bytes())
    _report(target, results, args)
    return problems.status


@dataclass(slots=True)
class _Result:
    directory: Path
    config: object  # LogConfig
    plan: object  # RetentionPlan
    assumed: bool  # nothing records the topic's configs: Kafka's defaults assumed
    applied: bool


def _policy(config) -> str:
    return (
        f"cleanup.policy={cleanup_policy(config)} retention.ms={config['retention.ms']} "
        f"retention.bytes={config['retention.bytes']}"
    )


def _report(target, results, args: argparse.Namespace) -> None:
    if args.json:
        for r in results:
            directory, config, plan = r.directory, r.config, r.plan
            write_json(
                {
                    "type": "partition",
                    "partition": directory.name,
                    "path": str(directory),
                    "cleanupPolicy": cleanup_policy(config),
                    "retentionMs": config["retention.ms"],
                    "retentionBytes": config["retention.bytes"],
                    "configsAssumed": r.assumed,
                    "applied": r.applied and bool(plan.deletions),
                    "logStartOffset": plan.log_start_offset,
                    "newLogStartOffset": plan.new_log_start_offset,
                    "bytesDeleted": plan.bytes_deleted,
                    "segments": [d.to_dict() for d in plan.deletions],
                }
            )
        write_json(_summary(target, results, args))
        return
    lines = []
    for r in results:
        directory, config, plan = r.directory, r.config, r.plan
        if not plan.deletions:
            continue
        assumed = " (Kafka's defaults assumed: nothing records this topic's configs)"
        refused = "; not applied" if args.apply and not r.applied else ""
        lines.append(
            f"{directory.name}: {_policy(config)}{assumed if r.assumed else ''}: "
            f"{plural(len(plan.deletions), 'segment')}, "
            f"{plan.bytes_deleted} bytes; log start offset {plan.log_start_offset} -> "
            f"{plan.new_log_start_offset}{refused}"
        )
        for d in plan.deletions:
            active = ", the active segment (a new one is rolled first)" if d.active else ""
            lines.append(
                f"  {relative(d.path, target.path)} (offsets {d.base_offset}-{d.next_offset - 1}, "
                f"{d.size} bytes, newest record {format_time(d.largest_timestamp)}{active}): "
                f"{d.reason}"
            )
    s = _summary(target, results, args)
    verb = "deleted" if args.apply else "dry run: would delete"
    segments, partitions = plural(s["segments"], "segment"), plural(s["partitions"], "partition")
    lines.append(
        f"{verb} {segments} ({s['bytes']} bytes) in {s['partitionsChanged']} of {partitions}"
        + ("; run with --apply to delete them" if not args.apply and s["segments"] else "")
        + (
            f"; {plural(s['partitionsRefused'], 'partition')} left alone (configs assumed)"
            if s["partitionsRefused"]
            else ""
        )
    )
    sys.stdout.write("\n".join(lines) + "\n")


def _summary(target, results, args) -> dict:
    # Applied: what was deleted; a dry run: what would be (refused partitions count in neither).
    counted = [r.plan for r in results if r.applied or not args.apply]
    return {
        "type": "summary",
        "path": str(target.path),
        "dryRun": not args.apply,
        "partitions": len(results),
        "partitionsChanged": sum(bool(plan.deletions) for plan in counted),
        "segments": sum(len(plan.deletions) for plan in counted),
        "bytes": sum(plan.bytes_deleted for plan in counted),
        "partitionsRefused": sum(bool(r.plan.deletions) and not r.applied for r in results)
        if args.apply
        else 0,
    }
