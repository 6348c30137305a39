"""Kafka's two checksums: CRC-32 (zlib) for magic 0/1, CRC-32C (Castagnoli) for magic 2.

CRC-32C comes from the ``crc32c`` package, which uses the CPU's instruction (SSE4.2 or ARMv8) and
accepts memoryviews without copying; a pure-Python CRC-32C runs at a few MB/s and is never used.
"""

from __future__ import annotations

import zlib

import crc32c as _crc32c

__all__ = ["crc32", "crc32c"]


def crc32(data, value: int = 0) -> int:
    """Unsigned CRC-32 as java.util.zip.CRC32 computes it."""
    return zlib.crc32(data, value) & 0xFFFFFFFF


def crc32c(data, value: int = 0) -> int:
    """Unsigned CRC-32C (Castagnoli) as Kafka's Crc32C computes it."""
    return _crc32c.crc32c(data, value)
