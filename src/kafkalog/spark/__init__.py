"""kafkalog on Apache Spark: the ``kafkalog`` data source (PySpark's Python Data Source API).

``kafkalog.spark.register(spark)`` registers it; then ``spark.read.format("kafkalog")``,
``spark.readStream.format("kafkalog")``, ``df.write.format("kafkalog")`` and
``df.writeStream.format("kafkalog")`` read and write Kafka data directories with Spark's Kafka
source and sink schema and options. See docs/spark.md.
"""

from __future__ import annotations

__all__ = ["KafkaLogDataSource", "register"]


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark`` (a SparkSession)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)


def __getattr__(name: str):
    if name == "KafkaLogDataSource":
        from .datasource import KafkaLogDataSource

        return KafkaLogDataSource
    raise AttributeError(name)
