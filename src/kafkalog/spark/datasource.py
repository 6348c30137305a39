"""The ``kafkalog`` data source: Kafka data directories as Spark DataFrames.

Register it once per session, then read like Spark's Kafka source, with a directory instead of
a broker::

    import kafkalog.spark
    kafkalog.spark.register(spark)          # or spark.dataSource.register(KafkaLogDataSource)

    df = (spark.read.format("kafkalog")
          .option("subscribe", "orders")                  # or assign / subscribePattern
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .load("/var/lib/kafka/data"))                    # or load([dir1, dir2]): log.dirs

    df.write.format("kafkalog").option("topic", "copy").option("numPartitions", 8).save(path)

Schema: Spark's Kafka source's (key, value, topic, partition, offset, timestamp, timestampType,
plus headers with includeHeaders=true). Options are checked at load(); planning happens when a
query runs, from listings, indexes and segment tails (never whole .log files), into Spark's Kafka
source's tasks: one per topic-partition offset range, divided by offsets for minPartitions and
maxRecordsPerPartition; read() yields Arrow batches from the columnar decoder. Options,
partitioning and the streaming source and sink: docs/spark.md.
"""

from __future__ import annotations

import datetime as _dt
import logging
import sys
from typing import TYPE_CHECKING

try:
    import pyspark  # noqa: F401  (an extra: say how to get it)
except ModuleNotFoundError as e:
    raise ModuleNotFoundError(
        "kafkalog's Spark data source needs pyspark: pip install 'kafkalog[spark]'", name="pyspark"
    ) from e
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    from ..dataset import OffsetRange

# kafkalog's log layer, planner and decoder (numpy, pyarrow) are imported by the methods that use
# them, not with this module: every Python process Spark starts for the source imports it (the
# driver at register(), a worker for the schema at load(), one for planning, the executors'),
# and most need only part of it (docs/benchmarks.md, first read).

__all__ = ["KafkaLogDataSource"]


def worker_logging() -> None:
    """Warnings of the ``kafkalog`` logger (damage skipped with failOnDataLoss=false, torn
    tails) on this Python worker's stderr, which Spark keeps in the executor's log: one line per
    damage, where ``warnings`` would show only the first of each kind."""
    logger = logging.getLogger("kafkalog")
    if not any(getattr(h, "_kafkalog_worker", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s WARN kafkalog: %(message)s"))
        handler._kafkalog_worker = True  # type: ignore[attr-defined]
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)


def _include_headers(options) -> bool:
    raw = {str(k).lower(): v for k, v in options.items()}.get("includeheaders", "false")
    return str(raw).strip().lower() == "true"


class KafkaLogDataSource(DataSource):
    """Reads, streams and writes Kafka data directories (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        # Spark asks for the schema at load(): bad options and paths fail there, at analysis,
        # not at the first action (what differs between batch and streaming is checked when
        # Spark asks for a reader of either).
        from ..dataset import discover, parse_read_options, spark_schema_ddl

        options = parse_read_options(self.options, streaming=None)
        discover(options.paths, report=True, warn=False)
        return spark_schema_ddl(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        from ..dataset import parse_read_options

        options = parse_read_options(self.options)
        _check_schema(schema, options.include_headers)
        return (PushdownReader if options.pushdown else KafkaLogReader)(options)

    def streamReader(self, schema: StructType):
        from ..dataset import parse_read_options
        from .stream import KafkaLogStreamReader

        options = parse_read_options(self.options, streaming=True)
        _check_schema(schema, options.include_headers)
        return KafkaLogStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool):
        from ..dataset import parse_write_options
        from .writer import KafkaLogWriter

        return KafkaLogWriter(parse_write_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from ..dataset import parse_write_options
        from .writer import KafkaLogStreamWriter

        return KafkaLogStreamWriter(parse_write_options(self.options), schema, overwrite)


def _check_schema(schema: StructType, include_headers: bool) -> None:
    from ..dataset import OptionError, arrow_schema

    expected = arrow_schema(include_headers).names
    if schema is not None and [f.name for f in schema.fields] != expected:
        raise OptionError(
            "the kafkalog source has a fixed schema (Spark's Kafka source's) and cannot be set "
            "with a custom one"
        )


class KafkaLogReader(DataSourceReader):
    """Batch reads: partitions() plans on the driver, read() decodes one byte range."""

    def __init__(self, options) -> None:
        self.options = options
        self.constraints = _Constraints()

    def partitions(self):
        from ..dataset import open_selected, plan_input_partitions, resolve_ranges

        worker_logging()
        logs = open_selected(self.options)
        try:
            logs = {tp: log for tp, log in logs.items() if self.constraints.keeps(tp)}
            ranges = [self.constraints.narrow(r) for r in resolve_ranges(self.options, logs)]
            parts = plan_input_partitions(
                self.options, logs, ranges, min_timestamp=self.constraints.min_timestamp
            )
        finally:
            for log in logs.values():
                log.close()
        return [InputPartition(p) for p in parts] or [InputPartition(None)]

    def read(self, partition):
        if partition.value is None:  # the no-work partition of an empty plan
            return iter(())
        from ..dataset import read_partition

        worker_logging()
        return read_partition(partition.value)


def _millis(value) -> int | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return None


class _Constraints:
    """What pushed filters allow: topics, partitions, offset bounds, a minimum timestamp."""

    def __init__(self) -> None:
        self.topics: set[str] | None = None
        self.partitions: set[int] | None = None
        self.offset_lo: int | None = None
        self.offset_hi: int | None = None  # exclusive
        self.min_timestamp: int | None = None

    def keeps(self, tp) -> bool:
        return (self.topics is None or tp.topic in self.topics) and (
            self.partitions is None or tp.partition in self.partitions
        )

    def narrow(self, r: OffsetRange) -> OffsetRange:
        from ..dataset import OffsetRange

        start = r.start if self.offset_lo is None else max(r.start, self.offset_lo)
        end = r.end if self.offset_hi is None else min(r.end, self.offset_hi)
        return OffsetRange(r.tp, start, max(start, end))

    def _set(self, attr: str, values) -> None:
        current = getattr(self, attr)
        values = set(values)
        setattr(self, attr, values if current is None else current & values)

    def _lo(self, v: int) -> None:
        self.offset_lo = v if self.offset_lo is None else max(self.offset_lo, v)

    def _hi(self, v: int) -> None:
        self.offset_hi = v if self.offset_hi is None else min(self.offset_hi, v)

    def push(self, f) -> bool:
        """Apply ``f`` if it is understood; True when Spark need not apply it again."""
        column = f.attribute[0] if len(f.attribute) == 1 else None
        if column == "topic":
            if isinstance(f, EqualTo) and isinstance(f.value, str):
                self._set("topics", [f.value])
                return True
            if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                self._set("topics", f.value)
                return True
        elif column in ("partition", "offset"):
            values = f.value if isinstance(f, In) else (getattr(f, "value", None),)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                return False
            if column == "partition":
                if isinstance(f, EqualTo | In):
                    self._set("partitions", values)
                    return True
                return False
            if isinstance(f, EqualTo):
                self._lo(f.value)
                self._hi(f.value + 1)
            elif isinstance(f, GreaterThan):
                self._lo(f.value + 1)
            elif isinstance(f, GreaterThanOrEqual):
                self._lo(f.value)
            elif isinstance(f, LessThan):
                self._hi(f.value)
            elif isinstance(f, LessThanOrEqual):
                self._hi(f.value + 1)
            else:
                return False
            return True
        elif column == "timestamp" and isinstance(f, GreaterThan | GreaterThanOrEqual):
            ms = _millis(f.value)
            if ms is not None:  # only skips segments: Spark still applies the filter
                self.min_timestamp = (
                    ms if self.min_timestamp is None else max(self.min_timestamp, ms)
                )
        return False


class PushdownReader(KafkaLogReader):
    """The reader with filter pushdown (option pushdown=true). pyspark 4.3.0 needs
    spark.sql.python.filterPushdown.enabled=true for it, and reuses a pushed plan across queries
    on one DataFrame (fixed after 4.3.0): build a new DataFrame per filtered query."""

    def pushFilters(self, filters):
        for f in filters:
            if not self.constraints.push(f):
                yield f
