"""Columnar encode: Arrow arrays (or plain sequences) of keys, values, timestamps and headers ->
magic 2 batches, byte for byte what :class:`MemoryRecordsBuilder` writes for the same records.

The kernel first *plans* (splits the rows into batches whose records section fits
``batch_bytes``, and finds each batch's first and max timestamp), then writes every record of
every batch in one call: uncompressed, whole batches (header, records, CRC-32C) straight into a
new output; otherwise into one scratch buffer that Python compresses batch by batch with
:mod:`kafkalog.format.codecs`, and the kernel writes each header, its compressed records and its
CRC-32C into the output. Inputs are checked here
(lengths, offsets inside their data, no null header keys, the batch fields' ranges) so the
kernels can trust them.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pyarrow as pa

from ..codecs import CompressionType, codec_for
from ..constants import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
)
from ..record import Header
from ._kernels import kernels as default_kernels
from .decode import HEADER_TYPE

__all__ = ["encode_columnar"]

_EMPTY_U8 = np.empty(0, np.uint8)
_EMPTY_I64 = np.empty(0, np.int64)
_PLAN_WIDTH = 5


def _as_array(values, type_: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values, type=type_)
    return values


def _binary_parts(
    values, n: int, what: str, kernels: ModuleType | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets int64[n+1], validity uint8[n] or empty, data uint8)`` of a binary-like column.

    A list or tuple of bytes and None goes through the kernels' ``binary_column`` when they
    have a compiled one (None from it, or any other column: pyarrow converts it)."""
    if values is None:
        return np.zeros(n + 1, np.int64), np.zeros(n, np.uint8), _EMPTY_U8
    if kernels is not None and isinstance(values, (list, tuple)):
        if len(values) != n:
            raise ValueError(f"{what} has {len(values)} items, keys/values have {n}")
        parts = kernels.binary_column(values)
        if parts is not None:
            offsets, valid, data = parts
            return (
                np.frombuffer(offsets, np.int64),
                np.frombuffer(valid, np.uint8),
                np.frombuffer(data, np.uint8),
            )
    arr = _as_array(values, pa.binary())
    if len(arr) != n:
        raise ValueError(f"{what} has {len(arr)} items, keys/values have {n}")
    t = arr.type
    if pa.types.is_string(t):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.view(pa.large_binary())
    elif not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        raise TypeError(f"{what} must be binary or string, not {t}")
    _, offsets_buf, data_buf = arr.buffers()
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    if offsets_buf is None:  # an empty array may have no offsets buffer
        offsets = np.zeros(n + 1, np.int64)
    else:
        offsets = np.frombuffer(offsets_buf, width)[arr.offset : arr.offset + n + 1]
        offsets = offsets.astype(np.int64)
    data = _EMPTY_U8 if data_buf is None else np.frombuffer(data_buf, np.uint8)
    if len(offsets) != n + 1 or (
        n and (offsets[0] < 0 or offsets[-1] > len(data) or np.any(offsets[1:] < offsets[:-1]))
    ):
        raise ValueError(f"{what}: malformed Arrow offsets")
    valid = _EMPTY_U8
    if arr.null_count:
        valid = np.asarray(arr.is_valid()).view(np.uint8)
    return offsets, valid, data


def _timestamps(timestamps, n: int, kernels: ModuleType) -> np.ndarray:
    if timestamps is None:
        return np.full(n, NO_TIMESTAMP, np.int64)
    raw = kernels.int64_column(timestamps) if isinstance(timestamps, (list, tuple)) else None
    if raw is not None:
        timestamps = np.frombuffer(raw, np.int64)
    if isinstance(timestamps, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_timestamp(timestamps.type):
            timestamps = timestamps.cast(pa.timestamp("ms")).cast(pa.int64())
        if timestamps.null_count:
            raise ValueError("timestamps cannot be null (use -1, Kafka's NO_TIMESTAMP)")
        ts = np.asarray(timestamps, dtype=np.int64)
    elif isinstance(timestamps, (list, tuple)):  # pyarrow converts lists of ints fastest
        arr = pa.array(timestamps, pa.int64())
        if arr.null_count:
            raise ValueError("timestamps cannot be null (use -1, Kafka's NO_TIMESTAMP)")
        ts = arr.to_numpy()
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
    ts = np.ascontiguousarray(ts, dtype=np.int64)
    if ts.shape != (n,):
        raise ValueError(f"timestamps has shape {ts.shape}, keys/values have {n} rows")
    if n and ts.min() < NO_TIMESTAMP:
        raise ValueError(f"invalid negative timestamp {int(ts.min())}")
    return ts


def _header_parts(headers, n: int, kernels: ModuleType) -> tuple[np.ndarray, ...]:
    """List offsets, key offsets/data, value offsets/validity/data of the headers column (a list
    or tuple of lists of ``(str, bytes or None)`` through the kernels' ``header_columns`` when
    they have a compiled one; anything else, Header objects included, through pyarrow)."""
    if headers is None:
        return (
            _EMPTY_I64,
            np.zeros(1, np.int64),
            _EMPTY_U8,
            np.zeros(1, np.int64),
            _EMPTY_U8,
            _EMPTY_U8,
        )
    if kernels is not None and isinstance(headers, (list, tuple)):
        if len(headers) != n:
            raise ValueError(f"headers has {len(headers)} items, keys/values have {n}")
        parts = kernels.header_columns(headers)
        if parts is not None:
            list_offsets, k_off, k_data, v_off, v_valid, v_data = parts
            return (
                np.frombuffer(list_offsets, np.int64),
                np.frombuffer(k_off, np.int64),
                np.frombuffer(k_data, np.uint8),
                np.frombuffer(v_off, np.int64),
                np.frombuffer(v_valid, np.uint8),
                np.frombuffer(v_data, np.uint8),
            )
    if not isinstance(headers, (pa.Array, pa.ChunkedArray)):
        headers = [
            None
            if hs is None
            else [(h.key, h.value) if isinstance(h, Header) else tuple(h) for h in hs]
            for hs in headers
        ]
    arr = _as_array(headers, HEADER_TYPE)
    if len(arr) != n:
        raise ValueError(f"headers has {len(arr)} items, keys/values have {n}")
    if not (
        pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
    ) or not pa.types.is_struct(arr.type.value_type):
        raise TypeError(f"headers must be list<struct<key, value>>, not {arr.type}")
    list_offsets = np.asarray(arr.offsets, dtype=np.int64)
    if arr.null_count:  # a null list means no headers; its offsets may still span items
        valid = np.asarray(arr.is_valid())
        counts = np.where(valid, np.diff(list_offsets), 0)
        if np.any(counts != np.diff(list_offsets)):
            arr = pa.array(arr.to_pylist(), type=arr.type)  # rare: rebuild without null spans
            list_offsets = np.asarray(arr.offsets, dtype=np.int64)
    keys, values = arr.values.flatten()
    m = len(keys)
    if keys.null_count:
        raise ValueError("header keys cannot be null")
    k_off, _, k_data = _binary_parts(keys, m, "header keys")
    v_off, v_valid, v_data = _binary_parts(values, m, "header values")
    if n and (list_offsets[0] < 0 or list_offsets[-1] > m):
        raise ValueError("headers: malformed Arrow list offsets")
    return list_offsets, k_off, k_data, v_off, v_valid, v_data


def encode_columnar(
    keys,
    values,
    timestamps=None,
    headers=None,
    *,
    base_offset: int = 0,
    compression: int | str = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    batch_bytes: int = 16384,
    max_records_per_batch: int | None = None,
    kernels: ModuleType | None = None,
) -> bytearray:
    """Magic 2 batches for the rows ``keys[i], values[i], timestamps[i], headers[i]``.

    Columns are Arrow arrays (binary/string, large or not; headers list<struct<key, value>>) or
    plain sequences (bytes or None; headers as lists of ``(key, value)`` or Header); ``keys`` or
    ``values`` may be None for all-null. Rows take consecutive offsets from ``base_offset``; a
    batch holds as many rows as fit ``batch_bytes`` of (uncompressed) records, at least one, and
    at most ``max_records_per_batch``. Batches after the first continue the producer sequence.
    Levels default to Kafka's (gzip 6, lz4 9, zstd 3). ``kernels`` picks a kernel twin (tests).
    """
    if kernels is None:
        kernels = default_kernels
    if keys is None and values is None:
        raise ValueError("give keys or values (or both)")
    n = len(values) if keys is None else len(keys)
    if isinstance(compression, str):
        compression = CompressionType.from_label(compression)
    codec_impl = codec_for(int(compression), magic=2)
    codec = int(codec_impl.type)
    if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time == NO_TIMESTAMP:
        raise ValueError("LogAppendTime needs log_append_time")
    if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
        raise ValueError("NoTimestampType is only for magic 0")
    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise ValueError("a transactional batch needs a producer id")
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be positive, not {batch_bytes}")
    max_records = (1 << 31) - 1 if max_records_per_batch is None else max_records_per_batch
    if not 1 <= max_records <= (1 << 31) - 1:
        raise ValueError(f"max_records_per_batch must be in 1..2**31-1, not {max_records}")
    _check_ranges(
        ("base_offset", base_offset, 64),
        ("the last offset", base_offset + max(n - 1, 0), 64),
        ("partition_leader_epoch", partition_leader_epoch, 32),
        ("producer_id", producer_id, 64),
        ("producer_epoch", producer_epoch, 16),
        ("base_sequence", base_sequence, 32),
        ("log_append_time", log_append_time, 64),
    )
    out = bytearray()
    if n == 0:
        return out
    ts = _timestamps(timestamps, n, kernels)
    k_off, k_valid, k_data = _binary_parts(keys, n, "keys", kernels)
    v_off, v_valid, v_data = _binary_parts(values, n, "values", kernels)
    h_off, hk_off, hk_data, hv_off, hv_valid, hv_data = _header_parts(headers, n, kernels)
    for offsets, what in (
        (k_off, "key"),
        (v_off, "value"),
        (hk_off, "header key"),
        (hv_off, "header value"),
    ):
        if len(offsets) > 1 and int(np.max(np.diff(offsets), initial=0)) > (1 << 31) - 1:
            raise ValueError(f"a {what} is longer than a varint can say (2 GiB)")
    source = kernels.Source(
        (
            ts,
            k_off,
            k_valid,
            k_data,
            v_off,
            v_valid,
            v_data,
            h_off,
            hk_off,
            hk_data,
            hv_off,
            hv_valid,
            hv_data,
        )
    )
    plan = np.empty(_PLAN_WIDTH * n, np.int64)
    n_batches = kernels.encode_plan(source, n, batch_bytes, max_records, plan)
    rows = plan[: _PLAN_WIDTH * n_batches].reshape(n_batches, _PLAN_WIDTH)
    attributes = codec
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    fields = (
        base_offset,
        attributes,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
        timestamp_type == TimestampType.LOG_APPEND_TIME,
        log_append_time,
    )
    if codec == CompressionType.NONE:
        return kernels.encode_batches(source, plan, n_batches, fields)
    scratch = np.empty(int(rows[:, 2].sum()), np.uint8)
    kernels.encode_records(source, plan, 0, n_batches, 0, scratch, 0)
    records = memoryview(scratch)
    compress = codec_impl.compress
    bodies = []
    pos = 0
    for size in rows[:, 2].tolist():
        bodies.append(compress(records[pos : pos + size], level=compression_level, magic=2))
        pos += size
    return kernels.encode_compressed(plan, n_batches, fields, bodies)


def _check_ranges(*fields: tuple[str, int, int]) -> None:
    """Each ``(name, value, bits)`` fits the signed field of a batch header that carries it."""
    for name, value, bits in fields:
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise ValueError(f"{name} {value} does not fit a batch header's int{bits}")
