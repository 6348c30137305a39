"""Decompression for the columnar decoder: lz4, snappy and large zstd frames into one reused buffer.

:func:`kafkalog.format.codecs.decompress` returns a new ``bytes`` per batch, and Kafka's lz4 frame
costs a pure-Python header checksum per call; the columnar decoder copies every record out of
the decompressed bytes anyway, so one buffer serves every batch. This fast lane reads the framing
that Kafka's clients write (lz4 frames with independent blocks; xerial or raw snappy; one zstd
frame) with the codecs' own checks, and decompresses each block with cramjam's ``*_into``
functions (an lz4 frame's blocks through the kernels' ``lz4_blocks``, so that the compiled twin
takes no Python step per block), or a zstd frame in one shot by the system's libzstd where there
is one (``codecs.libzstd``: no copy out of a streaming window, a 1 MB frame 13% faster) and else
with zstandard's ``readinto``, each bounded by what the codec module would allow: the block's or
frame's own limit and what is left of ``max_size``. A zstd frame takes the lane only when it may
hold more than one 128 KiB block: a fresh ``bytes`` of a megabyte costs page faults that depend on
the allocator's history, while a small frame decodes faster through the codec module's one-shot
call.

Anything else, and anything that goes wrong, goes to the codec module instead, on the same bytes:
it returns the data or raises its own error, so results and errors are the codec module's. gzip
always takes that path.
"""

from __future__ import annotations

import struct
from types import ModuleType

import cramjam
import numpy as np
import zstandard

from ...errors import CorruptRecordError
from ..codecs import decompress, libzstd
from ..codecs import lz4 as _lz4
from ..codecs import snappy as _snappy
from ..codecs import zstd as _zstd
from ._kernels import kernels as default_kernels

_decompress_block_into = cramjam.lz4.decompress_block_into

__all__ = ["Inflater"]

_SNAPPY, _LZ4, _ZSTD = 2, 3, 4
_INT64_MAX = (1 << 63) - 1
_HEADER_CACHE = 64  # lz4 frame headers remembered (clients write one or two kinds)
# The common shapes, read in one call: an lz4 frame header without a content size and its first
# block's size word; a xerial header and its first block's length.
_LZ4_HEAD = struct.Struct("<IBBBI")
_XERIAL_HEAD = struct.Struct(">Q8xi")
_XERIAL_MAGIC = int.from_bytes(_snappy.XERIAL_MAGIC, "big")


class Inflater:
    """Decompresses batches' records into one growing buffer (one per decoder: not thread-safe).

    :meth:`inflate` returns a memoryview that is valid until the next call. ``kernels`` picks the
    twin that walks lz4 frames' blocks (by default the facade's)."""

    def __init__(self, kernels: ModuleType | None = None) -> None:
        self._lz4_blocks = (default_kernels if kernels is None else kernels).lz4_blocks
        self._out = np.empty(0, np.uint8)
        self._view = memoryview(self._out)  # kept: making a view of an array costs a call
        self._lz4_headers: dict[tuple[bytes, int], tuple[int, int, int]] = {}
        # (FLG, BD, HC, magic) of checked headers without content size or block checksums
        self._lz4_plain: dict[tuple[int, int, int, int], int] = {}
        self._zstd_decompressor: zstandard.ZstdDecompressor | None = None
        self._one_shot: libzstd.OneShot | bool | None = None  # False: no system libzstd

    def inflate(self, codec: int, data: memoryview, magic: int, max_size: int):
        """``data`` decompressed (bytes or a memoryview into the buffer)."""
        try:
            if codec == _LZ4:
                n = self._lz4(data, magic, max_size)
            elif codec == _SNAPPY:
                n = self._snappy(data, max_size)
            elif codec == _ZSTD and magic == 2:
                return self._zstd(data, max_size)
            else:
                n = None
        except (cramjam.DecompressionError, CorruptRecordError):
            n = None
        if n is None:
            return decompress(codec, data, magic=magic, max_size=max_size)
        return self._view[:n]

    def _room(self, need: int, keep: int) -> memoryview:
        """The buffer, grown to at least ``need`` bytes keeping its first ``keep``. A new array
        each time: views handed out earlier stay valid."""
        if len(self._out) < need:
            grown = np.empty(max(need, 2 * len(self._out)), np.uint8)
            grown[:keep] = self._out[:keep]
            self._out = grown
            self._view = memoryview(grown)
        return self._view

    def _lz4(self, view: memoryview, magic: int, max_size: int) -> int | None:
        """One compressed block between a known header and the end mark (what Kafka's clients
        write for a batch up to the block size) in a few steps; anything else by _lz4_frame."""
        size = len(view)
        if size >= 15:
            found, flg, bd, hc, word = _LZ4_HEAD.unpack_from(view)
            max_block = self._lz4_plain.get((flg, bd, hc, magic))
            end = 11 + word  # a compressed block's end (the raw bit, if set, makes it huge)
            if (
                max_block is not None
                and found == _lz4.MAGIC
                and word <= max_block
                and size - end == (8 if flg & _lz4._FLG_CONTENT_CHECKSUM else 4)
                and _lz4._U32.unpack_from(view, end)[0] == 0
            ):
                room = min(max_block, _lz4._MAX_EXPANSION * word + _lz4._EXPANSION_SLACK, max_size)
                out = self._view if len(self._out) >= room else self._room(room, 0)
                return cramjam.lz4.decompress_block_into(view[11:end], out[:room])
        return self._lz4_frame(view, magic, max_size)

    def _lz4_frame(self, view: memoryview, magic: int, max_size: int) -> int | None:
        size = len(view)
        if size < 7:
            return None
        header = (bytes(view[: 15 if view[4] & _lz4._FLG_CONTENT_SIZE else 7]), magic)
        known = self._lz4_headers.get(header)
        if known is None:
            known = _lz4._read_header(view, magic)  # CorruptRecordError: the codec's path
            if len(self._lz4_headers) >= _HEADER_CACHE:
                self._lz4_headers.clear()
                self._lz4_plain.clear()
            self._lz4_headers[header] = known
            pos, flg, max_block = known
            if pos == 7 and not flg & _lz4._FLG_BLOCK_CHECKSUM:
                self._lz4_plain[(flg, view[5], view[6], magic)] = max_block
        pos, flg, max_block = known
        # The blocks (some 16 in a 1 MB batch) by the kernels, the compiled twin without a
        # Python step per block; a cap of 0 or less admits nothing, one past int64 everything.
        args = (
            view,
            pos,
            4 if flg & _lz4._FLG_BLOCK_CHECKSUM else 0,
            4 if flg & _lz4._FLG_CONTENT_CHECKSUM else 0,
            max_block,
            min(max(max_size, 0), _INT64_MAX),
            _lz4._MAX_EXPANSION,
            _lz4._EXPANSION_SLACK,
        )
        n = self._lz4_blocks(*args, self._view, _decompress_block_into)
        if n is not None and n < 0:
            n = self._lz4_blocks(*args, self._room(-n, 0), _decompress_block_into)
        return n

    def _snappy(self, view: memoryview, max_size: int) -> int | None:
        """A xerial stream of one block (what Kafka's clients write for a batch up to 32 KiB)
        in a few steps; anything else by _snappy_stream."""
        size = len(view)
        if size >= 23:
            magic, length = _XERIAL_HEAD.unpack_from(view)
            if magic == _XERIAL_MAGIC and length == size - 20:
                b0, b1, b2 = view[20], view[21], view[22]
                if b0 < 0x80:
                    n = b0
                elif b1 < 0x80:
                    n = (b0 & 0x7F) | b1 << 7
                elif b2 < 0x80:
                    n = (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14
                else:
                    return self._snappy_stream(view, max_size)
                if n > _snappy._MAX_EXPANSION * length + _snappy._EXPANSION_SLACK or n > max_size:
                    return None
                out = self._view if len(self._out) >= n else self._room(n, 0)
                if cramjam.snappy.decompress_raw_into(view[20:], out[:n]) != n:
                    return None
                return n
        return self._snappy_stream(view, max_size)

    def _snappy_stream(self, view: memoryview, max_size: int) -> int | None:
        if bytes(view[:8]) == _snappy.XERIAL_MAGIC:
            blocks = _snappy._xerial_blocks(view)
        else:
            blocks = [view]
        lengths = []
        total = 0
        for block in blocks:
            length = _snappy._uncompressed_length(block, len(view))
            if length > _snappy._MAX_EXPANSION * len(block) + _snappy._EXPANSION_SLACK:
                return None
            total += length
            if total > max_size:
                return None
            lengths.append(length)
        out = self._room(total, 0)
        pos = 0
        for block, length in zip(blocks, lengths, strict=True):
            if cramjam.snappy.decompress_raw_into(block, out[pos : pos + length]) != length:
                return None
            pos += length
        return total

    def _zstd(self, view: memoryview, max_size: int):
        """A frame of one block in a few steps (the codec module's short path, one new buffer);
        one zstd frame that may pass one block, read into the buffer. Other small frames, several
        frames, skippable frames and frames the codec module would not trust with a buffer of
        their bound are the codec module's, from the same walk of the frame headers; so is any
        frame libzstd rejects (for the codec module's error)."""
        out = _zstd.decompress_one_block(view, max_size)  # a producer's small batch
        if out is not None:
            return out
        frames = _zstd.walk_frames(view)  # its CorruptRecordError is the codec module's
        if len(frames) == 1:
            n = self._zstd_frame(view, frames[0], max_size)
            if n is not None:
                return self._view[:n]
        return _zstd.decompress_frames(view, frames, max_size)

    def _zstd_frame(self, view: memoryview, frame: tuple, max_size: int) -> int | None:
        """The walked frame's size once read into the buffer, or None for the codec module."""
        start, end, content_size, exact, bound = frame
        expected = bound if content_size is None else content_size
        if start or end != len(view) or expected <= _zstd._MAX_BLOCK or expected > max_size:
            return None
        if content_size is not None and content_size > bound:
            return None
        if not _zstd.earns_buffer(expected - exact, end):
            return None
        # One byte of room past the bound: a frame that fills it is not what its headers say.
        out = self._room(expected + 1, 0)[: expected + 1]
        if self._one_shot is not False and _window(view, content_size) <= libzstd.MAX_WINDOW:
            if self._one_shot is None:
                self._one_shot = libzstd.OneShot() if libzstd.available() else False
            if self._one_shot:
                src = np.frombuffer(view, np.uint8)
                n = self._one_shot.decompress_into(
                    self._out.ctypes.data, expected + 1, src.ctypes.data, len(view)
                )
                return n if n is not None and n <= expected else None
        if self._zstd_decompressor is None:
            self._zstd_decompressor = zstandard.ZstdDecompressor()
        reader = self._zstd_decompressor.stream_reader(view)
        total = 0
        try:
            while True:
                n = reader.readinto(out[total:])
                if not n:
                    return total
                total += n
                if total > expected:
                    return None
        except zstandard.ZstdError:
            return None


def _window(frame: memoryview, content_size: int | None) -> int:
    """The window a walked zstd frame (magic at 0) declares: its content size for a single
    segment, else its window descriptor's."""
    if frame[4] & 0x20:
        return 0 if content_size is None else content_size
    return _zstd._window_size(frame[5])
