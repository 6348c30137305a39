"""No per-record Python objects: decoding a million records leaves almost no allocated blocks."""

from __future__ import annotations

import gc
import struct
import sys

from kafkalog.format import MemoryRecordsBuilder
from kafkalog.format import columnar as fast

RECORDS = 1_000_000
PER_BATCH = 10_000


def million_records() -> bytes:
    """One 10,000-record batch, repeated with new base offsets (outside the CRC)."""
    b = MemoryRecordsBuilder()
    for i in range(PER_BATCH):
        b.append(
            timestamp=1_700_000_000_000 + i,
            key=b"key-%012d" % i,
            value=b"v" * 100,
            headers=[("h", b"1")] if i % 2 else (),
        )
    batch = b.build()
    out = bytearray(batch * (RECORDS // PER_BATCH))
    for i in range(RECORDS // PER_BATCH):
        struct.pack_into(">q", out, i * len(batch), i * PER_BATCH)
    return bytes(out)


def test_decoding_a_million_records_adds_fewer_than_1000_blocks():
    data = million_records()
    dec = fast.ColumnarDecoder()
    dec.decode(data[: len(data) // 100])  # warm up imports and caches
    gc.collect()
    before = sys.getallocatedblocks()
    batch = dec.decode(data, validate_crc=True)  # kept: its arrays are alive
    kept = sys.getallocatedblocks()
    assert batch.num_rows == RECORDS
    assert batch.column("offset")[RECORDS - 1].as_py() == RECORDS - 1
    del batch
    gc.collect()
    released = sys.getallocatedblocks()
    assert kept - before < 1000, kept - before
    assert released - before < 1000, released - before
