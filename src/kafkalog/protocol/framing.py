"""Kafka's framing: every request and response is an int32 size followed by that many bytes.

:class:`FrameBuffer` is sans-I/O: the connection feeds it whatever the socket gave and takes
whole frames out. The size limit is checked on the prefix, before any of the body is buffered,
so an oversized or hostile size costs four bytes of memory, not the size it claims (Kafka's
``socket.request.max.bytes``, 100 MiB by default).
"""

from __future__ import annotations

import struct

from .errors import FrameTooLargeError, InvalidRequestError

__all__ = ["DEFAULT_MAX_REQUEST_SIZE", "FrameBuffer", "size_prefix"]

DEFAULT_MAX_REQUEST_SIZE = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)


class FrameBuffer:
    """Bytes in, whole frames out."""

    def __init__(self, max_size: int = DEFAULT_MAX_REQUEST_SIZE) -> None:
        self.max_size = max_size
        self._buf = bytearray()
        self._start = 0  # consumed bytes not yet compacted away

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._start

    def next_frame(self) -> bytes | None:
        """The next whole frame's body, or None until more bytes arrive."""
        if self.buffered < 4:
            self._compact()
            return None
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        if size < 0:
            raise InvalidRequestError(f"negative frame size {size}", position=self._start)
        if size > self.max_size:
            raise FrameTooLargeError(
                f"frame of {size} bytes is larger than the limit of {self.max_size} bytes",
                position=self._start,
            )
        if self.buffered < 4 + size:
            self._compact()
            return None
        begin = self._start + 4
        frame = bytes(self._buf[begin : begin + size])
        self._start = begin + size
        return frame

    def _compact(self) -> None:
        if self._start:
            del self._buf[: self._start]
            self._start = 0
