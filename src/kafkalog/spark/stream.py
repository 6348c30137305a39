"""Streaming reads: ``spark.readStream.format("kafkalog")`` tails a data directory.

Offsets are Spark's Kafka JSON, ``{"topic": {"partition": nextOffset}}``. Each trigger lists the
directory again (new partitions start at their log start offset, as Spark's Kafka source starts
new partitions at earliest) and walks only the tails of active segments, so a batch still being
written (a torn tail) is left for a later trigger. maxOffsetsPerTrigger is split across
partitions in proportion to their backlog, as Spark does; minOffsetsPerTrigger waits (up to
maxTriggerDelay) for enough new records; trigger(availableNow=True) reads up to the offsets found
when the query starts. Offsets below a partition's log start offset (retention) are data loss:
an error, or skipped with failOnDataLoss=false.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..log.datadir import TopicPartition
from .datasource import worker_logging

if TYPE_CHECKING:
    from ..dataset import ReadOptions

# The planner and reader (the log layer, numpy, pyarrow) are imported by the methods that use
# them: Spark builds this reader in its planning worker only to pickle it.

__all__ = ["KafkaLogStreamReader"]


def _as_json(offsets: dict[TopicPartition, int]) -> dict:
    out: dict = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def _from_json(doc: dict) -> dict[TopicPartition, int]:
    return {
        TopicPartition(t, int(p)): int(o) for t, ps in (doc or {}).items() for p, o in ps.items()
    }


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict | None = None
        self._last_batch = time.monotonic()
        # what the last latestOffset() found available (before any read limit), reported by
        # reportLatestOffset() as Spark's KafkaMicroBatchStream reports latestPartitionOffsets
        self._latest_available: dict | None = None

    def _ends(self) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, readable end) of every selected partition now."""
        from ..dataset import open_selected

        logs = open_selected(self.options)
        try:
            return {
                tp: (
                    log.log_start_offset,
                    log.last_stable_offset() if self.options.read_committed else log.log_end_offset,
                )
                for tp, log in logs.items()
            }
        finally:
            for log in logs.values():
                log.close()

    def initialOffset(self) -> dict:
        from ..dataset import check_all_given, open_selected, resolve_spec

        logs = open_selected(self.options)
        try:
            starting = self.options.starting
            if starting.kind == "offsets":  # as Spark's KafkaOffsetReader.fetchSpecificOffsets
                check_all_given(starting.offsets, logs, "startingOffsets", streaming=True)
            elif starting.kind == "timestamps":
                check_all_given(
                    starting.offsets, logs, "startingOffsetsByTimestamp", streaming=True
                )
            out = {}
            for tp, log in logs.items():
                upper = (
                    log.last_stable_offset() if self.options.read_committed else log.log_end_offset
                )
                out[tp] = resolve_spec(self.options.starting, log, start=True, options=self.options,
                                   upper=upper)  # fmt: skip
            return _as_json(out)
        finally:
            for log in logs.values():
                log.close()

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = _as_json({tp: end for tp, (_, end) in self._ends().items()})

    def reportLatestOffset(self):
        """The offsets the last latestOffset() found available, before any read limit (with
        trigger(availableNow=True), those fixed at the start), as Spark's Kafka source reports
        them: the query progress's ``sources[].latestOffset``, which with ``endOffset`` gives
        the lag (:func:`kafkalog.spark.lag_metrics`)."""
        if self._latest_available is None:  # not asked for offsets yet: what is there now
            return _as_json({tp: end for tp, (_, end) in self._ends().items()}) or None
        return self._latest_available or None

    def latestOffset(self, start: dict, limit) -> dict:
        begin = _from_json(start)
        if self._target is not None:
            ends = {tp: (0, e) for tp, e in _from_json(self._target).items()}
            for tp, (lso, e) in self._ends().items():  # partitions added since: not in target
                ends.setdefault(tp, (lso, min(e, lso)))
        else:
            ends = self._ends()
        self._latest_available = _as_json({tp: end for tp, (_, end) in ends.items()})
        latest = {}
        for tp, (log_start, end) in ends.items():
            frm = begin.get(tp, log_start)
            latest[tp] = max(frm, end)
        for tp, off in begin.items():  # a partition that went away keeps its offset
            latest.setdefault(tp, off)
        if isinstance(limit, ReadMaxRows):
            latest = _rate_limit(limit.max_rows, begin, latest, ends)
        minimum = self.options.min_offsets_per_trigger
        if minimum and self._target is None and not isinstance(limit, ReadAllAvailable):
            backlog = sum(latest[tp] - begin.get(tp, ends.get(tp, (0, 0))[0]) for tp in latest)
            waited = (time.monotonic() - self._last_batch) * 1000
            if backlog < minimum and waited < self.options.max_trigger_delay_ms:
                return start
        if latest != begin:
            self._last_batch = time.monotonic()
        return _as_json(latest)

    def partitions(self, start: dict, end: dict):
        from ..dataset import OffsetRange, data_loss, open_selected, plan_input_partitions

        worker_logging()
        begin, stop = _from_json(start), _from_json(end)
        logs = open_selected(self.options)
        try:
            ranges = []
            for tp, e in stop.items():
                log = logs.get(tp)
                if log is None:
                    continue
                s = begin.get(tp, log.log_start_offset)
                if s < log.log_start_offset:
                    data_loss(
                        f"{tp}: offsets [{s}, {log.log_start_offset}) are gone (retention "
                        f"or deletion) before they were read",
                        self.options.fail_on_data_loss,
                        log_dir=self.options.data_loss_log,
                    )
                    s = log.log_start_offset  # fmt: skip
                if e > s:
                    ranges.append(OffsetRange(tp, s, e))
            parts = plan_input_partitions(self.options, logs, ranges)
        finally:
            for log in logs.values():
                log.close()
        return [InputPartition(p) for p in parts]

    def read(self, partition):
        from ..dataset import read_partition

        worker_logging()
        return read_partition(partition.value)

    def commit(self, end: dict) -> None:
        pass


def _rate_limit(limit: int, begin, latest, ends) -> dict:
    """Spark's KafkaMicroBatchStream.rateLimit: ``limit`` offsets shared by backlog size."""
    sizes = {}
    for tp, end in latest.items():
        frm = begin.get(tp, ends.get(tp, (0, 0))[0])
        if end > frm:
            sizes[tp] = (frm, end)
    total = sum(e - f for f, e in sizes.values())
    if total <= limit:
        return latest
    out = dict(latest)
    for tp, (frm, end) in sizes.items():
        prorate = limit * ((end - frm) / total)
        step = int(-(-prorate // 1)) if prorate < 1 else int(prorate)
        out[tp] = min(end, frm + step)
    return out
