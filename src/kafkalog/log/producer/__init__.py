"""Producer state: idempotence and transactions per producer, and its snapshot files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .append_info import (
        InvalidProducerEpochError,
        TransactionCoordinatorFencedError,
        end_txn_marker,
    )
    from .snapshot import (
        CorruptSnapshotError,
        SnapshotFile,
        decode_snapshot,
        list_snapshot_files,
        read_snapshot,
    )
    from .state import ProducerStateManager
    from .state_entry import CompletedTxn, ProducerStateEntry

# What the code outside imports from here, and the module that defines it (loaded on first use).
_EXPORTS = {
    "CompletedTxn": "state_entry",
    "CorruptSnapshotError": "snapshot",
    "InvalidProducerEpochError": "append_info",
    "ProducerStateEntry": "state_entry",
    "ProducerStateManager": "state",
    "SnapshotFile": "snapshot",
    "TransactionCoordinatorFencedError": "append_info",
    "decode_snapshot": "snapshot",
    "end_txn_marker": "append_info",
    "list_snapshot_files": "snapshot",
    "read_snapshot": "snapshot",
}
__all__ = [
    "CompletedTxn",
    "CorruptSnapshotError",
    "InvalidProducerEpochError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SnapshotFile",
    "TransactionCoordinatorFencedError",
    "decode_snapshot",
    "end_txn_marker",
    "list_snapshot_files",
    "read_snapshot",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
