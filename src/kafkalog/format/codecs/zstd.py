"""zstd (codec id 4, magic 2 only): standard zstd frames (RFC 8878), via the zstandard package.

Frame: ``magic 28 b5 2f fd | descriptor | [window] | [dictionary id] | [content size]``, then
blocks with a 3-byte LE header ``last:1 type:2 size:21`` (raw: size bytes; RLE: 1 byte expanding
to size; compressed: size bytes expanding to at most 128 KiB), then a 4-byte checksum if the
descriptor says so. Skippable frames are ``magic 5? 2a 4d 18 | size u32 LE | size bytes``.

Java (zstd-jni's stream) writes frames without a content size, which zstandard's one-shot
decompress refuses, and producers may concatenate frames, which one-shot silently cuts at the
first; zstandard's stream reader returns truncated input's partial output silently. So we walk
the frame and block headers ourselves (cheap: one header per 128 KiB block), which finds truncation
and trailing garbage, rejects declared content sizes over ``max_size`` at once, and bounds each
frame's output (raw and RLE sizes plus 128 KiB per compressed block). Each frame is then decoded in
one shot into a buffer of its declared size or bound; only a frame whose bound passes ``max_size``
is streamed, in reads of at most ``max_size`` + 1 bytes. We write frames without a content size,
as Java does.
"""

from __future__ import annotations

import struct
import threading

import zstandard

from kafkalog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    as_view,
    check_level,
    too_large,
)

__all__ = ["DEFAULT_LEVEL", "MAX_LEVEL", "MIN_LEVEL", "compress", "decompress"]

MIN_LEVEL = -131072  # ZSTD_minCLevel(): -(1 << 17), ZSTD_TARGETLENGTH_MAX
MAX_LEVEL = 22
DEFAULT_LEVEL = 3

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_MAX_BLOCK = 128 * 1024
_U32 = struct.Struct("<I")
_DICT_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (1, 2, 4, 8)  # for FCS_flag 0 only when single-segment, else 0

# zstandard's contexts are not thread-safe; each thread keeps one decompressor and its last
# compressor (a compressor keeps its large work buffers, so only one level is cached).
_local = threading.local()


def _check_magic(magic: int) -> None:
    if magic < 2:
        raise UnsupportedCompressionTypeError(
            f"compression type zstd (id 4) needs magic 2, not magic {magic}"
        )


def compress(data: BytesLike, *, level: int | None = None, magic: int = 2) -> bytes:
    """One zstd frame of ``data``, without a content size or checksum (as Kafka's Java client)."""
    _check_magic(magic)
    level = check_level("zstd", level, MIN_LEVEL, MAX_LEVEL, DEFAULT_LEVEL)
    cached = getattr(_local, "compressor", None)
    if cached is None or cached[0] != level:
        cached = (level, zstandard.ZstdCompressor(level=level, write_content_size=False))
        _local.compressor = cached
    return cached[1].compress(as_view(data))


def decompress(
    data: BytesLike, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """The content of every zstd frame in ``data``, at most ``max_size`` bytes."""
    _check_magic(magic)
    view = as_view(data)
    frames = _walk_frames(view)
    declared = sum(frame[2] for frame in frames if frame[2] is not None)
    if declared > max_size:
        raise too_large("zstd", max_size, f"frames declare {declared} bytes")
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    parts = []
    total = 0
    for start, end, content_size, bound in frames:
        frame = view[start:end]
        try:
            if content_size is not None:
                # Exact allocation; libzstd checks the output against the declared size.
                out = decompressor.decompress(frame)
            elif bound <= max_size - total:
                # A valid frame cannot pass ``bound``: running out of room means corruption.
                out = decompressor.decompress(frame, max_output_size=max(bound, 1))
            else:
                out = _read_capped(decompressor, frame, max_size - total)
                if out is None:
                    raise too_large("zstd", max_size, f"frame at byte {start} of {len(view)}")
        except zstandard.ZstdError as e:
            reason = str(e).removeprefix("zstd decompress error: ")
            raise CorruptRecordError(
                f"zstd: {reason} (frame at byte {start} of {len(view)})"
            ) from e
        total += len(out)
        if total > max_size:
            raise too_large("zstd", max_size, f"frame at byte {start} of {len(view)}")
        parts.append(out)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


def _read_capped(
    decompressor: zstandard.ZstdDecompressor, frame: memoryview, budget: int
) -> bytes | None:
    """Stream ``frame`` out in reads of at most ``budget`` + 1 bytes (only frames whose bound
    passes the budget get here); None once the output passes ``budget``."""
    chunks = []
    total = 0
    reader = decompressor.stream_reader(frame)
    while True:
        chunk = reader.read(budget - total + 1)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > budget:
            return None
        chunks.append(chunk)


def _walk_frames(view: memoryview) -> list[tuple[int, int, int | None, int]]:
    """Check that ``view`` is whole frames; return (start, end, declared size, output bound) for
    each data frame (skippable frames are left out)."""
    size = len(view)
    if size == 0:
        raise CorruptRecordError("zstd: empty input, expected at least one frame")
    frames = []
    pos = 0
    while pos < size:
        if size - pos < 4:
            raise CorruptRecordError(f"zstd: {size - pos} stray bytes at byte {pos} of {size}")
        (magic,) = _U32.unpack_from(view, pos)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            if size - pos < 8:
                raise CorruptRecordError(f"zstd: skippable frame header at byte {pos} is cut off")
            (length,) = _U32.unpack_from(view, pos + 4)
            pos += 8 + length
            if pos > size:
                raise CorruptRecordError(
                    f"zstd: skippable frame of {length} bytes runs past the end ({size} bytes)"
                )
            continue
        if magic != _FRAME_MAGIC:
            raise CorruptRecordError(
                f"zstd: magic {magic:#010x} at byte {pos} of {size}, expected {_FRAME_MAGIC:#010x}"
            )
        end, bound, content_size = _walk_frame(view, pos + 4)
        frames.append((pos, end, content_size, bound))
        pos = end
    return frames


def _walk_frame(view: memoryview, pos: int) -> tuple[int, int, int | None]:
    """Walk one frame after its magic; return (end, output bound, declared content size)."""
    size = len(view)
    if pos >= size:
        raise CorruptRecordError(f"zstd: frame header at byte {pos} is cut off ({size} bytes)")
    descriptor = view[pos]
    single_segment = descriptor & 0x20
    fcs_flag = descriptor >> 6
    fcs_bytes = _CONTENT_SIZE_BYTES[fcs_flag] if fcs_flag or single_segment else 0
    fcs_pos = pos + 1 + (0 if single_segment else 1) + _DICT_ID_BYTES[descriptor & 0x03]
    pos = fcs_pos + fcs_bytes
    if pos > size:
        raise CorruptRecordError(
            f"zstd: frame header ends at byte {pos}, past the end of the {size}-byte input"
        )
    content_size = None
    if fcs_bytes:
        content_size = int.from_bytes(view[fcs_pos:pos], "little") + (256 if fcs_bytes == 2 else 0)
    bound = 0
    while True:
        if size - pos < 3:
            raise CorruptRecordError(f"zstd: block header at byte {pos} is cut off ({size} bytes)")
        header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
        last, block_type, length = header & 1, (header >> 1) & 3, header >> 3
        pos += 3
        if block_type == 3:
            raise CorruptRecordError(f"zstd: reserved block type at byte {pos - 3}")
        stored = 1 if block_type == 1 else length
        if stored > size - pos:
            raise CorruptRecordError(
                f"zstd: block of {stored} bytes runs past the end of the input "
                f"(at byte {pos} of {size})"
            )
        pos += stored
        bound += _MAX_BLOCK if block_type == 2 else length
        if last:
            break
    if descriptor & 0x04:
        pos += 4
        if pos > size:
            raise CorruptRecordError(f"zstd: frame checksum is cut off at byte {size}")
    return pos, bound, content_size
