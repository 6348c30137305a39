"""What the object-storage tests of every store share: the Arrow read of a data directory (a
path or a URL) and its digest, the reader options each store is read with, the damage the
damaged copies carry, and the check of a real broker's directory read from a store."""

from __future__ import annotations

import hashlib
import os
import warnings
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


def read_as_locally(local_dir: Path, remote_url: str, expected: dict) -> int:
    """A real broker's data directory read from its copy at ``remote_url``: the same records as
    the local read, and each clean segment's record count as EXPECTED.json (``expected``, its
    ``logs``) gives it, facts independent of kafkalog. Returns the segments so checked."""
    from kafkalog.dataset import discover

    topics = sorted({tp.topic for tp in discover([local_dir])})
    kwargs = {"topics": topics} if topics else {"topic_pattern": ".*"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = table(local_dir, fail_on_data_loss=False, **kwargs)
        remote = table(remote_url, fail_on_data_loss=False, **kwargs)
    assert digest(remote) == digest(local), local_dir.name
    checked = 0
    for key, facts in expected.items():
        if (
            not key.startswith(local_dir.name + "/")
            or not key.endswith(".log")
            or facts.get("control_batches")
            or not facts.get("clean_to_end")
        ):
            continue
        rows = remote.filter(
            pa.compute.and_(
                pa.compute.equal(remote["topic"], facts["topic"]),
                pa.compute.equal(remote["partition"], facts["partition"]),
            )
        )
        offsets = rows["offset"].to_pylist()
        inside = [o for o in offsets if facts["first_offset"] <= o <= facts["last_offset"]]
        if offsets and min(offsets) <= facts["first_offset"] and facts["records"]:
            assert len(inside) == facts["records"], key
            checked += 1
    return checked
