"""Bounded-memory iteration: Arrow record batches of about N rows over a buffer (or an mmap)."""

from __future__ import annotations

import mmap

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords

from kafkalog.format import MemoryRecordsBuilder
from kafkalog.format import columnar as fast

from .fastcheck import TWINS, control_batch, logs, reference_outcome, twin


def many_batches(n_batches: int, per_batch: int) -> bytes:
    out = bytearray()
    for i in range(n_batches):
        b = MemoryRecordsBuilder(base_offset=i * per_batch, compression="lz4" if i % 2 else "none")
        for j in range(per_batch):
            b.append(timestamp=j, key=b"k%d" % j, value=b"v" * (j % 40), headers=[("h", b"%d" % j)])
        out += b.build()
    return bytes(out)


@given(buf=logs(max_batches=8), max_rows=st.integers(1, 20))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunks_concatenate_to_the_whole_decode(buf, max_rows):
    whole = fast.decode_columnar(buf)
    for name in TWINS:
        chunks = list(fast.ColumnarDecoder(kernels=twin(name)).iter_batches(buf, max_rows=max_rows))
        assert all(c.schema == fast.SCHEMA for c in chunks)
        assert pa.Table.from_batches(chunks).combine_chunks().to_batches()[0].equals(whole)


@pytest.mark.parametrize("name", TWINS)
def test_chunk_size_is_bounded_by_max_rows_plus_one_batch(name):
    data = many_batches(40, 25)
    sizes = [
        c.num_rows
        for c in fast.ColumnarDecoder(kernels=twin(name)).iter_batches(data, max_rows=100)
    ]
    assert sum(sizes) == 1000
    assert all(100 <= s < 125 for s in sizes[:-1])


def test_kept_chunks_stay_intact_and_dropped_chunks_are_reused():
    data = many_batches(40, 25)
    dec = fast.ColumnarDecoder()
    kept = list(dec.iter_batches(data, max_rows=100))
    assert pa.Table.from_batches(kept).equals(pa.Table.from_batches([fast.decode_columnar(data)]))
    seen = set()
    for chunk in dec.iter_batches(data, max_rows=100):
        seen.add(id(dec._buffers))
        del chunk
    assert len(seen) == 1  # one set of arrays, reused chunk after chunk


def test_iterates_an_mmapped_file(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    data = many_batches(10, 50)
    path.write_bytes(data + data[:100])  # a partial trailing batch, as in an active segment
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        rows = sum(c.num_rows for c in fast.iter_record_batches(mm, max_rows=64))
        # No Arrow array may keep the mmap exported once iteration is over.
    assert rows == 500


@given(
    bufs=st.lists(logs(max_batches=6), min_size=1, max_size=4),
    max_rows=st.integers(1, 30),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_chunk_held_keeps_its_columns_while_the_decoder_goes_on(bufs, max_rows):
    """One decoder, one log after another, every chunk held: the batch-level columns that the
    kernels leave to constant arrays (a chunk whose rows share a producerId, a leader epoch...)
    and those they write (rows of another value) stay what the reference decoder says, however
    the values change between batches, chunks and calls."""
    for name in TWINS:
        dec = fast.ColumnarDecoder(kernels=twin(name))
        held = [(buf, list(dec.iter_batches(buf, max_rows=max_rows))) for buf in bufs]
        for buf, chunks in held:
            rows = pa.Table.from_batches(chunks, schema=fast.SCHEMA).to_pylist()
            assert ("ok", rows) == reference_outcome(buf)
            assert [tuple(r[k] for k in _BATCH_LEVEL) for r in rows] == _kafka_python_fields(buf)


_BATCH_LEVEL = (
    "offset",
    "timestampType",
    "producerId",
    "producerEpoch",
    "sequence",
    "isTransactional",
    "isControl",
    "partitionLeaderEpoch",
)


def _kafka_python_fields(buf: bytes) -> list[tuple]:
    """Each record's offset and batch-level fields as kafka-python reads them (magic 0/1
    messages have no producer, sequence or leader epoch; magic 0 no timestamp type)."""
    rows = []
    records = KpMemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            if batch.magic < 2:
                tt = -1 if r.timestamp_type is None else r.timestamp_type
                rows.append((r.offset, tt, -1, -1, -1, False, False, -1))
                continue
            seq = -1
            if batch.base_sequence >= 0:
                seq = batch._increment_sequence(batch.base_sequence, r.offset - batch.base_offset)
            rows.append(
                (
                    r.offset,
                    batch.timestamp_type,
                    batch.producer_id,
                    batch.producer_epoch,
                    seq,
                    batch.is_transactional,
                    batch.is_control_batch,
                    batch.leader_epoch,
                )
            )
    return rows


def test_a_chunk_of_one_producer_shares_constant_batch_level_arrays():
    """Rows that share a value get the decoder's one constant array for it, chunk after chunk;
    a chunk that mixes values gets its own."""
    data = many_batches(6, 25)  # no producer: producerId -1 in every row
    dec = fast.ColumnarDecoder()
    first, second = list(dec.iter_batches(data, max_rows=50))[:2]
    for column in ("producerId", "sequence", "partitionLeaderEpoch", "isControl"):
        a, b = first.column(column), second.column(column)
        assert a.buffers()[1].address == b.buffers()[1].address, column
    mixed = many_batches(1, 10) + control_batch(10)
    batch = dec.decode(mixed)
    assert batch.column("producerId").to_pylist() == [-1] * 10 + [9]
    assert batch.column("isControl").to_pylist() == [False] * 10 + [True]
    assert batch.column("timestampType").to_pylist() == [0] * 11
