"""A segment's ``.log`` in object storage: :class:`FileRecords` read by byte ranges.

``FileRecords(url)`` makes one: every read of FileRecords goes through ``_pread`` and its size
through ``_fstat_size``, so those two are all that differ (a ranged read of the object, its
size from the listing). Nothing is written: no appends, truncation, renames or fsyncs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ...format import DEFAULT_MAX_DECOMPRESSED_SIZE
from ..storage import RemoteFile
from .file_records import FileRecords

__all__ = ["RemoteRecords"]


class RemoteRecords(FileRecords):
    """Log entries in an object, or a window ``[start, end)`` of one."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        writable: bool = False,
        create: bool = False,
        start: int = 0,
        end: int | None = None,
        _fd: RemoteFile | None = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        file_cache: object = None,
    ) -> None:
        self.path = os.fspath(path)
        if writable or create:
            raise PermissionError(f"{self.path}: object storage is only read")
        self.writable = False
        self._start = start
        self._end = end
        self._owns_fd = _fd is None
        self._max = max_decompressed_size
        self._owner: FileRecords | None = None
        self._on_close: Callable[[], None] | None = None
        self._file = _fd if _fd is not None else RemoteFile(self.path, getattr(path, "size", None))
        self._closed = False
        self._size = None

    def _pread(self, size: int, position: int) -> bytes:
        return self._file.read_at(size, position)

    def _fstat_size(self) -> int:
        return self._file.size()

    def detach(self, on_close: Callable[[], None] | None = None) -> FileRecords:
        window = self.slice(self._start, self.end - self._start)
        window._on_close = on_close
        return window

    def drop_descriptor(self) -> None:
        pass
