"""The log layer: Kafka's files on disk (segments, indexes, checkpoints), on ``kafkalog.format``.

Everything here opens read-only unless writing is asked for, so pointing kafkalog at a dead broker's
disk never changes it. Its packages: ``segment`` (LogSegment, FileRecords, the indexes),
``partition`` (Log, loading and recovery, leader epochs, retention and recovery plans), ``producer``
(producer state and snapshots), ``cleaner`` (compaction), ``datadir`` (data directories: LogManager,
names, checkpoints, meta.properties, the metadata log) and ``verify``; each package's ``__init__``
is its door, and the names most callers want are here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .clock import MockClock, SystemClock
    from .datadir import LogManager, TopicPartition
    from .partition import Log, LogConfig
    from .segment import FileRecords, LogSegment, OffsetIndex, TimeIndex, TransactionIndex

_EXPORTS = {
    "FileRecords": "segment",
    "Log": "partition",
    "LogConfig": "partition",
    "LogManager": "datadir",
    "LogSegment": "segment",
    "MockClock": "clock",
    "OffsetIndex": "segment",
    "SystemClock": "clock",
    "TimeIndex": "segment",
    "TopicPartition": "datadir",
    "TransactionIndex": "segment",
}
__all__ = [
    "FileRecords",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "MockClock",
    "OffsetIndex",
    "SystemClock",
    "TimeIndex",
    "TopicPartition",
    "TransactionIndex",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
