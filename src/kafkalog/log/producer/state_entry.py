"""What the broker remembers of each idempotent or transactional producer (ProducerStateEntry).

Per producer id: its epoch, the metadata of its last 5 batches (enough to answer a retry of any
in-flight batch, as a producer has at most 5 in flight), the coordinator epoch of its last
transaction marker, the first offset of its open transaction, and its last timestamp (for
expiry). Values here are immutable: an append builds new entries and the manager swaps them in
only once the append succeeded, so a rejected batch leaves no trace.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...format.constants import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateEntry",
    "decrement_sequence",
]

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = (1 << 31) - 1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence: the inverse of the wrap past Integer.MAX."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: sequences and offsets (BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a COMMIT or ABORT marker at ``last_offset`` (for the .txnindex)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerStateEntry:
    """The state of one producer id; ``current_txn_first_offset`` is None outside a transaction."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: tuple[BatchMetadata, ...] = ()

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        return cls(producer_id=producer_id)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def with_epoch(self, producer_epoch: int) -> ProducerStateEntry:
        """A new epoch forgets the old epoch's batches (their sequences no longer apply)."""
        if producer_epoch == self.producer_epoch:
            return self
        return replace(self, producer_epoch=producer_epoch, batch_metadata=())

    def with_batch(self, producer_epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        """Record an appended data batch, keeping the last NUM_BATCHES_TO_RETAIN."""
        entry = self.with_epoch(producer_epoch)
        kept = (*entry.batch_metadata, batch)[-NUM_BATCHES_TO_RETAIN:]
        return replace(entry, batch_metadata=kept, last_timestamp=batch.timestamp)

    def merged(self, update: ProducerStateEntry) -> ProducerStateEntry:
        """This entry after an append whose own view is ``update`` (ProducerStateEntry.update)."""
        entry = self.with_epoch(update.producer_epoch)
        kept = (*entry.batch_metadata, *update.batch_metadata)[-NUM_BATCHES_TO_RETAIN:]
        return replace(
            entry,
            batch_metadata=kept,
            coordinator_epoch=update.coordinator_epoch,
            current_txn_first_offset=update.current_txn_first_offset,
            last_timestamp=update.last_timestamp,
        )

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for metadata in self.batch_metadata:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None

    def find_duplicate_batch(self, batch) -> BatchMetadata | None:
        """The earlier append of a retried ``batch`` (same epoch and sequence range), if cached."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)
