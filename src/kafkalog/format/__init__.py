"""The record format layer: pure functions and views over bytes, no file or socket I/O.

Start with :class:`MemoryRecords` (or :func:`iter_batches`) to walk any buffer of log entries,
:class:`RecordsScan` to also learn how the buffer ends, and :class:`MemoryRecordsBuilder` to write.
"""

from .batch import MutableRecordBatch, RecordBatch, empty_batch
from .builder import MemoryRecordsBuilder, build_end_txn_marker_batch
from .codecs import CODECS, DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType, compress, decompress
from .constants import (
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ControlRecordType,
    TimestampType,
)
from .legacy import LegacyBatch
from .partitioner import murmur2, partition_for_key
from .record import Header, Record
from .records import Batch, MemoryRecords, RecordsScan, Tail, iter_batches

__all__ = [
    "CODECS",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "MAGIC_VALUE_V0",
    "MAGIC_VALUE_V1",
    "MAGIC_VALUE_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "Batch",
    "CompressionType",
    "ControlRecordType",
    "Header",
    "LegacyBatch",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "MutableRecordBatch",
    "Record",
    "RecordBatch",
    "RecordsScan",
    "Tail",
    "TimestampType",
    "build_end_txn_marker_batch",
    "compress",
    "decompress",
    "empty_batch",
    "iter_batches",
    "murmur2",
    "partition_for_key",
]
