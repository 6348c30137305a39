"""XXH32, the 32-bit xxHash that the LZ4 frame uses for its header checksum byte.

Only ever run over a few header bytes (block and content checksums are not verified), so a pure
Python version is fast enough and avoids a dependency. Reference: xxHash's xxhash_spec.md.
"""

from __future__ import annotations

import struct

__all__ = ["xxh32"]

_P1 = 0x9E3779B1
_P2 = 0x85EBCA77
_P3 = 0xC2B2AE3D
_P4 = 0x27D4EB2F
_P5 = 0x165667B1
_M = 0xFFFFFFFF
_U32 = struct.Struct("<I")
_LANES = struct.Struct("<4I")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 13) * _P1) & _M


def xxh32(data, seed: int = 0) -> int:
    """XXH32 of ``data`` (any bytes-like object) with ``seed``, as an unsigned int."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    n = len(view)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        while i + 16 <= n:
            a, b, c, d = _LANES.unpack_from(view, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        h = (_rotl((h + _U32.unpack_from(view, i)[0] * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + view[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h
