"""Kafka data directories as Apache Arrow, for DuckDB, Polars, pandas and anything else that
takes a ``pyarrow.RecordBatchReader``, and Arrow data written as Kafka logs; no broker and no
Spark needed. See docs/arrow.md::

    import kafkalog.arrow

    reader = kafkalog.arrow.open_data_dir("/var/lib/kafka/data", topics=["orders"])
    table = reader.read_all()        # or stream: for batch in reader: ...

    kafkalog.arrow.write_data_dir(table, "/tmp/copy", topic="orders", num_partitions=3)
"""

from __future__ import annotations

from .scan import OffsetsArg, Scan, open_data_dir, plan_scan, schema
from .write import WriteResult, write_data_dir

__all__ = ["OffsetsArg", "Scan", "WriteResult", "open_data_dir", "plan_scan", "schema",
           "write_data_dir"]  # fmt: skip
