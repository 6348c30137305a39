"""A batch's records through the columnar fast path, and their metadata lines written from columns.

A deep dump's time is mostly decoding records and formatting ``| offset: ...`` lines; for magic 2
batches of more than a few records both are done on whole columns (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import KafkalogError
from ...format import Batch, TimestampType
from ...format import columnar as fast
from ...format.constants import MAGIC_VALUE_V2
from ...format.record import Header, Record

__all__ = ["MetadataLineWindows", "metadata_lines", "records_of"]

_COLUMNAR_MIN_RECORDS = 16
_LINES_MIN_RECORDS = 16  # metadata_lines' threshold


def records_of(batch: Batch, decoder: fast.ColumnarDecoder | None = None) -> list[Record]:
    """A batch's records, decoded through the columnar fast path.

    Legacy messages keep the reference decoder: their per-message CRCs, which kafka-dump-log
    prints, are not a column of the fast path. So do small batches (KRaft logs hold one record
    per batch), for which building columns costs more than it saves.
    """
    if batch.magic < MAGIC_VALUE_V2 or batch.count < _COLUMNAR_MIN_RECORDS:
        return list(batch.records())
    columns = _columns(batch, decoder).to_pydict()
    return [
        Record(
            offset=offset,
            timestamp=columns["timestamp"][i],
            timestamp_type=TimestampType(columns["timestampType"][i]),
            key=columns["key"][i],
            value=columns["value"][i],
            headers=tuple(Header(h["key"], h["value"]) for h in columns["headers"][i]),
            sequence=columns["sequence"][i],
            is_control=columns["isControl"][i],
        )
        for i, offset in enumerate(columns["offset"])
    ]


def metadata_lines(
    batch: Batch, decoder: fast.ColumnarDecoder | None = None
) -> tuple[list[int], str] | None:
    """The offsets and ``| offset: ...`` lines (each ending in a newline) of a magic 2 data
    batch's records, as :func:`record_line` writes them without data, formatted from the fast
    path's columns: no Record per record (a million records printed 4-13x faster, see
    docs/benchmarks.md). None for control batches, legacy entries and batches of a few
    records."""
    if batch.magic < MAGIC_VALUE_V2 or batch.is_control or batch.count < _LINES_MIN_RECORDS:
        return None
    rows = _columns(batch, decoder)
    offsets = rows.column("offset").to_pylist()
    sizes = [
        pc.fill_null(pc.binary_length(rows.column(name)), -1).to_pylist()
        for name in ("key", "value")
    ]
    headers = rows.column("headers")
    header_keys = headers.flatten().field("key").to_pylist()
    if header_keys:
        ends = headers.offsets.to_pylist()
        joined = [",".join(header_keys[a:b]) for a, b in itertools.pairwise(ends)]
    else:
        joined = [""] * len(offsets)
    ts_type = str(batch.timestamp_type)
    text = "".join(
        [
            f"| offset: {o} {ts_type}: {t} keySize: {k} valueSize: {v} sequence: {s} "
            f"headerKeys: [{h}]\n"
            for o, t, k, v, s, h in zip(
                offsets,
                rows.column("timestamp").to_pylist(),
                *sizes,
                rows.column("sequence").to_pylist(),
                joined,
            )
        ]
    )
    return offsets, text


_WINDOW_BYTES = 4 << 20
_TS_TYPES = {int(t): str(t) for t in TimestampType}


class MetadataLineWindows:
    """:func:`metadata_lines` for a whole file, a window of consecutive magic 2 batches (up to
    4 MiB) decoded in one call and its columns converted once: one decoder call and one
    conversion a batch was most of a deep dump's time. A window the decoder refuses, or that
    holds anything but magic 2 batches, leaves its batches to :func:`metadata_lines` one at a
    time (which says what is wrong)."""

    def __init__(self, view: memoryview, decoder: fast.ColumnarDecoder) -> None:
        self._view = view
        self._decoder = decoder
        # batch position -> its rows in the window, and whether their offsets follow one another
        self._rows: dict[int, tuple[int, int, bool]] = {}
        self._offsets = np.empty(0, np.int64)
        self._lines: list[str] = []  # a line per row, or:
        self._text, self._ends = b"", []  # all the lines, where each ends (no header keys)
        self._end = 0  # the loaded window ends here

    def lines(self, batch: Batch) -> tuple[Sequence[int], str] | None:
        """As :func:`metadata_lines`, for any data batch of magic 2; None where it cannot. The
        offsets are a ``range`` when each follows the one before (no list of a batch's
        offsets to walk), else a list."""
        if batch.magic < MAGIC_VALUE_V2 or batch.is_control:
            return None
        if batch.position >= self._end:
            self._load(batch.position)
        span = self._rows.get(batch.position)
        if span is None:
            return None
        a, b, consecutive = span
        if a == b:
            offsets: Sequence[int] = []
        elif consecutive:
            first = int(self._offsets[a])
            offsets = range(first, first + b - a)
        else:
            offsets = self._offsets[a:b].tolist()
        if self._lines:
            return offsets, "".join(self._lines[a:b])
        return offsets, self._text[self._ends[a] : self._ends[b]].decode("ascii")

    def _load(self, start: int) -> None:
        view, end = self._view, len(self._view)
        self._rows, self._lines, self._text, self._ends = {}, [], b"", []
        self._offsets = np.empty(0, np.int64)
        spans, pos, rows = {}, start, 0
        while pos + 61 <= end and pos - start < _WINDOW_BYTES and view[pos + 16] == MAGIC_VALUE_V2:
            size = 12 + struct.unpack_from(">i", view, pos + 8)[0]
            count = struct.unpack_from(">i", view, pos + 57)[0]
            if size < 61 or pos + size > end or count < 0:
                break
            spans[pos] = (rows, rows + count)
            rows += count
            pos += size
        self._end = max(pos, start + 1)
        if not spans:
            return
        try:
            rb = self._decoder.decode(view[start:pos], keep_control=True, check_offset_order=False,
                                      position_base=start)  # fmt: skip
        except KafkalogError:
            return  # each batch on its own: the one at fault is reported precisely
        if rb.num_rows != rows:
            return
        self._offsets = offsets = _ints(rb.column("offset"))
        sizes = [_sizes(rb.column(name)) for name in ("key", "value")]
        headers = rb.column("headers")
        header_keys = headers.flatten().field("key").to_pylist()
        flags = _consecutive(offsets, list(spans.values()))
        self._rows = {
            pos: (a, b, flag) for (pos, (a, b)), flag in zip(spans.items(), flags, strict=True)
        }
        if not header_keys:  # the kernels write the lines
            ts_type, ts, seq = (
                _ints(rb.column(name)) for name in ("timestampType", "timestamp", "sequence")
            )
            columns = [offsets, ts_type, ts, *sizes, seq]
            ends = np.empty(rows + 1, np.int64)
            self._text = fast.kernels.dump_lines(*columns, ends)
            self._ends = ends.tolist()
            return
        ends = headers.offsets.to_pylist()
        joined = [",".join(header_keys[a:b]) for a, b in itertools.pairwise(ends)]
        ts_types = [_TS_TYPES[t] for t in rb.column("timestampType").to_pylist()]
        sizes = [x.tolist() for x in sizes]
        self._lines = [
            f"| offset: {o} {tt}: {t} keySize: {k} valueSize: {v} sequence: {q} headerKeys: [{h}]\n"
            for o, tt, t, k, v, q, h in zip(
                offsets.tolist(),
                ts_types,
                rb.column("timestamp").to_pylist(),
                *sizes,
                rb.column("sequence").to_pylist(),
                joined,
            )
        ]


def _consecutive(offsets: np.ndarray, spans: list[tuple[int, int]]) -> list[bool]:
    """For each span of rows, whether each offset in it is the one before plus one, found for
    the whole window at once (a span of no rows: True)."""
    if not len(offsets):
        return [True] * len(spans)
    # breaks[i]: the rows before i whose next offset is not theirs plus one.
    breaks = np.zeros(len(offsets), np.int64)
    np.cumsum(np.diff(offsets) != 1, out=breaks[1:])
    bounds = np.array(spans, np.int64).reshape(-1, 2)
    first = bounds[:, 0].clip(max=len(offsets) - 1)
    last = np.maximum(bounds[:, 1] - 1, bounds[:, 0]).clip(max=len(offsets) - 1)
    return (breaks[last] == breaks[first]).tolist()


def _ints(column: pa.Array) -> np.ndarray:
    """An integer column (no nulls) as int64s, read through its buffer."""
    n, at = len(column), column.offset
    values = np.frombuffer(column.buffers()[1], np.dtype(f"<i{column.type.bit_width // 8}"))
    return values[at : at + n].astype(np.int64)


def _sizes(column: pa.Array) -> np.ndarray:
    """Each item's length, -1 for a null (kafka-dump-log's keySize/valueSize), from the
    column's offsets and validity buffers, as int64s."""
    n, at = len(column), column.offset
    offsets = np.frombuffer(column.buffers()[1], np.int32)[at : at + n + 1]
    sizes = np.diff(offsets)
    if column.null_count:
        bits = np.frombuffer(column.buffers()[0], np.uint8)
        valid = np.unpackbits(bits, bitorder="little")[at : at + n].astype(bool)
        sizes[~valid] = -1
    return sizes.astype(np.int64)


def _columns(batch: Batch, decoder: fast.ColumnarDecoder | None) -> pa.RecordBatch:
    """The batch's records as columns; through ``decoder`` when given, whose arrays a file's
    dump reuses batch after batch (a new decoder per 1 MB batch page-faults fresh arrays:
    0.39 s against 0.05 s for a million records)."""
    if decoder is None:
        decoder = fast.ColumnarDecoder()
    return decoder.decode(batch.buffer, keep_control=True, position_base=batch.position)
