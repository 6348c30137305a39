"""snappy (codec id 2): xerial framing around raw snappy blocks, as Kafka's Java client writes.

Java's SnappyOutputStream (snappy-java) writes a 16-byte header
``82 'SNAPPY' 00 | version i32 BE (1) | compatible i32 BE (1)``, then
``[length i32 BE][raw snappy block]`` for each 32 KiB of input; an empty input is the header alone.
librdkafka writes one raw snappy block with no framing, so readers tell the two apart by the
8-byte magic. Version and compatible are not checked (Redpanda once wrote them little-endian); a
second header between blocks (concatenated streams) is skipped, as SnappyInputStream does.

A raw block starts with its uncompressed length as a uvarint, and cramjam allocates that much
before decoding. So every block's length is checked before anything is decompressed: against what
the block's size can expand to (snappy's densest op, a 3-byte copy of 64 bytes, expands 21.3x; a
larger claim is corruption) and against ``max_size``. A bomb or a lying length costs no allocation
past about 22 times the input. cramjam provides the raw codec.
"""

from __future__ import annotations

import struct

import cramjam

from kafkalog.errors import CorruptRecordError
from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    as_view,
    joined,
    too_large,
)

__all__ = ["BLOCK_SIZE", "XERIAL_HEADER", "XERIAL_MAGIC", "compress", "decompress"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
_LENGTH = struct.Struct(">i")
# A raw block of n bytes decodes to at most 64/3 * n bytes (a copy op with a 2-byte offset is 3
# bytes for up to 64 bytes of output; literals and the other copy ops expand less).
_MAX_EXPANSION = 22
_EXPANSION_SLACK = 64


def compress(data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """xerial-framed snappy: the header, then one length-prefixed raw block per 32 KiB of input."""
    if level is not None:
        raise ValueError(f"snappy has no compression levels; got level {level}")
    view = as_view(data)
    parts: list = [XERIAL_HEADER]
    for start in range(0, len(view), BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + BLOCK_SIZE])
        parts.append(_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def decompress(
    data: BytesLike, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """xerial-framed or raw snappy ``data``, at most ``max_size`` bytes of output."""
    view = as_view(data)
    if view[:8] == XERIAL_MAGIC:
        blocks = _xerial_blocks(view)
    else:
        blocks = [view]
    # Check every declared length first: a bomb is rejected before any decompression.
    total = 0
    for block in blocks:
        length = _uncompressed_length(block, len(view))
        possible = _MAX_EXPANSION * len(block) + _EXPANSION_SLACK
        if length > possible:
            raise CorruptRecordError(
                f"snappy: block of {len(block)} bytes declares {length} uncompressed bytes, "
                f"but can expand to at most {possible} (input of {len(view)} bytes)"
            )
        total += length
        if total > max_size:
            raise too_large("snappy", max_size, f"blocks declare at least {total} bytes")
    parts = []
    for block in blocks:
        try:
            parts.append(cramjam.snappy.decompress_raw(block))
        except cramjam.DecompressionError as e:
            raise CorruptRecordError(f"snappy: {_reason(e)} (input of {len(view)} bytes)") from e
    return joined(parts)


def _xerial_blocks(view: memoryview) -> list[memoryview]:
    """The raw blocks of a xerial stream, checked to lie inside ``view``."""
    size = len(view)
    if size < len(XERIAL_HEADER):
        raise CorruptRecordError(
            f"snappy: xerial stream of {size} bytes is shorter than its 16-byte header"
        )
    blocks = []
    pos = len(XERIAL_HEADER)
    while pos < size:
        if view[pos : pos + 8] == XERIAL_MAGIC and size - pos >= len(XERIAL_HEADER):
            pos += len(XERIAL_HEADER)
            continue
        if size - pos < 4:
            raise CorruptRecordError(
                f"snappy: {size - pos} bytes left at byte {pos} of {size}, "
                "too few for a 4-byte block length"
            )
        (length,) = _LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > size - pos:
            raise CorruptRecordError(
                f"snappy: block of {length} bytes at byte {pos} runs past the end of the "
                f"{size}-byte stream ({size - pos} left)"
            )
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def _uncompressed_length(block: memoryview, stream_size: int) -> int:
    """The uvarint that starts a raw snappy block: its uncompressed length (at most 2**32 - 1)."""
    value = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value
    raise CorruptRecordError(
        f"snappy: block of {len(block)} bytes does not start with a valid length uvarint "
        f"(input of {stream_size} bytes)"
    )


def _reason(error: Exception) -> str:
    text = str(error)
    return text.removeprefix("snappy: ") if text else type(error).__name__
