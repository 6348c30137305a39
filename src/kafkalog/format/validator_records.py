"""What LogValidator needs of each record of a magic 2 batch, through the fast path's kernels.

Kafka's per-record checks on an append (LogValidator.validateRecord) read a record's timestamp,
whether it has a key, and its offset; the batch's max timestamp is the largest record timestamp.
Decoding records one Python object at a time costs microseconds each; the columnar kernels
(compiled, or their pure twins) walk a batch's records into arrays instead, with the same framing
rules as the record-at-a-time decoder. A batch is decoded into buffers kept per thread and reused
(fresh large allocations page-fault); the columns are copied out of them unless asked not to.

The kernels decode keys and values too (they build Arrow columns); a validation-only kernel (the
same walk, writing only offset deltas, timestamps and key presence) would do less work.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from . import _kernel_abi as A
from ._columnar_decode import _Buffers, _ChunkFull
from ._kernels import kernels

__all__ = ["RecordColumns", "v2_record_columns"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_local = threading.local()
_KEEP_BYTES = 16 << 20


class RecordColumns(NamedTuple):
    """Per record, in order: offset (base offset + delta), timestamp (a LogAppendTime batch's
    max timestamp for each, as Kafka's ``Record.timestamp()``), key present (1) or null (0)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    key_present: np.ndarray


def _buffers(size: int, count: int) -> _Buffers:
    """This thread's buffers, emptied; replaced when an exceptionally large batch left them
    much larger than needed."""
    b = getattr(_local, "buffers", None)
    if b is None or len(b.arrays[A.VALUE_DATA]) > max(_KEEP_BYTES, 4 * size):
        b = _local.buffers = _Buffers(kernels, max(64, count), max(1024, size), 64)
    b.reset()
    return b


def v2_record_columns(view: memoryview, count: int, *, copy: bool = True) -> RecordColumns | None:
    """The records of ``view``, one complete magic 2 batch whose records are not compressed
    (``count`` is its header's), or None when the kernel finds them malformed: the caller's
    record-at-a-time path then raises the precise error. ``copy=False`` returns views of this
    thread's buffers instead, which its next call overwrites (for a caller done before then)."""
    b = _buffers(len(view), count)
    pos, end = 0, len(view)
    while True:
        result = kernels.decode_entries(
            b.sink, view, pos, end, _INT64_MIN, _INT64_MAX, _INT64_MAX, A.FLAG_KEEP_CONTROL
        )
        status = result[0]
        if status == A.NEED_SPACE:
            try:
                b.grow(result[2], result[3])
            except _ChunkFull:
                return None
            pos = result[1]
            continue
        if status != A.END or result[1] != end:
            return None
        break
    if b.rows() != count:
        return None
    a = b.arrays
    columns = RecordColumns(a[A.OFFSET][:count], a[A.TIMESTAMP][:count], a[A.KEY_VALID][:count])
    return RecordColumns(*(c.copy() for c in columns)) if copy else columns
