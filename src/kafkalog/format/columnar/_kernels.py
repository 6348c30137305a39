"""Which kernels the columnar fast path runs: the compiled twin, or the pure-Python reference.

As msgpack does: ``KAFKALOG_PUREPYTHON=1`` (any non-empty value but ``0``) forces the pure
kernels; otherwise the C extension ``_compiled`` (built from ``_speedups/*.c``) is used when it
loads and speaks the same ABI version, else kafkalog falls back to the pure kernels and warns once
(this module is imported once per process). Decompression is the same on both paths; the compiled
kernels compute CRCs with the CPU's instructions where it has them, the pure ones with the
``crc32c`` package and zlib.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

from . import _kernel_abi
from ._pure import kernels as _pure_kernels

__all__ = ["FORCED_PURE", "IMPLEMENTATION", "KERNEL_FUNCTIONS", "LOAD_ERROR", "kernels"]

# The functions (and types) every kernel module provides; the facade uses only these.
KERNEL_FUNCTIONS = (
    "Sink",
    "Source",
    "decode_entries",
    "decode_records_v2",
    "decode_legacy_set",
    "encode_plan",
    "encode_records",
    "encode_batches",
    "encode_compressed",
    "binary_column",
    "int64_column",
    "header_columns",
    "validate_records_v2",
    "lz4_blocks",
    "dump_lines",
    "valid_prefix_run",
    "frame_run",
)

FORCED_PURE = os.environ.get("KAFKALOG_PUREPYTHON", "") not in ("", "0")
LOAD_ERROR: str | None = None


def _load() -> ModuleType:
    global LOAD_ERROR
    if FORCED_PURE:
        return _pure_kernels
    try:
        from . import _compiled  # type: ignore[attr-defined]
    except ImportError as e:
        LOAD_ERROR = f"the compiled kernels did not load ({e})"
    else:
        if getattr(_compiled, "ABI_VERSION", None) == _kernel_abi.ABI_VERSION:
            return _compiled
        LOAD_ERROR = (
            f"the compiled kernels speak ABI {getattr(_compiled, 'ABI_VERSION', None)}, "
            f"not {_kernel_abi.ABI_VERSION} (rebuild: pip install -e .)"
        )
    warnings.warn(
        f"kafkalog: {LOAD_ERROR}; using the pure-Python kernels (correct, but about 10x slower)",
        RuntimeWarning,
        stacklevel=2,
    )
    return _pure_kernels


kernels: ModuleType = _load()
IMPLEMENTATION: str = kernels.IMPLEMENTATION
