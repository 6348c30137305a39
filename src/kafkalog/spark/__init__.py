"""kafkalog on Apache Spark: the ``kafkalog`` data source (PySpark's Python Data Source API).

``kafkalog.spark.register(spark)`` registers it; then ``spark.read.format("kafkalog")``,
``spark.readStream.format("kafkalog")``, ``df.write.format("kafkalog")`` and
``df.writeStream.format("kafkalog")`` read and write Kafka data directories with Spark's Kafka
source and sink schema and options. See docs/spark.md.
"""

from __future__ import annotations

__all__ = ["KafkaLogDataSource", "data_loss_report", "lag_metrics", "register"]


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark`` (a SparkSession)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)


def data_loss_report(log_dir: str) -> list[dict]:
    """What a read with failOnDataLoss=false skipped, from the directory given as its option
    ``dataLossLog``: one dict per damage or loss (``message``, ``path``, ``position``,
    ``offset``, ``time``), from the driver and every task; ``len()`` is the count."""
    from ..dataset import read_data_loss

    return read_data_loss(log_dir)


def lag_metrics(source_progress) -> dict[str, str]:
    """The lag metrics Spark's Kafka source puts in its query progress's ``sources[].metrics``
    (``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``minOffsetsBehindLatest``),
    computed as KafkaMicroBatchStream.metrics computes them: for every partition of the latest
    offsets the source reported, that offset minus the batch's end offset.

    A Python streaming source cannot put metrics in the progress itself (PySpark's
    PythonMicroBatchStream does not implement ReportsSourceMetrics; docs/spark.md), but the
    kafkalog source reports its latest offsets (``reportLatestOffset``) as Spark's Kafka source
    does, so the progress holds both inputs: pass one entry of ``progress.sources`` (a
    SourceProgress, or a dict from the progress's JSON). ``{}`` when either offset is missing
    (no batch yet), as Spark's source reports no metrics then; values are strings, as there."""
    import json

    def offsets(value) -> dict[tuple[str, int], int]:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() not in ("", "null", "None") else None
        return {(t, int(p)): int(o) for t, ps in (value or {}).items() for p, o in ps.items()}

    latest = offsets(source_progress["latestOffset"])
    consumed = offsets(source_progress["endOffset"])
    if not latest or not consumed:
        return {}
    behind = [end - consumed.get(tp, 0) for tp, end in latest.items()]
    return {
        "avgOffsetsBehindLatest": _java_double(sum(behind) / len(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "minOffsetsBehindLatest": str(min(behind)),
    }


def _java_double(value: float) -> str:
    """``value`` as Java's Double.toString writes it (Spark's metrics are Scala doubles' text):
    plain from 10^-3 to 10^7, else like ``1.5E7``."""
    from decimal import Decimal

    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    shortest = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    exponent = len(digits) - 1 + shortest.exponent
    return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def __getattr__(name: str):
    if name == "KafkaLogDataSource":
        from .datasource import KafkaLogDataSource

        return KafkaLogDataSource
    raise AttributeError(name)
