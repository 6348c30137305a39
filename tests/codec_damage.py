"""Damaged compressed frames for the differential tests of two codec paths: the same damage
(a few bytes flipped, then maybe a cut) goes through both, and their outcomes must be equal."""

from __future__ import annotations

from hypothesis import strategies as st

from kafkalog.errors import KafkalogError

FLIPS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=3)
CUTS = st.integers(0, 1 << 20)
CAPS = st.sampled_from([0, 100, 5000, 1 << 30])  # max_size: nothing, small, mid, unbounded


def damaged(frame: bytes, flips: list[tuple[int, int]], cut: int) -> bytes:
    """``frame`` with each (place, mask) XORed in, then cut when ``cut`` is a multiple of 3."""
    out = bytearray(frame)
    for at, mask in flips:
        if out:
            out[at % len(out)] ^= mask
    if cut % 3 == 0:
        del out[cut % (len(out) + 1) :]
    return bytes(out)


def outcome(fn, *args, **kwargs) -> tuple:
    """("ok", the bytes) or ("error", the exception's type, its message)."""
    try:
        return ("ok", bytes(fn(*args, **kwargs)))
    except KafkalogError as e:
        return ("error", type(e), str(e))
