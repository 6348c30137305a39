"""none (codec id 0): records stored as they are; "decompressing" copies them out as bytes."""

from __future__ import annotations

from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    as_view,
    too_large,
)

__all__ = ["compress", "decompress"]


def compress(data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """``data`` as bytes; codec none has no levels."""
    if level is not None:
        raise ValueError(f"none has no compression levels; got level {level}")
    return bytes(as_view(data))


def decompress(
    data: BytesLike, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """``data`` as bytes, refused if longer than ``max_size`` like every other codec's output."""
    view = as_view(data)
    if len(view) > max_size:
        raise too_large("none", max_size, f"input is {len(view)} bytes")
    return bytes(view)
