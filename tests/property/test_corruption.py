"""Damaged and hostile input: kafkalog either decodes it or raises its own error, naming where.

The rule, for every magic and codec: walking a buffer and decoding every field and record of every
batch yields results or raises :class:`KafkalogError` (with ``position`` set), never another
exception type (struct.error, IndexError, zlib.error, a codec library's error, RuntimeError,
MemoryError) and never hangs. :class:`RecordsScan` never raises at all. Inputs of about 100 bytes
that declare gigabytes of lengths or counts allocate under 1 MiB, and compressed data expanding
past ``max_decompressed_size`` stops with CorruptRecordError.
"""

from __future__ import annotations

import contextlib
import gzip as stdlib_gzip
import random
import signal
import struct
import subprocess
import sys
import tracemalloc
import zlib
from dataclasses import dataclass

import pytest
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.codec import lz4_encode, lz4_encode_old_kafka, snappy_encode, zstd_encode
from kafka.record.util import calc_crc32, calc_crc32c, encode_varint

from kafkalog.errors import CorruptRecordError, InvalidRecordError, KafkalogError
from kafkalog.format import (
    CompressionType,
    ControlRecordType,
    LegacyBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    RecordsScan,
    TimestampType,
    build_end_txn_marker_batch,
    empty_batch,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = list(CompressionType)
MAGIC_CODECS = [(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)] + [
    (2, c) for c in CompressionType
]
TAILS = {"none", "partial", "zeros", "corrupt"}
MIB = 1 << 20
TIME_LIMIT_S = 10


def combo_id(value) -> str:
    return value.label if isinstance(value, CompressionType) else f"v{value}"


class Hang(Exception):
    """Raised by the alarm below: not a KafkalogError, so it fails the rule."""


@contextlib.contextmanager
def time_limit(seconds: float = TIME_LIMIT_S):
    def on_alarm(signum, frame):
        raise Hang(f"decoding took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- the rule ----------------------------------------------------------------------------------

BATCH_FIELDS = (
    "base_offset",
    "last_offset",
    "next_offset",
    "count",
    "magic",
    "compression",
    "crc",
    "is_valid",
    "timestamp_type",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "last_sequence",
    "is_transactional",
    "is_control",
    "partition_leader_epoch",
    "delete_horizon_ms",
    "size_in_bytes",
)


def _allowed(error: KafkalogError, errors: list, size: int) -> None:
    assert error.position is not None, f"{type(error).__name__} without a position: {error}"
    assert 0 <= error.position <= size, f"position {error.position} outside {size} bytes"
    errors.append(error)


def touch(batch, errors: list, size: int) -> int:
    """Read every field and every record of ``batch``; returns how many records were decoded."""
    assert isinstance(batch, (RecordBatch, LegacyBatch))
    for name in BATCH_FIELDS:
        try:
            getattr(batch, name)
        except KafkalogError as e:
            _allowed(e, errors, size)
    try:
        batch.ensure_valid()
    except KafkalogError as e:
        _allowed(e, errors, size)
    decoded = 0
    try:
        for record in batch.records():
            _ = (record.offset, record.timestamp, record.key, record.value, record.headers)
            _ = (record.sequence, record.key_size, record.value_size, record.timestamp_type)
            decoded += 1
    except KafkalogError as e:
        _allowed(e, errors, size)
    return decoded


def check_rule(buf, **kwargs) -> list[KafkalogError]:
    """Apply the rule to ``buf``: decode everything with MemoryRecords and with RecordsScan."""
    errors: list[KafkalogError] = []
    with time_limit():
        try:
            for batch in MemoryRecords(buf, **kwargs):
                touch(batch, errors, len(buf))
        except KafkalogError as e:
            _allowed(e, errors, len(buf))
        scan = RecordsScan(buf, **kwargs)
        batches = list(scan)  # never raises
        assert scan.tail in TAILS
        assert 0 <= scan.valid_bytes <= len(buf)
        assert (scan.error is None) == (scan.tail in ("none", "partial"))
        if scan.error is not None:
            assert isinstance(scan.error, KafkalogError)
            assert scan.error.position == scan.valid_bytes
        for batch in batches:
            touch(batch, errors, len(buf))
    return errors


# -- samples -----------------------------------------------------------------------------------


def build(magic: int, codec, records, **kwargs) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression=codec, **kwargs)
    for ts, key, value, headers in records:
        builder.append(timestamp=ts, key=key, value=value, headers=headers if magic == 2 else ())
    return builder.build()


def small_records():
    return [
        (1_700_000_000_000, b"key-1", b"hello world " * 3, [("h", b"x"), ("n", None)]),
        (1_700_000_000_005, None, b"", []),
        (1_699_999_999_000, b"", None, [("\u00e9", b"\x00")]),
    ]


def large_records(seed: int):
    rng = random.Random(seed)
    return [
        (1_700_000_000_000 + i, b"key-%d" % i, rng.randbytes(3_000) + b"z" * 17_000, [])
        for i in range(3)
    ]


def small_sample(magic: int, codec) -> bytes:
    return build(magic, codec, small_records(), base_offset=1000)


def large_sample(magic: int, codec) -> bytes:
    return build(magic, codec, large_records(magic * 10 + codec), base_offset=5)


def split_entries(buf: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        out.append(buf[pos : pos + 12 + size])
        pos += 12 + size
    return out


def fix_crc(entry: bytearray) -> None:
    """Make an entry's CRC match its (damaged) bytes, so that only the structure is wrong."""
    if len(entry) >= 21 and entry[16] == 2:
        struct.pack_into(">I", entry, 17, calc_crc32c(bytes(entry[21:])))
    elif len(entry) >= 17:
        struct.pack_into(">I", entry, 12, calc_crc32(bytes(entry[16:])))


def consistent_truncation(entry: bytes, n: int) -> bytes:
    """The first ``n`` bytes of ``entry`` presented as a complete entry: the size field (and for a
    legacy wrapper the value length) rewritten to end at ``n``, the CRC recomputed."""
    cut = bytearray(entry[:n])
    if n >= 12:
        struct.pack_into(">i", cut, 8, n - 12)
    if n > 17 and cut[16] in (0, 1) and cut[17] & 0x07:
        key_pos = 12 + (6 if cut[16] == 0 else 14)
        if n >= key_pos + 8 and struct.unpack_from(">i", cut, key_pos)[0] == -1:
            struct.pack_into(">i", cut, key_pos + 4, n - key_pos - 8)
    fix_crc(cut)
    return bytes(cut)


SMALL = {combo: small_sample(*combo) for combo in MAGIC_CODECS}


# -- truncation --------------------------------------------------------------------------------


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=combo_id)
def test_small_buffers_truncated_at_every_length_follow_the_rule(magic, codec):
    buf = SMALL[(magic, codec)]
    two = buf + small_sample(magic, codec)
    for n in range(len(two) + 1):
        check_rule(two[:n])
    *prefix, last = split_entries(buf)
    head = b"".join(prefix)
    for n in range(len(last) + 1):
        check_rule(head + consistent_truncation(last, n))


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=combo_id)
def test_large_buffers_truncated_at_sampled_lengths_follow_the_rule(magic, codec):
    buf = large_sample(magic, codec)
    *prefix, last = split_entries(buf)
    head = b"".join(prefix)
    rng = random.Random(len(buf))
    lengths = {0, 1, 11, 12, 16, 17, 18, 60, 61, 62, len(last) - 1, len(last)}
    lengths |= {rng.randrange(len(last)) for _ in range(60)}
    for n in sorted(lengths):
        check_rule(buf[: len(head) + n])
        errors = check_rule(head + consistent_truncation(last, n))
        if 61 < n < len(last) - 8 and codec != NONE:
            assert errors, f"compressed data cut at {n} of {len(last)} decoded without error"


# -- bit flips and zeroed ranges ---------------------------------------------------------------


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=combo_id)
def test_every_single_bit_flip_follows_the_rule(magic, codec):
    buf = SMALL[(magic, codec)]
    for i in range(len(buf)):
        for bit in range(8):
            damaged = bytearray(buf)
            damaged[i] ^= 1 << bit
            check_rule(bytes(damaged))
            # Same damage with a matching CRC, so that only the structure is wrong.
            entries = split_entries_lenient(bytes(damaged))
            if entries:
                check_rule(b"".join(entries))


def split_entries_lenient(buf: bytes) -> list[bytes]:
    """Entries with fixed CRCs, as long as sizes frame the buffer; [] if they do not."""
    out, pos = [], 0
    while pos + 12 <= len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 0 or pos + 12 + size > len(buf):
            return []
        entry = bytearray(buf[pos : pos + 12 + size])
        fix_crc(entry)
        out.append(bytes(entry))
        pos += 12 + size
    return out if pos == len(buf) else []


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=combo_id)
def test_zeroed_ranges_follow_the_rule(magic, codec):
    buf = SMALL[(magic, codec)]
    for length in (1, 2, 4, 8, 16, 64):
        for start in range(len(buf) - length + 1):
            damaged = bytearray(buf)
            damaged[start : start + length] = bytes(length)
            check_rule(bytes(damaged))
            fixed = split_entries_lenient(bytes(damaged))
            if fixed:
                check_rule(b"".join(fixed))


@dataclass(frozen=True)
class Mutation:
    kind: str
    at: float
    size: int
    value: int


mutations = st.builds(
    Mutation,
    st.sampled_from(["flip", "zero", "ones", "random", "insert", "delete", "dup"]),
    st.floats(0, 1, exclude_max=True),
    st.integers(1, 40),
    st.integers(0, 255),
)


def mutate(buf: bytes, muts: list[Mutation], rng: random.Random) -> bytes:
    data = bytearray(buf)
    for m in muts:
        if not data:
            break
        i = int(m.at * len(data))
        if m.kind == "flip":
            data[i] ^= m.value or 1
        elif m.kind == "zero":
            data[i : i + m.size] = bytes(len(data[i : i + m.size]))
        elif m.kind == "ones":
            data[i : i + m.size] = b"\xff" * len(data[i : i + m.size])
        elif m.kind == "random":
            data[i : i + m.size] = rng.randbytes(len(data[i : i + m.size]))
        elif m.kind == "insert":
            data[i:i] = rng.randbytes(m.size)
        elif m.kind == "delete":
            del data[i : i + m.size]
        else:
            data[i:i] = data[i : i + m.size]
    return bytes(data)


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    combo=st.sampled_from(MAGIC_CODECS),
    muts=st.lists(mutations, min_size=1, max_size=6),
    seed=st.integers(0, 2**32),
    fix=st.booleans(),
    two=st.booleans(),
)
def test_random_damage_follows_the_rule(combo, muts, seed, fix, two):
    buf = SMALL[combo]
    if two:
        buf += SMALL[MAGIC_CODECS[seed % len(MAGIC_CODECS)]]
    damaged = mutate(buf, muts, random.Random(seed))
    check_rule(damaged)
    check_rule(damaged, max_decompressed_size=64)
    if fix:
        fixed = split_entries_lenient(damaged)
        if fixed:
            check_rule(b"".join(fixed))


# -- absurd lengths and counts ----------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def v2_batch(section: bytes, *, count: int, attributes: int = 0, last_delta: int = 0) -> bytes:
    header = struct.pack(
        ">qiibIhiqqqhii",
        0,
        49 + len(section),
        -1,
        2,
        0,
        attributes,
        last_delta,
        1,
        1,
        -1,
        -1,
        -1,
        count,
    )
    buf = bytearray(header + section)
    fix_crc(buf)
    return bytes(buf)


def v2_record_bytes(fields: list[bytes], length: int | None = None) -> bytes:
    body = b"".join(fields)
    return varint(len(body) if length is None else length) + body


INT_MAX = 2**31 - 1
V2_NORMAL_FIELDS = [b"\x00", varint(0), varint(0), varint(1), b"k", varint(1), b"v", varint(0)]


def legacy_entry(
    magic: int, key_len: int, value_len: int, payload: bytes, codec: int = 0, key: bytes = b""
) -> bytes:
    """A legacy entry: key length | key | value length | payload (lengths may lie)."""
    body = bytearray([magic, codec])
    if magic == 1:
        body += struct.pack(">q", 1)
    body += struct.pack(">i", key_len) + key + struct.pack(">i", value_len) + payload
    message = struct.pack(">I", calc_crc32(bytes(body))) + bytes(body)
    return struct.pack(">qi", 0, len(message)) + message


def _lz4_frame(bd: int, blocks: bytes) -> bytes:
    descriptor = bytes((0x60, bd))
    return (
        struct.pack("<I", 0x184D2204)
        + descriptor
        + bytes(((xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF,))
        + blocks
    )


def _zstd_frame_with_content_size(size: int) -> bytes:
    # Single segment, 8-byte content size, then one raw block of 1 byte (last).
    descriptor = 0xC0 | 0x20
    return (
        struct.pack("<I", 0xFD2FB528)
        + bytes((descriptor,))
        + struct.pack("<Q", size)
        + bytes((0x09, 0x00, 0x00))  # last=1, raw, size 1
        + b"x"
    )


HOSTILE = {
    "v2 recordsCount 2^31-1": v2_batch(v2_record_bytes(V2_NORMAL_FIELDS), count=INT_MAX),
    "v2 recordsCount 2^31-1 gzip": v2_batch(
        stdlib_gzip.compress(v2_record_bytes(V2_NORMAL_FIELDS)), count=INT_MAX, attributes=1
    ),
    "v2 recordsCount 2^31-1 snappy": v2_batch(
        snappy_encode(v2_record_bytes(V2_NORMAL_FIELDS)), count=INT_MAX, attributes=2
    ),
    "v2 recordsCount 2^31-1 lz4": v2_batch(
        lz4_encode(v2_record_bytes(V2_NORMAL_FIELDS)), count=INT_MAX, attributes=3
    ),
    "v2 recordsCount 2^31-1 zstd": v2_batch(
        zstd_encode(v2_record_bytes(V2_NORMAL_FIELDS)), count=INT_MAX, attributes=4
    ),
    "v2 recordsCount -2^31": v2_batch(v2_record_bytes(V2_NORMAL_FIELDS), count=-(2**31)),
    "v2 lastOffsetDelta 2^31-1": v2_batch(
        v2_record_bytes(V2_NORMAL_FIELDS), count=1, last_delta=INT_MAX
    ),
    "v2 record length 2^31-1": v2_batch(v2_record_bytes(V2_NORMAL_FIELDS, INT_MAX), count=1),
    "v2 record length -2^31": v2_batch(v2_record_bytes(V2_NORMAL_FIELDS, -(2**31)), count=1),
    "v2 record length varint of 6 bytes": v2_batch(b"\xff" * 6 + bytes(20), count=1),
    "v2 key length 2^31-1": v2_batch(
        v2_record_bytes([b"\x00", varint(0), varint(0), varint(INT_MAX), bytes(30)]), count=1
    ),
    "v2 value length 2^31-1": v2_batch(
        v2_record_bytes([b"\x00", varint(0), varint(0), varint(-1), varint(INT_MAX), bytes(30)]),
        count=1,
    ),
    "v2 header count 2^31-1": v2_batch(
        v2_record_bytes([*V2_NORMAL_FIELDS[:-1], varint(INT_MAX), bytes(30)]), count=1
    ),
    "v2 header count -1": v2_batch(
        v2_record_bytes([*V2_NORMAL_FIELDS[:-1], varint(-1), bytes(30)]), count=1
    ),
    "v2 header key length 2^31-1": v2_batch(
        v2_record_bytes([*V2_NORMAL_FIELDS[:-1], varint(1), varint(INT_MAX), bytes(30)]), count=1
    ),
    "v2 header value length 2^31-1": v2_batch(
        v2_record_bytes(
            [*V2_NORMAL_FIELDS[:-1], varint(1), varint(1), b"h", varint(INT_MAX), bytes(30)]
        ),
        count=1,
    ),
    "v2 timestamp delta varlong of 11 bytes": v2_batch(
        v2_record_bytes([b"\x00", b"\xff" * 10 + b"\x01", bytes(20)]), count=1
    ),
    "v2 batch length 2^31-1": struct.pack(">qi", 0, INT_MAX) + bytes(88),
    "v2 codec id 7": v2_batch(bytes(40), count=1, attributes=7),
    "legacy v0 key length 2^31-1": legacy_entry(0, INT_MAX, 5, b"x" * 80),
    "legacy v1 key length 2^31-1": legacy_entry(1, INT_MAX, 5, b"x" * 80),
    "legacy v0 value length 2^31-1": legacy_entry(0, -1, INT_MAX, b"x" * 80),
    "legacy v1 value length 2^31-1": legacy_entry(1, 3, INT_MAX, b"x" * 80, key=b"abc"),
    "legacy key length -2^31": legacy_entry(1, -(2**31), 1, b"x" * 80),
    "legacy wrapper value length 2^31-1 gzip": legacy_entry(1, -1, INT_MAX, b"x" * 80, codec=1),
    "legacy entry size 2^31-1": struct.pack(">qi", 0, INT_MAX)
    + b"\x00\x00\x00\x00\x01"
    + bytes(83),
    "xerial snappy block length 2^31-1": v2_batch(
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, INT_MAX) + bytes(20), count=1, attributes=2
    ),
    "raw snappy declaring 2^32-1 bytes": v2_batch(
        b"\xff\xff\xff\xff\x0f" + bytes(30), count=1, attributes=2
    ),
    "xerial snappy blocks declaring 2 GiB": v2_batch(
        b"\x82SNAPPY\x00"
        + struct.pack(">ii", 1, 1)
        + b"".join(struct.pack(">i", 5) + b"\x80\x80\x80\x80\x04" for _ in range(4)),
        count=1,
        attributes=2,
    ),
    "raw snappy declaring 200 MiB": v2_batch(
        b"\x80\x80\x80\x64" + bytes(40), count=1, attributes=2
    ),
    "xerial snappy block declaring 200 MiB": v2_batch(
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 44) + b"\x80\x80\x80\x64" + bytes(40),
        count=1,
        attributes=2,
    ),
    "lz4 block size 2^31-1": v2_batch(
        _lz4_frame(0x40, struct.pack("<I", INT_MAX) + bytes(20)), count=1, attributes=3
    ),
    "lz4 4 MiB block maximum": v2_batch(
        _lz4_frame(0x70, struct.pack("<I", 3) + b"\x30abc" + bytes(4)), count=1, attributes=3
    ),
    "zstd content size 2^40": v2_batch(_zstd_frame_with_content_size(2**40), count=1, attributes=4),
    "zstd content size 200 MiB": v2_batch(
        _zstd_frame_with_content_size(200 * MIB), count=1, attributes=4
    ),
    "zstd block size 2^21-1": v2_batch(
        struct.pack("<I", 0xFD2FB528) + b"\x00\x58" + b"\xfd\xff\xff" + bytes(20),
        count=1,
        attributes=4,
    ),
}


def _wrapper_with_huge_inner_size() -> bytes:
    inner = struct.pack(">qi", 0, INT_MAX) + bytes(30)
    return legacy_entry(1, -1, len(compressed := stdlib_gzip.compress(inner)), compressed, codec=1)


def _wrapper_with_huge_inner_key() -> bytes:
    inner = legacy_entry(1, INT_MAX, 1, bytes(40))
    return legacy_entry(1, -1, len(compressed := zlib_gzip(inner)), compressed, codec=1)


def zlib_gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


HOSTILE["legacy wrapper with inner size 2^31-1"] = _wrapper_with_huge_inner_size()
HOSTILE["legacy wrapper with inner key length 2^31-1"] = _wrapper_with_huge_inner_key()
HOSTILE["v1 lz4 wrapper with 4 MiB block maximum"] = legacy_entry(
    1, -1, len(f := _lz4_frame(0x70, struct.pack("<I", 3) + b"\x30abc" + bytes(4))), f, codec=3
)


def _zstd_empty_blocks(blocks: int) -> bytes:
    """A valid zstd frame without a content size: ``blocks`` compressed blocks of 2 bytes (no
    literals, no sequences), decoding to nothing."""
    out = bytearray(struct.pack("<I", 0xFD2FB528) + b"\x00\x58")
    for i in range(blocks):
        header = (1 if i == blocks - 1 else 0) | 2 << 1 | 2 << 3  # last?, compressed, size 2
        out += header.to_bytes(3, "little") + b"\x00\x00"
    return bytes(out)


HOSTILE["zstd 18 empty compressed blocks"] = v2_batch(_zstd_empty_blocks(18), count=1, attributes=4)
ZSTD_2000_EMPTY_BLOCKS = v2_batch(_zstd_empty_blocks(2000), count=1, attributes=4)


def peak_allocation(func) -> int:
    func()  # warm up: imports, codec contexts, caches
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_absurd_lengths_and_counts_raise_kafkalog_errors_with_positions(name):
    buf = HOSTILE[name]
    assert len(buf) < 200
    errors = check_rule(buf)
    if name in ("v2 batch length 2^31-1", "legacy entry size 2^31-1"):
        # An entry longer than the buffer is a partial tail: nothing to decode, no error.
        assert errors == []
        scan = RecordsScan(buf)
        assert list(scan) == [] and scan.tail == "partial"
    elif name == "v2 lastOffsetDelta 2^31-1":
        # Only the header is odd; the record decodes.
        assert errors == []
        assert only(buf).last_offset == INT_MAX
    elif name == "legacy key length -2^31":
        # Kafka's LegacyRecord reads any negative size as null (and ignores trailing bytes).
        assert errors == []
        assert [(r.key, r.value) for r in only(buf).records()] == [(None, b"x")]
    else:
        assert errors, f"{name}: decoded without error"
        assert all(isinstance(e, (CorruptRecordError, InvalidRecordError)) for e in errors)


def only(buf):
    [batch] = list(MemoryRecords(buf))
    return batch


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_absurd_lengths_and_counts_allocate_under_one_mib(name):
    # Including lz4 frames declaring 4 MiB blocks (BD 0x70): python-lz4's output buffer is bounded
    # by what a block's size can expand to (255x), not by the block maximum.
    buf = HOSTILE[name]
    peak = peak_allocation(lambda: check_rule(buf))
    assert peak < MIB, f"{name}: {len(buf)}-byte input peaked at {peak} bytes"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_absurd_lengths_and_counts_allocate_under_one_mib_with_a_one_mib_cap(name):
    buf = HOSTILE[name]
    peak = peak_allocation(lambda: check_rule(buf, max_decompressed_size=MIB))
    assert peak < MIB, f"{name}: {len(buf)}-byte input peaked at {peak} bytes"


_UNDER_ADDRESS_LIMIT = """
import os, resource, sys
from kafkalog.errors import KafkalogError
from kafkalog.format import MemoryRecords
buf = bytes.fromhex(sys.argv[1])
vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (vm + (128 << 20), resource.RLIM_INFINITY))
try:
    for batch in MemoryRecords(buf):
        list(batch.records())
except KafkalogError as e:
    assert e.position is not None
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and RLIMIT_AS")
@pytest.mark.parametrize(
    "name",
    [
        "v2 recordsCount 2^31-1",
        "legacy v1 key length 2^31-1",
        "zstd content size 2^40",
        "raw snappy declaring 200 MiB",
        "xerial snappy block declaring 200 MiB",
        "zstd content size 200 MiB",
        "zstd 2000 empty compressed blocks",
    ],
)
def test_small_hostile_input_decodes_under_a_128_mib_address_space_limit(name):
    # A declared size trusted before the data proves it shows up here as MemoryError (not a
    # KafkalogError) or as an abort from a codec's native allocator.
    buf = ZSTD_2000_EMPTY_BLOCKS if name == "zstd 2000 empty compressed blocks" else HOSTILE[name]
    proc = subprocess.run(
        [sys.executable, "-c", _UNDER_ADDRESS_LIMIT, buf.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr[-2000:]


def test_scan_of_a_small_partial_tail_allocates_little_without_the_zero_check():
    # The walk itself (without RecordsScan's zero check) stays tiny on a huge declared size.
    buf = HOSTILE["v2 batch length 2^31-1"]
    peak = peak_allocation(lambda: list(MemoryRecords(buf)))
    assert peak < 64 * 1024


# -- compression bombs -------------------------------------------------------------------------

BOMB_SIZE = 8 * MIB


def _bomb_v2(codec) -> bytes:
    """A valid batch whose one record is 8 MiB of zeros: only the cap can stop it."""
    return build(2, codec, [(1, b"k", bytes(BOMB_SIZE), [])])


def _bomb_legacy(magic: int, codec) -> bytes:
    return build(magic, codec, [(1, b"k", bytes(BOMB_SIZE), []), (2, None, b"v", [])])


def _bomb_section() -> bytes:
    """The records section of one v2 record holding 8 MiB of zeros."""
    fields = [b"\x00", varint(0), varint(0), varint(-1), varint(BOMB_SIZE), bytes(BOMB_SIZE)]
    return v2_record_bytes([*fields, varint(0)])


def _foreign_bomb_v2(codec, compress) -> bytes:
    """The same valid record compressed by another writer's codec code."""
    return v2_batch(compress(_bomb_section()), count=1, attributes=int(codec))


def _two_gzip_members(data: bytes) -> bytes:
    half = len(data) // 2
    return stdlib_gzip.compress(data[:half]) + stdlib_gzip.compress(data[half:])


def _lie_about_zstd_content_size(frame: bytes) -> bytes:
    """Claim a 1000-byte content size in a frame holding 8 MiB (the size field is 4 bytes)."""
    descriptor = frame[4]
    assert descriptor >> 6 == 2  # 4-byte content size
    pos = 5 + (0 if descriptor & 0x20 else 1)
    return frame[:pos] + struct.pack("<I", 1000) + frame[pos + 4 :]


def _kp_lz4_v0_wrapper() -> bytes:
    inner = legacy_entry(0, -1, BOMB_SIZE, bytes(BOMB_SIZE))
    payload = lz4_encode_old_kafka(inner)
    return legacy_entry(0, -1, len(payload), payload, codec=3)


BOMBS = {
    **{f"v2 {c.label}": (lambda c=c: _bomb_v2(c)) for c in (GZIP, SNAPPY, LZ4, ZSTD)},
    **{
        f"v{m} {c.label}": (lambda m=m, c=c: _bomb_legacy(m, c))
        for m in (0, 1)
        for c in (GZIP, SNAPPY, LZ4)
    },
    # Other writers' streams: stdlib gzip, kafka-python's codecs, zstd with and without a size.
    "v2 gzip stdlib": lambda: _foreign_bomb_v2(GZIP, stdlib_gzip.compress),
    "v2 gzip two members": lambda: _foreign_bomb_v2(GZIP, _two_gzip_members),
    "v2 xerial snappy kafka-python": lambda: _foreign_bomb_v2(SNAPPY, snappy_encode),
    "v2 lz4 kafka-python": lambda: _foreign_bomb_v2(LZ4, lz4_encode),
    "v0 lz4 kafka-python": _kp_lz4_v0_wrapper,
    "v2 zstd with content size": lambda: _foreign_bomb_v2(ZSTD, zstd_encode),
    "v2 zstd without content size": lambda: _foreign_bomb_v2(
        ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress
    ),
    "v2 zstd lying content size": lambda: _foreign_bomb_v2(
        ZSTD, lambda data: _lie_about_zstd_content_size(zstd_encode(data))
    ),
}


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {name: make() for name, make in BOMBS.items()}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_compression_bomb_stops_with_corrupt_record_error(bombs, name):
    buf = bombs[name]
    assert len(buf) < BOMB_SIZE // 16
    prefix = small_sample(2, NONE)
    batches = list(MemoryRecords(prefix + buf, max_decompressed_size=MIB))
    assert len(batches) == 2
    with time_limit(), pytest.raises(CorruptRecordError) as info:
        for _ in batches[1].records():
            pass
    assert info.value.position == len(prefix)
    if "lying" in name:
        # A content size that is a lie is corruption even without a cap.
        with pytest.raises(CorruptRecordError):
            list(MemoryRecords(buf).records())
    else:
        # Without the cap the same bytes decode: only the cap stopped them.
        assert max(len(r.value or b"") for r in MemoryRecords(buf).records()) == BOMB_SIZE


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_compression_bomb_peaks_near_the_cap_not_the_expanded_size(bombs, name):
    buf = bombs[name]

    def decode():
        with contextlib.suppress(CorruptRecordError):
            for batch in MemoryRecords(buf, max_decompressed_size=MIB):
                batch.count  # noqa: B018 - for legacy wrappers this decompresses
                list(batch.records())

    peak = peak_allocation(decode)
    assert peak < 4 * MIB, f"{name}: peaked at {peak} bytes with a 1 MiB cap"


# -- other framing edge cases --------------------------------------------------------------------


def test_control_and_empty_batches_under_damage_follow_the_rule():
    samples = [
        build_end_txn_marker_batch(
            ControlRecordType.COMMIT,
            producer_id=1,
            producer_epoch=0,
            coordinator_epoch=3,
            timestamp=5,
        ),
        empty_batch(
            base_offset=0,
            last_offset=9,
            max_timestamp=1,
            attributes=0x10,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        ),
        build(
            2,
            NONE,
            small_records(),
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            log_append_time=9,
            delete_horizon_ms=77,
        ),
    ]
    for buf in samples:
        for i in range(len(buf)):
            for value in (0x00, 0xFF, buf[i] ^ 0x80):
                damaged = bytearray(buf)
                damaged[i] = value
                check_rule(bytes(damaged))
                fixed = split_entries_lenient(bytes(damaged))
                if fixed:
                    check_rule(b"".join(fixed))


@pytest.mark.parametrize("junk_len", [1, 5, 16, 17, 18, 30, 100])
def test_random_junk_after_valid_batches_never_escapes_the_rule(junk_len):
    rng = random.Random(junk_len)
    base = SMALL[(2, ZSTD)] + SMALL[(1, GZIP)]
    for _ in range(200):
        check_rule(base + rng.randbytes(junk_len))
    for _ in range(200):
        check_rule(rng.randbytes(junk_len))
