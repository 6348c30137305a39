"""A partition's producer state: idempotence, transactions, snapshots (ProducerStateManager).

The manager maps producer ids to :class:`ProducerStateEntry` and tracks open transactions by first
offset, which gives the last stable offset (LSO) that read_committed consumers stop at. A
transaction stays *unstable* after its marker until the high watermark passes the marker, so the
first unstable offset is the earliest of the open and the completed-but-unreplicated ones.

An append as leader goes: :meth:`~ProducerStateManager.analyze_batches` (checks every batch, finds
a retried duplicate, which the broker answers with the original offsets instead of appending),
write the bytes, then :meth:`~ProducerStateManager.apply_append` (entries swapped in, completed
transactions returned with their LSO for the ``.txnindex``). Log recovery replays batches with
:meth:`~ProducerStateManager.replay_batch`. State survives restarts in ``.snapshot`` files
(:mod:`kafkalog.log.producer.snapshot`); producers idle for ``producer.id.expiration.ms`` without
an open transaction are forgotten. Time comes from an injected clock: any object with
``milliseconds()``, or a callable returning milliseconds.

Left out on purpose: KIP-890 transaction verification (a broker-to-coordinator round trip).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ...format.constants import NO_PRODUCER_ID
from ...format.validate import AppendOrigin
from .append_info import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerAppendInfo,
    TransactionCoordinatorFencedError,
)
from .snapshot import (
    CorruptSnapshotError,
    SnapshotFile,
    delete_snapshot_file,
    list_snapshot_files,
    read_snapshot,
    snapshot_file_path,
    write_snapshot,
)
from .state_entry import BatchMetadata, CompletedTxn, ProducerStateEntry

__all__ = [
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "LATE_TRANSACTION_BUFFER_MS",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerAppendAnalysis",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "TxnMetadata",
]

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000


@dataclass(slots=True)
class TxnMetadata:
    """A transaction in flight: ``last_offset`` (its marker) is None until it completes."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class ProducerAppendAnalysis:
    """What :meth:`ProducerStateManager.analyze_batches` found; nothing is applied yet.

    ``duplicate`` is set when a client retried a batch already in the log: append nothing and
    answer with ``duplicate.first_offset .. duplicate.last_offset`` (and its timestamp).
    """

    updated_producers: Mapping[int, ProducerAppendInfo]
    completed_txns: tuple[CompletedTxn, ...]
    duplicate: BatchMetadata | None = None


class ProducerStateManager:
    """Producer state of one partition directory ``log_dir``; snapshot files live there too."""

    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        clock,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        topic_partition: str | None = None,
        writable: bool = True,
        discard_snapshot: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        # Read-only (a dead broker's disk): snapshots are read, never written or deleted.
        self.writable = writable
        # Where a snapshot Kafka deletes goes instead (``discard_snapshot(path, why)``, e.g. log
        # recovery's quarantine); None: deleted.
        self._discard_snapshot = discard_snapshot
        self.topic_partition = topic_partition or self.log_dir.name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._now: Callable[[], int] = getattr(clock, "milliseconds", clock)
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated: dict[int, TxnMetadata] = {}  # completed, marker above the HW
        self._oldest_txn_last_timestamp = -1
        self._snapshots = self._load_snapshot_files()
        self._last_map_offset = 0
        self._last_snap_offset = 0

    # -- state -----------------------------------------------------------------------------------
    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    @property
    def map_end_offset(self) -> int:
        """The offset up to which batches have been applied (exclusive)."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            first = entry.current_txn_first_offset
            self._ongoing[first] = TxnMetadata(entry.producer_id, first)

    # -- appends ---------------------------------------------------------------------------------
    def prepare_update(
        self, producer_id: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(
            producer_id, current, origin, topic_partition=self.topic_partition
        )

    def analyze_batches(
        self, batches: Iterable, *, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> ProducerAppendAnalysis:
        """Check the batches of an append (offsets assigned) against the state; apply nothing.

        Raises the producer errors (epoch, sequence, transaction state, coordinator fencing).
        """
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            producer_id = batch.producer_id
            if producer_id <= NO_PRODUCER_ID:
                continue
            if origin == AppendOrigin.CLIENT:
                entry = self._producers.get(producer_id)
                duplicate = entry.find_duplicate_batch(batch) if entry else None
                if duplicate is not None:
                    return ProducerAppendAnalysis(updated, tuple(completed), duplicate)
            info = updated.get(producer_id)
            if info is None:
                info = updated[producer_id] = self.prepare_update(producer_id, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        return ProducerAppendAnalysis(updated, tuple(completed))

    def apply_append(
        self, analysis: ProducerAppendAnalysis, next_offset: int
    ) -> list[tuple[CompletedTxn, int]]:
        """After the bytes are written: swap in the entries, complete transactions and move the
        map end to ``next_offset``. Returns each completed transaction with the last stable
        offset to record in the transaction index."""
        for info in analysis.updated_producers.values():
            self.update(info)
        done = []
        for txn in analysis.completed_txns:
            done.append((txn, self.last_stable_offset(txn)))
            self.complete_txn(txn)
        self.update_map_end_offset(next_offset)
        return done

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Merge one producer's append into the state (ProducerStateManager.update)."""
        producer_id = append_info.producer_id
        if producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {producer_id} passed to update")
        updated = append_info.to_entry()
        current = self._producers.get(producer_id)
        self._producers[producer_id] = current.merged(updated) if current else updated
        for first in append_info.started_transactions:
            self._ongoing[first] = TxnMetadata(producer_id, first)
        self._update_oldest_txn_timestamp()

    def replay_batch(self, batch) -> tuple[CompletedTxn, int] | None:
        """Apply one batch read back from the log (LogSegment recovery): no sequence checks,
        old epochs only warned about. Returns a completed transaction with its last stable offset
        for the transaction index, if the batch is a marker."""
        result = None
        if batch.producer_id > NO_PRODUCER_ID:
            info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            txn = info.append(batch)
            self.update(info)
            if txn is not None:
                result = (txn, self.last_stable_offset(txn))
                self.complete_txn(txn)
        self.update_map_end_offset(batch.last_offset + 1)
        return result

    def load_producers_from_batches(self, batches: Iterable) -> list[CompletedTxn]:
        """Rebuild state from batches after a snapshot (UnifiedLog.loadProducersFromRecords)."""
        analysis = self.analyze_batches(batches, origin=AppendOrigin.REPLICATION)
        for info in analysis.updated_producers.values():
            self.update(info)
        for txn in analysis.completed_txns:
            self.complete_txn(txn)
        return list(analysis.completed_txns)

    # -- transactions ----------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The earliest first offset of a transaction open or not yet replicated (LSO bound)."""
        candidates = [min(d) for d in (self._ongoing, self._unreplicated) if d]
        return min(candidates) if candidates else None

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO once ``completed_txn`` completes: the next other open transaction's start."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed_txn.producer_id:
                return first
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(
                f"Attempted to complete transaction {completed_txn} on partition "
                f"{self.topic_partition} which was not started"
            )
        txn.last_offset = completed_txn.last_offset
        self._unreplicated[completed_txn.first_offset] = txn
        self._update_oldest_txn_timestamp()

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def has_late_transaction(self, now_ms: int | None = None) -> bool:
        """An open transaction idle past the max transaction timeout plus 5 minutes."""
        now = self._now() if now_ms is None else now_ms
        last = self._oldest_txn_last_timestamp
        limit = self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS
        return last > 0 and now - last > limit

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        for first, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first]

    def _update_oldest_txn_timestamp(self) -> None:
        if not self._ongoing:
            self._oldest_txn_last_timestamp = -1
            return
        entry = self._producers.get(self._ongoing[min(self._ongoing)].producer_id)
        self._oldest_txn_last_timestamp = entry.last_timestamp if entry else -1

    # -- expiry and truncation -------------------------------------------------------------------
    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        now = self._now() if now_ms is None else now_ms
        self._producers = {
            pid: e for pid, e in self._producers.items() if not self._is_expired(now, e)
        }

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_transactions(log_start_offset)
        self._last_map_offset = max(self._last_map_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot; the map restarts at ``offset``."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for snapshot_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(
                snapshot_offset, "the producer state was truncated fully"
            )
        self._last_snap_offset = 0
        self._last_map_offset = offset
        self._update_oldest_txn_timestamp()

    def truncate_fully_and_reload_snapshots(self) -> None:
        self.truncate_fully_and_start_at(0)
        self._snapshots = self._load_snapshot_files()

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """Keep snapshots in (log start, log end], then reload from the latest one that reads.

        Corrupt snapshots are deleted on the way, as Kafka does, and the log is replayed from
        :attr:`map_end_offset` by the caller.
        """
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(
                    offset,
                    f"above offset {log_end_offset}, where the producer state is reloaded"
                    if offset > log_end_offset
                    else f"at or below the log start offset {log_start_offset}",
                )
        if log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            self._update_oldest_txn_timestamp()
            self._load_from_snapshot(log_start_offset, self._now() if now_ms is None else now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            latest = self._snapshots[max(self._snapshots)]
            try:
                entries = read_snapshot(latest.path)
            except (CorruptSnapshotError, FileNotFoundError) as e:
                self._remove_and_delete_snapshot(latest.offset, f"cannot be loaded: {e}")
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = latest.offset
            self._update_oldest_txn_timestamp()
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    # -- snapshots -------------------------------------------------------------------------------
    def _load_snapshot_files(self) -> dict[int, SnapshotFile]:
        return {s.offset: s for s in list_snapshot_files(self.log_dir)}

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write a snapshot at :attr:`map_end_offset` unless one is already there or later."""
        if self._last_map_offset <= self._last_snap_offset or not self.writable:
            return None
        path = snapshot_file_path(self.log_dir, self._last_map_offset)
        write_snapshot(path, self._producers.values(), sync=sync)
        self._snapshots[self._last_map_offset] = SnapshotFile(self._last_map_offset, path)
        self._last_snap_offset = self._last_map_offset
        return path

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_files(self) -> list[SnapshotFile]:
        return sorted(self._snapshots.values())

    def fetch_snapshot(self, offset: int) -> Path | None:
        snapshot = self._snapshots.get(offset)
        return snapshot.path if snapshot else None

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot_offset in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snapshot_offset, f"below offset {offset}")

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots without a segment of that base offset, except the latest stray one
        when it is above every segment (the one written at clean shutdown)."""
        bases = set(segment_base_offsets)
        self._snapshots = self._load_snapshot_files()
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        why = "a stray snapshot (no segment starts at its offset)"
        for offset in strays[:-1]:
            self._remove_and_delete_snapshot(offset, why)
        if strays and bases and strays[-1] < max(bases):
            self._remove_and_delete_snapshot(strays[-1], why)

    def _remove_and_delete_snapshot(self, offset: int, why: str) -> None:
        snapshot = self._snapshots.pop(offset, None)
        if snapshot is None or not self.writable:
            return
        if self._discard_snapshot is not None and snapshot.path.exists():
            self._discard_snapshot(snapshot.path, why)
        else:
            delete_snapshot_file(snapshot.path)
