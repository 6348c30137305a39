"""``kafkalog transactions``: aborted and open (hanging) transactions per partition, read-only.

The log is walked once per partition (batch headers, and the one record of each control batch):
a transactional producer's first data batch opens its transaction, its COMMIT or ABORT marker
closes it. What is still open at the end of the log is open; open for longer than the
transaction timeout, it is hanging: its coordinator would have aborted it, so its marker is
missing, and it holds back the last stable offset (read_committed consumers stop there) until
an operator aborts it (``kafka-transactions.sh abort``). Aborted transactions are held against
the segments' ``.txnindex``, which read_committed consumers use to skip them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EXIT_OK, EXIT_PROBLEMS
from .arguments import bounded_int
from .failures import guarded, report
from .operate import (
    add_now_option,
    logs_in_progress,
    now_ms,
    operator_arguments,
    read_segments,
    resolve_target,
)
from .output import format_time, write_json

SUMMARY = "aborted and open (hanging) transactions per partition"
DESCRIPTION = (
    "List the aborted and the open (hanging) transactions of every partition, "
    "with producer ids, epochs and offsets, from the logs' transactional batches and "
    "COMMIT/ABORT markers, checked against the .txnindex files."
)
EXAMPLES = """\
examples:
  kafkalog transactions /var/lib/kafka/data
  kafkalog transactions --all --topic payments /var/lib/kafka/data   # committed ones too
  kafkalog transactions --json /var/lib/kafka/data | jq 'select(.state=="open")'

exit status: 0 no hanging transaction, 1 hanging transactions, aborted transactions missing
from the .txnindex (read_committed consumers would return their records), or unreadable data,
2 usage error, 3 I/O error
"""

DEFAULT_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms: no transaction may stay open longer
ABORTED, COMMITTED, OPEN = "aborted", "committed", "open"


@dataclass(slots=True)
class Transaction:
    """One transaction of one producer in one partition (offsets inclusive)."""

    partition: str
    producer_id: int
    producer_epoch: int
    state: str
    first_offset: int | None  # None: its data is not in the log (below the log start)
    last_offset: int | None  # last data offset
    marker_offset: int | None = None
    coordinator_epoch: int | None = None
    first_timestamp: int | None = None
    records: int = 0
    batches: int = 0
    hanging: bool = False
    in_txn_index: bool | None = None  # aborted: whether a .txnindex entry names it

    def to_dict(self) -> dict:
        return {
            "type": "transaction",
            "partition": self.partition,
            "state": self.state,
            "hanging": self.hanging,
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "firstOffset": self.first_offset,
            "lastOffset": self.last_offset,
            "markerOffset": self.marker_offset,
            "coordinatorEpoch": self.coordinator_epoch,
            "firstTimestamp": self.first_timestamp,
            "batches": self.batches,
            "records": self.records,
            "inTxnIndex": self.in_txn_index,
        }


@dataclass(slots=True)
class PartitionTransactions:
    directory: Path
    transactions: list[Transaction] = field(default_factory=list)
    index_only: list = field(default_factory=list)  # .txnindex entries with no ABORT marker
    error: str | None = None
    log_end_offset: int | None = None

    @property
    def last_stable_offset(self) -> int | None:
        """Where read_committed consumers stop: the first offset of the earliest open
        transaction, else the log end."""
        starts = [t.first_offset for t in self.transactions if t.state == OPEN]
        return min(starts) if starts else self.log_end_offset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    with operator_arguments(parser):
        parser.add_argument("--all", action="store_true", help="list committed transactions too")
        parser.add_argument(
            "--timeout-ms",
            type=bounded_int(1),
            default=DEFAULT_TIMEOUT_MS,
            metavar="MS",
            help=f"an open transaction older than this is hanging (default {DEFAULT_TIMEOUT_MS}, "
            f"Kafka's transaction.max.timeout.ms)",
        )
        add_now_option(parser, used_for="the time to judge ages by")


@guarded("transactions")
def run(args: argparse.Namespace) -> int:
    target = resolve_target(args.path, topics=args.topic)
    now = now_ms(args)
    results = []
    with logs_in_progress("transactions", args, target) as (progress, logs):
        for entry in logs:
            found = PartitionTransactions(entry.directory)
            if entry.log is None:
                found.error = entry.error
            else:
                scan_transactions(
                    entry.log, found, now_ms=now, timeout_ms=args.timeout_ms, progress=progress
                )
            results.append(found)
    _report(target.path, results, args)
    for found in results:
        unindexed = [t for t in found.transactions if t.in_txn_index is False]
        if unindexed:
            report(
                "transactions",
                f"{found.directory}: {len(unindexed)} aborted "
                f"transaction(s) missing from the .txnindex (producer {unindexed[0].producer_id}, "
                f"offsets {_opt(unindexed[0].first_offset)}-{_opt(unindexed[0].last_offset)}"
                f"{' and more' if len(unindexed) > 1 else ''}): read_committed consumers "
                f"return their records; kafkalog rebuild-index rebuilds the .txnindex",
            )
        if found.error:
            report("transactions", f"{found.directory}: {found.error}")
    problems = any(
        f.error or any(t.hanging or t.in_txn_index is False for t in f.transactions)
        for f in results
    )
    return EXIT_PROBLEMS if problems else EXIT_OK


def scan_transactions(
    log, found: PartitionTransactions, *, now_ms: int, timeout_ms: int, progress=None
) -> None:
    """Walk ``log`` (read-only) and fill ``found`` with its transactions."""
    from ..format import ControlRecordType
    from ..format.control import decode_control_type, decode_end_txn_marker

    name = found.directory.name
    found.log_end_offset = log.log_end_offset
    ongoing: dict[int, Transaction] = {}
    indexed: dict[tuple[int, int], object] = {}

    def read(segment) -> None:
        for txn in segment.txn_index.all_aborted_txns():
            indexed[(txn.producer_id, txn.last_offset)] = txn
        for batch in segment.log.batches():
            if not batch.is_transactional:
                continue
            pid = batch.producer_id
            if not batch.is_control:
                txn = ongoing.get(pid)
                if txn is None:
                    txn = ongoing[pid] = Transaction(
                        name,
                        pid,
                        batch.producer_epoch,
                        OPEN,
                        batch.base_offset,
                        batch.last_offset,
                        first_timestamp=batch.base_timestamp,
                    )
                txn.last_offset = batch.last_offset
                txn.batches += 1
                txn.records += batch.count
                continue
            record = next(iter(batch.records()), None)
            if record is None:
                continue  # a marker the cleaner emptied
            kind = decode_control_type(record.key)
            if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                continue
            txn = ongoing.pop(pid, None) or Transaction(
                name, pid, batch.producer_epoch, OPEN, None, None
            )
            txn.state = ABORTED if kind == ControlRecordType.ABORT else COMMITTED
            txn.marker_offset = batch.base_offset
            txn.coordinator_epoch = decode_end_txn_marker(record.value)[1]
            if txn.state == ABORTED:
                txn.in_txn_index = indexed.pop((pid, batch.base_offset), None) is not None
            found.transactions.append(txn)

    found.error = read_segments(log.segments, read, progress)
    for txn in ongoing.values():
        age = now_ms - txn.first_timestamp if txn.first_timestamp is not None else None
        txn.hanging = age is not None and age > timeout_ms
        found.transactions.append(txn)
    found.index_only = list(indexed.values())
    found.transactions.sort(
        key=lambda t: t.first_offset if t.first_offset is not None else t.marker_offset
    )


def _report(root: Path, results: list[PartitionTransactions], args: argparse.Namespace) -> None:
    shown = [t for f in results for t in f.transactions if args.all or t.state != COMMITTED]
    counts = {
        state: sum(t.state == state for f in results for t in f.transactions)
        for state in (ABORTED, OPEN, COMMITTED)
    }
    hanging = sum(t.hanging for f in results for t in f.transactions)
    index_only = sum(len(f.index_only) for f in results)
    if args.json:
        for f in results:
            if f.transactions or f.index_only:
                write_json(
                    {
                        "type": "partition",
                        "partition": f.directory.name,
                        "logEndOffset": f.log_end_offset,
                        "lastStableOffset": f.last_stable_offset,
                    }
                )
            for t in f.transactions:
                if args.all or t.state != COMMITTED:
                    write_json(t.to_dict())
            for txn in f.index_only:
                write_json(
                    {
                        "type": "txnIndexEntry",
                        "partition": f.directory.name,
                        "producerId": txn.producer_id,
                        "firstOffset": txn.first_offset,
                        "lastOffset": txn.last_offset,
                        "lastStableOffset": txn.last_stable_offset,
                    }
                )
        write_json(
            {
                "type": "summary",
                "path": str(root),
                "partitions": len(results),
                "aborted": counts[ABORTED],
                "open": counts[OPEN],
                "hanging": hanging,
                "committed": counts[COMMITTED],
                "txnIndexOnly": index_only,
                "notInTxnIndex": sum(
                    t.in_txn_index is False for f in results for t in f.transactions
                ),
            }
        )
        return
    lines = []
    if shown:
        header = (
            "PARTITION",
            "STATE",
            "PRODUCER",
            "EPOCH",
            "FIRST",
            "LAST",
            "MARKER",
            "RECORDS",
            "STARTED",
        )
        rows = [header]
        for t in shown:
            state = t.state + (" (hanging)" if t.hanging else "")
            if t.state == ABORTED and t.in_txn_index is False:
                state += " (not in .txnindex)"
            rows.append(
                (
                    t.partition,
                    state,
                    str(t.producer_id),
                    str(t.producer_epoch),
                    _opt(t.first_offset),
                    _opt(t.last_offset),
                    _opt(t.marker_offset),
                    str(t.records),
                    format_time(t.first_timestamp),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for row in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        lines.append("")
    for f in results:
        if any(t.state == OPEN for t in f.transactions):
            lines.append(
                f"{f.directory.name}: last stable offset {f.last_stable_offset} (log end offset "
                f"{f.log_end_offset}): read_committed consumers stop there"
            )
        for txn in f.index_only:
            lines.append(
                f"{f.directory.name}: .txnindex entry without an ABORT marker in the log: producer "
                f"{txn.producer_id}, offsets {txn.first_offset}-{txn.last_offset}"
            )
    lines.append(
        f"{len(results)} partitions: {counts[ABORTED]} aborted, {counts[OPEN]} open "
        f"({hanging} hanging), {counts[COMMITTED]} committed transactions"
    )
    sys.stdout.write("\n".join(lines) + "\n")


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)
