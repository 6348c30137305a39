"""One segment's files: the ``.log`` (FileRecords) and its offset, time and transaction indexes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .append_walk import walk_append, walk_validated
    from .entry_walk import SegmentWalk
    from .fields import keys_and_offsets, record_fields
    from .file_cache import configured_capacity, default_cache
    from .file_records import FileRecords, PinnedDescriptor, TimestampAndOffset
    from .log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment, RollParams
    from .offset_index import OffsetIndex, OffsetPosition
    from .recovery_scan import RecoveryScan
    from .remote_records import RemoteRecords
    from .remote_segments import open_remote_segments
    from .time_index import TimeIndex
    from .txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
    from .valid_prefix import ValidPrefix, ValidPrefixWalk, records_from, zero_filled

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "AbortedTxn": "txn_index",
    "ENTRY_SIZE": "txn_index",
    "FetchDataInfo": "log_segment",
    "FileRecords": "file_records",
    "PinnedDescriptor": "file_records",
    "LogOffsetMetadata": "log_segment",
    "LogSegment": "log_segment",
    "OffsetIndex": "offset_index",
    "OffsetPosition": "offset_index",
    "RemoteRecords": "remote_records",
    "RollParams": "log_segment",
    "SegmentWalk": "entry_walk",
    "TimeIndex": "time_index",
    "TimestampAndOffset": "file_records",
    "TransactionIndex": "txn_index",
    "RecoveryScan": "recovery_scan",
    "ValidPrefix": "valid_prefix",
    "ValidPrefixWalk": "valid_prefix",
    "records_from": "valid_prefix",
    "zero_filled": "valid_prefix",
    "configured_capacity": "file_cache",
    "default_cache": "file_cache",
    "keys_and_offsets": "fields",
    "record_fields": "fields",
    "walk_append": "append_walk",
    "walk_validated": "append_walk",
    "open_remote_segments": "remote_segments",
}
__all__ = [
    "ENTRY_SIZE",
    "AbortedTxn",
    "FetchDataInfo",
    "FileRecords",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetIndex",
    "OffsetPosition",
    "PinnedDescriptor",
    "RecoveryScan",
    "RemoteRecords",
    "RollParams",
    "SegmentWalk",
    "TimeIndex",
    "TimestampAndOffset",
    "TransactionIndex",
    "ValidPrefix",
    "ValidPrefixWalk",
    "configured_capacity",
    "default_cache",
    "keys_and_offsets",
    "open_remote_segments",
    "record_fields",
    "records_from",
    "walk_append",
    "walk_validated",
    "zero_filled",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
