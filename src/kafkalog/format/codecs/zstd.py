"""zstd (codec id 4, magic 2 only): standard zstd frames (RFC 8878), via the zstandard package.

Frame: ``magic 28 b5 2f fd | descriptor | [window] | [dictionary id] | [content size]``, then
blocks with a 3-byte LE header ``last:1 type:2 size:21`` (raw: size bytes; RLE: 1 byte expanding
to size; compressed: size bytes expanding to at most 128 KiB), then a 4-byte checksum if the
descriptor says so. Skippable frames are ``magic 5? 2a 4d 18 | size u32 LE | size bytes``.

Java (zstd-jni's stream) writes frames without a content size, which zstandard's one-shot
decompress refuses, and producers may concatenate frames, which one-shot silently cuts at the
first; zstandard's stream reader returns truncated input's partial output silently. So we walk
the frame and block headers ourselves (cheap: a few header bytes per 128 KiB block), which finds
truncation and trailing garbage, rejects blocks over the block maximum (128 KiB or the window, as
libzstd does) and declared content sizes over ``max_size`` at once, and bounds each frame's
output: raw and RLE blocks count exactly, a compressed block up to the block maximum. A declared
content size past that bound is corruption.

zstandard allocates an output buffer (one-shot, or each stream read) in full before decoding, so
a buffer must be earned. A frame is decoded in one shot into a buffer of its declared size, or
else its bound, when the part of that its headers do not prove is at most 256 KiB or 64 times its
compressed size: nearly all real frames. Past that, the frame's small compressed blocks are
looked into (one with no sequences decodes to exactly its literals: an empty block to nothing)
and the bound tightened; if still past, the frame is streamed in reads that grow with the
output so far (256 KiB up to 1 MiB), and once it has decoded to an eighth of that size it has
earned the buffer and is decoded again in one shot (cheaper than streaming the rest). A frame
whose bound passes what is left of ``max_size`` is streamed to the end, stopping past the cap. So
a small frame of empty blocks, or declaring a content size its blocks cannot hold, costs about
what it produces. We write frames without a content size, as Java does.

A frame of one block (a producer's batch up to 128 KiB) skips the walk: one ``struct`` read checks
its shape and gives the same bound (``decompress_one_block``), since the walk's Python costs as
much as decompressing a 16 KB batch.
"""

from __future__ import annotations

import struct
import threading

import zstandard

from kafkalog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kafkalog.format.codecs._common import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    BytesLike,
    CappedOutput,
    as_view,
    check_level,
    joined,
    too_large,
)

__all__ = [
    "DEFAULT_LEVEL",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "compress",
    "decompress",
    "decompress_frames",
    "decompress_one_block",
    "earns_buffer",
    "walk_frames",
]

MIN_LEVEL = -131072  # ZSTD_minCLevel(): -(1 << 17), ZSTD_TARGETLENGTH_MAX
MAX_LEVEL = 22
DEFAULT_LEVEL = 3

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_MAX_BLOCK = 128 * 1024
_U32 = struct.Struct("<I")
# magic, frame header descriptor, window descriptor, and a word whose low 3 bytes are a block header
_ONE_BLOCK_HEAD = struct.Struct("<IBBI")
_U16 = struct.Struct("<H")
_DICT_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (1, 2, 4, 8)  # for FCS_flag 0 only when single-segment, else 0
_COMPRESSED_LITERALS_HEADER = ((3, 10), (3, 10), (4, 14), (5, 18))  # (bytes, bits) by Size_Format
# A frame is decoded in one shot when the part of its output that its headers do not prove (up
# to 128 KiB per block with sequences, or a declared content size past the proven part) is at
# most max(_UNPROVEN_SLACK, _UNPROVEN_RATIO * its compressed size); else streamed in reads from
# _UNPROVEN_SLACK up to _MAX_READ.
_UNPROVEN_SLACK = 256 * 1024
_UNPROVEN_RATIO = 64
_MAX_READ = 1 << 20
# Otherwise a frame streamed past 1/_EARNED of its expected size is decoded again in one shot.
_EARNED = 8
# Only compressed blocks this small are looked into for holding literals alone: a larger
# block's 128 KiB is within _UNPROVEN_RATIO times its size already.
_PARSE_BELOW = _MAX_BLOCK // _UNPROVEN_RATIO

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
    out = decompress_one_block(view, max_size)
    if out is not None:
        return out
    return decompress_frames(view, walk_frames(view), max_size)


def decompress_one_block(view: memoryview, max_size: int) -> bytes | None:
    """``view`` decompressed when it is one frame of one block without a dictionary, as
    producers write a batch up to the block size (Kafka's Java client: no content size;
    kafka-python and libzstd's one-shot compress: a 2 or 4-byte content size), in a few steps: the
    same result as :func:`decompress_frames` after :func:`walk_frames`, whose Python costs as much
    as decompressing a 16 KB batch. None for any other input and for any frame libzstd rejects,
    which the full walk then reports."""
    size = len(view)
    if size < 10:
        return None
    found, descriptor, window_descriptor, word = _ONE_BLOCK_HEAD.unpack_from(view)
    if found != _FRAME_MAGIC:
        return None
    shape = descriptor & 0xE3  # FCS_flag, Single_Segment_flag and Dictionary_ID_flag
    content_size = None
    if shape == 0:  # a window descriptor, then the block
        window = _window_size(window_descriptor)
        block_at = 6
    elif shape == 0x60 and size >= 11:  # single segment: a 2-byte content size is the window
        window = content_size = _U16.unpack_from(view, 5)[0] + 256
        block_at = 7
        word = _U32.unpack_from(view, 7)[0]
    elif shape == 0xA0 and size >= 13:  # the same with a 4-byte content size
        window = content_size = _U32.unpack_from(view, 5)[0]
        block_at = 9
        word = _U32.unpack_from(view, 9)[0]
    else:
        return None
    block_type, length = (word >> 1) & 3, (word & 0xFFFFFF) >> 3
    if not word & 1 or block_type == 3:  # not the last block, or the reserved type
        return None
    block_max = min(_MAX_BLOCK, window)
    stored = 1 if block_type == 1 else length
    # the frame ends with the block, or with a 4-byte checksum if its flag (0x04) is set
    if length > block_max or block_at + 3 + stored + (descriptor & 0x04) != size:
        return None
    bound = block_max if block_type == 2 else length  # as _walk_frame counts it
    if content_size is None:
        if bound > max_size:
            return None
        try:
            return _decompressor().decompress(view, max_output_size=max(bound, 1))
        except zstandard.ZstdError:
            return None
    if content_size > bound or content_size > max_size:
        return None
    try:
        return _decompressor().decompress(view)  # libzstd holds it to the declared size
    except zstandard.ZstdError:
        return None


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor."""
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def decompress_frames(
    view: memoryview, frames: list[tuple[int, int, int | None, int, int]], max_size: int
) -> bytes:
    """:func:`decompress` of ``view`` once :func:`walk_frames` has walked it into ``frames``."""
    declared = sum(frame[2] for frame in frames if frame[2] is not None)
    if declared > max_size:
        raise too_large("zstd", max_size, f"frames declare {declared} bytes")
    decompressor = _decompressor()
    output = CappedOutput("zstd", max_size)
    for start, end, content_size, exact, bound in frames:
        budget = max_size - output.total
        expected = bound if content_size is None else content_size
        unproven = expected - exact
        if not earns_buffer(unproven, end - start):
            # The block headers alone do not justify the buffer: look into the small compressed
            # blocks too (one holding only literals, or nothing, counts exactly).
            _, _, exact, bound = _walk_frame(view, start + 4, look_inside=True)
            expected = bound if content_size is None else content_size
            unproven = expected - exact
        if content_size is not None:
            if content_size > bound:
                raise CorruptRecordError(
                    f"zstd: frame at byte {start} of {len(view)} declares {content_size} bytes "
                    f"of content, but its blocks hold at most {bound}"
                )
            if content_size > budget:
                raise too_large("zstd", max_size, f"frame at byte {start} of {len(view)}")
        frame = view[start:end]
        try:
            if expected > budget:
                # An unsized frame that may pass max_size: stream it, stopping past the budget.
                out = _read_capped(decompressor, frame, budget)
                if out is None:
                    raise too_large("zstd", max_size, f"frame at byte {start} of {len(view)}")
            elif earns_buffer(unproven, end - start):
                if content_size is not None:
                    # Exact allocation; libzstd checks the output against the declared size.
                    out = decompressor.decompress(frame)
                else:
                    # A valid frame cannot pass ``bound``: running out of room means corruption.
                    out = decompressor.decompress(frame, max_output_size=max(bound, 1))
            else:
                # Streamed while its output stays within 1/_EARNED of ``expected``; past that the
                # frame has earned a one-shot buffer of ``expected`` (faster than streaming on).
                out = _read_capped(decompressor, frame, expected // _EARNED)
                if out is None:
                    out = _one_shot(decompressor, frame, content_size, bound)
        except zstandard.ZstdError as e:
            reason = str(e).removeprefix("zstd decompress error: ")
            raise CorruptRecordError(
                f"zstd: {reason} (frame at byte {start} of {len(view)})"
            ) from e
        output.add(out, f"frame at byte {start} of {len(view)}")
    return output.joined()


def earns_buffer(unproven: int, compressed: int) -> bool:
    """Whether a frame of ``compressed`` bytes is decoded in one shot into a buffer whose
    ``unproven`` bytes its headers do not account for (see the module docstring)."""
    return unproven <= _UNPROVEN_SLACK or unproven <= _UNPROVEN_RATIO * compressed


def _one_shot(
    decompressor: zstandard.ZstdDecompressor,
    frame: memoryview,
    content_size: int | None,
    bound: int,
) -> bytes:
    """``frame`` decoded into one buffer of its declared size, or else of its bound (as above)."""
    if content_size is not None:
        return decompressor.decompress(frame)
    return decompressor.decompress(frame, max_output_size=max(bound, 1))


def _read_capped(
    decompressor: zstandard.ZstdDecompressor, frame: memoryview, cap: int
) -> bytes | None:
    """Stream ``frame`` out; None once the output passes ``cap``. zstandard allocates each read's
    full size, so reads start at 256 KiB and grow with the output so far (up to 1 MiB): allocation
    tracks the actual output, not an estimate or the cap."""
    chunks = []
    total = 0
    reader = decompressor.stream_reader(frame)
    while True:
        size = min(max(_UNPROVEN_SLACK, min(total, _MAX_READ)), cap + 1 - total)
        chunk = reader.read(size)
        total += len(chunk)
        if total > cap:
            return None
        chunks.append(chunk)
        if len(chunk) < size:
            # A short read is the end of the frame (the walk checked that the input is whole).
            break
    return joined(chunks)


def walk_frames(view: memoryview) -> list[tuple[int, int, int | None, int, int]]:
    """Check that ``view`` is whole frames; return (start, end, declared size, exact output,
    output bound) for each data frame (skippable frames are left out). CorruptRecordError if not."""
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
        end, content_size, exact, bound = _walk_frame(view, pos + 4)
        frames.append((pos, end, content_size, exact, bound))
        pos = end
    return frames


def _walk_frame(
    view: memoryview, pos: int, look_inside: bool = False
) -> tuple[int, int | None, int, int]:
    """Walk one frame after its magic; return (end, declared content size, exact output, output
    bound). Raw and RLE blocks count exactly towards both; a compressed block adds the frame's
    block maximum (the least of 128 KiB and the window size) to the bound only, unless
    ``look_inside`` finds it small and holding literals alone (then it counts exactly). Blocks
    larger than the block maximum are rejected, as libzstd rejects them."""
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
    if single_segment:
        window = content_size
    else:
        window = _window_size(view[fcs_pos - 1 - _DICT_ID_BYTES[descriptor & 0x03]])
    block_max = min(_MAX_BLOCK, window)
    exact = 0
    guessed = 0
    while True:
        if size - pos < 3:
            raise CorruptRecordError(f"zstd: block header at byte {pos} is cut off ({size} bytes)")
        header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
        last, block_type, length = header & 1, (header >> 1) & 3, header >> 3
        if block_type == 3:
            raise CorruptRecordError(f"zstd: reserved block type at byte {pos}")
        if length > block_max:
            # RFC 8878: Block_Size <= Block_Maximum_Size; libzstd rejects these too.
            raise CorruptRecordError(
                f"zstd: block of {length} bytes at byte {pos} exceeds the frame's "
                f"{block_max}-byte block maximum"
            )
        pos += 3
        stored = 1 if block_type == 1 else length
        if stored > size - pos:
            raise CorruptRecordError(
                f"zstd: block of {stored} bytes runs past the end of the input "
                f"(at byte {pos} of {size})"
            )
        if block_type != 2:
            exact += length
        elif look_inside and length < _PARSE_BELOW:
            literals = _literals_only_size(view, pos, length)
            if literals is None:
                guessed += block_max
            else:
                exact += min(literals, block_max)
        else:
            guessed += block_max
        pos += stored
        if last:
            break
    if descriptor & 0x04:
        pos += 4
        if pos > size:
            raise CorruptRecordError(f"zstd: frame checksum is cut off at byte {size}")
    return pos, content_size, exact, exact + guessed


def _window_size(window_descriptor: int) -> int:
    """The window a Window_Descriptor byte declares (RFC 8878 3.1.1.1.2): exponent and mantissa."""
    window = 1 << (10 + (window_descriptor >> 3))
    return window + (window >> 3) * (window_descriptor & 7)


def _literals_only_size(view: memoryview, pos: int, length: int) -> int | None:
    """For the compressed block of ``length`` bytes at ``pos``: its output size if it holds no
    sequences (its output is then its literals), else None (up to 128 KiB). Only headers are read
    (RFC 8878 3.1.1.3.1.1 and 3.1.1.3.2.1); what does not parse is left to libzstd (None)."""
    if length < 2:
        return None
    first = view[pos]
    size_format = (first >> 2) & 3
    if first & 3 < 2:  # raw or RLE literals: a 1, 2 or 3-byte header, then the bytes or 1 byte
        header = (1, 2, 1, 3)[size_format]
        if header > length:
            return None
        if header == 1:
            regenerated = first >> 3
        elif header == 2:
            regenerated = first >> 4 | view[pos + 1] << 4
        else:
            regenerated = first >> 4 | view[pos + 1] << 4 | view[pos + 2] << 12
        stored = regenerated if first & 3 == 0 else 1
    else:  # Huffman-coded literals: two sizes of 10, 10, 14 or 18 bits in a 3 to 5-byte header
        header, bits = _COMPRESSED_LITERALS_HEADER[size_format]
        if header > length:
            return None
        value = first >> 4 | view[pos + 1] << 4 | view[pos + 2] << 12
        if header > 3:
            value |= view[pos + 3] << 20
            if header > 4:
                value |= view[pos + 4] << 28
        mask = (1 << bits) - 1
        regenerated, stored = value & mask, (value >> bits) & mask
    sequences = header + stored
    if sequences >= length or view[pos + sequences] != 0:
        return None
    return regenerated
