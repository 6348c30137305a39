"""The internal topics: the coordinators' logs, which clients may read but never write."""

from __future__ import annotations

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
