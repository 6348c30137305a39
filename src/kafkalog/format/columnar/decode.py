"""Columnar decode: a buffer of log entries (any magic, any codec) -> Arrow record batches.

The kernel (compiled or pure, see ``_kernels``) walks entries and appends every record of
uncompressed batches to growable numpy arrays in one call; it stops at each compressed batch,
which this driver decompresses (``_columnar_inflate``: lz4 and snappy into one reused buffer,
everything else through :mod:`kafkalog.format.codecs`, all capped by ``max_decompressed_size``)
and hands back to the kernel. There is no per-record Python object and
no per-batch Python work for uncompressed data: the optional CRC checks (CRC-32C of v2 batches,
CRC-32 of legacy messages) run inside the kernels, in the same walk.

Buffers are reused: a :class:`ColumnarDecoder` keeps its arrays between chunks and calls, and only
allocates new ones while Arrow arrays it handed out still reference the old ones (checked with
reference counts), because fresh large allocations page-fault heavily. Growth uses ``resize``
(``mremap``), so nothing is copied when an estimate was low.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np
import pyarrow as pa

from ...errors import CorruptRecordError, UnsupportedCompressionTypeError
from ..codecs import DEFAULT_MAX_DECOMPRESSED_SIZE
from ..constants import BATCH_HEADER
from . import _kernel_abi as A
from ._kernels import kernels as default_kernels
from .errors import Context, kernel_error
from .inflate import Inflater

__all__ = ["HEADER_TYPE", "SCHEMA", "ColumnarDecoder"]

HEADER_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)
SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE, nullable=False),
        pa.field("producerId", pa.int64(), nullable=False),
        pa.field("producerEpoch", pa.int16(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),
        pa.field("isTransactional", pa.bool_(), nullable=False),
        pa.field("isControl", pa.bool_(), nullable=False),
        pa.field("partitionLeaderEpoch", pa.int32(), nullable=False),
    ]
)

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_DATA = (1 << 31) - 1  # Arrow binary offsets are int32
POOL_SIZE = 3  # sets of arrays a decoder keeps: the one it fills and two a consumer may hold

_DTYPES = {
    A.OFFSET: np.int64,
    A.TIMESTAMP: np.int64,
    A.TIMESTAMP_TYPE: np.int32,
    A.KEY_OFFSETS: np.int32,
    A.KEY_VALID: np.uint8,
    A.KEY_DATA: np.uint8,
    A.VALUE_OFFSETS: np.int32,
    A.VALUE_VALID: np.uint8,
    A.VALUE_DATA: np.uint8,
    A.HEADER_OFFSETS: np.int32,
    A.HKEY_OFFSETS: np.int32,
    A.HKEY_DATA: np.uint8,
    A.HVAL_OFFSETS: np.int32,
    A.HVAL_VALID: np.uint8,
    A.HVAL_DATA: np.uint8,
    A.PRODUCER_ID: np.int64,
    A.PRODUCER_EPOCH: np.int16,
    A.SEQUENCE: np.int32,
    A.IS_TRANSACTIONAL: np.uint8,
    A.IS_CONTROL: np.uint8,
    A.PARTITION_LEADER_EPOCH: np.int32,
    A.STATE: np.int64,
}
_ROW_SLOTS = (
    A.OFFSET,
    A.TIMESTAMP,
    A.TIMESTAMP_TYPE,
    A.KEY_VALID,
    A.VALUE_VALID,
    A.PRODUCER_ID,
    A.PRODUCER_EPOCH,
    A.SEQUENCE,
    A.IS_TRANSACTIONAL,
    A.IS_CONTROL,
    A.PARTITION_LEADER_EPOCH,
)
_ROW_OFFSET_SLOTS = (A.KEY_OFFSETS, A.VALUE_OFFSETS, A.HEADER_OFFSETS)
_HEADER_SLOTS = (A.HVAL_VALID,)
_HEADER_OFFSET_SLOTS = (A.HKEY_OFFSETS, A.HVAL_OFFSETS)
_DATA_SLOT = {
    A.GROW_KEY_DATA: (A.KEY_DATA, A.ST_KEY_BYTES),
    A.GROW_VALUE_DATA: (A.VALUE_DATA, A.ST_VALUE_BYTES),
    A.GROW_HKEY_DATA: (A.HKEY_DATA, A.ST_HKEY_BYTES),
    A.GROW_HVAL_DATA: (A.HVAL_DATA, A.ST_HVAL_BYTES),
}
_DATA_NAMES = {
    A.KEY_DATA: "keys",
    A.VALUE_DATA: "values",
    A.HKEY_DATA: "header keys",
    A.HVAL_DATA: "header values",
}


class _ChunkFull(Exception):
    """A data buffer would pass Arrow's 2 GiB binary limit: end the chunk first."""


def _empty(length: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array in memory from Arrow's pool. The pool (mimalloc or jemalloc) keeps
    what batches handed out before gave back, pages the kernel has already mapped: a batch of a
    whole buffer, 150 MB for a million 100-byte records, costs 15 ms of first-touch page faults
    from ``np.empty`` (the C library unmaps large blocks on free), 0.4 ms from the pool."""
    dtype = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(length * dtype.itemsize), dtype)


class _Buffers:
    """The sink's arrays: allocated uninitialised (:func:`_empty`) and grown into fresh arrays
    that take only the filled part of the old ones (``resize`` would zero-fill the new part:
    touching pages the kernels write anyway, 85% of a whole buffer's decode). ``extrapolate``,
    set by a caller that fills one chunk from a whole buffer, is ``(bytes read, bytes in all)``:
    a growth then aims at the end of the buffer, as the data so far scales, instead of doubling
    step by step."""

    def __init__(self, kernels: ModuleType, rows: int, data: int, headers: int) -> None:
        self.kernels = kernels
        caps = {A.STATE: A.STATE_SIZE}
        for s in _ROW_SLOTS:
            caps[s] = rows
        for s in _ROW_OFFSET_SLOTS:
            caps[s] = rows + 1
        for s in _HEADER_SLOTS:
            caps[s] = headers
        for s in _HEADER_OFFSET_SLOTS:
            caps[s] = headers + 1
        caps[A.KEY_DATA] = caps[A.VALUE_DATA] = data
        caps[A.HKEY_DATA] = caps[A.HVAL_DATA] = max(64, data // 16)
        self.arrays = [_empty(caps[s], _DTYPES[s]) for s in range(A.NUM_SLOTS)]
        self.state = self.arrays[A.STATE]
        self.sink = None
        self._baseline: list[int] = []
        self.extrapolate: tuple[int, int] | None = None
        self.reset()

    def _bind(self) -> None:
        self.sink = None
        self.sink = self.kernels.Sink(tuple(self.arrays))
        self._baseline = self._refcounts()

    def _refcounts(self) -> list[int]:
        return [sys.getrefcount(a) for a in self.arrays]

    def reset(self) -> None:
        self.extrapolate = None
        self.state[:] = 0
        for s in (*_ROW_OFFSET_SLOTS, *_HEADER_OFFSET_SLOTS):
            self.arrays[s][0] = 0
        if self.sink is None:
            self._bind()

    def exported(self) -> bool:
        """True while an Arrow array handed out still references one of these arrays."""
        return self._refcounts() != self._baseline

    def _resize(self, slots, new: int, filled: int) -> None:
        self.sink = None  # the kernel's views of the old arrays go first
        for s in slots:
            old = self.arrays[s]
            fresh = _empty(new, old.dtype)
            fresh[:filled] = old[:filled]
            self.arrays[s] = fresh

    def _target(self, need: int, current: int) -> int:
        """The new length for a slot of ``current`` items that needs ``need``."""
        if self.extrapolate is not None:
            done, total = self.extrapolate
            if done * 100 >= total:  # 1% read: the rest is likely to look like it
                return max(need, min(need * total // done + need // 16, 16 * current))
        return max(need, 2 * current)

    def grow(self, group: int, need: int) -> None:
        self._grow(group, need)
        self._bind()  # after _grow: no local reference of its may count in the baseline

    def _grow(self, group: int, need: int) -> None:
        st = self.state
        if group == A.GROW_ROWS:
            rows, n = self._target(need, len(self.arrays[A.OFFSET])), int(st[A.ST_ROWS])
            self._resize(_ROW_SLOTS, rows, n)
            self._resize(_ROW_OFFSET_SLOTS, rows + 1, n + 1)
        elif group == A.GROW_HEADERS:
            headers = self._target(need, len(self.arrays[A.HVAL_VALID]))
            n = int(st[A.ST_HEADERS])
            self._resize(_HEADER_SLOTS, headers, n)
            self._resize(_HEADER_OFFSET_SLOTS, headers + 1, n + 1)
        else:
            slot, used = _DATA_SLOT[group]
            if need > _MAX_DATA:
                raise _ChunkFull(_DATA_NAMES[slot])
            new = min(_MAX_DATA, self._target(need, len(self.arrays[slot])))
            self._resize((slot,), new, int(st[used]))

    def rows(self) -> int:
        return int(self.state[A.ST_ROWS])

    def to_arrow(self, constants: Constants) -> pa.RecordBatch:
        """The filled part as an Arrow record batch, without copying the big buffers; a
        batch-level column that the kernels left unwritten (one value in every row) is a constant
        array from ``constants``."""
        a, st = self.arrays, self.state
        n, nh = int(st[A.ST_ROWS]), int(st[A.ST_HEADERS])
        hkeys = _binary(
            pa.string(), nh, a[A.HKEY_OFFSETS], None, 0, a[A.HKEY_DATA], st[A.ST_HKEY_BYTES]
        )
        hvals = _binary(
            pa.binary(),
            nh,
            a[A.HVAL_OFFSETS],
            a[A.HVAL_VALID],
            int(st[A.ST_HVAL_NULLS]),
            a[A.HVAL_DATA],
            st[A.ST_HVAL_BYTES],
        )
        structs = pa.Array.from_buffers(
            HEADER_TYPE.value_type, nh, [None], null_count=0, children=[hkeys, hvals]
        )
        headers = pa.Array.from_buffers(
            HEADER_TYPE,
            n,
            [None, _buf(a[A.HEADER_OFFSETS], n + 1)],
            null_count=0,
            children=[structs],
        )
        shared = int(st[A.ST_SHARED])
        batch_level = []
        for k, slot in enumerate(A.BATCH_SLOTS):
            type_ = _BATCH_TYPES[k]
            if shared >> k & 1:
                batch_level.append(constants.array(type_, int(st[A.ST_SHARED_VALUES + k]), n))
            elif type_ == pa.bool_():
                batch_level.append(_bools(a[slot], n))
            else:
                batch_level.append(_fixed(type_, a[slot], n))
        tt, pid, epoch, seq, txn, ctl, ple = batch_level
        columns = [
            _fixed(pa.int64(), a[A.OFFSET], n),
            _fixed(pa.int64(), a[A.TIMESTAMP], n),
            tt,
            _binary(
                pa.binary(),
                n,
                a[A.KEY_OFFSETS],
                a[A.KEY_VALID],
                int(st[A.ST_KEY_NULLS]),
                a[A.KEY_DATA],
                st[A.ST_KEY_BYTES],
            ),
            _binary(
                pa.binary(),
                n,
                a[A.VALUE_OFFSETS],
                a[A.VALUE_VALID],
                int(st[A.ST_VALUE_NULLS]),
                a[A.VALUE_DATA],
                st[A.ST_VALUE_BYTES],
            ),
            headers,
            pid,
            epoch,
            seq,
            txn,
            ctl,
            ple,
        ]
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


# Arrow types of the batch-level columns, by their B_* index.
_BATCH_TYPES = (pa.int32(), pa.int64(), pa.int16(), pa.int32(), pa.bool_(), pa.bool_(), pa.int32())
_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.int16(): np.int16}


class Constants:
    """Constant arrays for the batch-level columns whose rows share one value (a chunk's
    producerId, isControl...: most often all of them). Each is filled once and never written
    again, so every batch handed out may reference it: a decoder's chunks skip writing 24 bytes a
    row to memory. Kept per decoder (its lifetime, as its arrays'), at most MAX_KEPT of them,
    each as long as the longest chunk asked of it."""

    MAX_KEPT = 16

    def __init__(self) -> None:
        self._kept: dict[tuple[pa.DataType, int], np.ndarray] = {}

    def array(self, type_: pa.DataType, value: int, n: int) -> pa.Array:
        key = (type_, value)
        is_bool = type_ == pa.bool_()
        size = (n + 7) // 8 if is_bool else n
        kept = self._kept.get(key)
        if kept is None or len(kept) < size:
            if is_bool:
                kept = np.full(max(size, 1), 0xFF if value else 0, np.uint8)
            else:
                kept = np.full(max(size, 1), value, _NUMPY[type_])
            self._kept.pop(key, None)
            if len(self._kept) >= self.MAX_KEPT:
                del self._kept[next(iter(self._kept))]  # the oldest
            self._kept[key] = kept
        return pa.Array.from_buffers(type_, n, [None, _buf(kept, size)], null_count=0)


def _buf(array: np.ndarray, n: int) -> pa.Buffer:
    return pa.py_buffer(array[:n])


def _fixed(type_: pa.DataType, array: np.ndarray, n: int) -> pa.Array:
    return pa.Array.from_buffers(type_, n, [None, _buf(array, n)], null_count=0)


def _bools(mask: np.ndarray, n: int) -> pa.Array:
    bits = np.packbits(mask[:n], bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)], null_count=0)


def _binary(type_, n: int, offsets, valid, nulls: int, data, used) -> pa.Array:
    bitmap = None
    if nulls:
        bitmap = pa.py_buffer(np.packbits(valid[:n], bitorder="little"))
    return pa.Array.from_buffers(
        type_, n, [bitmap, _buf(offsets, n + 1), _buf(data, int(used))], null_count=nulls
    )


def _view(buffer) -> memoryview:
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class ColumnarDecoder:
    """Decodes log entries to Arrow, reusing its arrays between chunks and calls: it keeps up to
    POOL_SIZE sets, so a consumer may hold the chunk it has (and the one before) while it asks
    for the next without the decoder allocating afresh; all of them live as long as it does.

    Not thread-safe: use one decoder per thread. Options:

    - ``start_offset``/``end_offset``: keep records with ``start <= offset < end``; batches
      wholly outside are skipped without being decoded (or CRC-checked), and the walk stops at
      the first entry starting at or after ``end_offset``, as a fetch does.
    - ``validate_crc``: check each batch's CRC-32C (magic 2) or each message's CRC-32 (magic 0/1,
      inner messages included) before its records; a mismatch raises CorruptRecordError.
    - ``keep_control``: False drops control batches (transaction markers) unread.
    - ``max_decompressed_size``: the cap per compressed batch (CorruptRecordError past it).
    - ``position_base``: the file position of ``buffer[0]``, for error positions.
    - ``check_offset_order``: True (the default: ``buffer`` is a log) raises CorruptRecordError
      where an entry's first offset is not above the previous entry's last offset in
      ``buffer`` (:mod:`kafkalog.format.offsets_rule`); False for client produce requests, whose
      batches may all start at offset 0. Either way every entry's offsets must fit a log's
      (0 to 2^63 - 2: a damaged baseOffset, which the CRC does not cover, raises
      CorruptRecordError, never ends the walk).

    ``kernels`` picks a kernel twin (the differential tests use it); by default the facade's.
    """

    def __init__(self, *, kernels: ModuleType | None = None) -> None:
        self._kernels = default_kernels if kernels is None else kernels
        self._pool: list[_Buffers] = []
        self._buffers: _Buffers | None = None  # the set filled last
        self._constants = Constants()
        self._inflater = Inflater(self._kernels)

    def _acquire(self, view_len: int, max_rows: int) -> _Buffers:
        """A set of arrays no Arrow batch references any more, or a new one. A consumer's loop
        holds the chunk it has while it asks for the next (Spark's worker the one before it
        too): with a single set every chunk would get fresh arrays, and fresh large allocations
        page-fault heavily (1M records in 64K-row chunks decoded in about twice the time)."""
        pool = self._pool
        for b in pool:
            if not b.exported():
                break
        else:
            rows = max(64, min(max_rows, view_len // 48 + 64))
            data = max(1024, min(view_len, 256 * rows))
            b = _Buffers(self._kernels, rows, data, max(64, rows // 4))
            pool.append(b)
            if len(pool) > POOL_SIZE:
                del pool[0]  # the oldest, still held by whoever has its batch
        b.reset()
        self._buffers = b
        return b

    def _next_chunk(self, b: _Buffers, view_len: int, max_rows: int) -> _Buffers:
        """The arrays of the next chunk, carrying the offset rule's memory over from ``b``."""
        prev = b.state[A.ST_PREV_LAST], b.state[A.ST_HAS_PREV]
        b = self._acquire(view_len, max_rows)
        b.state[A.ST_PREV_LAST], b.state[A.ST_HAS_PREV] = prev
        return b

    def decode(self, buffer, **options) -> pa.RecordBatch:
        """All records of ``buffer`` (up to a partial trailing entry) as one record batch."""
        chunks = list(self._chunks(buffer, max_rows=_INT64_MAX, single=True, **options))
        return chunks[0]

    def iter_batches(self, buffer, *, max_rows: int = 65536, **options) -> Iterator[pa.RecordBatch]:
        """Record batches of about ``max_rows`` rows (a Kafka batch is never split, so a chunk can
        pass ``max_rows`` by up to one batch's records); memory stays bounded by the chunk."""
        if max_rows < 1:
            raise ValueError(f"max_rows must be positive, not {max_rows}")
        return self._chunks(buffer, max_rows=max_rows, single=False, **options)

    def _chunks(
        self,
        buffer,
        *,
        max_rows: int,
        single: bool,
        start_offset: int | None = None,
        end_offset: int | None = None,
        validate_crc: bool = False,
        keep_control: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        position_base: int = 0,
        check_offset_order: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        view = _view(buffer)
        end = len(view)
        lo = _INT64_MIN if start_offset is None else max(_INT64_MIN, min(start_offset, _INT64_MAX))
        hi = _INT64_MAX if end_offset is None else max(_INT64_MIN, min(end_offset, _INT64_MAX))
        flags = (
            (A.FLAG_VALIDATE_CRC if validate_crc else 0)
            | (A.FLAG_KEEP_CONTROL if keep_control else 0)
            | (A.FLAG_CHECK_ORDER if check_offset_order else 0)
        )
        ctx = Context("entries", view, position_base)
        kernels = self._kernels
        b = self._acquire(end, max_rows)
        pos = 0
        yielded = False
        inflate = self._inflater.inflate  # compressed v2 batches inflate inside decode_entries
        while True:
            result = kernels.decode_entries(
                b.sink, view, pos, end, lo, hi, max_rows, flags, inflate, max_decompressed_size
            )
            status = result[0]
            if single:  # where the rows so far came from: growth aims at the buffer's end
                b.extrapolate = (result[1], end)
            if status == A.ERROR:
                raise kernel_error(result, ctx)
            if status in (A.NEED_SPACE, A.DECOMPRESS):
                try:
                    if status == A.NEED_SPACE:
                        b.grow(result[2], result[3])
                        pos = result[1]
                    else:
                        pos = self._decompressed(
                            b, view, result, lo, hi, flags, max_decompressed_size, position_base
                        )
                    continue
                except _ChunkFull as full:
                    if single or b.rows() == 0:
                        raise _too_big(full, single) from None
            elif status != A.ROWS_FULL:
                # END or RANGE_END: a last chunk, or one empty batch (with the schema) if none came
                if b.rows() or not yielded:
                    yield b.to_arrow(self._constants)
                return
            # The chunk is full (its rows, or a data buffer at Arrow's limit): hand it out and
            # go on from the same entry in the next one.
            yielded = True
            yield b.to_arrow(self._constants)
            b = self._next_chunk(b, end, max_rows)
            pos = result[1]

    def _decompressed(self, b, view, result, lo, hi, flags, max_size, position_base) -> int:
        """Decode the compressed entry at result's position; return the next entry's position."""
        pos = result[1]
        where = position_base + pos
        magic = view[pos + 16]
        if magic == 2:
            header = BATCH_HEADER.unpack_from(view, pos)
            base_offset, length, _, _, _, attributes, last_delta, *_ = header
            codec = attributes & 0x07
            if codec > 4:
                raise UnsupportedCompressionTypeError(
                    f"Unknown compression type id {codec} in batch attributes",
                    position=where,
                    offset=base_offset,
                )
            try:
                data = self._inflater.inflate(
                    codec, view[pos + 61 : pos + 12 + length], 2, max_size
                )
            except CorruptRecordError as e:
                raise CorruptRecordError(
                    f"Records of the batch at position {where} cannot be decompressed: {e.message}",
                    position=where,
                    offset=base_offset,
                ) from None
            *fields, _ = A.records_v2_fields(header)
            r = _grown_run(b, self._kernels.decode_records_v2, data, *fields, lo, hi, last_delta)
            if r[0] == A.ERROR:
                ctx = Context("v2", data, batch_position=where, batch_offset=base_offset)
                raise kernel_error(r, ctx)
            _passed(b, base_offset + last_delta)
            return pos + 12 + length
        offset, size = _ENTRY.unpack_from(view, pos)
        attributes = view[pos + 17]
        ts = _I64.unpack_from(view, pos + 18)[0] if magic == 1 else -1
        value_pos, value_len = result[3], result[4]
        try:
            data = self._inflater.inflate(
                attributes & 0x07, view[value_pos : value_pos + value_len], magic, max_size
            )
        except CorruptRecordError as e:
            raise CorruptRecordError(
                f"Compressed message set of the wrapper at position {where} cannot be "
                f"decompressed: {e.message}",
                position=where,
                offset=offset,
            ) from None
        r = _grown_run(
            b, self._kernels.decode_legacy_set, data, offset, magic, attributes, ts, lo, hi, flags
        )
        if r[0] == A.ERROR:
            ctx = Context("legacy", data, batch_position=where, batch_offset=offset)
            raise kernel_error(r, ctx)
        _passed(b, offset)
        return pos + 12 + size


def _grown_run(b: _Buffers, kernel: Callable[..., tuple], *args: object) -> tuple:
    """``kernel``'s result over ``b``'s sink, run again after each growth it asks for (a kernel
    stopped for space left the sink as it found it)."""
    while True:
        r = kernel(b.sink, *args)
        if r[0] != A.NEED_SPACE:
            return r
        b.grow(r[2], r[3])


def _passed(b: _Buffers, last: int) -> None:
    """The offset rule's memory after an entry the driver decoded (the walk checked its offsets
    before handing it over): the next entry must start above ``last``."""
    b.state[A.ST_PREV_LAST] = last
    b.state[A.ST_HAS_PREV] = 1


def _too_big(full: _ChunkFull, single: bool) -> ValueError:
    hint = "; use iter_record_batches() to get it in chunks" if single else ""
    return ValueError(f"the {full} of one chunk would pass Arrow's 2 GiB binary limit{hint}")
