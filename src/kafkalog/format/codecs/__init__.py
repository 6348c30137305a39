"""Kafka's compression codecs: one registry from a batch's 3-bit codec id to its implementation.

Ids, names and level ranges are Kafka's (CompressionType.java and the compress/ package): 0 none,
1 gzip (levels 1..9, default 6), 2 snappy, 3 lz4 (1..17, default 9), 4 zstd (-131072..22, default 3,
magic 2 only); ids 5..7 are unused and rejected. Each codec module writes what Kafka's Java client
writes and reads what Kafka and the other clients write; see their docstrings for the byte layouts
and quirks. Decompression is capped by ``max_size``; bad bytes raise CorruptRecordError only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafkalog.errors import UnsupportedCompressionTypeError
from kafkalog.format.codecs import gzip as _gzip
from kafkalog.format.codecs import lz4 as _lz4
from kafkalog.format.codecs import none as _none
from kafkalog.format.codecs import snappy as _snappy
from kafkalog.format.codecs import zstd as _zstd
from kafkalog.format.codecs._common import DEFAULT_MAX_DECOMPRESSED_SIZE, BytesLike

__all__ = [
    "CODECS",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Codec",
    "CompressionType",
    "codec_for",
    "compress",
    "decompress",
]


class CompressionType(enum.IntEnum):
    """Kafka's compression type ids; ``str()`` and ``label`` give Kafka's lowercase name."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name: "none", "gzip", "snappy", "lz4" or "zstd"."""
        return self.name.lower()

    @classmethod
    def from_label(cls, name: str) -> CompressionType:
        """The type called ``name`` (any case); ValueError for a name Kafka does not define."""
        try:
            return cls[name.strip().upper()]
        except (KeyError, AttributeError):
            names = ", ".join(t.label for t in cls)
            raise ValueError(
                f"unknown compression name {name!r}; expected one of {names}"
            ) from None

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True, slots=True)
class Codec:
    """One registry entry: Kafka's level range (``None`` where the codec has no levels) and the
    functions ``compress(data, *, level=None, magic=2)`` and
    ``decompress(data, *, magic=2, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE)``."""

    type: CompressionType
    min_level: int | None
    max_level: int | None
    default_level: int | None
    compress: Callable[..., bytes]
    decompress: Callable[..., bytes]


CODECS: Mapping[int, Codec] = MappingProxyType(
    {
        CompressionType.NONE: Codec(
            CompressionType.NONE, None, None, None, _none.compress, _none.decompress
        ),
        CompressionType.GZIP: Codec(
            CompressionType.GZIP,
            _gzip.MIN_LEVEL,
            _gzip.MAX_LEVEL,
            _gzip.DEFAULT_LEVEL,
            _gzip.compress,
            _gzip.decompress,
        ),
        CompressionType.SNAPPY: Codec(
            CompressionType.SNAPPY, None, None, None, _snappy.compress, _snappy.decompress
        ),
        CompressionType.LZ4: Codec(
            CompressionType.LZ4,
            _lz4.MIN_LEVEL,
            _lz4.MAX_LEVEL,
            _lz4.DEFAULT_LEVEL,
            _lz4.compress,
            _lz4.decompress,
        ),
        CompressionType.ZSTD: Codec(
            CompressionType.ZSTD,
            _zstd.MIN_LEVEL,
            _zstd.MAX_LEVEL,
            _zstd.DEFAULT_LEVEL,
            _zstd.compress,
            _zstd.decompress,
        ),
    }
)


def codec_for(codec_id: int, *, magic: int = 2) -> Codec:
    """The codec for ``codec_id`` in a batch of ``magic``; UnsupportedCompressionTypeError for an
    id Kafka does not define (5..7) and for zstd below magic 2."""
    codec = CODECS.get(codec_id)
    if codec is None:
        raise UnsupportedCompressionTypeError(
            f"unknown compression type id {codec_id} (magic {magic}); Kafka defines 0..4"
        )
    if codec.type is CompressionType.ZSTD and magic < 2:
        raise UnsupportedCompressionTypeError(
            f"compression type zstd (id {codec_id}) needs magic 2, not magic {magic}"
        )
    return codec


def compress(codec_id: int, data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """``data`` compressed with codec ``codec_id`` at ``level`` (None: Kafka's default)."""
    return codec_for(codec_id, magic=magic).compress(data, level=level, magic=magic)


def decompress(
    codec_id: int,
    data: BytesLike,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """``data`` decompressed with codec ``codec_id``; CorruptRecordError for bad bytes or output
    over ``max_size``."""
    return codec_for(codec_id, magic=magic).decompress(data, magic=magic, max_size=max_size)
