"""lz4 (codec id 3): Kafka's own subset of the LZ4 frame format (Lz4BlockOutputStream).

Frame: ``magic 04 22 4d 18 | FLG | BD | [content size u64 LE if FLG bit 3] | HC``, then blocks
``[size u32 LE, high bit = stored raw][data][xxh32 u32 if FLG bit 4]`` up to an end mark
``00000000``, then ``[xxh32 of content u32 if FLG bit 2]``. Java writes FLG 0x60 (version 1,
independent blocks), BD 0x40 (64 KiB blocks), no sizes or checksums, and stores a block raw when
compression does not shrink it. kafka-python writes FLG 0x68 (content size), aiokafka 0x70 (block
checksums): all are read.

HC is ``(xxh32(descriptor) >> 8) & 0xFF``. For magic 0 Kafka hashed the 4 magic bytes too
(KAFKA-1493): we write that broken byte for magic 0 and, like Lz4BlockInputStream, skip the check
for magic 0. Block and content checksums are not verified (pure-Python xxh32 is too slow for data),
the content size is ignored, dependent blocks are rejected: all as Java does or allows. Level 9
(Kafka's default) uses the fast compressor, any other level the HC compressor at that level, again
as Java does.

python-lz4 decodes a block into a buffer of the size it is given, allocated up front. A block of n
bytes decodes to at most 255 * n bytes (LZ4's densest encoding is a run of 0xff match-length
bytes), so the buffer is the least of that, the frame's block maximum and what is left of
``max_size``: a small frame declaring 4 MiB blocks costs a small buffer.
"""

from __future__ import annotations

import struct

import lz4.block

from kafkalog.errors import CorruptRecordError
from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    CappedOutput,
    as_view,
    check_level,
    too_large,
)
from kafkalog.format.codecs._xxh32 import xxh32

__all__ = ["DEFAULT_LEVEL", "MAGIC", "MAX_LEVEL", "MIN_LEVEL", "compress", "decompress"]

MIN_LEVEL = 1
MAX_LEVEL = 17
DEFAULT_LEVEL = 9

MAGIC = 0x184D2204
FLG = 0x60  # version 01, block independence
BD = 0x40  # 64 KiB maximum block size
BLOCK_SIZE = 64 * 1024
_RAW = 0x80000000
_FLG_VERSION_MASK = 0xC0
_FLG_VERSION_1 = 0x40
_FLG_RESERVED = 0x03  # bit 0 is a dictionary id in later lz4 versions; Java rejects it
_FLG_INDEPENDENT = 0x20
_FLG_BLOCK_CHECKSUM = 0x10
_FLG_CONTENT_SIZE = 0x08
_FLG_CONTENT_CHECKSUM = 0x04
_U32 = struct.Struct("<I")
_PREFIX = _U32.pack(MAGIC) + bytes((FLG, BD))
_HEADER = _PREFIX + bytes(((xxh32(_PREFIX[4:]) >> 8) & 0xFF,))
_HEADER_MAGIC_V0 = _PREFIX + bytes(((xxh32(_PREFIX) >> 8) & 0xFF,))  # KAFKA-1493
_END_MARK = b"\x00\x00\x00\x00"
# The most a compressed block of n bytes can decode to: 255 * n (each match-length byte adds at most
# 255 bytes of output), plus slack.
_MAX_EXPANSION = 255
_EXPANSION_SLACK = 64


def compress(data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """A Kafka lz4 frame of ``data``; ``magic`` 0 gets the broken header checksum."""
    level = check_level("lz4", level, MIN_LEVEL, MAX_LEVEL, DEFAULT_LEVEL)
    view = as_view(data)
    parts: list = [_HEADER_MAGIC_V0 if magic == 0 else _HEADER]
    for start in range(0, len(view), BLOCK_SIZE):
        chunk = view[start : start + BLOCK_SIZE]
        if level == DEFAULT_LEVEL:
            block = lz4.block.compress(chunk, mode="default", store_size=False)
        else:
            block = lz4.block.compress(
                chunk, mode="high_compression", compression=level, store_size=False
            )
        if len(block) >= len(chunk):
            parts.append(_U32.pack(len(chunk) | _RAW))
            parts.append(chunk)
        else:
            parts.append(_U32.pack(len(block)))
            parts.append(block)
    parts.append(_END_MARK)
    return b"".join(parts)


def decompress(
    data: BytesLike, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """The content of the lz4 frame ``data`` (at most ``max_size`` bytes); bytes after it are
    ignored, as Lz4BlockInputStream ignores them."""
    view = as_view(data)
    size = len(view)
    pos, flg, max_block = _read_header(view, magic)
    block_checksum = 4 if flg & _FLG_BLOCK_CHECKSUM else 0
    output = CappedOutput("lz4", max_size)
    while True:
        if size - pos < 4:
            raise CorruptRecordError(
                f"lz4: frame of {size} bytes ends at byte {pos} without its end mark"
            )
        (word,) = _U32.unpack_from(view, pos)
        length = word & ~_RAW
        if length == 0:
            pos += 4
            break
        if length > max_block:
            raise CorruptRecordError(
                f"lz4: block of {length} bytes at byte {pos} exceeds the frame's "
                f"{max_block}-byte maximum"
            )
        pos += 4
        if length + block_checksum > size - pos:
            raise CorruptRecordError(
                f"lz4: block of {length} bytes runs past the end of the frame "
                f"(at byte {pos} of {size})"
            )
        block = view[pos : pos + length]
        if word & _RAW:
            out = block
        else:
            # What a valid block can decode to, and room for one byte past max_size at most, so
            # that a 4 MiB block cannot overshoot it; python-lz4 allocates all of ``room``.
            limit = min(max_block, _MAX_EXPANSION * length + _EXPANSION_SLACK)
            room = min(limit, max_size - output.total + 1)
            try:
                out = lz4.block.decompress(block, uncompressed_size=room)
            except lz4.block.LZ4BlockError as e:
                if room < limit:
                    raise too_large(
                        "lz4", max_size, f"or the block at byte {pos} of {size} is corrupt"
                    ) from e
                raise CorruptRecordError(
                    f"lz4: block of {length} bytes at byte {pos} of {size} does not decompress "
                    f"into at most {limit} bytes"
                ) from e
        output.add(out, f"at byte {pos} of a {size}-byte frame")
        pos += length + block_checksum
    if flg & _FLG_CONTENT_CHECKSUM and size - pos < 4:
        raise CorruptRecordError(
            f"lz4: frame of {size} bytes ends at byte {pos} without its 4-byte content checksum"
        )
    return output.joined()


def _read_header(view: memoryview, magic: int) -> tuple[int, int, int]:
    """Check the frame header; return (first block position, FLG, maximum block size)."""
    size = len(view)
    if size < 7:
        raise CorruptRecordError(f"lz4: frame of {size} bytes is shorter than the 7-byte header")
    (found,) = _U32.unpack_from(view, 0)
    if found != MAGIC:
        raise CorruptRecordError(f"lz4: magic {found:#010x}, expected {MAGIC:#010x}")
    flg, bd = view[4], view[5]
    if flg & _FLG_VERSION_MASK != _FLG_VERSION_1 or flg & _FLG_RESERVED:
        raise CorruptRecordError(f"lz4: unsupported FLG {flg:#04x} (version 1, reserved bits 0)")
    if not flg & _FLG_INDEPENDENT:
        raise CorruptRecordError(
            f"lz4: FLG {flg:#04x} asks for dependent blocks; Kafka needs independent"
        )
    block_size_id = (bd >> 4) & 0x07
    if bd & 0x8F or block_size_id < 4:
        raise CorruptRecordError(f"lz4: invalid BD {bd:#04x} (block size id 4..7, reserved bits 0)")
    max_block = 1 << (2 * block_size_id + 8)
    hc_pos = 6
    if flg & _FLG_CONTENT_SIZE:
        hc_pos += 8
        if size < hc_pos + 1:
            raise CorruptRecordError(
                f"lz4: frame of {size} bytes is shorter than its {hc_pos + 1}-byte header"
            )
    if magic != 0:
        expected = (xxh32(view[4:hc_pos]) >> 8) & 0xFF
        if view[hc_pos] != expected:
            raise CorruptRecordError(
                f"lz4: header checksum {view[hc_pos]:#04x}, expected {expected:#04x} "
                f"(magic {magic})"
            )
    return hc_pos + 1, flg, max_block
