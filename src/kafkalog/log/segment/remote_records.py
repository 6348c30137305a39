"""A segment's ``.log`` in object storage: :class:`FileRecords` read by byte ranges.

``FileRecords(url)`` makes one: every read of FileRecords goes through ``_pread`` (or
``_pread_into``, a read into a buffer) and its size through ``_fstat_size``, so those are all
that differ (a ranged read of the object, its
size from the listing), with ``_open_file``, which refuses to write. Nothing is written: no
appends, truncation, renames or fsyncs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..storage import RemoteFile
from .file_records import FileRecords

__all__ = ["RemoteRecords"]


class RemoteRecords(FileRecords):
    """Log entries in an object, or a window ``[start, end)`` of one."""

    def _open_file(
        self,
        path: str | os.PathLike,
        writable: bool,
        create: bool,
        fd: RemoteFile | None,
        file_cache: object,
    ) -> tuple[RemoteFile, bool]:
        if writable or create:
            raise PermissionError(f"{self.path}: object storage is only read")
        if fd is not None:
            return fd, False  # a window on its owner's object
        return RemoteFile(self.path, getattr(path, "size", None)), True

    def _pread(self, size: int, position: int) -> bytes:
        return self._file.read_at(size, position)

    def _pread_into(self, view: memoryview, position: int) -> int:
        data = self._pread(len(view), position)
        view[: len(data)] = data
        return len(data)

    def _fstat_size(self) -> int:
        return self._file.size()

    def detach(self, on_close: Callable[[], None] | None = None) -> FileRecords:
        window = self.slice(self._start, self.end - self._start)
        window._on_close = on_close
        return window

    def drop_descriptor(self) -> None:
        pass
