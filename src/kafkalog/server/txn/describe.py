"""DescribeTransactions (65) and ListTransactions (66): what ``kafka-transactions.sh`` asks to find
hanging transactions (KIP-664), answered from the transaction coordinator's state.

States are Kafka's names (TransactionState.stateName: Empty, Ongoing, PrepareCommit, ...); an
unknown transactional id is TRANSACTIONAL_ID_NOT_FOUND, and state filters Kafka does not know
come back in ``unknown_state_filters``, as Kafka answers them.
"""

from __future__ import annotations

import re

from ..error_codes import INVALID_REQUEST, NONE, TRANSACTIONAL_ID_NOT_FOUND
from ..handlers import RequestContext
from .coordinator import TransactionCoordinator
from .state import TransactionState

__all__ = ["describe_transactions", "list_transactions"]

_STATE_NAMES = {s.name_in_kafka: s for s in TransactionState}


async def describe_transactions(
    coordinator: TransactionCoordinator, ctx: RequestContext, req: dict
) -> dict:
    out = []
    for txn_id in req.get("transactional_ids") or []:
        txn = coordinator.txns.get(txn_id)
        if txn is None:
            out.append({"error_code": TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": txn_id,
                        "transaction_state": "", "producer_id": -1, "producer_epoch": -1,
                        "transaction_start_time_ms": -1})  # fmt: skip
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append({
            "error_code": NONE, "transactional_id": txn_id,
            "transaction_state": txn.state.name_in_kafka,
            "transaction_timeout_ms": txn.timeout_ms,
            "transaction_start_time_ms": txn.start_timestamp_ms,
            "producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        })  # fmt: skip
    return {"transaction_states": out}


async def list_transactions(
    coordinator: TransactionCoordinator, ctx: RequestContext, req: dict
) -> dict:
    filters = list(req.get("state_filters") or [])
    unknown = [f for f in filters if f not in _STATE_NAMES]
    states = {_STATE_NAMES[f] for f in filters if f in _STATE_NAMES}
    producer_ids = set(req.get("producer_id_filters") or [])
    duration = req.get("duration_filter", -1)
    pattern_text = req.get("transactional_id_pattern")
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return {"error_code": INVALID_REQUEST, "unknown_state_filters": unknown}
    now = coordinator.now()
    out = []
    for txn_id, txn in sorted(coordinator.txns.items()):
        if filters and txn.state not in states:
            continue
        if producer_ids and txn.producer_id not in producer_ids:
            continue
        if duration >= 0 and (
            txn.start_timestamp_ms < 0 or now - txn.start_timestamp_ms < duration
        ):
            continue
        if pattern is not None and not pattern.fullmatch(txn_id):
            continue
        out.append({"transactional_id": txn_id, "producer_id": txn.producer_id,
                    "transaction_state": txn.state.name_in_kafka})  # fmt: skip
    return {"error_code": NONE, "unknown_state_filters": unknown, "transaction_states": out}
