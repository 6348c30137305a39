"""What the log cleaner keeps: Kafka's MemoryRecords.filterTo and the cleaner's RecordFilter.

Rewriting (:func:`filter_batch`, pure: batches in, bytes out) is apart from the policy
(:class:`LogCleanerFilter`), as in Kafka. Per batch, the policy first answers
``check_batch_retention``: DELETE (drop without looking at the records), RETAIN_EMPTY (keep the
batch even if no record survives) or DELETE_EMPTY (drop it if none survives); then
``should_retain_record`` for each record (``should_retain_fields``: its offset, key and whether it
has a value, all the decision reads, which come from the fast path's columns for magic 2 batches
of 16 records or more, :mod:`kafkalog.log.segment.fields`). A surviving batch is

- copied byte for byte when it is magic 2, every record survives and no delete horizon is due;
- else rebuilt as magic 2 with its codec, timestamp type, producer fields, leader epoch,
  baseOffset and (magic 2) lastOffset kept, so that the producer's last sequence survives;
  legacy entries become magic 2 batches starting at their first retained record;
- or, with no record left and RETAIN_EMPTY, written as an empty batch header.

A batch that keeps a tombstone, or a marker whose transaction has no data left, gets the delete
horizon (attribute 0x40, baseTimestamp = now + delete.retention.ms) the first time (KIP-534); a
later clean at or after that time removes them.

Transactions (Kafka's CleanedTransactionMetadata): the cleaner walks the aborted transactions of the
``.txnindex`` files in offset order. Batches of an aborted transaction are discarded; its ABORT
marker stays, and its index entry goes to the cleaned segment, while any batch of it is still in
the log. A COMMIT marker can go once no batch of the transaction was seen in this pass.
"""

from __future__ import annotations

import abc
import enum
import heapq
import itertools
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...format.batch import empty_batch
from ...format.builder import MemoryRecordsBuilder
from ...format.constants import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    ControlRecordType,
    TimestampType,
)
from ...format.control import decode_control_type
from ...format.crc import crc32c
from ...format.record import Record
from ...format.records import Batch
from ..segment import AbortedTxn, record_fields
from .offset_map import OffsetMap

__all__ = [
    "REMOVED_ABORTED",
    "REMOVED_MARKER",
    "REMOVED_NO_KEY",
    "REMOVED_SUPERSEDED",
    "REMOVED_TOMBSTONE",
    "BatchRetention",
    "BatchRetentionResult",
    "CleanedTransactionMetadata",
    "CleanerStats",
    "FilteredBatch",
    "LastRecord",
    "LogCleanerFilter",
    "RecordFilter",
    "build_retained_batch",
    "filter_batch",
]

REMOVED_SUPERSEDED = "superseded by a later record with the same key"
REMOVED_TOMBSTONE = "tombstone past its delete horizon"
REMOVED_NO_KEY = "record without a key"
REMOVED_ABORTED = "data of an aborted transaction"
REMOVED_MARKER = "transaction marker no longer needed"

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch without inspecting its records
    RETAIN_EMPTY = "retain_empty"  # keep the batch even if no record is left
    DELETE_EMPTY = "delete_empty"  # drop the batch if no record is left


@dataclass(frozen=True, slots=True)
class BatchRetentionResult:
    batch_retention: BatchRetention
    contains_marker_for_empty_txn: bool


class RecordFilter(abc.ABC):
    """Kafka's MemoryRecords.RecordFilter: the policy :func:`filter_batch` applies."""

    def __init__(self, current_time: int, delete_retention_ms: int) -> None:
        self.current_time = current_time
        self.delete_retention_ms = delete_retention_ms

    @abc.abstractmethod
    def check_batch_retention(self, batch: Batch) -> BatchRetentionResult: ...

    def should_retain_record(self, batch: Batch, record: Record) -> bool:
        return self.should_retain_fields(batch, record.offset, record.key, record.value is not None)

    @abc.abstractmethod
    def should_retain_fields(
        self, batch: Batch, offset: int, key: bytes | None, has_value: bool
    ) -> bool:
        """should_retain_record from the only fields of a record the decision reads, so that
        :func:`filter_batch` can decide from columns (:mod:`kafkalog.log.segment.fields`)."""


@dataclass(frozen=True, slots=True)
class FilteredBatch:
    """A batch as the cleaner writes it: ``data``, or None to copy the original batch as it is
    (Kafka's batch.writeTo), which the caller reads from where the batch came from."""

    data: bytes | None
    size_in_bytes: int
    last_offset: int
    records_retained: int


def filter_batch(batch: Batch, record_filter: RecordFilter) -> FilteredBatch | None:
    """One batch through ``record_filter`` (Kafka's filterTo a batch at a time); None: dropped."""
    retention = record_filter.check_batch_retention(batch)
    if retention.batch_retention is BatchRetention.DELETE:
        return None
    fields = record_fields(batch)
    if fields is None:
        retained: list[Record] = []
        contains_tombstones = False
        write_original = batch.magic >= MAGIC_VALUE_V2
        for record in batch.records():
            if record_filter.should_retain_record(batch, record):
                retained.append(record)
                contains_tombstones |= record.value is None
            else:
                write_original = False
    else:
        # The decisions from the columns; Record objects only for a batch that is rebuilt.
        keep = [record_filter.should_retain_fields(batch, *row) for row in fields.rows()]
        contains_tombstones = not all(v for k, v in zip(keep, fields.has_value) if k)
        write_original = all(keep)
        if write_original and not _needs_horizon(batch, retention, contains_tombstones):
            return FilteredBatch(None, batch.size_in_bytes, batch.last_offset, len(keep))
        retained = fields.records(keep, batch.timestamp_type) if any(keep) else []
    if retained:
        horizon = batch.delete_horizon_ms
        need_horizon = _needs_horizon(batch, retention, contains_tombstones)
        if write_original and not need_horizon:
            return FilteredBatch(None, batch.size_in_bytes, batch.last_offset, len(retained))
        if need_horizon:
            horizon = record_filter.current_time + record_filter.delete_retention_ms
        data = build_retained_batch(batch, retained, horizon)
        return FilteredBatch(data, len(data), _last_offset(batch, retained), len(retained))
    if retention.batch_retention is BatchRetention.RETAIN_EMPTY:
        if batch.magic < MAGIC_VALUE_V2:  # "should never happen" in Kafka too
            raise ValueError("Empty batches are only supported for magic v2 and above")
        attributes = batch.attributes & (
            TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
        )
        data = empty_batch(
            base_offset=batch.base_offset,
            last_offset=batch.last_offset,
            max_timestamp=batch.max_timestamp,
            attributes=attributes,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
        )
        return FilteredBatch(data, len(data), batch.last_offset, 0)
    return None


def _needs_horizon(
    batch: Batch, retention: BatchRetentionResult, contains_tombstones: bool
) -> bool:
    """Whether a kept batch gets its delete horizon now: it keeps a tombstone or a marker whose
    transaction has no data left, and has none yet (KIP-534)."""
    return (
        contains_tombstones or retention.contains_marker_for_empty_txn
    ) and batch.delete_horizon_ms is None


def _last_offset(batch: Batch, retained: list[Record]) -> int:
    return batch.last_offset if batch.magic >= MAGIC_VALUE_V2 else retained[-1].offset


def build_retained_batch(
    batch: Batch, retained: list[Record], delete_horizon_ms: int | None
) -> bytes:
    """Kafka's buildRetainedRecordsInto: the survivors as one magic 2 batch."""
    timestamp_type = batch.timestamp_type
    if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
        timestamp_type = TimestampType.CREATE_TIME  # no log append time to invent for magic 0
    v2 = batch.magic >= MAGIC_VALUE_V2
    builder = MemoryRecordsBuilder(
        compression=batch.compression,
        timestamp_type=timestamp_type,
        base_offset=batch.base_offset if v2 else retained[0].offset,
        log_append_time=(
            batch.max_timestamp if timestamp_type == TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
        ),
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
    for record in retained:
        builder.append(
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=record.headers,
            offset=record.offset,
        )
    data = builder.build()
    if v2 and retained[-1].offset != batch.last_offset:
        data = _override_last_offset(data, batch.last_offset)
    return data


def _override_last_offset(data: bytes, last_offset: int) -> bytes:
    """Kafka's MemoryRecordsBuilder.overrideLastOffset, which kafkalog's builder lacks: the
    batch keeps its lastOffset (and so its producer's last sequence) when its tail is removed.
    lastOffsetDelta is inside the CRC, so the CRC is recomputed."""
    buf = bytearray(data)
    base_offset = struct.unpack_from(">q", buf, 0)[0]
    _I32.pack_into(buf, LAST_OFFSET_DELTA_OFFSET, last_offset - base_offset)
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


# -- transactions ----------------------------------------------------------------------------------
@dataclass(slots=True)
class _AbortedTxnMetadata:
    aborted_txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state while the cleaner walks the log (Kafka's CleanedTransactionMetadata).

    ``retained_aborted_txns`` collects the aborted transactions whose ABORT marker is kept: the
    cleaner appends them to the ``.txnindex`` of the segment it writes the marker to.
    """

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._tie = itertools.count()
        self.retained_aborted_txns: list[AbortedTxn] = []

    def add_aborted_transactions(self, aborted_txns: Iterable[AbortedTxn]) -> None:
        for txn in aborted_txns:
            heapq.heappush(self._aborted, (txn.first_offset, next(self._tie), txn))

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnMetadata(txn))

    def on_control_batch_read(self, batch: Batch) -> bool:
        """True if the control batch can be discarded."""
        self._consume_aborted_txns_up_to(batch.last_offset)
        first = next(iter(batch.records()), None)
        if first is None:
            return True  # an empty control batch was already cleaned
        control_type = decode_control_type(first.key)
        producer_id = batch.producer_id
        if control_type == ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                self.retained_aborted_txns.append(aborted.aborted_txn)
                return False  # kept until every batch of the transaction is gone
            return True
        if control_type == ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, batch: Batch) -> bool:
        """True if the data batch belongs to an aborted transaction."""
        self._consume_aborted_txns_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(batch.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False


# -- the cleaner's policy ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last data offset (None after only markers) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class CleanerStats:
    """Counts of one clean (Kafka's CleanerStats), plus what was removed and why."""

    max_messages: int = 1000
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    records_removed: int = 0
    # Records of batches dropped whole (aborted data, markers): Kafka's messagesRead leaves
    # them out, so the records a clean looked at are messages_read plus these.
    batch_records_removed: int = 0
    batches_removed: int = 0
    removed_by_reason: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def removed(self, count: int, reason: str, message: str) -> None:
        self.records_removed += count
        self.removed_by_reason[reason] = self.removed_by_reason.get(reason, 0) + count
        if len(self.messages) < self.max_messages:
            self.messages.append(message)


def _key_repr(key: bytes) -> str:
    return repr(key) if len(key) <= 40 else repr(key[:40]) + "..."


class LogCleanerFilter(RecordFilter):
    """The cleaner's decisions (the RecordFilter of Kafka's Cleaner.cleanInto and
    shouldRetainRecord), for the batches of one source segment."""

    def __init__(
        self,
        *,
        current_time: int,
        delete_retention_ms: int,
        offset_map: OffsetMap,
        retain_legacy_deletes: bool,
        transaction_metadata: CleanedTransactionMetadata,
        last_records_of_active_producers: Mapping[int, LastRecord],
        high_watermark: int,
        stats: CleanerStats,
    ) -> None:
        super().__init__(current_time, delete_retention_ms)
        self.offset_map = offset_map
        self.retain_legacy_deletes = retain_legacy_deletes
        self.txn = transaction_metadata
        self.active_producers = last_records_of_active_producers
        self.high_watermark = high_watermark
        self.stats = stats
        self._discard_batch_records = False

    def check_batch_retention(self, batch: Batch) -> BatchRetentionResult:
        is_control = batch.is_control
        # Markers piggy-back on the tombstone horizon: never removed before their data.
        if is_control:
            can_discard = self.txn.on_control_batch_read(batch)
            horizon = batch.delete_horizon_ms
            self._discard_batch_records = (
                can_discard and horizon is not None and horizon <= self.current_time
            )
        else:
            can_discard = self.txn.on_batch_read(batch)
            self._discard_batch_records = can_discard
        has_producer_id = batch.producer_id > NO_PRODUCER_ID
        if has_producer_id and self._is_batch_last_record_of_producer(batch):
            retention = BatchRetention.RETAIN_EMPTY  # keeps the producer's sequence and epoch
        elif batch.next_offset == self.high_watermark:
            retention = BatchRetention.RETAIN_EMPTY  # keeps the log end offset
        elif self._discard_batch_records:
            retention = BatchRetention.DELETE
            self.stats.batches_removed += 1
            self._removed_batch(batch, batch.count)
        else:
            retention = BatchRetention.DELETE_EMPTY
        return BatchRetentionResult(retention, can_discard and is_control)

    def _is_batch_last_record_of_producer(self, batch: Batch) -> bool:
        last = self.active_producers.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.is_control and batch.producer_epoch == last.producer_epoch

    def _removed_batch(self, batch: Batch, count: int) -> None:
        if batch.is_control:
            reason, what = REMOVED_MARKER, "transaction marker"
        else:
            reason, what = REMOVED_ABORTED, "aborted transaction data"
        self.stats.batch_records_removed += count
        self.stats.removed(
            count,
            reason,
            f"offsets {batch.base_offset}..{batch.last_offset}: {what} of producer "
            f"{batch.producer_id} ({reason})",
        )

    def should_retain_fields(
        self, batch: Batch, offset: int, key: bytes | None, has_value: bool
    ) -> bool:
        self.stats.messages_read += 1
        if self._discard_batch_records:
            # The batch is only kept (empty) to preserve its producer's state.
            self._removed_batch_record(batch, offset)
            return False
        if batch.is_control:
            return True
        if offset > self.offset_map.latest_offset:
            return True
        if key is None:
            self.stats.invalid_messages_read += 1
            self.stats.removed(1, REMOVED_NO_KEY, f"offset {offset}: {REMOVED_NO_KEY}")
            return False
        found = self.offset_map.get(key)
        if offset < found:
            self.stats.removed(
                1,
                REMOVED_SUPERSEDED,
                f"offset {offset} (key {_key_repr(key)}): superseded by offset {found}",
            )
            return False
        if has_value:
            return True
        if batch.magic >= MAGIC_VALUE_V2:
            horizon = batch.delete_horizon_ms
            retain_deletes = horizon is None or self.current_time < horizon
        else:
            retain_deletes = self.retain_legacy_deletes
        if not retain_deletes:
            self.stats.removed(
                1,
                REMOVED_TOMBSTONE,
                f"offset {offset} (key {_key_repr(key)}): {REMOVED_TOMBSTONE}",
            )
        return retain_deletes

    def _removed_batch_record(self, batch: Batch, offset: int) -> None:
        reason = REMOVED_MARKER if batch.is_control else REMOVED_ABORTED
        self.stats.removed(
            1,
            reason,
            f"offset {offset}: {reason} (producer {batch.producer_id}; its batch is "
            f"kept empty for the producer's state)",
        )
