"""Kafka's default partitioner for keyed records: murmur2 (Utils.murmur2), positive, modulo.

Java computes in 32-bit signed ints with wrap-around; Python's ints do not wrap, so every step
masks to 32 bits and the result is converted back to a signed value only at the end.
"""

from __future__ import annotations

__all__ = ["murmur2", "partition_for_key", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The signed 32-bit murmur2 hash of ``data`` exactly as Kafka's Utils.murmur2."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (not abs(), which overflows on MIN_VALUE)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's producer picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"number of partitions must be positive, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
