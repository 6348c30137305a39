"""Pure-Python reference kernels of the columnar fast path (the compiled twin is ``_speedups/*.c``).

Same functions, arguments, results and error codes as the C kernels (see ``_kernel_abi``): the
differential tests hold them to identical arrays and identical errors. They follow record.py's and
legacy.py's checks in the same order, but append into the sink's numpy arrays (through
memoryviews) instead of building Record objects. Integer overflow wraps to int64/int32 as the C
kernel (and Java) does, so hostile bytes give the same columns on both paths. CRCs come from
the libraries kafkalog uses everywhere: ``zlib.crc32`` for legacy messages, the ``crc32c``
package for v2 batches.
"""

from __future__ import annotations

import zlib
from array import array

from ...codecs import lz4 as _lz4
from ...constants import BATCH_HEADER
from ...crc import crc32c
from .. import _kernel_abi as A
from .encode import (
    Source,
    _wrap64,
    binary_column,
    encode_batches,
    encode_compressed,
    encode_plan,
    encode_records,
    header_columns,
    int64_column,
)

__all__ = [
    "ABI_VERSION",
    "IMPLEMENTATION",
    "Sink",
    "Source",
    "binary_column",
    "decode_entries",
    "decode_legacy_set",
    "decode_records_v2",
    "dump_lines",
    "encode_batches",
    "encode_compressed",
    "encode_plan",
    "encode_records",
    "frame_run",
    "header_columns",
    "int64_column",
    "lz4_blocks",
    "valid_prefix_run",
    "validate_records_v2",
]

IMPLEMENTATION = "pure"
ABI_VERSION = A.ABI_VERSION

_M64 = 0xFFFFFFFFFFFFFFFF
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
_MAX_LAST = _I64_MAX - 1  # offsets_rule.MAX_LAST_OFFSET: a log's next offset must fit int64


def _wrap32(x: int) -> int:
    if -(1 << 31) <= x < (1 << 31):
        return x
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _be(buf, pos: int, n: int, signed: bool = True) -> int:
    return int.from_bytes(buf[pos : pos + n], "big", signed=signed)


class Sink:
    """Memoryviews over the driver's output arrays (built once per set of arrays)."""

    __slots__ = ("arrays", "views")

    def __init__(self, arrays: tuple) -> None:
        if len(arrays) != A.NUM_SLOTS:
            raise ValueError(f"a sink needs {A.NUM_SLOTS} arrays, not {len(arrays)}")
        self.arrays = arrays
        self.views = [_canonical(memoryview(a)) for a in arrays]


def _canonical(view: memoryview) -> memoryview:
    """The view with array.array's format letters, so slices can be assigned from arrays."""
    return view.cast("B").cast(_FORMATS[view.itemsize]) if view.itemsize > 1 else view.cast("B")


_FORMATS = {8: "q", 4: "i", 2: "h"}


class _Fail(Exception):
    """Internal: carries a kernel result tuple out of nested helpers."""

    def __init__(self, result: tuple) -> None:
        self.result = result


def _err(code: int, pos: int, a: int = 0, b: int = 0, c: int = 0) -> _Fail:
    return _Fail((A.ERROR, pos, code, a, b, c, -1))


def _grow(group: int, need: int) -> _Fail:
    return _Fail((A.NEED_SPACE, -1, group, need, 0, 0, -1))


def _varint(buf, pos: int, end: int, max_bytes: int, field: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _err(A.E_VARINT_EOF, start, field)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise _err(A.E_VARINT_LONG, start, field, max_bytes)
    raw &= 0xFFFFFFFF if max_bytes == 5 else _M64
    return (raw >> 1) ^ -(raw & 1), pos


def _read32(buf, pos: int, end: int, field: int) -> tuple[int, int]:
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    return _varint(buf, pos, end, 5, field)


def _record_head(buf, pos: int, end: int) -> tuple[int, ...]:
    """A v2 record's framing up to its headers, checked as record.py checks it (both walkers
    read records alike): (length, body end, timestamp delta, offset delta, key length, key
    position, value length, value position, header count, the headers' position); ``pos`` is the
    record's."""
    length, p = _read32(buf, pos, end, A.F_RECORD_LENGTH)
    body_end = p + length
    if length < 0 or body_end > end:
        raise _err(A.E_RECORD_SIZE_OVERRUN, pos, length, end - p)
    if length < 6:
        raise _err(A.E_RECORD_SIZE_SMALL, pos, length)
    b = buf[p + 1]  # after the (unused) attributes byte
    if b < 0x80:
        ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
    else:
        ts_delta, p = _varint(buf, p + 1, body_end, 10, A.F_TIMESTAMP_DELTA)
    offset_delta, p = _read32(buf, p, body_end, A.F_OFFSET_DELTA)
    k_len, p = _read32(buf, p, body_end, A.F_KEY_LENGTH)
    k_pos = p
    if k_len >= 0:  # Kafka reads any negative size as null
        if p + k_len > body_end:
            raise _err(A.E_KEY_OVERRUN, p, k_len, body_end - p)
        p += k_len
    v_len, p = _read32(buf, p, body_end, A.F_VALUE_LENGTH)
    v_pos = p
    if v_len >= 0:
        if p + v_len > body_end:
            raise _err(A.E_VALUE_OVERRUN, p, v_len, body_end - p)
        p += v_len
    h_count, p = _read32(buf, p, body_end, A.F_HEADER_COUNT)
    if h_count < 0:
        raise _err(A.E_HEADERS_NEGATIVE, p, h_count)
    return length, body_end, ts_delta, offset_delta, k_len, k_pos, v_len, v_pos, h_count, p


def _sequence(base_sequence: int, delta: int) -> int:
    if base_sequence < 0:
        return -1
    if base_sequence > _I32_MAX - delta:
        return _wrap32(delta - (_I32_MAX - base_sequence) - 1)
    return _wrap32(base_sequence + delta)


def _records_v2(
    sink: Sink, buf, start: int, end: int, batch: tuple, start_offset: int, end_offset: int
) -> None:
    """Append the records of ``buf[start:end]``; raise _Fail on bad bytes or no room. ``batch``
    holds the batch's fields in decode_records_v2's order (see ``_kernel_abi.records_v2_fields``).

    Columns are gathered in lists for the whole batch and written with one slice assignment
    each, after every check passed (the sink is untouched when this raises)."""
    (count, base_offset, base_ts, max_ts, attributes, base_sequence, producer_id, producer_epoch,
     leader_epoch, last_delta) = batch  # fmt: skip
    v = sink.views
    st = v[A.STATE]
    if count * 7 > end - start:
        raise _err(A.E_COUNT_TOO_LARGE, start, count, end - start)
    n = st[A.ST_ROWS]
    if n + count > len(v[A.OFFSET]):
        raise _grow(A.GROW_ROWS, n + count)
    ku, vu = st[A.ST_KEY_BYTES], st[A.ST_VALUE_BYTES]
    nh, hku, hvu = st[A.ST_HEADERS], st[A.ST_HKEY_BYTES], st[A.ST_HVAL_BYTES]
    log_append = bool(attributes & 0x08)
    offsets, stamps, sequences = [], [], []
    k_valid, k_ends, v_valid, v_ends, h_ends = [], [], [], [], []
    k_parts, v_parts = [], []
    hk_ends, hv_valid, hv_ends, hk_parts, hv_parts = [], [], [], [], []
    prev_delta = -1
    pos = start
    for _ in range(count):
        record_start = pos
        (length, body_end, ts_delta, offset_delta, k_len, k_pos, v_len, v_pos, h_count, pos) = (
            _record_head(buf, pos, end)
        )
        offset = base_offset + offset_delta
        if offset < _I64_MIN:
            offset = _wrap64(offset)
        keep = start_offset <= offset < end_offset
        if h_count:
            if h_count * 2 > body_end - pos:
                raise _err(A.E_HEADERS_TOO_MANY, pos, h_count, body_end - pos)
            for _ in range(h_count):
                hk_len, pos = _read32(buf, pos, body_end, A.F_HKEY_LENGTH)
                if hk_len < 0 or pos + hk_len > body_end:
                    raise _err(A.E_HKEY_SIZE, pos, hk_len)
                key = buf[pos : pos + hk_len]
                pos += hk_len
                hv_len, pos = _read32(buf, pos, body_end, A.F_HVAL_LENGTH)
                if hv_len >= 0:
                    if pos + hv_len > body_end:
                        raise _err(A.E_HVAL_OVERRUN, pos, hv_len)
                    value = buf[pos : pos + hv_len]
                    pos += hv_len
                if keep:
                    try:
                        str(key, "utf-8")
                    except UnicodeDecodeError:  # as Kafka's new String(bytes, UTF_8)
                        key = str(key, "utf-8", "replace").encode()
                    hku += len(key)
                    hk_parts.append(key)
                    hk_ends.append(hku)
                    if hv_len >= 0:
                        hvu += hv_len
                        hv_parts.append(value)
                    hv_valid.append(1 if hv_len >= 0 else 0)
                    hv_ends.append(hvu)
                    nh += 1
        if pos != body_end:
            raise _err(A.E_RECORD_PAYLOAD, record_start, length, pos - (body_end - length))
        # the offset rule, once the record is read (as record.py): within the batch's offsets,
        # which the caller checked fit a log's
        if offset_delta <= prev_delta or offset_delta > last_delta:
            raise _err(A.E_RECORD_OFFSET, record_start, offset_delta, prev_delta, last_delta)
        prev_delta = offset_delta
        if not keep:
            continue
        if k_len >= 0:
            k_parts.append(buf[k_pos : k_pos + k_len])
            ku += k_len
        k_valid.append(1 if k_len >= 0 else 0)
        k_ends.append(ku)
        if v_len >= 0:
            v_parts.append(buf[v_pos : v_pos + v_len])
            vu += v_len
        v_valid.append(1 if v_len >= 0 else 0)
        v_ends.append(vu)
        h_ends.append(nh)
        offsets.append(offset)
        stamps.append(max_ts if log_append else _wrap64(base_ts + ts_delta))
        sequences.append(_sequence(base_sequence, offset_delta))
    if pos != end:
        raise _err(A.E_RECORDS_REMAINING, pos, end - pos, count)
    # Room for everything gathered? (The driver grows and calls again if not.)
    if nh > len(v[A.HVAL_VALID]):
        raise _grow(A.GROW_HEADERS, nh)
    for group, slot, used in (
        (A.GROW_KEY_DATA, A.KEY_DATA, ku),
        (A.GROW_VALUE_DATA, A.VALUE_DATA, vu),
        (A.GROW_HKEY_DATA, A.HKEY_DATA, hku),
        (A.GROW_HVAL_DATA, A.HVAL_DATA, hvu),
    ):
        if used > len(v[slot]):
            raise _grow(group, used)
    m = len(offsets)
    _put(v, A.OFFSET, n, "q", offsets)
    _put(v, A.TIMESTAMP, n, "q", stamps)
    _put(v, A.KEY_VALID, n, "B", k_valid)
    _put(v, A.KEY_OFFSETS, n + 1, "i", k_ends)
    _put(v, A.VALUE_VALID, n, "B", v_valid)
    _put(v, A.VALUE_OFFSETS, n + 1, "i", v_ends)
    _put(v, A.HEADER_OFFSETS, n + 1, "i", h_ends)
    batch_values = (
        1 if log_append else 0,
        producer_id,
        producer_epoch,
        -1,
        1 if attributes & 0x10 else 0,
        1 if attributes & 0x20 else 0,
        leader_epoch,
    )
    _batch_columns(v, n, n + m, batch_values, sequences if base_sequence >= 0 else None)
    h0 = st[A.ST_HEADERS]
    _put(v, A.HKEY_OFFSETS, h0 + 1, "i", hk_ends)
    _put(v, A.HVAL_OFFSETS, h0 + 1, "i", hv_ends)
    _put(v, A.HVAL_VALID, h0, "B", hv_valid)
    for slot, parts, used0 in (
        (A.KEY_DATA, k_parts, st[A.ST_KEY_BYTES]),
        (A.VALUE_DATA, v_parts, st[A.ST_VALUE_BYTES]),
        (A.HKEY_DATA, hk_parts, st[A.ST_HKEY_BYTES]),
        (A.HVAL_DATA, hv_parts, st[A.ST_HVAL_BYTES]),
    ):
        data = b"".join(parts)
        v[slot][used0 : used0 + len(data)] = data
    st[A.ST_ROWS] = n + m
    st[A.ST_KEY_BYTES], st[A.ST_VALUE_BYTES] = ku, vu
    st[A.ST_HEADERS], st[A.ST_HKEY_BYTES], st[A.ST_HVAL_BYTES] = nh, hku, hvu
    st[A.ST_KEY_NULLS] += m - sum(k_valid)
    st[A.ST_VALUE_NULLS] += m - sum(v_valid)
    st[A.ST_HVAL_NULLS] += len(hv_valid) - sum(hv_valid)


_BATCH_CODES = ("i", "q", "h", "i", "B", "B", "i")
_ALL_SHARED = (1 << A.BATCH_COLUMNS) - 1


def _batch_columns(v, start: int, stop: int, values: tuple, sequences: list | None) -> None:
    """Rows [start, stop) of the batch-level columns take ``values`` (by ``B_*``; with
    ``sequences``, those rows' sequences instead of ``values[B_SEQUENCE]``). A column is written
    only once its rows stop sharing one value: until then its bit in ST_SHARED is set and the
    value kept at ST_SHARED_VALUES (the driver makes a constant array for it)."""
    if stop <= start:
        return
    st = v[A.STATE]
    same = A.ST_SHARED_VALUES
    shared = st[A.ST_SHARED]
    if start == 0:  # a chunk's first rows
        shared = _ALL_SHARED
        for k, value in enumerate(values):
            st[same + k] = value
        if sequences is not None:
            shared &= ~(1 << A.B_SEQUENCE)
    for k, value in enumerate(values):
        slot, code, bit = A.BATCH_SLOTS[k], _BATCH_CODES[k], 1 << k
        computed = k == A.B_SEQUENCE and sequences is not None
        if shared & bit:
            if not computed and value == st[same + k]:
                continue
            _put(v, slot, 0, code, [st[same + k]] * start)  # the rows before shared one value
            shared &= ~bit
        _put(v, slot, start, code, sequences if computed else [value] * (stop - start))
    st[A.ST_SHARED] = shared


def _put(views, slot: int, at: int, code: str, items: list) -> None:
    if items:
        views[slot][at : at + len(items)] = array(code, items)


def _legacy_key_value(buf, pos: int, end: int, magic: int) -> tuple[int, int, int, int]:
    """``(key_pos, key_len, value_pos, value_len)`` of the message whose entry starts at ``pos``."""
    p = pos + 12 + (14 if magic == 0 else 22) - 8
    out = []
    for field in (0, 1):
        length = _be(buf, p, 4)
        p += 4
        if length < 0:  # any negative size is null, as LegacyRecord reads it
            out += (p, -1)
        else:
            remaining = end - p - (4 if field == 0 else 0)
            if length > remaining:
                raise _err(A.E_LEGACY_OVERRUN, pos, field, length, remaining)
            out += (p, length)
            p += length
    return out[0], out[1], out[2], out[3]


def _legacy_row(
    sink: Sink, buf, pos: int, end: int, offset: int, timestamp: int, ts_type: int, magic: int
) -> None:
    v = sink.views
    st = v[A.STATE]
    n, ku, vu = st[A.ST_ROWS], st[A.ST_KEY_BYTES], st[A.ST_VALUE_BYTES]
    k_pos, k_len, v_pos, v_len = _legacy_key_value(buf, pos, end, magic)
    if n + 1 > len(v[A.OFFSET]):
        raise _grow(A.GROW_ROWS, n + 1)
    if k_len > 0 and ku + k_len > len(v[A.KEY_DATA]):
        raise _grow(A.GROW_KEY_DATA, ku + k_len)
    if v_len > 0 and vu + v_len > len(v[A.VALUE_DATA]):
        raise _grow(A.GROW_VALUE_DATA, vu + v_len)
    if k_len >= 0:
        v[A.KEY_DATA][ku : ku + k_len] = buf[k_pos : k_pos + k_len]
        ku += k_len
    if v_len >= 0:
        v[A.VALUE_DATA][vu : vu + v_len] = buf[v_pos : v_pos + v_len]
        vu += v_len
    v[A.KEY_VALID][n] = 1 if k_len >= 0 else 0
    v[A.VALUE_VALID][n] = 1 if v_len >= 0 else 0
    v[A.KEY_OFFSETS][n + 1] = ku
    v[A.VALUE_OFFSETS][n + 1] = vu
    v[A.HEADER_OFFSETS][n + 1] = st[A.ST_HEADERS]
    v[A.OFFSET][n] = offset
    v[A.TIMESTAMP][n] = timestamp
    st[A.ST_KEY_NULLS] += k_len < 0
    st[A.ST_VALUE_NULLS] += v_len < 0
    # a message's batch-level columns: no producer, sequence or leader epoch; its timestamp type
    _batch_columns(v, n, n + 1, (ts_type, -1, -1, -1, 0, 0, -1), None)
    st[A.ST_ROWS] = n + 1
    st[A.ST_KEY_BYTES], st[A.ST_VALUE_BYTES] = ku, vu


def _legacy_crc(buf, pos: int, end: int) -> None:
    stored = _be(buf, pos + 12, 4, signed=False)
    computed = zlib.crc32(buf[pos + 16 : end]) & 0xFFFFFFFF
    if stored != computed:
        raise _err(A.E_CRC, pos, stored, computed)


def _min_legacy_size(magic: int) -> int:
    return 14 if magic == 0 else 22


def _save(sink: Sink) -> list[int]:
    return list(sink.views[A.STATE])


def _restore(sink: Sink, saved: list[int]) -> None:
    st = sink.views[A.STATE]
    for i, x in enumerate(saved):
        st[i] = x


def decode_entries(
    sink: Sink,
    buf,
    pos: int,
    end: int,
    start_offset: int,
    end_offset: int,
    max_rows: int,
    flags: int,
    inflate=None,
    max_size: int | None = None,
) -> tuple:
    """Walk log entries from ``pos``, appending uncompressed records; stop at a status. With
    ``inflate`` (the driver's ``Inflater.inflate``) and a byte memoryview, compressed v2 batches
    are inflated and appended on the way; one that raises or does not decode is left to the driver
    (DECOMPRESS), which redoes it and reports what is wrong with its context."""
    if not isinstance(buf, memoryview) or buf.ndim != 1 or buf.itemsize != 1:
        inflate = None
    while True:
        result = _walk_entries(sink, buf, pos, end, start_offset, end_offset, max_rows, flags)
        if result[0] != A.DECOMPRESS or inflate is None or buf[result[1] + 16] != 2:
            return result
        at = result[1]
        pos = _inflate_v2_batch(sink, buf, at, start_offset, end_offset, inflate, max_size)
        if not pos:
            return result
        st = sink.views[A.STATE]  # the offset rule: the walk checked this batch's offsets
        st[A.ST_PREV_LAST], st[A.ST_HAS_PREV] = _be(buf, at, 8) + _be(buf, at + 23, 4), 1


def _batch_header(buf, pos: int) -> tuple:
    """The fields of the v2 batch at ``pos`` in decode_records_v2's order, lastOffsetDelta last."""
    return A.records_v2_fields(BATCH_HEADER.unpack_from(buf, pos))


def _inflate_v2_batch(sink, buf, pos, start_offset, end_offset, inflate, max_size) -> int:
    """The compiled twin's inflate_v2_batch: the next entry's position once the batch's records
    are appended, 0 when it is left to the driver."""
    entry_end = pos + 12 + _be(buf, pos + 8, 4)
    attributes = _be(buf, pos + 21, 2)
    if attributes & 0x07 > 4:
        return 0
    try:
        data = inflate(attributes & 0x07, buf[pos + 61 : entry_end], 2, max_size)
    except Exception:
        return 0
    saved = _save(sink)
    *fields, last_delta = _batch_header(buf, pos)
    result = decode_records_v2(sink, data, *fields, start_offset, end_offset, last_delta)
    if result[0] != A.END:
        _restore(sink, saved)
        return 0
    return entry_end


def _walk_entries(
    sink: Sink,
    buf,
    pos: int,
    end: int,
    start_offset: int,
    end_offset: int,
    max_rows: int,
    flags: int,
) -> tuple:
    """decode_entries without inflating: stops at every compressed batch with DECOMPRESS."""
    buf = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
    v = sink.views
    st = v[A.STATE]
    validate = flags & A.FLAG_VALIDATE_CRC
    keep_control = flags & A.FLAG_KEEP_CONTROL
    check_order = flags & A.FLAG_CHECK_ORDER
    while True:
        if end - pos <= 17:
            return (A.END, pos, 0, 0, 0, 0, pos)
        offset = _be(buf, pos, 8)
        size = _be(buf, pos + 8, 4)
        if size < 14:
            return (A.ERROR, pos, A.E_ENTRY_SIZE, size, offset, 0, pos)
        if size > end - pos - 12:
            return (A.END, pos, 0, 0, 0, 0, pos)
        magic = buf[pos + 16]
        if magic > 2:
            return (A.ERROR, pos, A.E_MAGIC, magic, offset, 0, pos)
        if magic == 2 and size < 49:
            return (A.ERROR, pos, A.E_BATCH_SIZE, size + 12, offset, 0, pos)
        if st[A.ST_ROWS] >= max_rows:
            return (A.ROWS_FULL, pos, 0, 0, 0, 0, pos)
        # The offset rule (offsets_rule.py), before anything else of the entry: its offsets fit
        # (the baseOffset is outside the CRC), and with check_order follow the previous entry's.
        delta = _be(buf, pos + 23, 4) if magic == 2 else 0
        last = offset + delta
        if offset < 0 or offset > _MAX_LAST or last > _MAX_LAST:
            return (A.ERROR, pos, A.E_OFFSETS, offset, delta, 0, pos)
        if check_order and st[A.ST_HAS_PREV] and offset <= st[A.ST_PREV_LAST]:
            return (A.ERROR, pos, A.E_OFFSET_ORDER, offset, st[A.ST_PREV_LAST], 0, pos)
        entry_end = pos + 12 + size
        saved = _save(sink)
        try:
            if magic == 2:
                if offset >= end_offset:
                    return (A.RANGE_END, pos, 0, 0, 0, 0, pos)
                attributes = _be(buf, pos + 21, 2)
                # Batches left out (before the range, control batches not kept) are checked as
                # the others are: their CRC and header, as Kafka's consumer checks every batch.
                if validate:
                    stored = _be(buf, pos + 17, 4, signed=False)
                    computed = crc32c(buf[pos + 21 : entry_end])
                    if stored != computed:
                        return (A.ERROR, pos, A.E_CRC, stored, computed, 0, pos)
                count = _be(buf, pos + 57, 4)
                if count < 0:
                    return (A.ERROR, pos, A.E_COUNT_NEGATIVE, count, 0, 0, pos)
                if delta < 0 or count > delta + 1:
                    return (A.ERROR, pos, A.E_BATCH_HEADER, delta, count, 0, pos)
                if attributes & 0x07 > 4:
                    return (A.ERROR, pos, A.E_CODEC, attributes & 0x07, offset, 0, pos)
                if last < start_offset or (attributes & 0x20 and not keep_control):
                    # Its records must decode (Kafka's consumer iterates a control batch's
                    # records too); a compressed one is left out whole, not inflated.
                    if not attributes & 0x07:
                        _validate_v2(buf, pos + 61, entry_end, count, _be(buf, pos + 23, 4),
                                     _be(buf, pos + 27, 8), _be(buf, pos + 35, 8),
                                     bool(attributes & 0x08))  # fmt: skip
                    st[A.ST_PREV_LAST], st[A.ST_HAS_PREV] = last, 1
                    pos = entry_end
                    continue
                if attributes & 0x07:  # even with a count of 0: hidden records are found
                    return (A.DECOMPRESS, pos, 0, 0, 0, 0, pos)
                batch = _batch_header(buf, pos)
                _records_v2(sink, buf, pos + 61, entry_end, batch, start_offset, end_offset)
            else:
                if size < _min_legacy_size(magic):
                    return (A.ERROR, pos, A.E_LEGACY_MSG_SIZE, size, magic, 0, pos)
                attributes = buf[pos + 17]
                codec = attributes & 0x07
                if codec == 0 and offset >= end_offset:
                    return (A.RANGE_END, pos, 0, 0, 0, 0, pos)
                if offset < start_offset:
                    st[A.ST_PREV_LAST], st[A.ST_HAS_PREV] = last, 1
                    pos = entry_end
                    continue
                if validate:
                    _legacy_crc(buf, pos, entry_end)
                if magic == 0:
                    ts, ts_type = -1, -1
                else:
                    ts, ts_type = _be(buf, pos + 18, 8), (1 if attributes & 0x08 else 0)
                if codec:
                    if codec > 3:
                        return (A.ERROR, pos, A.E_LEGACY_CODEC, codec, magic, 0, pos)
                    _, _, v_pos, v_len = _legacy_key_value(buf, pos, entry_end, magic)
                    if v_len < 0:
                        return (A.ERROR, pos, A.E_LEGACY_NULL_WRAPPER, magic, 0, 0, pos)
                    return (A.DECOMPRESS, pos, 0, v_pos, v_len, 0, pos)
                _legacy_row(sink, buf, pos, entry_end, offset, ts, ts_type, magic)
        except _Fail as f:
            status, p, code, a, b, c, _ = f.result
            if status == A.NEED_SPACE:
                _restore(sink, saved)
                return (status, pos, code, a, b, c, pos)
            return (status, p, code, a, b, c, pos)
        st[A.ST_PREV_LAST], st[A.ST_HAS_PREV] = last, 1
        pos = entry_end


def decode_records_v2(
    sink: Sink,
    data,
    count: int,
    base_offset: int,
    base_ts: int,
    max_ts: int,
    attributes: int,
    base_sequence: int,
    producer_id: int,
    producer_epoch: int,
    leader_epoch: int,
    start_offset: int,
    end_offset: int,
    last_delta: int,
) -> tuple:
    """Append the records of one decompressed v2 records section (all or nothing)."""
    data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    if not 0 <= count <= _I32_MAX or not _I32_MIN <= last_delta <= _I32_MAX:
        raise ValueError("decode_records_v2: count or lastOffsetDelta out of range")
    saved = _save(sink)
    try:
        batch = (count, base_offset, base_ts, max_ts, attributes, base_sequence, producer_id,
                 producer_epoch, leader_epoch, last_delta)  # fmt: skip
        _records_v2(sink, data, 0, len(data), batch, start_offset, end_offset)
    except _Fail as f:
        if f.result[0] == A.NEED_SPACE:
            _restore(sink, saved)
        return (*f.result[:6], 0)
    return (A.END, len(data), 0, 0, 0, 0, 0)


def validate_records_v2(
    data,
    start: int,
    end: int,
    count: int,
    base_ts: int,
    max_ts: int,
    log_append: bool,
    last_delta: int,
) -> tuple:
    """Check the framing of the ``count`` records of ``data[start:end]`` as decode_records_v2
    does, writing nothing: ``(status, pos, code, a, b, c, min_ts, max_ts, null_keys,
    deltas_ok)``, where the timestamps skip -1 (both -1 if none is set; each record has the
    batch's ``max_ts`` with ``log_append``), and ``pos`` is the end reached (or the error's)."""
    data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    if not 0 <= start <= end <= len(data) or not 0 <= count <= _I32_MAX:
        raise ValueError("validate_records_v2: range or count out of range")
    try:
        lo, hi, null_keys, deltas_ok = _validate_v2(data, start, end, count, last_delta, base_ts,
                                                    max_ts, log_append)  # fmt: skip
    except _Fail as f:
        return (*f.result[:6], -1, -1, 0, 0)
    return (A.END, end, 0, 0, 0, 0, lo, hi, null_keys, deltas_ok)


def _validate_v2(
    buf,
    start: int,
    end: int,
    count: int,
    last_delta: int,
    base_ts: int,
    max_ts: int,
    log_append: bool,
) -> tuple[int, int, int, int]:
    """_records_v2's walk (same rules, same order) keeping only what validation needs."""
    if count * 7 > end - start:
        raise _err(A.E_COUNT_TOO_LARGE, start, count, end - start)
    lo, hi = _I64_MAX, -_I64_MAX - 1
    null_keys, deltas_ok, prev_delta = 0, 1, -1
    pos = start
    for i in range(count):
        record_start = pos
        (length, body_end, ts_delta, offset_delta, k_len, _, _, _, h_count, pos) = _record_head(
            buf, pos, end
        )
        if k_len < 0:
            null_keys += 1
        if h_count * 2 > body_end - pos:
            raise _err(A.E_HEADERS_TOO_MANY, pos, h_count, body_end - pos)
        for _ in range(h_count):
            hk_len, pos = _read32(buf, pos, body_end, A.F_HKEY_LENGTH)
            if hk_len < 0 or pos + hk_len > body_end:
                raise _err(A.E_HKEY_SIZE, pos, hk_len)
            hv_len, pos = _read32(buf, pos + hk_len, body_end, A.F_HVAL_LENGTH)
            if hv_len >= 0:
                if pos + hv_len > body_end:
                    raise _err(A.E_HVAL_OVERRUN, pos, hv_len)
                pos += hv_len
        if pos != body_end:
            raise _err(A.E_RECORD_PAYLOAD, record_start, length, pos - (body_end - length))
        if offset_delta <= prev_delta or offset_delta > last_delta:
            raise _err(A.E_RECORD_OFFSET, record_start, offset_delta, prev_delta, last_delta)
        prev_delta = offset_delta
        if offset_delta != i:
            deltas_ok = 0
        ts = max_ts if log_append else _wrap64(base_ts + ts_delta)
        if ts != -1:
            lo, hi = min(lo, ts), max(hi, ts)
    if pos != end:
        raise _err(A.E_RECORDS_REMAINING, pos, end - pos, count)
    if lo > hi:
        lo = hi = -1  # no record has a timestamp
    return lo, hi, null_keys, deltas_ok


def decode_legacy_set(
    sink: Sink,
    data,
    wrapper_offset: int,
    magic: int,
    wrapper_attributes: int,
    wrapper_ts: int,
    start_offset: int,
    end_offset: int,
    flags: int,
) -> tuple:
    """Append the inner messages of one decompressed legacy wrapper (all or nothing)."""
    data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    end = len(data)
    pos = 0
    inner = []
    lowest, highest = _I64_MAX, _I64_MIN
    while pos < end:
        if end - pos < 12:
            return (A.ERROR, pos, A.E_INNER_STRAY, end - pos, 0, 0, 0)
        size = _be(data, pos + 8, 4)
        if size < 14 or pos + 12 + size > end:
            return (A.ERROR, pos, A.E_INNER_SIZE, pos, size, end - pos - 12, 0)
        inner_magic = data[pos + 16]
        if inner_magic != magic:
            return (A.ERROR, pos, A.E_INNER_MAGIC, inner_magic, magic, 0, 0)
        if size < _min_legacy_size(magic):
            return (A.ERROR, pos, A.E_LEGACY_MSG_SIZE, size, magic, 0, 0)
        if data[pos + 17] & 0x07:
            return (A.ERROR, pos, A.E_INNER_NESTED, 0, 0, 0, 0)
        inner_offset = _be(data, pos, 8)
        lowest, highest = min(lowest, inner_offset), max(highest, inner_offset)
        inner.append((pos, pos + 12 + size, inner_offset))
        pos += 12 + size
    if not inner:
        return (A.ERROR, 0, A.E_INNER_EMPTY, 0, 0, 0, 0)
    base = 0
    anchor = wrapper_offset  # the inner offset that maps to the wrapper offset
    if magic > 0:
        last_inner = inner[-1][2]
        if wrapper_offset != 0:
            if wrapper_offset < last_inner:
                return (A.ERROR, 0, A.E_WRAPPER_OFFSET, wrapper_offset, last_inner, 0, 0)
            base = wrapper_offset - last_inner
            anchor = last_inner
    # the offset rule: the absolute inner offsets fit a log's (E_INNER_OFFSETS)
    if base + lowest < 0 or base + highest > _MAX_LAST:
        return (A.ERROR, 0, A.E_INNER_OFFSETS, lowest, highest, anchor, 0)
    log_append = magic > 0 and wrapper_attributes & 0x08
    saved = _save(sink)
    try:
        for p, e, inner_offset in inner:
            offset = base + inner_offset
            if flags & A.FLAG_VALIDATE_CRC:
                _legacy_crc(data, p, e)
            if magic == 0:
                ts, ts_type = -1, -1
            elif log_append:
                ts, ts_type = wrapper_ts, 1
            else:
                ts, ts_type = _be(data, p + 18, 8), 0  # the wrapper's type (LegacyRecord)
            if not start_offset <= offset < end_offset:
                _legacy_key_value(data, p, e, magic)  # still checked, as the reference does
                continue
            _legacy_row(sink, data, p, e, offset, ts, ts_type, magic)
    except _Fail as f:
        if f.result[0] == A.NEED_SPACE:
            _restore(sink, saved)
        return (*f.result[:6], 0)
    return (A.END, end, 0, 0, 0, 0, 0)


def lz4_blocks(
    view, pos: int, checksum: int, trailer: int, max_block: int, max_size: int,
    expansion: int, slack: int, out, decompress_into,
) -> int | None:  # fmt: skip
    """The blocks of an lz4 frame from ``pos`` (after its header) into ``out``: the size
    decompressed. Each block is a little-endian size word (bit 31: stored raw; 0: the end mark)
    and its bytes, then ``checksum`` bytes; ``trailer`` bytes follow the end mark. None when
    the block table is not whole (a word missing, a block longer than ``max_block`` or than what
    is left, the trailer missing) or raw blocks pass ``max_size``, or ``decompress_into`` returns
    a count outside the room it was given: the frame is then the codec module's. Minus the size
    ``out`` must have (nothing is written) when it is shorter: min(max_size, the sum of each
    block's room). A compressed block's room is min(max_block, expansion * length + slack, what
    is left of max_size); ``decompress_into(block, out[total:total + room])`` (cramjam's
    signature) decompresses it, and its exceptions propagate."""
    size = len(view)
    unpack = _lz4._U32.unpack_from
    need, p = 0, pos
    while True:
        if size - p < 4:
            return None
        (word,) = unpack(view, p)
        length = word & ~_lz4._RAW
        p += 4
        if length == 0:
            break
        if length > max_block or length + checksum > size - p:
            return None
        need += length if word & _lz4._RAW else min(max_block, expansion * length + slack)
        p += length + checksum
    if size - p < trailer:
        return None
    need = min(need, max_size)
    if len(out) < need:
        return -need
    out = memoryview(out).cast("B")  # slices that write through, whatever the buffer
    total = 0
    while True:
        (word,) = unpack(view, pos)
        length = word & ~_lz4._RAW
        pos += 4
        if length == 0:
            return total
        if word & _lz4._RAW:
            if total + length > max_size:
                return None
            out[total : total + length] = view[pos : pos + length]
            total += length
        else:
            room = min(max_block, expansion * length + slack, max_size - total)
            n = decompress_into(view[pos : pos + length], out[total : total + room])
            if not 0 <= n <= room:
                return None
            total += n
        pos += length + checksum


_TS_TYPE_NAMES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def _int64s(column) -> list[int]:
    return memoryview(column).cast("B").cast("q").tolist()


def dump_lines(offsets, ts_types, timestamps, key_sizes, value_sizes, sequences, ends) -> bytes:
    """kafka-dump-log's record line, without data and with no header keys, for each row of the
    int64 columns (``ts_types``: -1, 0 or 1); ``ends`` (int64[n + 1]) gets where each ends."""
    columns = [_int64s(c) for c in (offsets, ts_types, timestamps, key_sizes, value_sizes,
                                    sequences)]  # fmt: skip
    n = len(columns[0])
    if any(len(c) != n for c in columns) or memoryview(ends).nbytes != 8 * (n + 1):
        raise ValueError("dump_lines: int64 columns and n + 1 ends expected")
    out = bytearray()
    marks = [0]
    for o, tt, t, k, v, q in zip(*columns):
        out += (
            f"| offset: {o} {_TS_TYPE_NAMES.get(tt, 'NoTimestampType')}: {t} keySize: {k} "
            f"valueSize: {v} sequence: {q} headerKeys: []\n"
        ).encode()
        marks.append(len(out))
    memoryview(ends).cast("B").cast("q")[:] = array("q", marks)
    return bytes(out)


def valid_prefix_run(buf, pos, end, segment_base, prev_last, has_prev, out):
    """The magic 2 batches of ``buf[pos:end]`` the valid-prefix walk keeps, one row of
    ``VP_WIDTH`` int64s each in ``out``, up to the first entry it must judge itself (the compiled
    twin's contract: :mod:`.._kernel_abi`, ``VP_*``). The rule's own functions decide here."""
    from ....errors import CorruptRecordError
    from ...batch import RecordBatch
    from ...entries import frame_entry
    from ...offsets_rule import check_entry_offsets

    view = memoryview(buf).cast("B")
    rows = memoryview(out).cast("B").cast("q")
    if not 0 <= pos <= end <= len(view):
        raise ValueError("valid_prefix_run: pos/end outside the buffer")
    capacity = len(rows) // A.VP_WIDTH
    n, status = 0, A.VP_END
    while True:
        try:
            found = frame_entry(view, pos, end)
        except CorruptRecordError:
            status = A.VP_STOP
            break
        if found is None:
            break
        size, magic = found
        if n == capacity:
            status = A.VP_FULL
            break
        batch = RecordBatch(view[pos : pos + 12 + size], pos) if magic == 2 else None
        if batch is None or (batch.is_control and batch.producer_id >= 0):
            status = A.VP_STOP  # a legacy entry, or a marker: the walk's own checks
            break
        last = batch.last_offset
        try:
            batch.ensure_valid()
            check_entry_offsets(
                batch.base_offset, last, prev_last if has_prev else None, position=pos
            )
        except CorruptRecordError:
            status = A.VP_STOP
            break
        if segment_base < 0 or not 0 <= last - segment_base <= _I32_MAX:
            status = A.VP_STOP
            break
        at = n * A.VP_WIDTH
        rows[at : at + A.VP_WIDTH] = array(
            "q",
            (pos, 12 + size, batch.base_offset, last, batch.max_timestamp,
             batch.partition_leader_epoch, batch.producer_id),
        )  # fmt: skip
        n += 1
        prev_last, has_prev = last, 1
        pos += 12 + size
    return status, pos, n, prev_last, has_prev


def frame_run(buf, pos, end, out):
    """The ends and offset fields of the entries :func:`~kafkalog.format.entries.framed_run`
    frames from ``buf[pos:end]``, as int64 pairs in ``out`` up to its capacity: ``(pos, n)``,
    where the run stopped and how many pairs were written (the compiled twin's contract)."""
    from ...entries import framed_run

    view = memoryview(buf).cast("B")
    rows = memoryview(out).cast("B").cast("q")
    if not 0 <= pos <= end <= len(view):
        raise ValueError("frame_run: pos/end outside the buffer")
    ends, offsets = framed_run(view, pos, end)
    n = min(len(ends), len(rows) // 2)
    for i in range(n):
        rows[2 * i], rows[2 * i + 1] = ends[i], offsets[i]
    return (ends[n - 1] if n else pos), n
