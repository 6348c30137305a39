"""Arrow rows written as a Kafka log, without Spark: the writer beside :func:`open_data_dir`.

Rows take the columns of Spark's Kafka sink and mean what they mean there (docs/spark.md,
"Writing"); the writing is :mod:`kafkalog.dataset`'s engine, the one the Spark sink's tasks and
commit run, so the same rows give the same segment bytes either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa

from ..dataset import (
    OptionError,
    WriteResult,
    check_arrow_sink_schema,
    parse_write_options,
    write_batches,
)

__all__ = ["WriteResult", "write_data_dir"]

_MODES = ("append", "overwrite")


def _reader(data) -> pa.RecordBatchReader:
    """``data`` as one stream of record batches of one schema."""
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if hasattr(data, "__arrow_c_stream__"):  # polars, pandas 2.2+, DuckDB relations, nanoarrow
        return pa.RecordBatchReader.from_stream(data)
    if type(data).__module__.split(".")[0] == "pandas":  # an older pandas DataFrame
        return pa.Table.from_pandas(data, preserve_index=False).to_reader()
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, Mapping)):
        batches: Iterator = iter(data)
        first = next(batches, None)
        if first is None:
            raise OptionError("no record batches given (an empty iterable has no schema)")
        if not isinstance(first, pa.RecordBatch):
            raise TypeError(f"an iterable of pyarrow.RecordBatch expected, not of {type(first)}")

        def chained():
            yield first
            yield from batches

        return pa.RecordBatchReader.from_batches(first.schema, chained())
    raise TypeError(
        f"write_data_dir takes a pyarrow Table, RecordBatch or RecordBatchReader, an object with "
        f"__arrow_c_stream__ (a Polars or pandas DataFrame, a DuckDB relation) or an iterable "
        f"of RecordBatches, not {type(data).__name__}"
    )


def write_data_dir(
    data,
    path: str | os.PathLike,
    *,
    topic: str | None = None,
    num_partitions: int | None = None,
    codec: str = "none",
    compression_level: int | None = None,
    batch_size: int = 16384,
    segment_bytes: int | None = None,
    mode: str = "append",
    lock_timeout_ms: int = 5000,
    options: Mapping[str, str] | None = None,
) -> WriteResult:
    """Append the rows of ``data`` to the Kafka data directory ``path`` (created if absent).

    ``data``: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader``, anything with
    ``__arrow_c_stream__`` (a Polars or pandas DataFrame, a DuckDB relation) or an iterable of
    RecordBatches, with Spark's Kafka sink columns: ``value`` (binary or string, required),
    ``key``, ``headers`` (list of struct<key: string, value: binary>), ``topic`` (unless
    ``topic`` is given: it wins), ``partition`` (null: Kafka's partitioner: murmur2 of the key,
    sticky for rows without a key) and ``timestamp`` (a timestamp or milliseconds; null: now).
    Other columns are ignored.

    ``num_partitions`` creates topics that do not exist (an existing topic keeps its count);
    ``codec`` (none, gzip, snappy, lz4, zstd), ``compression_level`` and ``batch_size`` (bytes of
    records per batch) shape the batches; ``segment_bytes`` is ``segment.bytes`` of topics
    created; ``mode="overwrite"`` replaces the topics written; ``options`` takes any other write
    option of the Spark sink by its Spark name.

    Every row is encoded before any is appended, then all are appended under the data
    directory's lock (waiting up to ``lock_timeout_ms``): a failure leaves the logs as they were.
    Columns of wrong types raise :class:`~kafkalog.dataset.WriteSchemaError` (``column`` and
    ``rule`` say which and why), a partition the topic does not have
    :class:`~kafkalog.dataset.PartitionOutOfRangeError`, bad options
    :class:`~kafkalog.dataset.OptionError`. Returns what was appended per topic-partition
    (:class:`WriteResult`: offsets, records, batches).
    """
    if mode not in _MODES:
        raise OptionError(f"mode must be append or overwrite, not {mode!r}")
    spark_options = {str(k): str(v) for k, v in (options or {}).items()}
    given = {k.lower() for k in spark_options}
    if given & {"path", "paths"}:
        raise OptionError("give the data directory as path, not in options")
    spark_options["path"] = os.fspath(path)
    arguments = {  # defaults left out, so that options can set them by their Spark names
        "topic": topic,
        "numPartitions": num_partitions,
        "codec": None if codec == "none" else codec,
        "compressionLevel": compression_level,
        "batchSize": None if batch_size == 16384 else batch_size,
        "segmentBytes": segment_bytes,
        "lockTimeoutMs": None if lock_timeout_ms == 5000 else lock_timeout_ms,
    }
    for name, value in arguments.items():
        if value is None:
            continue
        if name.lower() in given:
            raise OptionError(f"{name} is given twice: as an argument and in options")
        spark_options[name] = str(value)
    opts = parse_write_options(spark_options)
    reader = _reader(data)
    check_arrow_sink_schema(reader.schema, opts)
    return write_batches(reader, opts, overwrite=mode == "overwrite")
