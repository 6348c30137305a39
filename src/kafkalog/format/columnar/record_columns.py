"""What LogValidator needs of each record of a magic 2 batch, through the fast path's kernels.

Kafka's per-record checks on an append (LogValidator.validateRecord) read a record's timestamp,
whether it has a key, and its offset; the batch's max timestamp is the largest record timestamp.
Decoding records one Python object at a time costs microseconds each; the columnar kernels
(compiled, or their pure twins) walk a batch's records into arrays instead, with the same framing
rules as the record-at-a-time decoder. A batch is decoded into buffers kept per thread and reused
(fresh large allocations page-fault); the columns are copied out of them unless asked not to.

A compressed batch's records are decompressed as the columnar decoder does (lz4 and snappy
straight into one reused buffer, everything else through :mod:`kafkalog.format.codecs`, with the
same cap) and walked by the same kernel. The kernels decode keys and values too (they build Arrow
columns, which a rebuild re-encodes from); a validation-only kernel (the same walk, writing only
offset deltas, timestamps and key presence) would do less work for the checks alone.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from ..constants import RECORDS_OFFSET
from ..validate import V2Header
from . import _kernel_abi as A
from ._kernels import kernels
from .decode import Constants, _Buffers, _ChunkFull
from .inflate import Inflater

__all__ = ["RecordColumns", "current_records", "v2_compressed_columns", "v2_record_columns"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_local = threading.local()
_KEEP_BYTES = 16 << 20
_FLAGS = A.FLAG_KEEP_CONTROL  # no FLAG_CHECK_ORDER: see v2_record_columns


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
    # Not FLAG_CHECK_ORDER: this reads client produce requests too (the offset rule's order
    # check is for logs); each entry's offsets must still fit int64 (else None: the caller's
    # record-at-a-time path raises the rule's error).
    ok = _fill(
        b,
        lambda pos: kernels.decode_entries(
            b.sink, view, pos, len(view), _INT64_MIN, _INT64_MAX, _INT64_MAX, _FLAGS
        ),
    )
    if ok is None or ok[1] != len(view):
        return None
    return _columns(b, count, copy)


def v2_compressed_columns(view: memoryview, h: V2Header) -> tuple[RecordColumns, int] | None:
    """The records of ``view``, one complete compressed magic 2 batch with header ``h``, and the
    size of its decompressed records section (what Kafka counts as the records' bytes); None
    when they do not decompress or decode (the caller's general path then says why). The
    columns are views of this thread's buffers, valid until its next call."""
    inflater = getattr(_local, "inflater", None)
    if inflater is None:
        inflater = _local.inflater = Inflater()
    payload = view[RECORDS_OFFSET : h.size]
    try:
        data = inflater.inflate(h.attributes & 0x07, payload, 2, DEFAULT_MAX_DECOMPRESSED_SIZE)
    except Exception:  # whatever it is, the general path decompresses again and says why
        return None
    b = _buffers(len(data), h.count)
    fields = (h.count, h.base_offset, h.base_timestamp, h.max_timestamp, h.attributes)
    producer = (h.base_sequence, h.producer_id, h.producer_epoch, h.partition_leader_epoch)
    ok = _fill(
        b,
        lambda _: kernels.decode_records_v2(
            b.sink, data, *fields, *producer, _INT64_MIN, _INT64_MAX, h.last_offset_delta
        ),
    )
    if len(data) > _KEEP_BYTES:
        _local.inflater = None  # its buffer would stay as large as this exceptional batch
    if ok is None:
        return None
    return _columns(b, h.count, False), len(data)


def current_records() -> pa.RecordBatch:
    """The records of this thread's last decode as Arrow columns (``fast.SCHEMA``), without a
    copy: valid until its next call (a rebuild re-encodes them from here)."""
    constants = getattr(_local, "constants", None)
    if constants is None:
        constants = _local.constants = Constants()
    return _local.buffers.to_arrow(constants)


def _fill(b: _Buffers, decode) -> tuple | None:
    """Run a kernel call (given where to resume) until it has the room it needs; its END
    result, or None for anything else (malformed records, more than a chunk holds)."""
    pos = 0
    while True:
        result = decode(pos)
        if result[0] != A.NEED_SPACE:
            return result if result[0] == A.END else None
        try:
            b.grow(result[2], result[3])
        except _ChunkFull:
            return None
        pos = result[1]


def _columns(b: _Buffers, count: int, copy: bool) -> RecordColumns | None:
    if b.rows() != count:
        return None
    a = b.arrays
    if b.state[A.ST_KEY_NULLS]:
        key_present = a[A.KEY_VALID][:count]
    else:  # the kernels write no validity before a chunk's first null
        key_present = np.ones(count, np.uint8)
    columns = RecordColumns(a[A.OFFSET][:count], a[A.TIMESTAMP][:count], key_present)
    return RecordColumns(*(c.copy() for c in columns)) if copy else columns
