"""Kafka's producer partitioning for whole Arrow columns: murmur2 of each key, positive,
modulo the partition count (Kafka's BuiltInPartitioner for keyed records), and the sticky
spreading of records without a key.

murmur2 is computed with numpy over all keys of one length at a time (keys of a column usually
have few distinct lengths), 32-bit wrap-around arithmetic in uint32 arrays; the result equals
:func:`kafkalog.format.partitioner.murmur2` (tested).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["StickyPartitioner", "murmur2_array", "partitions_for_keys"]

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, width)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def murmur2_array(keys: pa.Array) -> np.ndarray:
    """Kafka's signed 32-bit murmur2 of every key (nulls give 0; callers mask them)."""
    n = len(keys)
    out = np.zeros(n, np.uint32)
    if n == 0:
        return out.view(np.int32)
    offsets, data = _binary_parts(keys)
    lengths = np.diff(offsets)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths):
            rows = np.nonzero(lengths == length)[0]
            length = int(length)
            if length:
                idx = offsets[rows][:, None] + np.arange(length)[None, :]
                block = data[idx]
            else:
                block = np.zeros((len(rows), 0), np.uint8)
            h = np.full(len(rows), _SEED ^ np.uint32(length & 0xFFFFFFFF), np.uint32)
            n4 = length & ~3
            if n4:
                words = np.ascontiguousarray(block[:, :n4]).view("<u4")
                for j in range(n4 // 4):
                    k = words[:, j] * _M
                    k ^= k >> np.uint32(24)
                    k *= _M
                    h *= _M
                    h ^= k
            rest = length & 3
            if rest == 3:
                h ^= block[:, n4 + 2].astype(np.uint32) << np.uint32(16)
            if rest >= 2:
                h ^= block[:, n4 + 1].astype(np.uint32) << np.uint32(8)
            if rest >= 1:
                h ^= block[:, n4].astype(np.uint32)
                h *= _M
            h ^= h >> np.uint32(13)
            h *= _M
            h ^= h >> np.uint32(15)
            out[rows] = h
    return out.view(np.int32)


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """``toPositive(murmur2(key)) % num_partitions`` for every key (int32)."""
    hashes = murmur2_array(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (hashes % np.uint32(num_partitions)).astype(np.int32)


class StickyPartitioner:
    """Records without a key, as Kafka's producer spreads them (KIP-480, KIP-794): all go to
    one partition until about ``batch_size`` bytes went there, then to another, chosen at
    random. State carries over between calls (one instance per topic per task)."""

    def __init__(self, num_partitions: int, batch_size: int, seed: int | None = None) -> None:
        self.num_partitions = num_partitions
        self.batch_size = max(1, batch_size)
        self._rng = np.random.default_rng(seed)
        self._current = int(self._rng.integers(num_partitions))
        self._filled = 0

    def assign(self, sizes: np.ndarray) -> np.ndarray:
        """Partitions for records of ``sizes`` bytes, in order."""
        if len(sizes) == 0:
            return np.zeros(0, np.int32)
        total = np.cumsum(sizes, dtype=np.int64) + self._filled
        switch = (total - 1) // self.batch_size  # 0 for the current partition's rest
        chunks = int(switch[-1])
        choices = np.empty(chunks + 1, np.int32)
        choices[0] = self._current
        if chunks:
            choices[1:] = self._rng.integers(self.num_partitions, size=chunks)
        self._current = int(choices[-1])
        self._filled = int(total[-1] - chunks * self.batch_size)
        return choices[switch]
