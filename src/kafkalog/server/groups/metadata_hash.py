"""The metadata hash of a consumer group (KIP-1101): what Kafka 4.1+ stores in
ConsumerGroupMetadataValue to notice that a subscribed topic changed (its id, name, partition
count or racks) without keeping the topics' metadata in records.

Kafka computes it with hash4j's XXH3-64 (seed 0; the xxhash package computes the same function)
over a stream of values: ``putByte`` one byte, ``putInt``/``putLong`` little-endian,
``putString`` the UTF-16LE code units then the length as an int. A topic's hash
(``Utils.computeTopicHash``) is magic byte 0, the topic id's two halves, the name, the partition
count, then per partition its index and the sorted racks of its replicas (each as length then
string); the group's (``Utils.computeGroupHash``) is the topic hashes in topic name order, 0 for
no topics. The same inputs give the same 64 bits here, so a Kafka broker
reading this server's records sees an unchanged hash and keeps the group's epoch.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from uuid import UUID

from xxhash import xxh3_64_intdigest as xxh3_64

__all__ = ["group_hash", "topic_hash"]


def _signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def _put_string(text: str) -> bytes:
    units = text.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def topic_hash(
    topic_id: UUID, name: str, partitions: int, racks: Sequence[Sequence[str]] = ()
) -> int:
    """Kafka's computeTopicHash as a signed long; ``racks[p]``: the racks of partition p's
    replicas (none here when the brokers have no rack)."""
    parts = [b"\x00", topic_id.bytes[:8][::-1], topic_id.bytes[8:][::-1], _put_string(name),
             struct.pack("<i", partitions)]  # fmt: skip
    for p in range(partitions):
        parts.append(struct.pack("<i", p))
        for rack in sorted(racks[p]) if p < len(racks) else ():
            parts.append(struct.pack("<i", len(rack)) + _put_string(rack))
    return _signed(xxh3_64(b"".join(parts)))


def group_hash(topics: Mapping[str, tuple[UUID, int]]) -> int:
    """Kafka's computeGroupHash over the subscribed ``topics`` (name -> (id, partition count))
    that exist, as a signed long."""
    if not topics:
        return 0
    hashes = [topic_hash(tid, name, count) for name, (tid, count) in sorted(topics.items())]
    return _signed(xxh3_64(struct.pack(f"<{len(hashes)}q", *hashes)))
