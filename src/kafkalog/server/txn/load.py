"""Loading ``__transaction_state`` on start (Kafka's TransactionStateManager.loadTransactions).

The newest record of each transactional id is its state; a tombstone removes the id. What the
records say is all the coordinator needs: an Ongoing transaction keeps its partitions and start
time (its timeout still applies), a Prepare state means markers may be missing and is finished
by :meth:`TransactionCoordinator.complete_prepared_transactions`. Records that cannot be read
(a newer value version, damage) are skipped with a warning naming partition and offset.
"""

from __future__ import annotations

import logging

from ...format.internal import decode_transaction_log_key, decode_transaction_log_value
from .coordinator import TransactionCoordinator
from .state import TransactionMetadata

__all__ = ["load_transactions"]

_log = logging.getLogger("kafkalog.server.transactions")


def load_transactions(coordinator: TransactionCoordinator) -> int:
    """Replay every partition into ``coordinator.txns``; returns the highest producer id seen
    (-1 if none), below which new producer ids must not start."""
    log = coordinator.log
    highest = -1
    for partition in range(log.partitions):
        for record in log.read(partition):
            if record.control is not None or record.key is None:
                continue
            where = f"{log.topic}-{partition} at offset {record.offset}"
            key = decode_transaction_log_key(record.key)
            if key.data is None:
                _log.warning("skipping unreadable key in %s: %s", where, key.error or key.kind)
                continue
            txn_id = key.data["transactionalId"]
            if record.value is None:
                coordinator.txns.pop(txn_id, None)
                continue
            value = decode_transaction_log_value(record.value)
            if value.data is None:
                _log.warning("skipping unreadable state of %s in %s: %s", txn_id, where,
                             value.error or f"version {value.version}")  # fmt: skip
                continue
            txn = TransactionMetadata.from_record(txn_id, value.data)
            coordinator.txns[txn_id] = txn
            highest = max(highest, txn.producer_id, value.data["previousProducerId"],
                          value.data["nextProducerId"])  # fmt: skip
    return highest
