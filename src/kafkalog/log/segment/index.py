"""The memory-mapped index base of ``.index`` and ``.timeindex`` (Kafka's AbstractIndex.java).

An index file is an array of fixed-size big-endian entries (8 bytes in the offset index, 12 in the
time index) whose keys increase, so lookups are binary searches over a memory map: the OS page
cache holds the hot part and nothing is read into Python memory wholesale.

Files and invariants:

- A *writable* index that does not exist yet is created preallocated to ``max_index_size``
  (segment.index.bytes, 10 MiB) rounded down to the entry size, and starts empty; appends fill
  it; on roll or close it is trimmed to its entries (:meth:`AbstractIndex.trim_to_valid_size`).
- An existing file is assumed valid: its entry count is its length / entry size, as Kafka does.
  So a file left untrimmed by a crashed broker looks full of zero entries; ``skip_zero_tail=True``
  applies the rule Kafka's tools use instead (:meth:`AbstractIndex.count_valid_entries`): the
  entries end at the first slot ``i > 0`` whose relative offset is 0, since relative offsets
  strictly increase after slot 0 and so a 0 there can only be an unwritten slot.
- *Read-only* (the default) maps the file with ACCESS_READ and never changes it: no creation,
  no resize, no trim on close. An empty file maps to nothing and has no entries.
- Offsets are stored relative to the segment's base offset in 4 bytes, so ``offset - base``
  must be in 0..Int.MAX (:meth:`AbstractIndex.relative_offset`).
- A writable index writes new entries with ``pwrite`` (through a descriptor it opens on first
  write and closes when trimmed); the map is only read (Linux keeps both views of the page cache
  coherent, and msync flushes the file's pages however they were written). The first store into
  a page of a freshly preallocated (sparse) file through a map costs milliseconds (the fault
  allocates the block), a ``pwrite`` of the same bytes microseconds; an append's entries go in
  one call.
- Descriptors: a writable index's map holds one, and so does its writer while open. Both count
  in the process's budget of open segment files (:mod:`.file_cache`): the map is made on the
  first read and unmapped when it is the least recently used beyond the budget (never while
  another thread's operation on the index holds its lock), then mapped again on the next read;
  the writer is a :class:`~kafkalog.log.segment.file_cache.CachedFile`. A read-only index holds
  none (a copy of its entries).

Lookup (Kafka's warm-section search): most lookups come from consumers and followers near the
end of the log, so the last 8 KiB of entries (the "warm" section) is searched first and only
targets before it fall back to the rest. Every lookup then touches the same few pages at the end,
which stay in the page cache; a plain binary search over the whole file would touch a different
set of cold pages each time the index grows by a page (AbstractIndex.java explains at length).
"""

from __future__ import annotations

import abc
import mmap
import os
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ...errors import CorruptIndexError
from ..datadir import open_regular_fd
from ..errors import IndexOffsetOverflowError, InvalidOffsetError
from ..storage import as_path, is_remote
from ..storage.remote_file import ClosedOnExit
from .file_cache import CachedFile, FileCache, default_cache
from .file_records import PinnedDescriptor

__all__ = ["DEFAULT_MAX_INDEX_SIZE", "AbstractIndex", "IndexFile"]

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
_WARM_SECTION_BYTES = 8192
_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SCAN_CHUNK_ENTRIES = 8192
_FIRST_READ = 64 * 1024  # a read-only copy's first piece (a rolled segment's whole index)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _entries_before_zero_tail(buf, total: int, size: int, field: int, first: int = 1) -> int:
    """Of the first ``total`` entries of ``size`` bytes in ``buf``, those before the first slot
    ``i > 0`` whose relative offset (at ``field``) is 0, looking from slot ``first`` on. Reads
    the relative offsets in bounded chunks; zero tests do not depend on byte order."""
    start = max(1, first)
    while start < total:
        stop = min(total, start + _SCAN_CHUNK_ENTRIES)
        chunk = buf[start * size : stop * size]
        words = memoryview(chunk).cast("I")[field // 4 :: size // 4]
        try:
            return start + words.tolist().index(0)
        except ValueError:
            start = stop
        finally:
            words.release()
    return total


class _IndexCopy(bytes):
    """A read-only index's bytes held in memory, with the two calls made on a memory map."""

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class IndexFile(ClosedOnExit, abc.ABC):
    """What a segment's index files share (the mapped ``.index`` and ``.timeindex``, the plain
    ``.txnindex``): a path, a mode, a descriptor held while open, closing as a context manager,
    and following a renamed partition directory."""

    def __init__(self, file: str | os.PathLike, *, writable: bool) -> None:
        self._file = as_path(file)  # a RemotePath in object storage (read-only)
        if writable and is_remote(self._file):
            raise PermissionError(f"{self._file}: object storage is only read")
        self._writable = writable

    @abc.abstractmethod
    def close(self) -> None:
        """Give the file's descriptors back."""

    def _held_file(self) -> CachedFile | None:
        """The descriptor the file is written (or read) through, when one is held."""
        return None

    def pin_for_fsync(self) -> PinnedDescriptor | None:
        """``flush`` in two halves: the written file's descriptor pinned now (on the thread that
        owns the index), fsynced and released on any thread; None when there is nothing to
        fsync (read-only, closed, or no file yet)."""
        if not self._writable or getattr(self, "_closed", False):
            return None
        held = self._held_file()
        return None if held is None or held.closed else PinnedDescriptor(held)

    @property
    def file(self) -> Path:
        return self._file

    @property
    def writable(self) -> bool:
        return self._writable

    def _unlink(self) -> bool:
        """Delete the file; False if it did not exist."""
        try:
            self._file.unlink()
        except FileNotFoundError:
            return False
        return True

    def update_parent_dir(self, parent_dir: str | os.PathLike) -> None:
        """Follow a renamed partition directory."""
        self._file = Path(parent_dir) / self._file.name
        handle = self._held_file()
        if handle is not None:
            handle.path = os.fspath(self._file)


class AbstractIndex(IndexFile):
    """Entry-format-agnostic index over a memory map: open, search, resize, trim, close."""

    ENTRY_SIZE: ClassVar[int]
    KIND: ClassVar[str]  # "offset index", "time index": for messages
    _RELATIVE_OFFSET_AT: ClassVar[int]  # byte position of the relative offset in an entry
    _KEY: ClassVar[struct.Struct]  # the lookup key: an entry's first field

    def __init__(
        self,
        file: str | os.PathLike,
        base_offset: int,
        *,
        writable: bool = False,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        skip_zero_tail: bool = False,
        file_cache: FileCache | None = None,
    ) -> None:
        super().__init__(file, writable=writable)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._lock = threading.RLock()
        self._mmap: mmap.mmap | _IndexCopy | None = None
        self._cache = file_cache or default_cache()
        # The descriptor entries are written through (writable indexes), within the budget.
        self._writer: CachedFile | None = None
        self._keys: np.ndarray | None = None  # a read-only index's keys, native, when searched
        self._closed = False
        with self._lock:
            newly_created = self._map_file(until_zero_tail=skip_zero_tail)
            self._max_entries = self._length // self.ENTRY_SIZE
            self._entries = 0 if newly_created else self._max_entries
            if skip_zero_tail:
                self._entries = self.count_valid_entries()
                if not writable and self._mmap is not None:
                    # Keep only the entries: an untrimmed file is mostly preallocated zeros.
                    kept = self._entries * self.ENTRY_SIZE
                    self._mmap = _IndexCopy(self._mmap[:kept]) if kept else None
            self._load_last_entry()

    # -- opening ------------------------------------------------------------------------------

    def _map_file(self, *, until_zero_tail: bool = False) -> bool:
        """Open the file: a read-only index is copied (``until_zero_tail``: up to its zero tail,
        :meth:`_read_entries`), a writable one created if missing (and mapped on first read,
        within the process's file budget: see :mod:`.file_cache`). True when a writable index
        had to be created."""
        newly_created = False
        if is_remote(self._file):  # an object: its entries are read whole, like a local copy
            data = self._file.read_bytes()
            self._length = len(data)
            self._mmap = _IndexCopy(data) if data else None
            return False
        if not self._writable:
            fd = open_regular_fd(self._file)
        else:
            try:
                fd = os.open(self._file, os.O_RDWR | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o644)
                newly_created = True
            except FileExistsError:
                fd = os.open(self._file, os.O_RDWR | _CLOEXEC)
        try:
            if newly_created:
                if self._max_index_size < self.ENTRY_SIZE:
                    os.close(fd)
                    fd = -1
                    self._file.unlink()
                    raise ValueError(f"Invalid max index size: {self._max_index_size}")
                os.ftruncate(fd, self._round_down(self._max_index_size))
            self._length = os.fstat(fd).st_size
            if not self._writable and until_zero_tail:
                self._mmap = self._read_entries(fd)
            elif not self._writable:
                self._mmap = self._mmap_fd(fd, self._length)
        finally:
            if fd >= 0:
                os.close(fd)
        if self._writable:
            self._writer = CachedFile(self._file, os.O_RDWR, cache=self._cache, open_now=False)
        return newly_created

    def _map(self) -> mmap.mmap | None:
        """Map a writable index's file (again, after an eviction): the map holds a descriptor,
        counted in the file budget like an open file."""
        cache = self._cache
        cache.make_room()
        fd = os.open(self._file, os.O_RDWR | _CLOEXEC)
        try:
            mapped = self._mmap_fd(fd, self._length)
        finally:
            os.close(fd)
        if mapped is not None:
            self._mmap = mapped
            cache.add(self)
        return mapped

    def _evict(self) -> bool:
        """Unmap to give the descriptor back (:class:`FileCache`); not while in use: another
        thread's operation holds the lock, or this thread's own (a buffer may be in hand)."""
        lock = self._lock
        if lock._is_owned() or not lock.acquire(blocking=False):
            return False
        try:
            mapped = self._mmap
            if mapped is None or isinstance(mapped, _IndexCopy):
                return True
            try:
                mapped.close()  # no msync: the pages stay in the page cache (as resize)
            except BufferError:  # a view of it is alive
                return False
            self._mmap = None
            return True
        finally:
            lock.release()

    def _unmap(self) -> None:
        mapped = self._mmap
        if mapped is not None:
            self._mmap = None
            if not isinstance(mapped, _IndexCopy):
                self._cache.discard(self)
            mapped.close()

    @property
    def is_mapped(self) -> bool:
        """Whether a writable index's map (and its descriptor) is held now."""
        return self._mmap is not None and not isinstance(self._mmap, _IndexCopy)

    def _mmap_fd(self, fd: int, length: int) -> mmap.mmap | _IndexCopy | None:
        if length == 0:  # mmap refuses empty files; an empty index has nothing to map
            return None
        if not self._writable:
            # A read-only index gets a private copy, not a map: a live broker (or kafkalog
            # writer) shrinks the file when it trims the index at roll, and touching a mapped
            # page past the new end kills the reading process (SIGBUS).
            return _IndexCopy(os.pread(fd, length, 0))
        return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE)

    def _read_entries(self, fd: int) -> _IndexCopy | None:
        """A read-only copy of the file up to its zero tail (or whole), read in growing pieces:
        the active segment's index on a live broker is preallocated (10 MB by default) and
        mostly zeros, which a whole copy would read for a few entries."""
        size, field = self.ENTRY_SIZE, self._RELATIVE_OFFSET_AT
        data, piece, scanned = bytearray(), _FIRST_READ, 1
        while len(data) < self._length:
            got = os.pread(fd, min(piece, self._length - len(data)), len(data))
            if not got:  # shorter than it was a moment ago: trimmed by its writer
                break
            data += got
            whole = len(data) // size
            if _entries_before_zero_tail(data, whole, size, field, scanned) < whole:
                break
            scanned, piece = max(1, whole), piece * 4
        return _IndexCopy(data) if data else None

    def _round_down(self, size: int) -> int:
        return self.ENTRY_SIZE * (size // self.ENTRY_SIZE)

    # -- subclass hooks -------------------------------------------------------------------------

    @abc.abstractmethod
    def _load_last_entry(self) -> None:
        """Refresh cached last-entry state after the entry count changed."""

    @abc.abstractmethod
    def _parse_entry(self, n: int) -> Any:
        """The n-th entry, offsets absolute (the caller checked ``n``)."""

    @abc.abstractmethod
    def _offset_at(self, n: int) -> int:
        """The n-th entry's offset, absolute."""

    @abc.abstractmethod
    def _known_last_offset(self) -> int:
        """The largest offset as cached by :meth:`_load_last_entry`."""

    def _check_entry_order(self) -> None:
        """Kafka's sanity rule on a non-empty index's entries, beyond the last offset's."""

    def entry(self, n: int) -> Any:
        """The n-th entry, offsets absolute; IndexError outside 0..entries-1."""
        with self._lock:
            self._check_entry_number(n)
            return self._parse_entry(n)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError on obvious corruption (Kafka rebuilds such an index): a
        non-empty index whose last offset is below the base offset (or which breaks
        :meth:`_check_entry_order`), or a length that is not whole entries."""
        with self._lock:
            if self._entries != 0:
                self._check_entry_order()
                last_offset = self._known_last_offset()
                if last_offset < self._base_offset:
                    raise self._corrupt(
                        f"the index has non-zero size but the last offset is {last_offset}, "
                        f"which is less than the base offset {self._base_offset}",
                        entry=self._entries - 1,
                    )
            if self._length % self.ENTRY_SIZE != 0:
                raise self._corrupt(
                    f"found {self._length} bytes, which is not a multiple of {self.ENTRY_SIZE}"
                )

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``; no effect above the largest offset."""
        with self._lock:
            self._check_writable("truncate")
            slot = self._slot_for(offset, self._offset_at, largest_lower_bound=True)
            if slot < 0:
                new_entries = 0
            elif self._offset_at(slot) == offset:
                new_entries = slot
            else:
                new_entries = slot + 1
            self._truncate_to_entries(new_entries)

    # -- state ----------------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def length(self) -> int:
        """The file's length in bytes (preallocated, so usually more than the entries use)."""
        return self._length

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def entries(self) -> int:
        """How many entries the index holds."""
        return self._entries

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by the entries."""
        return self.ENTRY_SIZE * self._entries

    @property
    def warm_entries(self) -> int:
        return _WARM_SECTION_BYTES // self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def __iter__(self) -> Iterator[Any]:
        for n in range(self._entries):
            yield self.entry(n)

    def __repr__(self) -> str:
        mode = "writable" if self._writable else "read-only"
        return (
            f"{type(self).__name__}({str(self._file)!r}, base_offset={self._base_offset}, "
            f"entries={self._entries}, max_entries={self._max_entries}, {mode})"
        )

    # -- offsets --------------------------------------------------------------------------------

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, which must fit the 4-byte field (0..Int.MAX)."""
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} (base offset {self._base_offset})",
                path=str(self._file),
                offset=offset,
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self._base_offset <= _INT32_MAX

    # -- reading --------------------------------------------------------------------------------

    def _buffer(self) -> mmap.mmap:
        mapped = self._mmap
        if mapped is None:
            if self._closed:
                raise ValueError(f"{self.KIND} {self._file} is closed")
            mapped = self._map() if self._writable else None
            assert mapped is not None  # callers check entries > 0 first
        elif self._writable:
            self._cache.touch(self)
        return mapped

    def _check_entry_number(self, n: int) -> None:
        if not 0 <= n < self._entries:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from {self.KIND} {self._file}, "
                f"which has size {self._entries}"
            )

    def count_valid_entries(self) -> int:
        """Entries before the zero tail of an untrimmed file: the first slot ``i > 0`` whose
        relative offset is 0 ends them (the rule of Kafka's DumpLogSegments)."""
        with self._lock:
            total = self._entries
            if total <= 1:
                return total
            return _entries_before_zero_tail(
                self._buffer(), total, self.ENTRY_SIZE, self._RELATIVE_OFFSET_AT
            )

    def _slot_for(
        self, target: int, attr: Callable[[int], int], *, largest_lower_bound: bool
    ) -> int:
        """Slot of the largest entry whose ``attr`` is <= target (or, with
        ``largest_lower_bound=False``, the smallest >= target); -1 if there is none."""
        entries = self._entries
        if entries == 0:
            return -1
        first_hot = max(0, entries - 1 - self.warm_entries)
        if attr(first_hot) < target:
            return self._binary_search(target, attr, largest_lower_bound, first_hot, entries - 1)
        if attr(0) > target:
            return -1 if largest_lower_bound else 0
        return self._binary_search(target, attr, largest_lower_bound, 0, first_hot)

    def _key_slot(self, key: int) -> int:
        """:meth:`_slot_for` with ``largest_lower_bound`` on the entry's first field (``_KEY``:
        the relative offset of the offset index, the timestamp of the time index), inlined:
        lookups are the hot path of every fetch, and a method call per probe doubled them.

        A read-only index never changes: its keys are copied once into a native array and
        searched there (a C binary search, where a probe in Python costs a struct unpack)."""
        entries = self._entries
        if entries == 0:
            return -1
        buf, size, unpack = self._buffer(), self.ENTRY_SIZE, self._KEY.unpack_from
        if isinstance(buf, _IndexCopy):
            if key < _INT64_MIN:
                return -1
            keys = self._keys if self._keys is not None else self._load_keys(buf)
            return int(keys.searchsorted(min(key, _INT64_MAX), side="right")) - 1
        first_hot = max(0, entries - 1 - self.warm_entries)
        if unpack(buf, first_hot * size)[0] < key:
            lo, hi = first_hot, entries - 1
        elif unpack(buf, 0)[0] > key:
            return -1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = unpack(buf, mid * size)[0]
            if found > key:
                hi = mid - 1
            elif found < key:
                lo = mid
            else:
                return mid
        return lo

    def _columns(self, fields: str) -> np.ndarray:
        """Every entry's fields (a structured numpy array of ``fields``, a dtype spec such as
        ``">i4,>i4"``), copied from the file: for checks over the whole index."""
        with self._lock:
            n = self._entries
            if n == 0:
                return np.zeros(0, dtype=np.dtype(fields))
            data = bytes(self._buffer()[: n * self.ENTRY_SIZE])
        return np.frombuffer(data, dtype=np.dtype(fields), count=n)

    def raw_entries(self) -> bytes:
        """The entries' bytes (a copy), for a caller that takes them whole (a planner reading
        an index in object storage as hints)."""
        with self._lock:
            n = self._entries
            return bytes(self._buffer()[: n * self.ENTRY_SIZE]) if n else b""

    def _first_break(self, values: np.ndarray, *, strict: bool) -> int | None:
        """The first entry whose value is not above (``strict``) or at least the one before."""
        if len(values) < 2:
            return None
        steps = np.diff(values.astype(np.int64))
        bad = np.flatnonzero(steps <= 0 if strict else steps < 0)
        return int(bad[0]) + 1 if len(bad) else None

    def _load_keys(self, buf: bytes) -> np.ndarray:
        field = np.dtype(
            {"names": ["key"], "formats": [">" + self._KEY.format[-1]], "itemsize": self.ENTRY_SIZE}
        )
        keys = np.frombuffer(buf, dtype=field, count=self._entries)["key"].astype(np.int64)
        self._keys = keys
        return keys

    def _binary_search(
        self, target: int, attr: Callable[[int], int], largest_lower_bound: bool, lo: int, hi: int
    ) -> int:
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = attr(mid)
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        if largest_lower_bound:
            return lo
        return -1 if lo == self._entries - 1 else lo + 1

    # -- changing -------------------------------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        if self._closed:
            raise ValueError(f"{self.KIND} {self._file} is closed")
        if not self._writable:
            raise PermissionError(f"cannot {action} read-only {self.KIND} {self._file}")

    def _truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self._entries = entries
            self._load_last_entry()

    def truncate(self) -> None:
        """Remove all entries (the file keeps its length)."""
        self._check_writable("truncate")
        self._truncate_to_entries(0)

    def resize(self, new_size: int) -> bool:
        """Set the file and map length to ``new_size`` rounded down to the entry size (trimming
        on roll/close, or growing back to ``max_index_size`` when a segment becomes active
        again). Returns whether the length changed."""
        with self._lock:
            self._check_writable("resize")
            rounded = self._round_down(new_size)
            if rounded == self._length:
                return False
            if rounded < self.size_in_bytes:
                raise ValueError(
                    f"cannot resize {self.KIND} {self._file} to {rounded} bytes: its "
                    f"{self._entries} entries use {self.size_in_bytes}"
                )
            # No msync: unmapping keeps the written pages in the page cache, and flush() makes
            # them durable when asked (Kafka's resize does not force either). An msync here
            # costs an fsync per resize, i.e. two per roll and per recovered segment. The file
            # is mapped again on the next read.
            self._unmap()
            assert self._writer is not None
            with self._writer.use() as fd:
                os.ftruncate(fd, rounded)
            self._length = rounded
            self._max_entries = rounded // self.ENTRY_SIZE
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail so the file holds exactly its entries."""
        with self._lock:
            self.resize(self.size_in_bytes)
            self._release_writer()  # no entry comes until it is resized again

    def reset(self) -> None:
        """Remove all entries and grow the file back to ``max_index_size``."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    def _write_entries(self, data: bytes) -> None:
        """Write packed entries at the first free slot and count them (callers checked them).

        The descriptor is opened on first use and kept until the index is trimmed or closed: only
        the active segment's indexes get entries, and a data directory holds thousands of others.
        """
        assert self._writer is not None
        position, written = self._entries * self.ENTRY_SIZE, 0
        with self._writer.use() as fd:
            while written < len(data):
                written += os.pwrite(fd, data[written:], position + written)
        self._entries += len(data) // self.ENTRY_SIZE

    def _release_writer(self) -> None:
        if self._writer is not None:
            self._writer.drop()

    def flush(self) -> None:
        """Make the entries durable (fsync of the file they were written to)."""
        with self._lock:
            if not self._writable or self._closed:
                return
            assert self._writer is not None
            with self._writer.use() as fd:
                os.fsync(fd)

    def close(self) -> None:
        """Trim (writable indexes only) and unmap. Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            if self._writable:
                self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming (a writable index is msynced first)."""
        with self._lock:
            if self._mmap is not None and self._writable:
                self._mmap.flush()
            self._unmap()
            if self._writer is not None:
                self._writer.close()
            self._closed = True

    def delete_if_exists(self) -> bool:
        """Unmap and delete the file; False if it did not exist."""
        with self._lock:
            if not self._writable:
                raise PermissionError(f"cannot delete read-only {self.KIND} {self._file}")
            self.close_handler()
            return self._unlink()

    def rename_to(self, file: str | os.PathLike) -> None:
        """Rename the backing file (e.g. adding .deleted or .swap); the map stays valid."""
        with self._lock:
            self._check_writable("rename")
            target = Path(file)
            if self._writer is not None:
                self._writer.rename_to(target)
            else:
                os.replace(self._file, target)
            self._file = target

    def _held_file(self) -> CachedFile | None:
        return self._writer

    def _corrupt(self, message: str, *, entry: int | None = None) -> CorruptIndexError:
        where = f" (entry {entry})" if entry is not None else ""
        return CorruptIndexError(f"Corrupt {self.KIND}{where}: {message}", path=str(self._file))

    def _check_rules(self, rules: Iterable[tuple[int | None, str]]) -> None:
        """Raise :class:`CorruptIndexError` for the first (entry, rule) whose entry is set."""
        for entry, rule in rules:
            if entry is not None:
                raise self._corrupt(rule, entry=entry)

    def _offset_rules(
        self, relative: np.ndarray, end_offset: int | None
    ) -> tuple[tuple[int | None, str], tuple[int | None, str]]:
        """The rules on the entries' ``relative`` offsets (a column of :meth:`_columns`): none is
        below the base offset, the last is below ``end_offset`` (when given)."""
        last = len(relative) - 1
        last_offset = self._base_offset + int(relative[last])
        return (
            (0 if relative[0] < 0 else None, "an offset below the base offset"),
            (
                last if end_offset is not None and last_offset >= end_offset else None,
                f"offset {last_offset} is not below the next segment's base offset {end_offset}",
            ),
        )

    def _invalid_offset(self, message: str, offset: int) -> InvalidOffsetError:
        return InvalidOffsetError(message, path=str(self._file), offset=offset)
