"""``valid_prefix_run``: the run of magic 2 batches recovery keeps, a window at a time. Batches
are written by kafka-python; both kernel twins keep the same rows and stop at the same entry, and
on undamaged bytes the rows are kafka-python's batches (positions, sizes, offsets, timestamps,
leader epochs, producer ids)."""

from __future__ import annotations

import struct
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.format.columnar import kernel_abi as abi

from .fastcheck import twin


def _segment(sizes: list[int], producer_id: int = -1, base: int = 0) -> bytes:
    """Batches of ``sizes`` records each, at consecutive offsets from ``base``."""
    out, offset = bytearray(), base
    for i, n in enumerate(sizes):
        kw = {"producer_id": producer_id, "producer_epoch": 0, "base_sequence": 0}
        builder = KpBuilder(2, 0, 1 << 30, **(kw if producer_id >= 0 else {}))
        for j in range(n):
            builder.append(1_767_225_600_000 + i * 10 + j, b"k%d" % j, b"v" * (j % 50), [])
        builder.close()
        batch = bytearray(builder.buffer())
        struct.pack_into(">q", batch, 0, offset)
        struct.pack_into(">i", batch, 12, i % 3)  # partitionLeaderEpoch: not under the CRC
        out += batch
        offset += n
    return bytes(out)


def _run(name: str, buf: bytes, segment_base: int = 0, rows: int = 64):
    out = array("q", bytes(8 * abi.VP_WIDTH * rows))
    result = twin(name).valid_prefix_run(buf, 0, len(buf), segment_base, 0, 0, out)
    n = result[2]
    return result, out[: n * abi.VP_WIDTH].tolist()


def test_rows_are_kafka_python_batches() -> None:
    buf = _segment([3, 1, 7, 2], producer_id=-1)
    records = KpRecords(buf)
    expected, position = [], 0
    while records.has_next():
        b = records.next_batch()
        size = 12 + struct.unpack_from(">i", buf, position + 8)[0]
        last = b.base_offset + b.last_offset_delta
        expected += [position, size, b.base_offset, last, b.max_timestamp,
                     struct.unpack_from(">i", buf, position + 12)[0], b.producer_id]  # fmt: skip
        position += size
    for name in ("pure", "compiled"):
        (status, pos, n, prev_last, has_prev), rows = _run(name, buf)
        assert (status, pos, n, has_prev) == (abi.VP_END, len(buf), 4, 1)
        assert rows == expected and prev_last == expected[-4]


@pytest.mark.parametrize("name", ["pure", "compiled"])
def test_a_partial_tail_ends_and_a_full_output_pauses(name: str) -> None:
    buf = _segment([2, 2, 2])
    first = 12 + struct.unpack_from(">i", buf, 8)[0]
    (status, pos, n, _, _), _ = _run(name, buf[:-5])
    assert (status, n) == (abi.VP_END, 2) and pos == 2 * first
    (status, pos, n, _, _), _ = _run(name, buf, rows=1)
    assert (status, pos, n) == (abi.VP_FULL, first, 1)


@pytest.mark.parametrize("name", ["pure", "compiled"])
def test_markers_of_a_producer_and_far_offsets_are_left_to_the_walk(name: str) -> None:
    data = bytearray(_segment([1, 1], producer_id=7))
    (status, pos, n, _, _), _ = _run(name, bytes(data))
    assert (status, n) == (abi.VP_END, 2)  # data batches of a producer are kept
    (status, pos, n, _, _), _ = _run(name, bytes(data), segment_base=1)
    assert (status, pos, n) == (abi.VP_STOP, 0, 0)  # offset 0 is below the segment's base
    far = _segment([1], base=1 << 31)
    assert _run(name, far)[0][:3] == (abi.VP_STOP, 0, 0)  # 2^31 past the base


@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6),
    at=st.integers(0, 10_000),
    how=st.sampled_from(["flip", "cut", "offset", "size", "magic"]),
)
@settings(max_examples=300, deadline=None)
def test_both_twins_keep_the_same_batches(sizes: list[int], at: int, how: str) -> None:
    data = bytearray(_segment(sizes))
    at %= len(data)
    if how == "flip":
        data[at] ^= 0x10
    elif how == "cut":
        del data[at:]
    elif how == "offset":
        struct.pack_into(">q", data, 0, -5 if at % 2 else (1 << 63) - 1)
    elif how == "size":
        struct.pack_into(">i", data, 8, at % 70)
    else:
        data[16] = 3 if at % 2 else 1
    assert _run("pure", bytes(data)) == _run("compiled", bytes(data))
