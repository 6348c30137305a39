"""Record batches written and read by kafka-python's record code, an encoder and decoder that
kafkalog did not write, for the server tests that produce raw batches and read segments back."""

from __future__ import annotations

from pathlib import Path

import pytest

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecords as KpRecords  # noqa: E402
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402


def kp_batch(values: list[bytes]) -> bytes:
    """One uncompressed magic 2 batch of ``values`` (no keys, no headers)."""
    builder = KpBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def partition_records(partition_dir: Path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in the partition's segments, in file order, each
    batch's CRC checked."""
    found = []
    for path in sorted(partition_dir.glob("*.log")):
        records = KpRecords(path.read_bytes())
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc(), path
            found += [(record.offset, record.value) for record in batch]
    return found


def read_partition(partition_dir: Path) -> dict[int, bytes]:
    """offset -> value of every record in the partition's segments."""
    return dict(partition_records(partition_dir))
