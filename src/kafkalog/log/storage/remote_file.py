"""One object read by byte ranges: what a descriptor and ``os.pread`` are to a local file.

Each :meth:`RemoteFile.read_at` is one ranged GET of exactly the bytes asked for, except small
reads (a batch header, an index entry's batch: under :data:`BLOCK` bytes), which fetch one
aligned block of :data:`BLOCK` bytes and answer the next small reads from it, so walking batch
headers costs one request per block, not per header. The block is the only thing kept: memory
per open object stays one block. A read that fails, or returns fewer bytes than the object
holds there (a connection dropped mid-answer), is retried on a reopened stream within the
bound of :func:`~.remote_storage.retrying`; then it fails with the URL and position.

:func:`fetched_bytes` counts the bytes fetched by this process, for tests and measurements.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from .remote_storage import filesystem_for, retrying

__all__ = ["BLOCK", "ClosedOnExit", "RemoteFile", "fetched_bytes"]

BLOCK = 64 << 10

_count_lock = threading.Lock()
_fetched = [0, 0]  # bytes, requests


def fetched_bytes() -> tuple[int, int]:
    """(bytes, ranged reads) fetched from object storage by this process so far."""
    return _fetched[0], _fetched[1]


def _count(n: int) -> None:
    with _count_lock:
        _fetched[0] += n
        _fetched[1] += 1


_Closing = TypeVar("_Closing", bound="ClosedOnExit")


class ClosedOnExit:
    """What holds files and is used in a ``with`` block: leaving the block closes it, as it
    does a file."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteFile(ClosedOnExit):
    """An object at ``url``, read by ranges; ``size`` when already known (from a listing)
    saves asking for it. Read-only: there is nothing to flush, lock or recover."""

    def __init__(self, url: str, size: int | None = None) -> None:
        self._fs, self._fs_path, self.path = filesystem_for(url)
        self._size = size
        self._stream = None
        self._lock = threading.RLock()
        self._block_start = -1
        self._block = b""
        self.closed = False

    # -- the stream --------------------------------------------------------------------------
    def _open(self):
        """The stream, opened if needed (a HEAD request: the size). Callers retry it."""
        if self._stream is None:
            self._stream = self._fs.open_input_file(self._fs_path)
            if self._size is None:
                self._size = self._stream.size()
        return self._stream

    def _reopen(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass

    def size(self) -> int:
        if self._size is None:
            with self._lock:
                retrying(self._open, url=self.path, what="opening", on_retry=self._reopen)
        assert self._size is not None
        return self._size

    # -- reads -------------------------------------------------------------------------------
    def _fetch(self, size: int, position: int) -> bytes:
        """Exactly the bytes ``[position, position + size)`` that the object holds."""

        def call() -> bytes:
            stream = self._open()
            want = max(0, min(size, self._size - position))
            if want == 0:
                return b""
            data = stream.read_at(want, position)
            _count(len(data))
            if len(data) != want:
                raise OSError(f"{len(data)} of {want} bytes arrived (the answer was cut short)")
            return data.to_pybytes() if hasattr(data, "to_pybytes") else bytes(data)

        return retrying(
            call, url=self.path, what=f"reading {size} bytes", position=position,
            on_retry=self._reopen,
        )  # fmt: skip

    def read_at(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer only at the object's end)."""
        if self.closed:
            raise ValueError(f"{self.path} is closed")
        with self._lock:
            if size >= BLOCK:
                return self._fetch(size, position)
            start = self._block_start
            if start < 0 or position < start or position + size > start + len(self._block):
                start = position - position % BLOCK
                span = BLOCK if position + size <= start + BLOCK else 2 * BLOCK
                self._block = self._fetch(span, start)
                self._block_start = start
            at = position - start
            return self._block[at : at + size]

    def readinto(self, view: memoryview, position: int) -> int:
        """Fill ``view`` from ``position``; the number of bytes put (fewer at the end)."""
        data = self.read_at(len(view), position)
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._block = b""
            self._reopen()

    def __repr__(self) -> str:
        return f"RemoteFile({self.path!r})"
