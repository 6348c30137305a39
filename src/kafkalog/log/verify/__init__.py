"""``verify``: checking a data directory, a partition or one file against Kafka's rules,
read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .data_dir import is_partition_dir, verify
    from .partition import log_start_before_segments, lost_segments, lost_span
    from .report import ERROR, INFO, WARNING, VerifyReport
    from .segment import check_records, hidden_records_problem
    from .tail import DEFAULT_MAX_MESSAGE_BYTES, partial_tail_problem
    from .txn import unindexed_aborts

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "DEFAULT_MAX_MESSAGE_BYTES": "tail",
    "ERROR": "report",
    "INFO": "report",
    "VerifyReport": "report",
    "WARNING": "report",
    "check_records": "segment",
    "hidden_records_problem": "segment",
    "is_partition_dir": "data_dir",
    "log_start_before_segments": "partition",
    "lost_segments": "partition",
    "lost_span": "partition",
    "partial_tail_problem": "tail",
    "unindexed_aborts": "txn",
    "verify": "data_dir",
}
__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERROR",
    "INFO",
    "WARNING",
    "VerifyReport",
    "check_records",
    "hidden_records_problem",
    "is_partition_dir",
    "log_start_before_segments",
    "lost_segments",
    "lost_span",
    "partial_tail_problem",
    "unindexed_aborts",
    "verify",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
