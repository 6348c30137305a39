"""A segment's ``.txnindex`` file: the aborted transactions whose ABORT marker is in the segment
(TransactionIndex.java, AbortedTxn.java).

Entry layout (34 bytes, big-endian)::

    0   i16  version              0
    2   i64  producerId
    10  i64  firstOffset          first offset of the aborted transaction
    18  i64  lastOffset           offset of its ABORT marker
    26  i64  lastStableOffset     the LSO when it was aborted

Unlike the offset and time indexes this file is not preallocated or memory-mapped: it is a plain
append-only file, created on the first append (most segments have no aborts, so no file), read
with positioned reads in bounded chunks. Entries are in increasing ``lastOffset``; a trailing
partial entry (a torn append) is not an entry. READ_COMMITTED fetches use
:meth:`TransactionIndex.collect_aborted_txns` to learn which transactions to filter out.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...errors import CorruptIndexError
from ..storage import RemoteFile, is_remote
from .file_cache import CachedFile, FileCache
from .index import IndexFile

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult"]

CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_READ_CHUNK_ENTRIES = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTxn:
    """One aborted transaction (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        """The entry's 34 bytes."""
        try:
            return _ENTRY.pack(
                self.version,
                self.producer_id,
                self.first_offset,
                self.last_offset,
                self.last_stable_offset,
            )
        except struct.error as e:
            raise ValueError(f"{self} does not fit the entry layout: {e}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range; ``is_complete`` when no later segment can
    hold more (an entry's LSO reached the range's upper bound)."""

    aborted_txns: tuple[AbortedTxn, ...]
    is_complete: bool


class TransactionIndex(IndexFile):
    """The ``.txnindex`` of the segment starting at ``start_offset``; read-only unless
    ``writable=True`` (read-only never creates, writes or truncates the file)."""

    def __init__(
        self,
        file: str | os.PathLike,
        start_offset: int,
        *,
        writable: bool = False,
        file_cache: FileCache | None = None,
    ) -> None:
        super().__init__(file, writable=writable)
        self._start_offset = start_offset
        self._cache = file_cache
        # The file's descriptor, opened on demand within the process's file budget; None while
        # there is no file (it is created on the first append).
        self._handle: CachedFile | RemoteFile | None = None
        self._last_offset: int | None = None
        if self._file.exists():
            self._open()
            self._last_offset = self._last_entry_offset()

    # -- file handling --------------------------------------------------------------------------

    def _open(self) -> CachedFile | RemoteFile:
        if self._handle is None and is_remote(self._file):  # read by ranges, read-only
            self._handle = self._file.open_file()
        if self._handle is None:
            flags = os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY
            self._handle = CachedFile(self._file, flags, cache=self._cache)
        return self._handle

    def _size(self) -> int:
        if self._handle is None:
            return 0
        if isinstance(self._handle, RemoteFile):
            return self._handle.size()
        with self._handle.use() as fd:
            return os.fstat(fd).st_size

    def _read(self, size: int, position: int) -> bytes:
        handle = self._handle
        assert handle is not None
        if isinstance(handle, RemoteFile):
            return handle.read_at(size, position)
        with handle.use() as fd:
            return os.pread(fd, size, position)

    def _check_writable(self, action: str) -> None:
        if not self._writable:
            raise PermissionError(f"cannot {action} read-only transaction index {self._file}")

    @property
    def start_offset(self) -> int:
        return self._start_offset

    def __repr__(self) -> str:
        mode = "writable" if self._writable else "read-only"
        return f"TransactionIndex({str(self._file)!r}, start_offset={self._start_offset}, {mode})"

    # -- reading --------------------------------------------------------------------------------

    def _iter_with_positions(self) -> Iterator[tuple[AbortedTxn, int]]:
        handle = self._handle
        if handle is None:
            return
        end = self._size()
        position = 0
        while end - position >= ENTRY_SIZE:
            count = min(_READ_CHUNK_ENTRIES, (end - position) // ENTRY_SIZE)
            chunk = self._read(count * ENTRY_SIZE, position)
            for i in range(len(chunk) // ENTRY_SIZE):
                version, producer_id, first, last, lso = _ENTRY.unpack_from(chunk, i * ENTRY_SIZE)
                if version != CURRENT_VERSION:
                    raise CorruptIndexError(
                        f"Corrupt transaction index (entry {position // ENTRY_SIZE}): unexpected "
                        f"aborted transaction version {version}, current version is "
                        f"{CURRENT_VERSION}",
                        path=str(self._file),
                        position=position,
                    )
                txn = AbortedTxn(
                    producer_id=producer_id,
                    first_offset=first,
                    last_offset=last,
                    last_stable_offset=lso,
                    version=version,
                )
                yield txn, position
                position += ENTRY_SIZE
            if len(chunk) < count * ENTRY_SIZE:  # the file shrank under us
                return

    def __iter__(self) -> Iterator[AbortedTxn]:
        for txn, _ in self._iter_with_positions():
            yield txn

    def _last_entry_offset(self) -> int | None:
        size = self._size()
        if size < ENTRY_SIZE or self._handle is None:
            return None
        position = (size // ENTRY_SIZE - 1) * ENTRY_SIZE
        return _ENTRY.unpack(self._read(ENTRY_SIZE, position))[3]

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``: those with
        ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``. The search
        stops early (``is_complete``) at an entry whose LSO is >= the upper bound: transactions
        aborted later began at or after that LSO, so cannot overlap the range."""
        found = []
        for txn in self:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted_txns=tuple(found), is_complete=True)
        return TxnIndexSearchResult(aborted_txns=tuple(found), is_complete=False)

    def sanity_check(self) -> None:
        """Every entry's last offset must be at or above the segment's start offset; the length
        must be whole entries (a torn tail would misalign the next append)."""
        for n, txn in enumerate(self):
            if txn.last_offset < self._start_offset:
                raise CorruptIndexError(
                    f"Corrupt transaction index (entry {n}): last offset of aborted transaction "
                    f"{txn} is less than start offset {self._start_offset}",
                    path=str(self._file),
                )
        size = self._size()
        if size % ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Corrupt transaction index: found {size} bytes, which is not a multiple of "
                f"{ENTRY_SIZE}",
                path=str(self._file),
            )

    # -- changing -------------------------------------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Append an entry; its last offset must exceed the last entry's (checked against the
        file's last entry too, where Kafka checks only appends since opening)."""
        self._check_writable("append to")
        if self._last_offset is not None and self._last_offset >= aborted_txn.last_offset:
            raise ValueError(
                "The last offset of appended transactions must increase sequentially, but "
                f"{aborted_txn.last_offset} is not greater than current last offset "
                f"{self._last_offset} of index {self._file}"
            )
        data = aborted_txn.encode()
        handle = self._open()
        size = self._size()
        position = size - size % ENTRY_SIZE  # over a torn partial entry, never after it
        written = 0
        with handle.use() as fd:
            while written < len(data):
                written += os.pwrite(fd, data[written:], position + written)
        self._last_offset = aborted_txn.last_offset

    def flush(self) -> None:
        if self._handle is not None and self._writable:
            with self._handle.use() as fd:
                os.fsync(fd)

    def reset(self) -> None:
        """Remove all entries (the file is emptied, not preallocated)."""
        self._check_writable("reset")
        if self._handle is not None:
            with self._handle.use() as fd:
                os.ftruncate(fd, 0)
        self._last_offset = None

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose last offset is >= ``offset``."""
        self._check_writable("truncate")
        new_last: int | None = None
        for txn, position in self._iter_with_positions():
            if txn.last_offset >= offset:
                assert self._handle is not None
                with self._handle.use() as fd:
                    os.ftruncate(fd, position)
                self._last_offset = new_last
                return
            new_last = txn.last_offset

    def close(self) -> None:
        # (Dropped unclosed, the descriptor goes back by itself, as a file object's does.)
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def delete_if_exists(self) -> bool:
        """Close and delete the file; False if it did not exist."""
        self._check_writable("delete")
        self.close()
        return self._unlink()

    def rename_to(self, file: str | os.PathLike) -> None:
        """Rename the file if it exists (it may not: it is created on first append)."""
        self._check_writable("rename")
        target = Path(file)
        try:
            if self._handle is not None:
                self._handle.rename_to(target)
            elif self._file.exists():
                os.replace(self._file, target)
        finally:
            self._file = target

    def _held_file(self) -> CachedFile | None:
        return self._handle
