"""Producer state snapshot files, ``<20-digit offset>.snapshot`` (ProducerStateManager).

Layout (big-endian; Kafka's ProducerSnapshot.json), version 1 only::

    version int16 | crc uint32 | count int32 | count x 46-byte entries:
    producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 | offsetDelta int32 |
    timestamp int64 | coordinatorEpoch int32 | currentTxnFirstOffset int64 (-1: no transaction)

The CRC-32C covers bytes 6..end (count and entries). A snapshot is named by the offset the producer
map reached (the next offset to append) when it was taken; the broker takes one at each roll and at
shutdown, then replays the log from there on restart. Kafka writes the entries in its HashMap's
order; :func:`encode_snapshot` does too, so a snapshot we write matches Kafka's byte for byte.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...errors import CorruptSnapshotError
from ...format.crc import crc32c
from ..datadir import NotRegularFileError, read_bounded_bytes
from ..errors import CorruptCheckpointError
from .state_entry import BatchMetadata, ProducerStateEntry

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "CorruptSnapshotError",
    "SnapshotFile",
    "decode_snapshot",
    "delete_snapshot_file",
    "encode_snapshot",
    "list_snapshot_files",
    "read_snapshot",
    "snapshot_file_path",
    "write_snapshot",
]

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")  # version, crc, count
_MAX_SNAPSHOT_BYTES = 256 << 20  # millions of producers' entries: beyond, not a snapshot
_ENTRY = struct.Struct(">qhiqiqiq")
_ENTRIES_OFFSET = 6  # where the CRC starts: the count field


@dataclass(frozen=True, slots=True, order=True)
class SnapshotFile:
    """A snapshot file and the offset its name gives."""

    offset: int
    path: Path


def snapshot_file_path(log_dir: str | os.PathLike, offset: int) -> Path:
    """``<log_dir>/<offset as 20 digits>.snapshot`` (LogFileUtils.producerSnapshotFile)."""
    return Path(log_dir) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _java_hash_order(producer_ids: list[int]) -> list[int]:
    """``producer_ids`` in the iteration order of a java.util.HashMap<Long, ...> holding them.

    Buckets are ``spread(Long.hashCode) & (capacity - 1)``; a bucket keeps insertion order. The
    capacity is the smallest a HashMap grows to for this many keys (16, doubling past 75% full).
    """
    capacity = 16
    while len(producer_ids) > capacity * 3 // 4:
        capacity *= 2

    def bucket(pid: int) -> int:
        unsigned = pid & 0xFFFFFFFFFFFFFFFF
        h = (unsigned ^ (unsigned >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(producer_ids, key=bucket)  # stable: insertion order within a bucket


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot holding ``entries`` (ProducerStateManager.writeSnapshot)."""
    by_id = {entry.producer_id: entry for entry in entries}
    body = bytearray(_HEADER.pack(SNAPSHOT_VERSION, 0, len(by_id)))
    for pid in _java_hash_order(list(by_id)):
        e = by_id[pid]
        body += _ENTRY.pack(
            pid,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_ENTRIES_OFFSET:]))
    return bytes(body)


def decode_snapshot(data: bytes, *, path: str | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot, in file order; CorruptSnapshotError naming ``path`` and the fault.

    Checks run in Kafka's order: version, then the layout (truncation), then the CRC. Bytes after
    the last entry are tolerated as Kafka's reader does (the CRC still covers them).
    """
    size = len(data)
    if size < 2:
        raise _corrupt(path, f"truncated: {size} bytes, too short for the version field")
    (version,) = struct.unpack_from(">h", data)
    if version != SNAPSHOT_VERSION:
        raise _corrupt(path, f"unknown file version {version} (supported: {SNAPSHOT_VERSION})")
    if size < _HEADER.size:
        raise _corrupt(path, f"truncated: {size} bytes, the header needs {_HEADER.size}")
    _, stored_crc, count = _HEADER.unpack_from(data)
    if count < 0:
        raise _corrupt(path, f"invalid negative producer entry count {count}")
    needed = _HEADER.size + count * _ENTRY.size
    if size < needed:
        raise _corrupt(
            path,
            f"truncated: {count} producer entries need {needed} bytes, the file has {size}",
        )
    computed = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if stored_crc != computed:
        raise _corrupt(
            path,
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
            f"Computed crc: {computed}",
        )
    entries = []
    for (
        pid,
        epoch,
        last_seq,
        last_offset,
        offset_delta,
        timestamp,
        coordinator_epoch,
        txn_first,
    ) in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size : needed]):
        batches = ()
        if last_offset >= 0:
            batches = (BatchMetadata(last_seq, last_offset, offset_delta, timestamp),)
        entries.append(
            ProducerStateEntry(
                producer_id=pid,
                producer_epoch=epoch,
                coordinator_epoch=coordinator_epoch,
                last_timestamp=timestamp,
                current_txn_first_offset=txn_first if txn_first >= 0 else None,
                batch_metadata=batches,
            )
        )
    return entries


def _corrupt(path: str | None, what: str) -> CorruptSnapshotError:
    return CorruptSnapshotError(f"Producer snapshot is corrupt: {what}", path=path)


def read_snapshot(path: str | os.PathLike) -> list[ProducerStateEntry]:
    """Read and check one snapshot file."""
    try:
        data = read_bounded_bytes(path, max_bytes=_MAX_SNAPSHOT_BYTES)
    except CorruptCheckpointError as e:  # too big
        raise CorruptSnapshotError(f"Producer snapshot is unreadable: {e.message}",
                                   path=str(path)) from None  # fmt: skip
    except NotRegularFileError as e:  # a FIFO, a socket, a device: never opened
        raise CorruptSnapshotError(f"Producer snapshot is unreadable: {e.strerror}",
                                   path=str(path)) from None  # fmt: skip
    return decode_snapshot(data, path=str(path))


def write_snapshot(
    path: str | os.PathLike, entries: Iterable[ProducerStateEntry], *, sync: bool = True
) -> Path:
    """Write a snapshot atomically: ``<name>.tmp``, fsync (if ``sync``), rename, fsync the dir.

    Kafka writes the final name directly; a crash then leaves a truncated file that the next load
    deletes as corrupt. Renaming a complete file avoids losing the snapshot at all.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    data = encode_snapshot(entries)
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        _fsync_dir(path.parent)
    return path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def list_snapshot_files(log_dir: str | os.PathLike) -> list[SnapshotFile]:
    """The ``<offset>.snapshot`` files in ``log_dir``, by offset ([] if it is not a directory).

    Names whose prefix is not a number are skipped (Kafka would fail on them): a reader of a dead
    broker's disk should not stop at a stray file.
    """
    directory = Path(log_dir)
    if not directory.is_dir():
        return []
    found = []
    for child in directory.iterdir():
        name = child.name
        if not name.endswith(SNAPSHOT_SUFFIX) or not child.is_file():
            continue
        prefix = name.split(".", 1)[0]
        if prefix.isdigit():
            found.append(SnapshotFile(int(prefix), child))
    return sorted(found)


def delete_snapshot_file(path: str | os.PathLike) -> bool:
    """Delete a snapshot file if it exists; True if it did."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    return True
