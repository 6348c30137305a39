"""Minimal numba kernel for the numba-vs-C measurement (docs/benchmarks.md): v2, no codec."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _varint(buf, pos):
    raw = np.uint64(0)
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            break
        shift += 7
    v = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
    return v, pos


@numba.njit(cache=True, boundscheck=False, nogil=True)
def decode(buf, offsets, timestamps, koffs, kdata, voffs, vdata):
    pos = 0
    n = 0
    kused = 0
    vused = 0
    end = buf.shape[0]
    while end - pos > 17:
        base = np.int64(0)
        for i in range(8):
            base = (base << 8) | buf[pos + i]
        size = np.int64(0)
        for i in range(4):
            size = (size << 8) | buf[pos + 8 + i]
        bts = np.int64(0)
        for i in range(8):
            bts = (bts << 8) | buf[pos + 27 + i]
        count = np.int64(0)
        for i in range(4):
            count = (count << 8) | buf[pos + 57 + i]
        p = pos + 61
        for _ in range(count):
            _, p = _varint(buf, p)  # record length
            p += 1
            tsd, p = _varint(buf, p)
            od, p = _varint(buf, p)
            kl, p = _varint(buf, p)
            offsets[n] = base + od
            timestamps[n] = bts + tsd
            if kl > 0:
                kdata[kused : kused + kl] = buf[p : p + kl]
                kused += kl
                p += kl
            koffs[n + 1] = kused
            vl, p = _varint(buf, p)
            if vl > 0:
                vdata[vused : vused + vl] = buf[p : p + vl]
                vused += vl
                p += vl
            voffs[n + 1] = vused
            _, p = _varint(buf, p)  # header count
            n += 1
        pos += 12 + size
    return n, kused, vused
