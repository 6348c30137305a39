"""The log cleaner's key -> latest offset map (Kafka's OffsetMap / SkimpyOffsetMap).

Kafka keys the map by the MD5 digest of the record key, not the key itself, so that every entry
takes a fixed 24 bytes (16 of digest, 8 of offset) of a preallocated buffer. kafkalog keys a dict
by the same MD5 digest, which keeps Kafka's behaviour exactly, collisions included: two different
keys with the same MD5 are one key to the cleaner, and the older record is removed as if
superseded (Kafka accepts this as astronomically unlikely). The capacity is Kafka's too: a buffer
of ``memory`` bytes has ``memory // 24`` slots, and the cleaner fills at most ``load_factor`` of
them (log.cleaner.dedupe.buffer.size, log.cleaner.io.buffer.load.factor); a full map ends the
cleanable range early and the next clean continues from there.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR",
    "DEFAULT_DEDUPE_BUFFER_SIZE",
    "OffsetMap",
]

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (one thread)
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
_HASH_SIZE = 16  # MD5
BYTES_PER_ENTRY = _HASH_SIZE + 8


class OffsetMap:
    """key digest -> latest offset, plus the latest offset put (or fast-forwarded to)."""

    __slots__ = ("_entries", "_latest_offset", "load_factor", "slots")

    def __init__(
        self,
        memory: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        *,
        load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR,
    ) -> None:
        self.slots = memory // BYTES_PER_ENTRY
        self.load_factor = load_factor
        if self.slots * load_factor <= 1:
            raise ValueError(
                f"offset map of {memory} bytes is too small to fit in even a single message, "
                f"so log cleaning will never make progress"
            )
        self._entries: dict[bytes, int] = {}
        self._latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def max_desired_size(self) -> int:
        """How many keys the cleaner puts before it calls the map full."""
        return int(self.slots * self.load_factor)

    def put(self, key: bytes, offset: int) -> None:
        if len(self._entries) >= self.slots:
            raise ValueError(
                f"Attempted to add a new entry to a full offset map, entries: "
                f"{len(self._entries)}, slots: {self.slots}"
            )
        self._entries[self.digest(key)] = offset
        self._latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when it is not in the map."""
        return self._entries.get(self.digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        """Fast-forward over offsets with no keyed record (batches, gaps, segment ends)."""
        self._latest_offset = offset

    @property
    def latest_offset(self) -> int:
        return self._latest_offset

    @property
    def size(self) -> int:
        return len(self._entries)

    def utilization(self) -> float:
        return len(self._entries) / self.slots

    def clear(self) -> None:
        self._entries.clear()
        self._latest_offset = -1

    def __repr__(self) -> str:
        return f"OffsetMap(size={self.size}, slots={self.slots}, latest={self._latest_offset})"
