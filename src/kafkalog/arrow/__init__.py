"""Kafka data directories as Apache Arrow, for DuckDB, Polars, pandas and anything else that
takes a ``pyarrow.RecordBatchReader``; no broker and no Spark needed. See docs/arrow.md::

    import kafkalog.arrow

    reader = kafkalog.arrow.open_data_dir("/var/lib/kafka/data", topics=["orders"])
    table = reader.read_all()        # or stream: for batch in reader: ...
"""

from __future__ import annotations

from .scan import OffsetsArg, Scan, open_data_dir, plan_scan, schema

__all__ = ["OffsetsArg", "Scan", "open_data_dir", "plan_scan", "schema"]
