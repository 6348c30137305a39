"""One transactional id's state (Kafka's TransactionMetadata and TransactionState).

The coordinator of a transactional id knows its producer id and epoch, its timeout, the
partitions the open transaction has written to, and where it stands::

    Empty -> Ongoing -> PrepareCommit -> CompleteCommit -> Ongoing ...
                     \\-> PrepareAbort  -> CompleteAbort  -> Ongoing ...

Each state is written to ``__transaction_state`` before the coordinator acts on it, so after a
crash the coordinator knows which markers may still be missing (a Prepare state) and writes
them again. The epoch is bumped by every InitProducerId and when the coordinator aborts a
transaction on its own (timeout, a new producer instance): older instances are fenced.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ...format.internal.transaction_state_encode import (
    encode_transaction_log_key,
    encode_transaction_log_value,
)

__all__ = ["TransactionMetadata", "TransactionState"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE: an epoch that cannot be bumped needs a new id


class TransactionState(enum.IntEnum):
    """TransactionLogValue's transactionStatus; ``name_in_kafka`` is what tools print."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def name_in_kafka(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


COMPLETE_STATES = frozenset({TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})
PREPARE_STATES = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID  # before the latest InitProducerId (KIP-360 retries)
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def record(self) -> tuple[bytes, bytes]:
        """The ``__transaction_state`` key and value of the current state."""
        partitions = () if self.state == TransactionState.EMPTY else sorted(self.partitions)
        value = encode_transaction_log_value(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            partitions=partitions, last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
        )  # fmt: skip
        return encode_transaction_log_key(self.transactional_id), value

    @classmethod
    def from_record(cls, transactional_id: str, data: dict) -> TransactionMetadata:
        """Rebuild from a decoded TransactionLogValue (see format.internal.transaction_state)."""
        partitions = {
            (t["topic"], p) for t in data["transactionPartitions"] or () for p in t["partitionIds"]
        }
        return cls(
            transactional_id=transactional_id, producer_id=data["producerId"],
            producer_epoch=data["producerEpoch"], timeout_ms=data["transactionTimeoutMs"],
            state=TransactionState(data["transactionStatus"]), partitions=partitions,
            start_timestamp_ms=data["transactionStartTimestampMs"],
            last_update_timestamp_ms=data["transactionLastUpdateTimestampMs"],
        )  # fmt: skip

    def is_expired(self, now_ms: int) -> bool:
        """An open transaction past its timeout (the coordinator aborts it)."""
        return (
            self.state == TransactionState.ONGOING
            and self.start_timestamp_ms >= 0
            and now_ms > self.start_timestamp_ms + self.timeout_ms
        )
