"""kafkalog on Apache Spark: the ``kafkalog`` data source (PySpark's Python Data Source API).

``kafkalog.spark.register(spark)`` registers it; then ``spark.read.format("kafkalog")``,
``spark.readStream.format("kafkalog")``, ``df.write.format("kafkalog")`` and
``df.writeStream.format("kafkalog")`` read and write Kafka data directories with Spark's Kafka
source and sink schema and options. See docs/spark.md.
"""

from __future__ import annotations

__all__ = ["KafkaLogDataSource", "data_loss_report", "register"]


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark`` (a SparkSession)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)


def data_loss_report(log_dir: str) -> list[dict]:
    """What a read with failOnDataLoss=false skipped, from the directory given as its option
    ``dataLossLog``: one dict per damage or loss (``message``, ``path``, ``position``,
    ``offset``, ``time``), from the driver and every task; ``len()`` is the count."""
    from ..table.planner import read_data_loss

    return read_data_loss(log_dir)


def __getattr__(name: str):
    if name == "KafkaLogDataSource":
        from .datasource import KafkaLogDataSource

        return KafkaLogDataSource
    raise AttributeError(name)
