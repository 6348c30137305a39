"""The fast path: columnar decode and encode of Kafka log entries, to and from Apache Arrow.

Everything outside the format layer imports this facade, never the kernels::

    from kafkalog.format import columnar

    batch = columnar.decode_columnar(buffer)                # pyarrow.RecordBatch, SCHEMA columns
    for chunk in columnar.iter_record_batches(mm, max_rows=65536):  # bounded memory (an mmap)
        ...
    data = columnar.encode_columnar(keys, values, timestamps, compression="zstd")

Work is done by compiled kernels (C: the extension ``_compiled``, built from ``_speedups/*.c``)
when they are built, else by their pure-Python twins (``_pure``): same results and same exceptions,
about ten times slower. ``KAFKALOG_PUREPYTHON=1`` forces the pure kernels; ``IMPLEMENTATION`` says
which run. Decompression is shared by both (:mod:`kafkalog.format.codecs`; lz4 and snappy straight
into a reused buffer); CRCs are computed inside the kernels (the pure twins call ``crc32c`` and
zlib).

Columns (:data:`SCHEMA`): ``offset``; ``timestamp`` (ms; with LogAppendTime the batch's max
timestamp, as Kafka reports it; -1 for magic 0, which has none); ``timestampType`` (0 CreateTime,
1 LogAppendTime, -1 none: magic 0); ``key`` and ``value`` (binary, null when absent); ``headers``
(list of struct<key string, value binary>); then the batch's fields on each record:
``producerId``, ``producerEpoch``, ``sequence`` (the record's own: baseSequence + offset delta,
wrapping as Kafka's; -1 when none), ``isTransactional``, ``isControl``, ``partitionLeaderEpoch``.
Legacy records carry Kafka's -1 sentinels and false there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from . import _kernel_abi as kernel_abi
from ._kernels import FORCED_PURE, IMPLEMENTATION, KERNEL_FUNCTIONS, LOAD_ERROR, kernels
from .decode import HEADER_TYPE, SCHEMA, ColumnarDecoder
from .encode import encode_columnar
from .record_columns import current_records, v2_compressed_columns, v2_record_columns

__all__ = [
    "FORCED_PURE",
    "HEADER_TYPE",
    "IMPLEMENTATION",
    "KERNEL_FUNCTIONS",
    "LOAD_ERROR",
    "SCHEMA",
    "ColumnarDecoder",
    "current_records",
    "decode_columnar",
    "encode_columnar",
    "iter_record_batches",
    "kernel_abi",
    "kernels",
    "v2_compressed_columns",
    "v2_record_columns",
]


def decode_columnar(buffer, **options) -> pa.RecordBatch:
    """Every record in ``buffer`` (log entries of any magic and codec, up to a partial trailing
    entry) as one Arrow record batch. Options: see :class:`ColumnarDecoder` (``start_offset``,
    ``end_offset``, ``validate_crc``, ``keep_control``, ``check_offset_order``,
    ``max_decompressed_size``, ``position_base``). Bad bytes raise CorruptRecordError or
    InvalidRecordError."""
    return ColumnarDecoder().decode(buffer, **options)


def iter_record_batches(buffer, *, max_rows: int = 65536, **options) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of about ``max_rows`` rows over ``buffer`` (for readers that must
    hold only a few batches at a time, such as Spark's). Same options as decode_columnar."""
    return ColumnarDecoder().iter_batches(buffer, max_rows=max_rows, **options)
