"""Targeted behaviours of the columnar decode, checked on both kernel twins."""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.format import MemoryRecordsBuilder, TimestampType
from kafkalog.format import columnar as fast
from kafkalog.format.batch import encode_batch_header
from kafkalog.format.varint import encode_varint

from .fastcheck import TWINS, columnar_outcome, control_batch, reference_outcome, twin


def v2_batch(records: bytes, count: int, **fields) -> bytes:
    return encode_batch_header(
        base_offset=fields.get("base_offset", 0),
        length=49 + len(records),
        attributes=fields.get("attributes", 0),
        last_offset_delta=max(0, count - 1),
        base_timestamp=100,
        max_timestamp=200,
        records_count=count,
        records=records,
    )


def raw_record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


def decode(buf, name, **options):
    return fast.ColumnarDecoder(kernels=twin(name)).decode(buf, **options)


@pytest.mark.parametrize("name", TWINS)
def test_header_keys_decode_like_kafka_new_string_utf8(name):
    """Invalid UTF-8 in a header key becomes U+FFFD exactly where Python's "replace" puts it."""
    pieces = [
        b"a",
        b"\x80",
        b"\xc2",
        b"\xc2\xa9",
        b"\xe0\xa0",
        b"\xed\xa0\x80",
        b"\xf0\x90\x80",
        b"\xf4\x90",
        b"\xff",
        b"\xe2\x82\xac",
        b"\xf0\x9f\x98\x80",
        b"\xc0\xaf",
    ]
    keys = [a + b for a, b in itertools.product(pieces, repeat=2)] + [p * 3 for p in pieces]
    # ASCII keys of 0-9 bytes (up to 8 are read as one word), then each with one byte that is not
    # ASCII at every place; the last record's key ends a byte before the batch does
    ascii_keys = [b"abcdefghi"[:n] for n in range(10)]
    keys += ascii_keys + [k[:i] + b"\xe9" + k[i + 1 :] for k in ascii_keys for i in range(len(k))]
    keys += [b"\xc3\xa9t\xc3\xa9", b"h0"]
    # each key twice: with a null value (the general header loop) and an empty one (the one-step
    # path for short headers, which must still see the bytes that are not ASCII)
    keys = [k for k in keys for _ in range(2)]
    records = b""
    for i, key in enumerate(keys):
        body = b"\x00\x00" + encode_varint(i) + b"\x01\x01\x02"
        body += encode_varint(len(key)) + key + (b"\x01" if i % 2 else b"\x00")
        records += raw_record(body)
    rb = decode(v2_batch(records, len(keys)), name)
    got = [h[0]["key"] for h in rb.column("headers").to_pylist()]
    assert got == [k.decode("utf-8", "replace") for k in keys]


# Header shapes on both sides of the walk's one-step path (one-byte lengths, an ASCII key of up
# to 8 bytes, a value of up to 32) and past it: longer keys and values, two-byte lengths, a key
# that is not ASCII, a null value.
HEADER_SHAPES = [
    (b"abcdefghi"[:n], b"v" * m)
    for n in (0, 1, 7, 8, 9)
    for m in (0, 1, 16, 31, 32, 33, 63, 64, 70)
] + [("\u00e9".encode(), b"x"), (b"k", None), (b"z" * 64, b"y"), (b"h0", b"header-value-0")]


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize("start_offset", [0, 5])
def test_headers_of_every_shape_decode_as_written(name, start_offset):
    """Records of each shape alone, of every pair and of three, in batches whose last records
    end within 32 bytes of the batch's end; a start offset leaves the first records out."""
    shapes = [(k.decode("utf-8"), v) for k, v in HEADER_SHAPES]
    rows = [[a] for a in shapes] + [[a, b] for a in shapes for b in shapes]
    rows += [[a, b, a] for a, b in itertools.pairwise(shapes)]
    buf = b""
    for first in range(0, len(rows), 10):
        b = MemoryRecordsBuilder(base_offset=first)
        for headers in rows[first : first + 10]:
            b.append(timestamp=1, key=b"k", value=b"v" * (len(headers) * 5), headers=headers)
        buf += b.build()
    rb = decode(buf, name, start_offset=start_offset)
    got = [[(h["key"], h["value"]) for h in r] for r in rb.column("headers").to_pylist()]
    assert got == rows[start_offset:]
    assert rb.column("offset").to_pylist() == list(range(start_offset, len(rows)))


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize("over", [1, 2, 3])
@pytest.mark.parametrize("which", ["key", "value"])
def test_a_short_header_past_its_record_fails_as_in_the_reference(name, over, which):
    """A header key or value a few bytes longer than its record, with records after it (so the
    bytes past the record are there to read): the error the reference gives, at its position."""
    key, value = b"hk", b"header-value"
    header = encode_varint(len(key)) + key + encode_varint(len(value)) + value
    body = b"\x00\x00\x00\x02k\x02v\x02" + header
    cut = len(body) - over if which == "value" else 8 + len(key) + 1 - over
    bad = raw_record(body[:cut])
    good = raw_record(b"\x00\x00\x02\x02k\x02v\x02" + header)
    buf = v2_batch(bad + good * 4, 5)
    got = columnar_outcome(buf, twin(name))
    assert got[0] == "error"
    assert got == reference_outcome(buf)


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize(
    "count, records",
    [
        (2**31 - 1, raw_record(b"\x00" * 6)),
        (3, raw_record(b"\x00\x00\x00\x01\x01\x00") + b"\xff\xff\xff\xff\x07" + b"\x00" * 20),
        (1, b"\xfe\xff\xff\xff\x0f" + b"\x00" * 30),  # record length 2**31 - 1
        (1, raw_record(b"\x00\x00\x00\xfe\xff\xff\xff\x0f" + b"\x00" * 10)),  # huge key
        (1, raw_record(b"\x00\x00\x00\x01\x01\xfe\xff\xff\xff\x0f" + b"\x00" * 10)),  # headers
    ],
)
def test_hostile_counts_and_lengths_raise_before_allocating(name, count, records):
    dec = fast.ColumnarDecoder(kernels=twin(name))
    with pytest.raises((InvalidRecordError, CorruptRecordError)):
        dec.decode(v2_batch(records, count))
    held = sum(a.nbytes for a in dec._buffers.arrays)
    assert held < 4 << 20


@pytest.mark.parametrize("name", TWINS)
def test_crc_validation_names_the_batch(name):
    batches = []
    for base in (40, 41):
        b = MemoryRecordsBuilder(base_offset=base)
        b.append(timestamp=1, key=b"k", value=b"value")
        batches.append(b.build())
    good = batches[0]
    bad = bytearray(b"".join(batches))
    bad[len(good) + 70] ^= 0x01  # inside the second batch's records
    assert decode(bytes(bad), name).num_rows == 2  # not validated: decodes
    with pytest.raises(CorruptRecordError, match=r"Record is corrupt \(stored crc = \d+") as e:
        decode(bytes(bad), name, validate_crc=True)
    assert e.value.position == len(good) and e.value.offset == 41


@pytest.mark.parametrize("name", TWINS)
@pytest.mark.parametrize("codec", ["none", "gzip"])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_crc_validation(name, codec, magic):
    b = MemoryRecordsBuilder(magic=magic, compression=codec, base_offset=7)
    for i in range(3):
        b.append(timestamp=1000 + i, key=b"k", value=b"v%d" % i)
    data = bytearray(b.build())
    assert decode(bytes(data), name, validate_crc=True).num_rows == 3
    data[-1] ^= 0x40
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        decode(bytes(data), name, validate_crc=True)


@pytest.mark.parametrize("name", TWINS)
def test_timestamps_follow_kafka(name):
    parts = []
    for magic, ts_type in (
        (2, TimestampType.LOG_APPEND_TIME),
        (1, TimestampType.LOG_APPEND_TIME),
        (0, TimestampType.CREATE_TIME),
        (2, TimestampType.CREATE_TIME),
    ):
        b = MemoryRecordsBuilder(
            magic=magic,
            timestamp_type=ts_type,
            log_append_time=999,
            base_offset=len(parts) * 2,
            compression="lz4",
        )
        b.append(timestamp=5, key=b"a", value=b"b")
        b.append(timestamp=6, key=b"a", value=b"b")
        parts.append(b.build())
    rb = decode(b"".join(parts), name)
    assert rb.column("timestamp").to_pylist() == [999, 999, 999, 999, -1, -1, 5, 6]
    assert rb.column("timestampType").to_pylist() == [1, 1, 1, 1, -1, -1, 0, 0]


@pytest.mark.parametrize("name", TWINS)
def test_partial_tail_ends_quietly_and_empty_input_gives_the_schema(name):
    b = MemoryRecordsBuilder()
    b.append(timestamp=1, key=b"k", value=b"v")
    one = b.build()
    assert decode(one + one[:30], name).num_rows == 1
    empty = decode(b"", name)
    assert empty.num_rows == 0 and empty.schema == fast.SCHEMA


@pytest.mark.parametrize("name", TWINS)
def test_decompression_is_capped(name):
    b = MemoryRecordsBuilder(compression="zstd")
    b.append(timestamp=1, key=None, value=bytes(100_000))
    with pytest.raises(CorruptRecordError, match="cannot be decompressed") as e:
        decode(b.build(), name, max_decompressed_size=10_000)
    assert e.value.position == 0


@pytest.mark.parametrize("name", TWINS)
def test_control_batches_kept_or_dropped(name):
    b = MemoryRecordsBuilder(
        producer_id=9, producer_epoch=1, is_transactional=True, base_sequence=3
    )
    b.append(timestamp=1, key=b"k", value=b"v")
    buf = b.build() + control_batch(1)
    rb = decode(buf, name)
    assert rb.column("isControl").to_pylist() == [False, True]
    assert rb.column("isTransactional").to_pylist() == [True, True]
    assert rb.column("producerId").to_pylist() == [9, 9]
    assert rb.column("sequence").to_pylist() == [3, -1]
    assert decode(buf, name, keep_control=False).column("offset").to_pylist() == [0]


@pytest.mark.parametrize("name", TWINS)
def test_errors_carry_file_positions(name):
    b = MemoryRecordsBuilder()
    b.append(timestamp=1, key=b"k", value=b"v")
    data = bytearray(b.build())
    struct.pack_into(">i", data, 57, 5)  # count 5, one record: records still missing
    outcome = columnar_outcome(bytes(data), twin(name), position_base=4096)
    assert outcome[0] == "error" and outcome[3] >= 4096
    assert columnar_outcome(bytes(data), twin(name))[:3] == reference_outcome(bytes(data))[:3]


def test_arrays_are_zero_copy_views_of_reused_buffers():
    b = MemoryRecordsBuilder()
    for i in range(100):
        b.append(timestamp=i, key=b"k%d" % i, value=b"v")
    data = b.build()
    dec = fast.ColumnarDecoder()
    first = dec.decode(data)
    buffers = dec._buffers
    second = dec.decode(data)  # the first result is alive: new arrays
    assert dec._buffers is not buffers
    assert first.equals(second)
    del first
    dec.decode(data)  # the second is alive, the first's arrays are free again
    assert dec._buffers is buffers
    del second
    third_buffers = dec._buffers
    dec.decode(data)
    assert dec._buffers is third_buffers  # nothing exported any more: reused
    value_data = np.asarray(third_buffers.arrays[8])
    assert value_data.nbytes >= 100


def test_a_consumer_holding_chunks_gets_a_bounded_number_of_array_sets():
    """Each chunk held (the pool's sets all exported) costs a new set, but the decoder keeps
    only POOL_SIZE of them: the rest belong to whoever holds their chunks."""
    from kafkalog.format.columnar.decode import POOL_SIZE

    parts = []
    for base in range(0, 1000, 100):  # ten batches of a log (its offsets increase)
        b = MemoryRecordsBuilder(base_offset=base)
        for i in range(100):
            b.append(timestamp=i, key=b"k", value=b"v%d" % i)
        parts.append(b.build())
    data = b"".join(parts)
    dec = fast.ColumnarDecoder()
    kept = list(dec.iter_batches(data, max_rows=100))
    assert len(kept) == 10
    assert len({id(c.column(4).buffers()[2]) for c in kept}) == 10
    assert len(dec._pool) == POOL_SIZE
    assert pa.Table.from_batches(kept).equals(pa.Table.from_batches([fast.decode_columnar(data)]))
    del kept
    seen = set()
    for chunk in dec.iter_batches(data, max_rows=100):
        seen.add(id(dec._buffers))
        assert chunk.num_rows == 100
    assert len(seen) == 2  # the loop holds one chunk while the next fills the other set


@pytest.mark.parametrize("name", TWINS)
def test_a_legacy_message_whose_crc_fails_reports_the_crc_first(name):
    """A message with a damaged CRC and a key length past its end is reported for its CRC, as
    Kafka checks a message's CRC before reading it; the rows before it are not lost."""
    b = MemoryRecordsBuilder(magic=1, base_offset=3)
    for i in range(3):
        b.append(timestamp=1000 + i, key=b"key", value=b"value-%d" % i)
    data = bytearray(b.build())
    second = 12 + struct.unpack_from(">i", data, 8)[0]
    struct.pack_into(">i", data, second + 12 + 4 + 1 + 1 + 8, 1_000)  # key length
    with pytest.raises(CorruptRecordError, match="Record is corrupt") as e:
        decode(bytes(data), name, validate_crc=True)
    assert e.value.offset == 4 and e.value.position == second
    with pytest.raises(CorruptRecordError, match="key size 1000 exceeds"):
        decode(bytes(data), name)
    chunks = fast.ColumnarDecoder(kernels=twin(name)).iter_batches(
        bytes(data), max_rows=1, validate_crc=True
    )
    assert next(chunks).column("offset").to_pylist() == [3]
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        next(chunks)


def _large_batch(base_offset: int, count: int) -> bytes:
    b = MemoryRecordsBuilder(base_offset=base_offset)
    for i in range(count):
        b.append(timestamp=1000 + i, key=b"key-%05d" % i, value=b"v" * 100 + b"%05d" % i)
    return b.build()


@pytest.mark.parametrize("name", TWINS)
def test_crc_of_a_batch_larger_than_the_crc_steps_is_checked_whole(name):
    """An uncompressed batch's CRC is computed behind its record walk in steps of 16 KiB (one
    pass over the bytes); a batch of several steps validates, and damage anywhere in it, even
    damage that also breaks a record, is reported as the batch's CRC with none of its rows."""
    first = _large_batch(10, 5)
    big = _large_batch(15, 600)  # about 70 KiB: four steps and a tail
    assert len(big) > 4 * 16384
    data = first + big
    rows = decode(data, name, validate_crc=True)
    assert rows.column("offset").to_pylist() == list(range(10, 615))
    for where in (61 + 3, 16384 + 7, 3 * 16384 + 1, len(big) - 1):
        bad = bytearray(data)
        bad[len(first) + where] ^= 0x10
        with pytest.raises(CorruptRecordError, match="Record is corrupt") as e:
            decode(bytes(bad), name, validate_crc=True)
        assert e.value.position == len(first) and e.value.offset == 15
        chunks = fast.ColumnarDecoder(kernels=twin(name)).iter_batches(
            bytes(bad), max_rows=5, validate_crc=True
        )
        assert next(chunks).column("offset").to_pylist() == list(range(10, 15))
        with pytest.raises(CorruptRecordError, match="Record is corrupt"):
            next(chunks)
    # A record length cut short late in the batch breaks the walk; the CRC is still what counts.
    last_record = len(first) + len(_large_batch(15, 599))
    bad = bytearray(data)
    bad[last_record] = 0x02  # a record length of 1
    with pytest.raises(CorruptRecordError, match="Record is corrupt") as e:
        decode(bytes(bad), name, validate_crc=True)
    assert e.value.position == len(first)
    with pytest.raises(InvalidRecordError, match="Invalid record size 1 at position"):
        decode(bytes(bad), name)
