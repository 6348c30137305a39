"""Helpers shared by the codec modules: input views, level checks and the output cap.

Every decompressor takes ``max_size`` and stops with :class:`CorruptRecordError` as soon as its
output would pass it, without first allocating the whole output: a few hundred bytes of gzip, lz4,
snappy or zstd can claim gigabytes, and a log segment is untrusted input.
"""

from __future__ import annotations

import operator

from kafkalog.errors import CorruptRecordError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "BytesLike",
    "CappedOutput",
    "as_view",
    "check_level",
    "joined",
    "too_large",
]

# Kafka has no cap of its own (it streams records out of the decompressor); 256 MiB is far above
# any batch a broker accepts (message.max.bytes defaults to about 1 MiB) while bounding memory.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

# What codecs accept; a memoryview may be over an mmap, and none is kept after a call returns.
BytesLike = bytes | bytearray | memoryview


def as_view(data: BytesLike) -> memoryview:
    """A flat byte view of ``data`` (bytes, bytearray, memoryview, mmap slice), without copying."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def check_level(
    name: str, level: int | None, lo: int, hi: int, default: int, *, also: int | None = None
) -> int:
    """Kafka's level for ``name``: ``None`` means Kafka's default; out of range is a ValueError."""
    if level is None:
        return default
    level = operator.index(level)
    if lo <= level <= hi:
        return level
    if also is not None and level == also:
        return default
    extra = f" or {also}" if also is not None else ""
    raise ValueError(f"{name} compression level {level} is outside Kafka's range {lo}..{hi}{extra}")


def too_large(name: str, max_size: int, where: str) -> CorruptRecordError:
    """The error for output that would pass ``max_size``."""
    return CorruptRecordError(
        f"{name}: decompressed data would exceed max_size {max_size} bytes ({where})"
    )


def joined(parts: list) -> bytes:
    """``parts`` as one bytes object, not copied when it is a single bytes part."""
    if len(parts) == 1 and isinstance(parts[0], bytes):
        return parts[0]
    return b"".join(parts)


class CappedOutput:
    """A decompressor's output so far, in parts: :meth:`add` raises :func:`too_large` as soon as
    the ``total`` passes ``max_size``."""

    __slots__ = ("max_size", "name", "parts", "total")

    def __init__(self, name: str, max_size: int) -> None:
        self.name = name
        self.max_size = max_size
        self.parts: list = []
        self.total = 0

    def add(self, part: BytesLike, where: str) -> None:
        """Keep ``part``; ``where`` is what the error names."""
        self.total += len(part)
        if self.total > self.max_size:
            raise too_large(self.name, self.max_size, where)
        self.parts.append(part)

    def joined(self) -> bytes:
        return joined(self.parts)
