"""Pure-Python reference kernels of the columnar encode (re-exported by ``_pure.kernels``).

The compiled twin is ``_speedups/encode.c`` and ``_speedups/columns.c``; both must write identical
bytes. A plan row per batch (see ``_kernel_abi.PLAN_*``) says which rows it holds, its records' size
and its first and max timestamps; the driver validated the input arrays (offsets inside their data)
and the batch fields' ranges.
"""

from __future__ import annotations

from ...batch import encode_batch_header
from ...constants import LOG_OVERHEAD, NO_SEQUENCE, RECORD_BATCH_OVERHEAD
from ...record import increment_sequence
from .. import _kernel_abi as A

__all__ = [
    "Source",
    "binary_column",
    "encode_batches",
    "encode_compressed",
    "encode_plan",
    "encode_records",
    "header_columns",
    "int64_column",
]

_M64 = 0xFFFFFFFFFFFFFFFF


def _wrap64(x: int) -> int:
    if -(1 << 63) <= x < (1 << 63):
        return x
    return ((x + (1 << 63)) & _M64) - (1 << 63)


class Source:
    """Memoryviews over the encoder's input arrays (see ``encode_plan``)."""

    __slots__ = ("arrays", "views")

    def __init__(self, arrays: tuple) -> None:
        if len(arrays) != 13:
            raise ValueError(f"a source needs 13 arrays, not {len(arrays)}")
        self.arrays = arrays
        self.views = [memoryview(a) for a in arrays]


def _size_varint(value: int) -> int:
    z = ((value << 1) ^ (value >> 63)) & _M64
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


def _put_varint(out: bytearray, value: int) -> None:
    z = ((value << 1) ^ (value >> 63)) & _M64
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _fields(src: Source, i: int) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    """Key length, value length (-1 = null) and header (key pos, len, value pos, len) of row i."""
    v = src.views
    ko, kv, vo, vv = v[1], v[2], v[4], v[5]
    k_len = -1 if len(kv) and not kv[i] else ko[i + 1] - ko[i]
    v_len = -1 if len(vv) and not vv[i] else vo[i + 1] - vo[i]
    headers = []
    ho = v[7]
    if len(ho):
        hko, hvo, hvv = v[8], v[10], v[11]
        for h in range(ho[i], ho[i + 1]):
            hv_len = -1 if len(hvv) and not hvv[h] else hvo[h + 1] - hvo[h]
            headers.append((hko[h], hko[h + 1] - hko[h], hvo[h], hv_len))
    return k_len, v_len, headers


def _record_size(src: Source, i: int, offset_delta: int, ts_delta: int) -> int:
    k_len, v_len, headers = _fields(src, i)
    body = 1 + _size_varint(ts_delta) + _size_varint(offset_delta)
    body += 1 if k_len < 0 else _size_varint(k_len) + k_len
    body += 1 if v_len < 0 else _size_varint(v_len) + v_len
    body += _size_varint(len(headers))
    for _, hk_len, _, hv_len in headers:
        body += _size_varint(hk_len) + hk_len
        body += 1 if hv_len < 0 else _size_varint(hv_len) + hv_len
    return _size_varint(body) + body


def encode_plan(src: Source, n: int, batch_bytes: int, max_records: int, plan) -> int:
    """Split rows 0..n into batches whose records fit ``batch_bytes``; fill ``plan``; count them."""
    ts = src.views[0]
    p = memoryview(plan).cast("B").cast("q")
    n_batches = 0
    i = 0
    while i < n:
        first = ts[i]
        start = i
        size = _record_size(src, i, 0, 0)
        max_ts = first
        i += 1
        while i < n and i - start < max_records:
            s = _record_size(src, i, i - start, _wrap64(ts[i] - first))
            if size + s > batch_bytes:
                break
            size += s
            max_ts = max(max_ts, ts[i])
            i += 1
        row = n_batches * A.PLAN_WIDTH
        p[row + A.PLAN_START] = start
        p[row + A.PLAN_COUNT] = i - start
        p[row + A.PLAN_BYTES] = size
        p[row + A.PLAN_FIRST_TS] = first
        p[row + A.PLAN_MAX_TS] = max_ts
        n_batches += 1
    return n_batches


def encode_records(src: Source, plan, b_from: int, b_to: int, gap: int, out, pos: int) -> int:
    """Write the records of batches b_from..b_to into ``out`` from ``pos``, each batch after a
    ``gap`` of bytes left for its header; return the end position."""
    v = src.views
    ts, kd, vd, hkd, hvd = v[0], v[3], v[6], v[9], v[12]
    ko, vo = v[1], v[4]
    p = memoryview(plan).cast("B").cast("q")
    o = memoryview(out).cast("B")
    for b in range(b_from, b_to):
        row = b * A.PLAN_WIDTH
        start, count, first = p[row + A.PLAN_START], p[row + A.PLAN_COUNT], p[row + A.PLAN_FIRST_TS]
        pos += gap
        for i in range(start, start + count):
            k_len, v_len, headers = _fields(src, i)
            body = bytearray(b"\x00")
            _put_varint(body, _wrap64(ts[i] - first))
            _put_varint(body, i - start)
            _put_varint(body, k_len)
            if k_len >= 0:
                body += kd[ko[i] : ko[i] + k_len]
            _put_varint(body, v_len)
            if v_len >= 0:
                body += vd[vo[i] : vo[i] + v_len]
            _put_varint(body, len(headers))
            for hk_pos, hk_len, hv_pos, hv_len in headers:
                _put_varint(body, hk_len)
                body += hkd[hk_pos : hk_pos + hk_len]
                _put_varint(body, hv_len)
                if hv_len >= 0:
                    body += hvd[hv_pos : hv_pos + hv_len]
            head = bytearray()
            _put_varint(head, len(body))
            o[pos : pos + len(head)] = head
            pos += len(head)
            o[pos : pos + len(body)] = body
            pos += len(body)
    return pos


def _batch(fields: tuple, row: list, records) -> bytes:
    """A planned batch (``row``: its plan row) whole, around its records section (compressed or
    not), by the format's own header writer. ``fields``: base offset, attributes, leader epoch,
    producer id, producer epoch, base sequence, LogAppendTime or not, the append time."""
    base_offset, attributes, leader_epoch, pid, epoch, base_seq, log_append, append_time = fields
    start, count, _, first_ts, max_ts = row
    return encode_batch_header(
        base_offset=base_offset + start,
        length=RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=first_ts,
        max_timestamp=append_time if log_append else max_ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=base_seq if base_seq == NO_SEQUENCE else increment_sequence(base_seq, start),
        records_count=count,
        partition_leader_epoch=leader_epoch,
        records=records,
    )


def _plan_rows(plan, n_batches: int) -> list[list[int]]:
    p = memoryview(plan).cast("B").cast("q")
    return [p[b * A.PLAN_WIDTH : (b + 1) * A.PLAN_WIDTH].tolist() for b in range(n_batches)]


def encode_compressed(plan, n_batches: int, fields: tuple, bodies: list) -> bytearray:
    """Each planned batch's header before its compressed records (``bodies[i]``), the CRC-32C
    over both, as a new bytearray."""
    if len(bodies) != n_batches:
        raise ValueError("encode_compressed: a body per planned batch, as bytes")
    out = bytearray()
    for row, body in zip(_plan_rows(plan, n_batches), bodies):
        out += _batch(fields, row, body)
    return out


def encode_batches(src: Source, plan, n_batches: int, fields: tuple) -> bytearray:
    """The planned batches uncompressed, headers and CRC-32Cs included, as a new bytearray."""
    rows = _plan_rows(plan, n_batches)
    records = bytearray(sum(r[A.PLAN_BYTES] for r in rows))
    encode_records(src, plan, 0, n_batches, 0, records, 0)
    view = memoryview(records)
    out = bytearray()
    pos = 0
    for row in rows:
        out += _batch(fields, row, view[pos : pos + row[A.PLAN_BYTES]])
        pos += row[A.PLAN_BYTES]
    return out


def binary_column(seq) -> None:
    """The compiled twin converts lists of bytes itself; here pyarrow does (the driver's path)."""
    return None


def int64_column(seq) -> None:
    """The compiled twin converts lists of ints itself; here numpy does (the driver's path)."""
    return None


def header_columns(seq) -> None:
    """The compiled twin converts lists of header lists itself; here pyarrow does."""
    return None
