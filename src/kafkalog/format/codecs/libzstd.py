"""One-shot zstd decoding into a caller's buffer through the system's libzstd, where there is one.

zstandard decodes a frame that declares no content size (what Kafka's clients write) through
libzstd's streaming API, which decodes block by block into its own window and copies each block
out; libzstd's one-shot ``ZSTD_decompressDCtx`` decodes straight into a buffer of the frame's
bound. zstandard links its libzstd statically and exports none of it, so this module opens the
system's (``libzstd.so.1``, which most Linux systems have) with ctypes, once, on first use. It is
optional: without that library (or with ``KAFKALOG_SYSTEM_ZSTD=0``) callers keep zstandard's path.

Only the columnar decoder's inflater uses it, for a single whole frame it has walked (see
``_columnar_inflate``): whatever libzstd rejects goes back to the codec module, which says why.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref

__all__ = ["MAX_WINDOW", "OneShot", "available"]

# Frames whose window passes this are left to zstandard, which refuses them (libzstd's default
# streaming limit, ZSTD_WINDOWLOG_LIMIT_DEFAULT: 2^27, as Java's zstd-jni has it); one-shot
# decoding would take them, up to the format's maximum.
MAX_WINDOW = 1 << 27
_MIN_VERSION = 10400  # 1.4.0: ZSTD_decompressDCtx, ZSTD_isError as used here
_NAMES = ("libzstd.so.1", "libzstd.so", "libzstd.1.dylib", "libzstd.dylib")

_lock = threading.Lock()
_loaded = False
_lib: ctypes.CDLL | None = None


def _open() -> ctypes.CDLL | None:
    if os.environ.get("KAFKALOG_SYSTEM_ZSTD", "") == "0":
        return None
    for name in _NAMES:
        try:
            lib = ctypes.CDLL(name)
            lib.ZSTD_versionNumber.restype = ctypes.c_uint
            lib.ZSTD_versionNumber.argtypes = []
            if lib.ZSTD_versionNumber() < _MIN_VERSION:
                continue
            lib.ZSTD_createDCtx.restype = ctypes.c_void_p
            lib.ZSTD_createDCtx.argtypes = []
            lib.ZSTD_freeDCtx.restype = ctypes.c_size_t
            lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
            lib.ZSTD_decompressDCtx.restype = ctypes.c_size_t
            lib.ZSTD_decompressDCtx.argtypes = [
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_void_p,
                ctypes.c_size_t,
            ]
            lib.ZSTD_isError.restype = ctypes.c_uint
            lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _library() -> ctypes.CDLL | None:
    global _lib, _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                _lib = _open()
                _loaded = True
    return _lib


def available() -> bool:
    """Whether the system's libzstd was found (and is not turned off)."""
    return _library() is not None


class OneShot:
    """A libzstd decompression context: one per user (it is not thread-safe)."""

    def __init__(self) -> None:
        lib = _library()
        if lib is None:
            raise RuntimeError("the system's libzstd is not available")
        self._lib = lib
        self._dctx = lib.ZSTD_createDCtx()
        if not self._dctx:
            raise MemoryError("ZSTD_createDCtx failed")
        weakref.finalize(self, lib.ZSTD_freeDCtx, self._dctx)

    def decompress_into(self, dst: int, capacity: int, src: int, size: int) -> int | None:
        """Decode the ``size`` bytes of whole frames at address ``src`` into ``capacity`` bytes at
        address ``dst``; the bytes written, or None for anything libzstd rejects (including a
        too small ``capacity``). The GIL is released during the call (ctypes)."""
        n = self._lib.ZSTD_decompressDCtx(self._dctx, dst, capacity, src, size)
        return None if self._lib.ZSTD_isError(n) else n
