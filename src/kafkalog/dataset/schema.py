"""The row layout of Spark's Kafka source, as Spark and as Arrow, and the conversion of the
columnar decoder's batches to it.

Spark checks only the first Arrow batch a read() yields, and wants it to match exactly: same
column order, every field nullable, ``binary`` (not large_binary), int32 for INT, int64 for BIGINT,
``timestamp[us, tz=UTC]`` for TIMESTAMP and ``list<struct<key: string, value: binary>>`` for the
headers. Headers are null (not an empty list) for a record that has none, as in Spark's source.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = [
    "HEADERS_ARROW",
    "SINK_COLUMNS",
    "arrow_schema",
    "spark_schema_ddl",
    "to_spark_batch",
]

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADERS_ARROW = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TIMESTAMP),
    pa.field("timestampType", pa.int32()),
]
_SCHEMAS = {
    False: pa.schema(_BASE_FIELDS),
    True: pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_ARROW)]),
}

# Columns Spark's Kafka sink accepts (value is required; topic unless the topic option is set).
SINK_COLUMNS = ("key", "value", "headers", "topic", "partition", "timestamp")


def spark_schema_ddl(include_headers: bool) -> str:
    """Spark's Kafka source schema as DDL (headers last, only with includeHeaders)."""
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    return _SCHEMAS[include_headers]


class ConstantColumns:
    """The topic and partition columns of one Kafka partition, sliced from arrays built once."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = partition
        self._size = 0
        self._topics: pa.Array | None = None
        self._partitions: pa.Array | None = None

    def get(self, n: int) -> tuple[pa.Array, pa.Array]:
        if n > self._size:
            self._size = max(n, 2 * self._size, 1024)
            raw = self._topic.encode("utf-8")
            offsets = np.arange(self._size + 1, dtype=np.int32) * len(raw)
            self._topics = pa.Array.from_buffers(
                pa.string(),
                self._size,
                [None, pa.py_buffer(offsets), pa.py_buffer(raw * self._size)],
                null_count=0,
            )
            partitions = np.full(self._size, self._partition, np.int32)
            self._partitions = pa.Array.from_buffers(
                pa.int32(), self._size, [None, pa.py_buffer(partitions)], null_count=0
            )
        return self._topics.slice(0, n), self._partitions.slice(0, n)


def _timestamps(ms: pa.Array) -> pa.Array:
    """Kafka milliseconds to Spark's microsecond UTC timestamps (Kafka's -1, no timestamp, stays
    the instant -1 ms, as Spark's Kafka source shows it)."""
    us = _int_values(ms, 1, np.int64, len(ms)) * 1000
    return pa.Array.from_buffers(_TIMESTAMP, len(us), [None, pa.py_buffer(us)], null_count=0)


def _int_values(array: pa.Array, index: int, dtype, n: int) -> np.ndarray:
    """``n`` items of ``array``'s buffer ``index`` from its offset, as a numpy view: read
    through the buffer, not ``np.asarray`` (which has pyarrow import pandas, 0.2 s in each fresh
    Spark worker)."""
    return np.frombuffer(array.buffers()[index], dtype=dtype)[array.offset : array.offset + n]


def _headers(headers: pa.Array) -> pa.Array:
    """Empty header lists become nulls; the list type gets Spark's field names."""
    n = len(headers)
    offsets = _int_values(headers, 1, np.int32, n + 1)
    values = headers.values
    if headers.offset or len(values) != offsets[-1] - offsets[0]:
        values = values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
    present = np.diff(offsets) > 0
    nulls = n - int(np.count_nonzero(present))
    keys = values.field("key")
    vals = values.field("value")
    structs = pa.StructArray.from_arrays([keys, vals], fields=list(HEADERS_ARROW.value_type))
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        HEADERS_ARROW, n, [bitmap, pa.py_buffer(offsets)], null_count=nulls, children=[structs]
    )


def to_spark_batch(
    decoded: pa.RecordBatch, constants: ConstantColumns, include_headers: bool
) -> pa.RecordBatch:
    """A batch of the columnar decoder (kafkalog.format.columnar.SCHEMA) in Spark's Kafka layout."""
    n = decoded.num_rows
    topics, partitions = constants.get(n)
    columns = [
        decoded.column(3),  # key
        decoded.column(4),  # value
        topics,
        partitions,
        decoded.column(0),  # offset
        _timestamps(decoded.column(1)),
        decoded.column(2),  # timestampType
    ]
    if include_headers:
        columns.append(_headers(decoded.column(5)))
    return pa.RecordBatch.from_arrays(columns, schema=_SCHEMAS[include_headers])
