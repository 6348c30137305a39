"""gzip (codec id 1): RFC 1952 members around raw deflate, as java.util.zip.GZIPOutputStream writes.

Layout of one member: ``1f 8b | CM 08 | FLG | MTIME u32 LE | XFL | OS`` then raw deflate, then
``CRC-32 u32 LE | ISIZE u32 LE``. We write Java's header (no flags, MTIME 0, XFL 0, OS 255 as
JDK 16+ writes) and zlib's deflate at Kafka's level (1..9, default -1 = zlib's 6).

Reading follows GZIPInputStream: members may be concatenated (``zlib.decompress(wbits=31)`` would
silently return only the first), and trailing bytes that do not start another member are ignored.
Output is produced with ``max_length`` so that a small bomb stops at ``max_size`` + 1 bytes.
"""

from __future__ import annotations

import struct
import zlib

from kafkalog.errors import CorruptRecordError
from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    CappedOutput,
    as_view,
    check_level,
)

__all__ = ["DEFAULT_LEVEL", "MAX_LEVEL", "MIN_LEVEL", "compress", "decompress"]

MIN_LEVEL = 1  # Deflater.BEST_SPEED
MAX_LEVEL = 9  # Deflater.BEST_COMPRESSION
DEFAULT_LEVEL = 6  # what Deflater.DEFAULT_COMPRESSION (-1) means in zlib
_KAFKA_DEFAULT = -1  # Kafka's configs accept -1 for "the default"

# Magic, CM=deflate, FLG=0, MTIME=0, XFL=0, OS=255 (unknown): GZIPOutputStream's fixed header.
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_MEMBER_START = b"\x1f\x8b\x08"
_MIN_HEADER = 10
_TRAILER = struct.Struct("<II")


def compress(data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """One gzip member holding ``data``; ``magic`` does not change gzip's layout."""
    level = check_level("gzip", level, MIN_LEVEL, MAX_LEVEL, DEFAULT_LEVEL, also=_KAFKA_DEFAULT)
    view = as_view(data)
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(view) + deflater.flush()
    trailer = _TRAILER.pack(zlib.crc32(view) & 0xFFFFFFFF, len(view) & 0xFFFFFFFF)
    return b"".join((_HEADER, body, trailer))


def decompress(
    data: BytesLike, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """The concatenated contents of every gzip member in ``data``, at most ``max_size`` bytes."""
    view = as_view(data)
    size = len(view)
    if view[:3] != _MEMBER_START:
        found = bytes(view[:3]).hex(" ") or "nothing"
        raise CorruptRecordError(
            f"gzip: expected magic 1f 8b 08 at byte 0 of {size}, found {found}"
        )
    if size < _MIN_HEADER:
        raise CorruptRecordError(f"gzip: stream of {size} bytes is shorter than a 10-byte header")
    output = CappedOutput("gzip", max_size)
    member = 1
    pending = view
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while True:
            chunk = inflater.decompress(pending, max_size - output.total + 1)
            if chunk:
                output.add(chunk, f"in member {member} of a {size}-byte stream")
            if inflater.eof:
                rest = inflater.unused_data
                # GZIPInputStream reads on only if the rest parses as a member header.
                if len(rest) < _MIN_HEADER or rest[:3] != _MEMBER_START:
                    break
                member += 1
                pending = rest
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif inflater.unconsumed_tail:
                pending = inflater.unconsumed_tail
            elif chunk:
                pending = b""  # input used up; zlib may still hold output for the next call
            else:
                raise CorruptRecordError(
                    f"gzip: stream of {size} bytes ends inside member {member} "
                    f"(after {output.total} bytes of output)"
                )
    except zlib.error as e:
        reason = str(e).rpartition(": ")[2]
        raise CorruptRecordError(
            f"gzip: {reason} in member {member} of a {size}-byte stream"
        ) from e
    return output.joined()
