"""Partitions written with kafka-python's batch builder (an independent encoder), and what
kafka-python decodes of them: the expectations of the read-contract tests."""

from __future__ import annotations

import struct
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

SEGMENT = "00000000000000000000"


def write_log(directory: Path, batches: int = 12, per_batch: int = 3) -> bytes:
    """A partition ``t-0`` of ``batches`` uncompressed v2 batches, with an offset index entry
    for every batch (as LogSegment indexes with a small index.interval.bytes)."""
    part = directory / "t-0"
    part.mkdir(parents=True)
    data = bytearray()
    index = bytearray()
    for b in range(batches):
        base = b * per_batch
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
        )  # fmt: skip
        for i in range(per_batch):
            ts = 1_700_000_000_000 + base + i
            builder.append(
                i, timestamp=ts, key=f"k{base + i}".encode(), value=b"v" * 50, headers=[]
            )
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, base)  # baseOffset is outside the CRC
        if b:
            index += struct.pack(">ii", base + per_batch - 1, len(data))
        data += batch
    (part / f"{SEGMENT}.log").write_bytes(bytes(data))
    (part / f"{SEGMENT}.index").write_bytes(bytes(index))
    return bytes(data)


def extents(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, size))
        pos += size
    return out


def kafka_python_records(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record kafka-python decodes, up to the first batch that
    fails its CRC or its decoding."""
    out = []
    records = KpMemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            break
        try:
            out.extend((r.offset, r.key, r.value) for r in batch)
        except Exception:
            break
    return out
