"""The producer rules an append must pass, one producer at a time (Kafka's ProducerAppendInfo).

Epochs fence zombies: a batch or marker with an epoch below the producer's is rejected
(INVALID_PRODUCER_EPOCH). Sequences give exactly-once appends: within an epoch each batch must
start right after the last one (wrapping past Integer.MAX to 0), a new epoch must start at 0
(OUT_OF_ORDER_SEQUENCE_NUMBER). A transactional data batch opens a transaction; a COMMIT/ABORT
marker closes it, giving a :class:`CompletedTxn`, and is refused from a coordinator older than the
last one seen (TRANSACTION_COORDINATOR_FENCED). Sequence checks apply only to client appends;
replication and log recovery take what the leader accepted and only warn about old epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from ...errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkalogError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from ...format.constants import ControlRecordType
from ...format.control import decode_control_type, decode_end_txn_marker
from ...format.record import Record
from ...format.validate import AppendOrigin
from .state_entry import BatchMetadata, CompletedTxn, ProducerStateEntry

__all__ = [
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerAppendInfo",
    "TransactionCoordinatorFencedError",
]

_log = logging.getLogger(__name__)
_INT32_MAX = (1 << 31) - 1


def end_txn_marker(batch) -> tuple[ControlRecordType, int, Record] | None:
    """(type, coordinator epoch, record) of a control batch's end-transaction marker, None when
    the cleaner emptied it; InvalidRecordError when it is not a COMMIT or ABORT marker that
    decodes (producer state cannot take it)."""
    record = next(iter(batch.records()), None)
    if record is None:
        return None
    control_type = decode_control_type(record.key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(
            f"Invalid control record type for end transaction marker {control_type}",
            position=batch.position,
            offset=batch.base_offset,
        )
    _, coordinator_epoch = decode_end_txn_marker(record.value)
    return ControlRecordType(control_type), coordinator_epoch, record


class ProducerAppendInfo:
    """One producer's share of an append: checks each batch against ``current_entry`` plus the
    batches already accepted in this append, and accumulates the updated entry.

    ``current_entry`` is what the manager holds; :meth:`to_entry` gives only what this append
    changes, which :meth:`ProducerStateManager.update` merges in once the append succeeded.
    """

    def __init__(
        self,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
        *,
        topic_partition: str = "unknown-0",
    ) -> None:
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.topic_partition = topic_partition
        self._updated = replace(current_entry, producer_id=producer_id, batch_metadata=())
        self._started: list[int] = []

    def to_entry(self) -> ProducerStateEntry:
        return self._updated

    @property
    def started_transactions(self) -> list[int]:
        """First offsets of the transactions this append opened."""
        return list(self._started)

    def append(self, batch, first_offset: int | None = None) -> CompletedTxn | None:
        """Apply one batch (data or control) of this producer; a marker may complete a txn."""
        if batch.is_control:
            marker = end_txn_marker(batch)
            if marker is None:  # the cleaner removed the whole transaction: nothing to close
                return None
            control_type, coordinator_epoch, record = marker
            return self.append_end_txn_marker(
                control_type,
                coordinator_epoch,
                producer_epoch=batch.producer_epoch,
                offset=batch.base_offset,
                timestamp=record.timestamp,
            )
        self.append_data_batch(
            producer_epoch=batch.producer_epoch,
            first_seq=batch.base_sequence,
            last_seq=batch.last_sequence,
            last_timestamp=batch.max_timestamp,
            first_offset=batch.base_offset if first_offset is None else first_offset,
            last_offset=batch.last_offset,
            is_transactional=batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        *,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        metadata = BatchMetadata(last_seq, last_offset, last_offset - first_offset, last_timestamp)
        updated = self._updated.with_batch(producer_epoch, metadata)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}",
                offset=first_offset,
            )
        if updated.current_txn_first_offset is None and is_transactional:
            updated = replace(updated, current_txn_first_offset=first_offset)
            self._started.append(first_offset)
        self._updated = updated

    def append_end_txn_marker(
        self,
        control_type: ControlRecordType,
        coordinator_epoch: int,
        *,
        producer_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Close the open transaction; None for a marker of a transaction without data here."""
        self._check_producer_epoch(producer_epoch, offset)
        current = self._updated.coordinator_epoch
        if current > coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} "
                f"in partition {self.topic_partition}: {coordinator_epoch} (zombie), {current} "
                f"(current)"
            )
            self._refuse(TransactionCoordinatorFencedError, message, offset, _log.info)
        first = self._updated.current_txn_first_offset
        completed = None
        if first is not None:
            completed = CompletedTxn(
                self.producer_id, first, offset, control_type == ControlRecordType.ABORT
            )
        self._updated = replace(
            self._updated.with_epoch(producer_epoch),
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=None,
            last_timestamp=timestamp,
        )
        return completed

    def _refuse(
        self, error: type[KafkalogError], message: str, offset: int, log: Callable[[str], None]
    ) -> None:
        """Raise ``error`` for an append Kafka refuses; a replica's is only logged (the leader
        accepted it)."""
        if self.origin != AppendOrigin.REPLICATION:
            raise error(message, offset=offset)
        log(message)

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self._updated.producer_epoch
        if producer_epoch < current:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {producer_epoch}, which is smaller than the last seen "
                f"epoch {current}"
            )
            self._refuse(InvalidProducerEpochError, message, offset, _log.warning)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self._updated, self.current_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != -1:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.topic_partition}: {producer_epoch} "
                    f"(request epoch), {first_seq} (seq. number), {updated.producer_epoch} "
                    f"(current producer epoch)",
                    offset=offset,
                )
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = -1
        # No epoch yet (every batch of the producer deleted by retention): accept any sequence.
        if current.producer_epoch != -1 and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {first_seq} (incoming seq. "
                f"number), {last_seq} (current end sequence number)",
                offset=offset,
            )

    def __repr__(self) -> str:
        u = self._updated
        return (
            f"ProducerAppendInfo(producerId={self.producer_id}, producerEpoch={u.producer_epoch}, "
            f"firstSequence={u.first_seq}, lastSequence={u.last_seq}, "
            f"currentTxnFirstOffset={u.current_txn_first_offset}, "
            f"coordinatorEpoch={u.coordinator_epoch}, startedTransactions={self._started})"
        )


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)
