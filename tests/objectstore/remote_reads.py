"""What the object-storage tests of every store share: the Arrow read of a data directory (a
path or a URL) and its digest, the reader options each store is read with, and the damage the
damaged copies carry."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa

import kafkalog.arrow
from arrow.arrow_data import T0

# The Arrow reader's options every store's directories are read with, remote against local.
READ_OPTIONS = [
    {},
    {"topics": "clicks", "starting_offsets": 7, "ending_offsets": 41},
    {"topics": "clicks,views", "starting_timestamp": T0 + 20_000, "ending_timestamp": T0 + 45_000},
    {"include_headers": True},
    {"topics": "tx", "isolation_level": "read_committed"},
    {"partitions": {"clicks": [0, 2]}},
]


def table(path, **kwargs) -> pa.Table:
    return kafkalog.arrow.open_data_dir(os.fspath(path), **kwargs).read_all()


def digest(t: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t.combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def damage_second_batch(log: Path) -> None:
    """One byte of the second batch's records flipped: its CRC fails there."""
    data = bytearray(log.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + 70] ^= 0xFF
    log.write_bytes(bytes(data))
