"""A segment's ``.log`` file as records: Kafka's FileRecords.

Reads go through ``os.pread`` in bounded chunks, so walking a 1 GB segment holds a few megabytes,
not the file; each batch is a zero-copy view into its chunk. Appends go through one file
descriptor opened for writing (only when asked: read-only is the default, so a dead broker's disk
is never changed). A slice (``slice(position, size)``) is a window on the same file, and
:meth:`FileRecords.send_to` hands a window to ``os.sendfile`` for zero-copy network transfer.

The descriptor is a :class:`~kafkalog.log.segment.file_cache.CachedFile`: opened on demand within
the process's budget of open segment files, closed when the least recently used beyond it, reopened
transparently. Every read, write and send pins it for its duration, so it is never closed (and
its number never reused for another file) under a window in use. :meth:`FileRecords.detach` gives
a window a duplicate descriptor of its own, outside the budget, for an answer that outlives the
request (a fetch response being sent).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ...errors import CorruptRecordError, KafkalogError
from ...format import DEFAULT_MAX_DECOMPRESSED_SIZE, Batch, RecordBatch, iter_batches
from ...format.constants import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
)
from ...format.entries import ENTRY_HEADER, frame_entry
from ..storage import is_remote
from ..storage.remote_file import ClosedOnExit
from .file_cache import CachedFile, FileCache, PinnedFile

__all__ = ["FileRecords", "LogOffsetPosition", "TimestampAndOffset"]

DEFAULT_READ_CHUNK = 8 << 20
# A walk starts with a small read and doubles it up to the chunk size: a lookup (an index entry
# is at most index.interval.bytes plus a batch before its target) reads kilobytes, not 8 MiB,
# while a long scan soon reads in full chunks.
FIRST_READ = 16 << 10
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SMALL_BATCH = 32


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where a batch is: its last offset, file position and size (Kafka's LogOffsetPosition)."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None = None


class PinnedDescriptor:
    """A segment file's descriptor held for an fsync on another thread (a broker fsyncs off its
    event loop).

    Taken on the thread that owns the file: a :class:`CachedFile` is pinned (never evicted; a
    ``close`` meanwhile is deferred to :meth:`release`, so the number is never reused under the
    fsync), any other file's descriptor duplicated. The descriptor stays the file's even when
    the file is renamed or deleted meanwhile (retention, the cleaner, a deleted topic): fsyncing
    a deleted file's descriptor succeeds, so it never fails for that. :meth:`fsync` and
    :meth:`release` may run on any thread; release exactly once (twice is harmless).
    """

    __slots__ = ("_file", "fd", "path")

    def __init__(self, file: CachedFile | PinnedFile) -> None:
        self.path = file.path
        if isinstance(file, CachedFile):
            self.fd = file.acquire()
            self._file: CachedFile | None = file
        else:
            self.fd = file.dup()
            self._file = None

    def fsync(self) -> None:
        os.fsync(self.fd)

    def release(self) -> None:
        fd, self.fd = self.fd, -1
        if fd < 0:
            return
        if self._file is not None:
            self._file.release()
        else:
            os.close(fd)

    def __repr__(self) -> str:
        return f"PinnedDescriptor({self.path!r}, fd={self.fd})"


class FileRecords(ClosedOnExit):
    """Log entries in a file, or a window ``[start, end)`` of one.

    ``end`` is None for a whole file that may grow (its size is read when needed); a slice has a
    fixed end. Positions given to and returned by methods are file positions.

    A URL (``s3://...``) gives a :class:`~kafkalog.log.segment.remote_records.RemoteRecords`:
    the same reads, by ranges of the object, read-only.
    """

    def __new__(cls, path: str | os.PathLike, *args, **kwargs) -> FileRecords:
        if cls is FileRecords and is_remote(path):
            from .remote_records import RemoteRecords

            cls = RemoteRecords
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        writable: bool = False,
        create: bool = False,
        start: int = 0,
        end: int | None = None,
        _fd: int | CachedFile | PinnedFile | None = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        file_cache: FileCache | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._file, self._owns_fd = self._open_file(path, writable, create, _fd, file_cache)
        self.writable = writable
        self._start = start
        self._end = end
        self._max = max_decompressed_size
        self._owner: FileRecords | None = None
        self._on_close: Callable[[], None] | None = None
        self._closed = False
        # A writable file has one writer (the data directory's .lock): this object, which keeps
        # its size rather than asking the file system at every append.
        self._size: int | None = (
            self._fstat_size() if writable and end is None and self._owns_fd else None
        )

    def _open_file(
        self,
        path: str | os.PathLike,
        writable: bool,
        create: bool,
        fd: int | CachedFile | PinnedFile | None,
        file_cache: FileCache | None,
    ) -> tuple[CachedFile | PinnedFile, bool]:
        """The file read (and written) through, and whether this object owns it (a window
        shares its owner's)."""
        if fd is None:
            flags = os.O_RDWR if writable else os.O_RDONLY
            if create:
                if not writable:
                    raise ValueError("create=True needs writable=True")
                flags |= os.O_CREAT
            return CachedFile(self.path, flags, cache=file_cache), True
        if isinstance(fd, (CachedFile, PinnedFile)):
            return fd, False  # a window on its owner's file
        return PinnedFile(self.path, fd), True  # a descriptor this object owns outright

    # -- size --------------------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The descriptor now. A segment file's may be evicted (closed, its number reused) at
        the next open of another file: hold it only through :meth:`detach`, whose descriptor is
        the window's own, or within :meth:`pinned_fd`."""
        f = self._file
        fd = f.acquire()
        f.release()
        return fd

    @contextmanager
    def pinned_fd(self) -> Iterator[int]:
        """``with records.pinned_fd() as fd:`` the descriptor, never evicted within the block."""
        f = self._file
        fd = f.acquire()
        try:
            yield fd
        finally:
            f.release()

    def _pread(self, size: int, position: int) -> bytes:
        f = self._file
        fd = f.acquire()
        try:
            return os.pread(fd, size, position)
        finally:
            f.release()

    def _fstat_size(self) -> int:
        f = self._file
        fd = f.acquire()
        try:
            return os.fstat(fd).st_size
        finally:
            f.release()

    def file_size(self) -> int:
        return self._fstat_size() if self._size is None else self._size

    @property
    def start(self) -> int:
        return self._start

    @property
    def end(self) -> int:
        return self.file_size() if self._end is None else self._end

    def size_in_bytes(self) -> int:
        if self._size is not None:  # a writable file: its writer knows (no fstat per append)
            return self._size - self._start
        return self.end - self._start

    def slice(self, position: int, size: int | None = None) -> FileRecords:
        """A read-only window of ``size`` bytes from file ``position`` (clamped to the end)."""
        end = self.end
        if position < self._start or position > end:
            raise ValueError(f"slice position {position} outside [{self._start}, {end}]")
        stop = end if size is None else min(end, position + size)
        window = FileRecords(
            self.path, start=position, end=stop, _fd=self._file, max_decompressed_size=self._max
        )
        window._owner = self  # the descriptor's owner lives as long as its windows
        return window

    def detach(self, on_close: Callable[[], None] | None = None) -> FileRecords:
        """This window over a duplicate descriptor that the result owns (``close`` releases it).

        An answer that outlives the request that built it (a fetch response still being sent)
        must not borrow the segment's descriptor: deleting the topic closes that one, and a
        reused descriptor number would carry another file's bytes. Kafka keeps deleted files
        readable for ``file.delete.delay.ms``; a duplicate keeps the inode until it is closed.
        The duplicate is not in the segment files' budget (:mod:`.file_cache`); ``on_close`` is
        called once when it is closed, for the caller's own count.
        """
        window = FileRecords(
            self.path,
            start=self._start,
            end=self.end,
            _fd=self._file.dup(),
            max_decompressed_size=self._max,
        )
        window._owns_fd = True
        window._on_close = on_close
        return window

    # -- reading -----------------------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes from file ``position`` (fewer at the end of the window)."""
        end = self.end
        size = max(0, min(size, end - position))
        data = self._pread(size, position)
        if len(data) != size:
            raise KafkalogError(
                f"short read: {len(data)} of {size} bytes at position {position}",
                position=position,
                path=self.path,
            )
        return data

    def read_into(self, position: int, buffer: bytearray) -> int:
        """Fill ``buffer`` with the bytes from file ``position`` (fewer at the end of the
        window); how many. A walk a window at a time reuses one buffer instead of a new one per
        read."""
        size = max(0, min(len(buffer), self.end - position))
        view = memoryview(buffer)[:size]
        got = 0
        while got < size:
            n = self._pread_into(view[got:], position + got)
            if n <= 0:
                raise KafkalogError(
                    f"short read: {got} of {size} bytes at position {position}",
                    position=position,
                    path=self.path,
                )
            got += n
        return size

    def _pread_into(self, view: memoryview, position: int) -> int:
        f = self._file
        fd = f.acquire()
        try:
            return os.preadv(fd, [view], position)
        finally:
            f.release()

    def batches(
        self, start_position: int | None = None, *, chunk_size: int = DEFAULT_READ_CHUNK
    ) -> Iterator[Batch]:
        """Every complete entry from ``start_position``; stops quietly at a partial tail.

        Raises :class:`CorruptRecordError` (with this file's path) at a corrupt entry header.
        """
        pos = self._start if start_position is None else start_position
        end = self.end
        read_size = min(FIRST_READ, chunk_size)
        while end - pos > HEADER_SIZE_UP_TO_MAGIC:
            want = min(read_size, end - pos)
            read_size = min(read_size * 2, chunk_size)
            chunk = self._pread(want, pos)
            if len(chunk) >= LOG_OVERHEAD:
                size = LOG_OVERHEAD + ENTRY_HEADER.unpack_from(chunk)[1]
                if len(chunk) < size <= end - pos:  # a big first entry gets a chunk of its own
                    chunk = self._pread(size, pos)
            if not chunk:
                return
            consumed = 0
            try:
                for batch in iter_batches(
                    chunk, position_base=pos, max_decompressed_size=self._max
                ):
                    consumed = batch.position - pos + batch.size_in_bytes
                    yield batch
            except CorruptRecordError as e:
                raise e.located(path=self.path) from None
            if consumed == 0:
                return  # a partial entry: nothing complete fits before the end
            pos += consumed

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch at or after ``starting_position`` whose last offset >= target."""
        start, batch = self._skip_v2_below(starting_position, target_offset, timestamps=False)
        if batch is not None:
            return LogOffsetPosition(batch.last_offset, start, batch.size_in_bytes)
        for batch in self.batches(start):
            last = batch.last_offset
            if last >= target_offset:
                return LogOffsetPosition(last, batch.position, batch.size_in_bytes)
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= ``starting_offset``."""
        start, batch = self._skip_v2_below(starting_position, target_timestamp, timestamps=True)
        if batch is not None:
            found = _first_record_from(batch, target_timestamp, starting_offset)
            if found is not None:
                return found
            start += batch.size_in_bytes
        for batch in self.batches(start):
            if batch.max_timestamp >= target_timestamp:
                found = _first_record_from(batch, target_timestamp, starting_offset)
                if found is not None:
                    return found
        return None

    def _skip_v2_below(
        self, position: int, target: int, *, timestamps: bool
    ) -> tuple[int, RecordBatch | None]:
        """Where a search for ``target`` must go on reading batches, past the whole magic 2
        batches of a first read whose last offset (or max timestamp) is below it; and the batch
        there when it is one of those batches and reaches the target.

        Lookups start at an index entry, a few batches before their target; reading those
        batches' headers in place is cheaper than a view per batch. Anything else (another
        magic, a bad size, a batch past the read) ends the skip: the caller's walk from there
        handles it and raises for what is corrupt."""
        chunk = self._pread(max(0, min(FIRST_READ, self.end - position)), position)
        i, n = 0, len(chunk)
        while n - i >= RECORD_BATCH_OVERHEAD:
            try:
                framed = frame_entry(chunk, i, n)  # the one entry framing (format.entries)
            except CorruptRecordError:
                break  # the caller's walk from here raises it, with this file's path
            if framed is None or framed[1] != MAGIC_VALUE_V2:
                break
            size = LOG_OVERHEAD + framed[0]
            if timestamps:
                key = _I64.unpack_from(chunk, i + 35)[0]  # maxTimestamp
            else:  # baseOffset + lastOffsetDelta
                key = _I64.unpack_from(chunk, i)[0] + _I32.unpack_from(chunk, i + 23)[0]
            if key >= target:
                view = memoryview(chunk)[i : i + size]
                return position + i, RecordBatch(
                    view, position + i, max_decompressed_size=self._max
                )
            i += size
        return position + i, None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """The largest timestamp (and the offset it first appears at) from a position on."""
        max_ts, offset, epoch = NO_TIMESTAMP, -1, None
        for batch in self.batches(starting_position):
            ts = batch.max_timestamp
            if ts > max_ts:
                max_ts, offset, epoch = ts, batch.last_offset, _leader_epoch(batch)
        return TimestampAndOffset(max_ts, offset, epoch)

    # -- writing -----------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if not self.writable or self._end is not None:
            raise PermissionError(f"{self.path} is open read-only")

    def append(self, data) -> int:
        """Append ``data`` at the end of the file; returns the bytes written."""
        position = self.append_parts((data,))
        return self.file_size() - position

    def append_parts(self, parts) -> int:
        """Append each buffer of ``parts`` in turn at the end of the file (a batch whose header
        was patched apart from its records is written without joining them); returns the
        position the first starts at."""
        self._check_writable()
        start = position = self.file_size()
        f = self._file
        fd = f.acquire()  # pinned for the whole write
        try:
            for part in parts:
                view = memoryview(part)
                written = 0
                while written < len(view):
                    written += os.pwrite(fd, view[written:], position + written)
                position += written
        finally:
            f.release()
            self._size = position
        return start

    def flush(self) -> None:
        """fsync: what was appended survives a power loss once this returns."""
        if self.writable:
            with self.pinned_fd() as fd:
                os.fsync(fd)

    def pin_for_fsync(self) -> PinnedDescriptor | None:
        """:meth:`flush` in two halves: the descriptor pinned now (on the thread that owns the
        file), to be fsynced and released on any thread (None when read-only)."""
        return PinnedDescriptor(self._file) if self.writable else None

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the bytes removed."""
        self._check_writable()
        current = self.file_size()
        if size > current or size < 0:
            raise KafkalogError(
                f"Attempt to truncate log segment {self.path} to {size} bytes failed, size of "
                f"this log segment is {current} bytes.",
                path=self.path,
            )
        if size < current:
            self._size = None  # unknown until the call returns
            with self.pinned_fd() as fd:
                os.ftruncate(fd, size)
            self._size = size
        return current - size

    def rename_to(self, new_path: str | os.PathLike) -> None:
        """Rename the file (the open descriptor follows it)."""
        self._file.rename_to(new_path)
        self.path = self._file.path

    # -- zero-copy transfer ------------------------------------------------------------------------
    def send_to(self, out_fd: int, position: int, length: int) -> int:
        """Send ``length`` bytes from file ``position`` to ``out_fd`` with os.sendfile."""
        end = self.end
        length = max(0, min(length, end - position))
        sent = 0
        with self.pinned_fd() as fd:
            while sent < length:
                n = os.sendfile(out_fd, fd, position + sent, length - sent)
                if n == 0:
                    break
                sent += n
        return sent

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the file (a window: only the window; its owner's file stays open). A window of
        this file still being read keeps the descriptor until its read ends."""
        if not self._closed and self._owns_fd:
            self._file.close()
        self._closed = True
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def drop_descriptor(self) -> None:
        """Close the descriptor now if unused (the next read or write reopens it)."""
        self._file.drop()

    def __repr__(self) -> str:
        return f"FileRecords({self.path!r}, start={self._start}, end={self._end})"


def _first_record_from(batch: Batch, timestamp: int, offset: int) -> TimestampAndOffset | None:
    """The batch's first record with a timestamp >= ``timestamp`` and an offset >= ``offset``.

    A magic 2 batch, compressed or not, is read by the fast path's kernels into arrays (no
    Python object per record: a broker's batches hold hundreds to thousands, and a time-range
    plan searches several); others, or one the kernels find malformed (whose error the
    record-at-a-time decoder then raises), record by record."""
    if isinstance(batch, RecordBatch):
        columns = _v2_columns(batch)
        if columns is not None:
            stamps, offsets = columns.timestamps, columns.offsets
            if len(stamps) <= _SMALL_BATCH:  # array operations cost more than a loop here
                pairs = zip(stamps.tolist(), offsets.tolist())
                found = next(((t, o) for t, o in pairs if t >= timestamp and o >= offset), None)
                return None if found is None else TimestampAndOffset(*found, _leader_epoch(batch))
            wanted = stamps >= timestamp
            wanted &= offsets >= offset
            i = int(wanted.argmax())  # the first True, if any
            if not wanted[i]:
                return None
            return TimestampAndOffset(int(stamps[i]), int(offsets[i]), _leader_epoch(batch))
    for record in batch.records():
        if record.timestamp >= timestamp and record.offset >= offset:
            return TimestampAndOffset(record.timestamp, record.offset, _leader_epoch(batch))
    return None


def _v2_columns(batch: RecordBatch):
    """The batch's records as the kernels' columns (views valid until this thread's next call),
    or None when they do not decode there."""
    from ...format import columnar  # Arrow's import only when searched

    if not batch.is_compressed:
        return columnar.v2_record_columns(batch.buffer, batch.count)
    from ...format.validate import scan_v2_batches

    headers = scan_v2_batches(batch.buffer, check_crc=False)
    decoded = columnar.v2_compressed_columns(batch.buffer, headers[0]) if headers else None
    return None if decoded is None else decoded[0]


def _leader_epoch(batch: Batch) -> int | None:
    epoch = batch.partition_leader_epoch
    return None if epoch < 0 else epoch
