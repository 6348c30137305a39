"""kafkalog.format.codecs against independent encoders and decoders (kafka-python's kafka.codec,
python-snappy, lz4.frame, zstandard), plus Kafka's quirks, decompression bombs and fuzzing.

Expected values never come from our own output: every byte we write is read back by another
library, and every frame another library writes is read by us.
"""

from __future__ import annotations

import mmap
import random
import struct
import tracemalloc
import zlib
from concurrent.futures import ThreadPoolExecutor

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kc

from codec_damage import CAPS, CUTS, FLIPS, damaged, outcome
from kafkalog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kafkalog.format.codecs import (
    CODECS,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    CompressionType,
    codec_for,
    compress,
    decompress,
)
from kafkalog.format.codecs._xxh32 import xxh32
from kafkalog.format.codecs.zstd import decompress_frames, decompress_one_block, walk_frames

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
MIB = 1 << 20

_rng = random.Random(0x4B61666B61)
SMALL = b"Kafka keeps its log in segments of record batches. " * 3
RANDOM_1M = _rng.randbytes(MIB)
REPETITIVE_1M = (b'offset=0000004711 key=user-17 value={"clicks": 3, "page": "/a"}\n' * 20000)[:MIB]
PAYLOADS = {"empty": b"", "small": SMALL, "random_1m": RANDOM_1M, "repetitive_1m": REPETITIVE_1M}
# Semi-compressible and long enough for several lz4 blocks, snappy blocks and zstd blocks.
MIXED = b"".join(_rng.randbytes(40) + b"x" * _rng.randrange(0, 300) for _ in range(1200))

needs_xxhash = pytest.mark.skipif(
    kc.xxhash is None, reason="kafka.codec's old-kafka lz4 functions need the xxhash package"
)
payloads = pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())


def lz4_blocks(frame: bytes, header_size: int = 7) -> list[tuple[bool, bytes]]:
    """(stored raw?, block bytes) for each block of a checksum-free lz4 frame."""
    blocks, pos = [], header_size
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame)
            return blocks
        length = word & 0x7FFFFFFF
        blocks.append((bool(word & 0x80000000), frame[pos : pos + length]))
        pos += length


def xerial_blocks(stream: bytes) -> list[bytes]:
    blocks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        blocks.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(stream)
    return blocks


def decode_or_corrupt(codec_id: int, data, **kwargs) -> bytes | None:
    """The fuzz invariant: bytes out, or CorruptRecordError, and nothing else."""
    try:
        out = decompress(codec_id, data, **kwargs)
    except CorruptRecordError:
        return None
    assert type(out) is bytes
    return out


# --- registry ------------------------------------------------------------------------------------


def test_compression_type_has_kafkas_ids_and_names():
    assert [(t.value, t.label) for t in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]
    assert str(CompressionType.ZSTD) == "zstd"
    assert f"{CompressionType.GZIP}" == "gzip"
    assert CompressionType.LZ4 == 3


@pytest.mark.parametrize("name", ["gzip", "GZIP", "Gzip", " gzip "])
def test_from_label_ignores_case(name):
    assert CompressionType.from_label(name) is CompressionType.GZIP


@pytest.mark.parametrize("name", ["brotli", "", "producer", "1"])
def test_from_label_rejects_unknown_names(name):
    with pytest.raises(ValueError, match="unknown compression name"):
        CompressionType.from_label(name)


def test_registry_holds_kafkas_level_ranges():
    ranges = {i: (c.min_level, c.max_level, c.default_level) for i, c in CODECS.items()}
    assert ranges == {
        NONE: (None, None, None),
        GZIP: (1, 9, 6),
        SNAPPY: (None, None, None),
        LZ4: (1, 17, 9),
        ZSTD: (-131072, 22, 3),
    }
    assert all(isinstance(c, Codec) and c.type == i for i, c in CODECS.items())
    assert DEFAULT_MAX_DECOMPRESSED_SIZE == 256 * MIB


@pytest.mark.parametrize("codec_id", [5, 6, 7, 8, -1])
def test_codec_for_rejects_ids_kafka_does_not_define(codec_id):
    with pytest.raises(UnsupportedCompressionTypeError, match=rf"id {codec_id}\b.*magic 2"):
        codec_for(codec_id)
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(codec_id, b"\x00" * 16)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_is_unsupported_below_magic_2(magic):
    with pytest.raises(UnsupportedCompressionTypeError, match=rf"zstd.*magic {magic}"):
        codec_for(ZSTD, magic=magic)
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(ZSTD, b"x", magic=magic)
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(ZSTD, zstandard.ZstdCompressor().compress(b"x"), magic=magic)
    with pytest.raises(UnsupportedCompressionTypeError):
        CODECS[ZSTD].decompress(zstandard.ZstdCompressor().compress(b"x"), magic=magic)
    assert codec_for(ZSTD, magic=2).type is CompressionType.ZSTD


@pytest.mark.parametrize(
    ("codec_id", "level", "message"),
    [
        (GZIP, 0, "1..9"),
        (GZIP, 10, "1..9"),
        (LZ4, 0, "1..17"),
        (LZ4, 18, "1..17"),
        (ZSTD, -131073, "-131072..22"),
        (ZSTD, 23, "-131072..22"),
        (SNAPPY, 1, "no compression levels"),
        (NONE, 1, "no compression levels"),
    ],
)
def test_levels_outside_kafkas_range_raise_value_error(codec_id, level, message):
    with pytest.raises(ValueError, match=message):
        compress(codec_id, b"data", level=level)


def test_gzip_accepts_kafkas_default_level_minus_one():
    assert kc.gzip_decode(compress(GZIP, SMALL, level=-1)) == SMALL


@pytest.mark.parametrize("payload", [b"", b"abc", bytearray(b"abc"), memoryview(b"abcdef")[1:4]])
def test_none_copies_bytes_through(payload):
    assert compress(NONE, payload) == bytes(payload)
    out = decompress(NONE, payload)
    assert type(out) is bytes and out == bytes(payload)


# --- every codec against kafka-python ------------------------------------------------------------


@payloads
@pytest.mark.parametrize("level", [1, 6, 9])
def test_gzip_interoperates_with_kafka_python(payload, level):
    assert kc.gzip_decode(compress(GZIP, payload, level=level)) == payload
    assert decompress(GZIP, kc.gzip_encode(payload, compresslevel=level)) == payload


@payloads
def test_snappy_interoperates_with_kafka_python(payload):
    ours = compress(SNAPPY, payload)
    if payload:  # kafka-python takes a header-only stream for raw snappy
        assert kc.snappy_decode(ours) == payload
    assert decompress(SNAPPY, kc.snappy_encode(payload, xerial_compatible=True)) == payload
    assert decompress(SNAPPY, snappy.compress(payload)) == payload  # raw, as librdkafka


@payloads
@pytest.mark.parametrize("level", [1, 9, 17])
def test_lz4_interoperates_with_kafka_python(payload, level):
    for magic in (1, 2):
        assert kc.lz4_decode(compress(LZ4, payload, level=level, magic=magic)) == payload
    assert decompress(LZ4, kc.lz4_encode(payload, compression_level=level)) == payload


@needs_xxhash
@payloads
@pytest.mark.parametrize("level", [1, 9, 17])
def test_lz4_magic_0_interoperates_with_kafka_python_old_kafka(payload, level):
    assert kc.lz4_decode_old_kafka(compress(LZ4, payload, level=level, magic=0)) == payload
    assert decompress(LZ4, kc.lz4_encode_old_kafka(payload), magic=0) == payload


def zstd_read_all(frames: bytes) -> bytes:
    """Decode with zstandard's stream reader (kafka.codec.zstd_decode's method, no size cap)."""
    with zstandard.ZstdDecompressor().stream_reader(frames, read_across_frames=True) as reader:
        return reader.readall()


@payloads
@pytest.mark.parametrize("level", [-131072, 3, 22])
def test_zstd_interoperates_with_kafka_python_and_zstandard(payload, level):
    ours = compress(ZSTD, payload, level=level)
    assert zstd_read_all(ours) == payload
    assert kc.zstd_decode(ours) == payload
    assert decompress(ZSTD, zstandard.ZstdCompressor(level=level).compress(payload)) == payload
    assert decompress(ZSTD, kc.zstd_encode(payload)) == payload


@pytest.mark.parametrize("codec_id", [GZIP, SNAPPY, LZ4, ZSTD])
def test_default_level_is_used_when_level_is_none(codec_id):
    codec = CODECS[codec_id]
    assert compress(codec_id, MIXED) == compress(codec_id, MIXED, level=codec.default_level)


@pytest.mark.parametrize("codec_id", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_inputs_may_be_bytearray_or_memoryview_over_mmap(codec_id):
    compressed = {
        NONE: MIXED,
        GZIP: kc.gzip_encode(MIXED),
        SNAPPY: kc.snappy_encode(MIXED),
        LZ4: kc.lz4_encode(MIXED),
        ZSTD: kc.zstd_encode(MIXED),
    }[codec_id]
    assert decompress(codec_id, bytearray(compressed)) == MIXED
    with mmap.mmap(-1, len(compressed) + 10) as m:
        m[5 : 5 + len(compressed)] = compressed
        assert decompress(codec_id, memoryview(m)[5 : 5 + len(compressed)]) == MIXED
        source = memoryview(m)[5 : 5 + len(compressed)]
        ours = compress(codec_id, source)
        source.release()
    # mmap.close() (the with block) fails while any view of it is alive: none was kept.
    assert decompress(codec_id, ours) == bytes(compressed)


# --- gzip ----------------------------------------------------------------------------------------


def test_gzip_writes_javas_member_header():
    ours = compress(GZIP, SMALL)
    # GZIPOutputStream: magic, deflate, no flags, MTIME 0, XFL 0, OS 255 (JDK 16+).
    assert ours[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    assert zlib.decompress(ours, wbits=31) == SMALL


def test_gzip_reads_every_member_of_a_multi_member_stream():
    stream = kc.gzip_encode(b"first member|") + kc.gzip_encode(b"") + kc.gzip_encode(MIXED)
    assert decompress(GZIP, stream) == b"first member|" + MIXED


def test_gzip_ignores_trailing_bytes_that_do_not_start_a_member():
    # java.util.zip.GZIPInputStream stops quietly when what follows is no gzip header.
    assert decompress(GZIP, kc.gzip_encode(SMALL) + b"\x00" * 20) == SMALL


def test_gzip_rejects_bad_crc_and_truncation():
    stream = bytearray(kc.gzip_encode(SMALL))
    stream[-8] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="gzip: incorrect data check"):
        decompress(GZIP, stream)
    with pytest.raises(CorruptRecordError, match=r"gzip: stream of .* ends inside member 1"):
        decompress(GZIP, kc.gzip_encode(SMALL)[:-3])
    with pytest.raises(CorruptRecordError, match="gzip: expected magic"):
        decompress(GZIP, b"PK\x03\x04" + bytes(20))


# --- snappy --------------------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_with_32k_blocks():
    ours = compress(SNAPPY, REPETITIVE_1M[:100_000])
    assert ours[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    blocks = [snappy.decompress(block) for block in xerial_blocks(ours)]
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == REPETITIVE_1M[:100_000]
    assert kc.snappy_decode(ours) == REPETITIVE_1M[:100_000]


def test_snappy_empty_input_is_the_header_alone():
    assert compress(SNAPPY, b"") == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    assert decompress(SNAPPY, kc.snappy_encode(b"")) == b""


def test_snappy_ignores_version_fields_and_reads_concatenated_streams():
    stream = kc.snappy_encode(MIXED)
    little_endian = stream[:8] + struct.pack("<ii", 1, 1) + stream[16:]  # as Redpanda once wrote
    assert decompress(SNAPPY, little_endian) == MIXED
    assert decompress(SNAPPY, stream + kc.snappy_encode(SMALL)) == MIXED + SMALL


def test_snappy_rejects_blocks_past_the_end_and_garbage():
    stream = kc.snappy_encode(SMALL)
    with pytest.raises(CorruptRecordError, match=r"snappy: block of .* runs past the end"):
        decompress(SNAPPY, stream[:-1])
    with pytest.raises(CorruptRecordError, match="snappy: "):
        decompress(SNAPPY, stream[:16] + struct.pack(">i", 6) + b"\x05\xff\xff\xff\xff\xff")
    with pytest.raises(CorruptRecordError, match="snappy: "):
        decompress(SNAPPY, b"\xff\xff\xff\xff\xff\xff")


# --- lz4 ------------------------------------------------------------------------------------------


def test_lz4_frame_header_is_kafkas_and_matches_the_lz4_library():
    ours = compress(LZ4, MIXED)
    assert ours[:4] == b"\x04\x22\x4d\x18"
    assert ours[4] == 0x60 and ours[5] == 0x40  # FLG: version 1, independent; BD: 64 KiB
    reference = lz4.frame.compress(
        b"", block_linked=False, store_size=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB
    )
    assert ours[:7] == reference[:7]  # the correct header checksum at magic 1 and 2
    assert ours[-4:] == b"\x00\x00\x00\x00"
    blocks = lz4_blocks(ours)
    assert len(blocks) == -(-len(MIXED) // 65536)


@needs_xxhash
def test_lz4_magic_0_writes_kafkas_broken_header_checksum():
    ours = compress(LZ4, SMALL, magic=0)
    broken = (kc.xxhash.xxh32_intdigest(ours[:6]) >> 8) & 0xFF  # over magic + FLG + BD
    assert ours[6] == broken != compress(LZ4, SMALL, magic=2)[6]
    assert ours[:7] == kc.lz4_encode_old_kafka(SMALL)[:7]


def test_lz4_header_checksum_is_checked_except_at_magic_0():
    frame = bytearray(compress(LZ4, SMALL, magic=2))
    frame[6] ^= 0x5A
    with pytest.raises(CorruptRecordError, match="lz4: header checksum"):
        decompress(LZ4, frame, magic=2)
    with pytest.raises(CorruptRecordError, match="lz4: header checksum"):
        decompress(LZ4, frame, magic=1)
    assert decompress(LZ4, frame, magic=0) == SMALL


@pytest.mark.parametrize(
    ("options", "flg"),
    [
        ({"store_size": True}, 0x68),  # kafka-python
        ({"store_size": False, "block_checksum": True}, 0x70),  # aiokafka
        ({"store_size": False, "content_checksum": True}, 0x64),
        ({"store_size": True, "block_checksum": True, "content_checksum": True}, 0x7C),
    ],
)
def test_lz4_reads_frames_with_sizes_and_checksums(options, flg):
    frame = lz4.frame.compress(MIXED + RANDOM_1M[:70000], block_linked=False, **options)
    assert frame[4] == flg
    assert decompress(LZ4, frame) == MIXED + RANDOM_1M[:70000]


def test_lz4_rejects_dependent_blocks_as_java_does():
    frame = lz4.frame.compress(MIXED, block_linked=True)
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(LZ4, frame)


def test_lz4_stores_incompressible_blocks_raw():
    ours = compress(LZ4, RANDOM_1M[:100_000])
    blocks = lz4_blocks(ours)
    assert blocks == [(True, RANDOM_1M[:65536]), (True, RANDOM_1M[65536:100_000])]


@pytest.mark.parametrize(("level", "mode"), [(9, "default"), (1, "hc"), (12, "hc"), (17, "hc")])
def test_lz4_level_9_uses_the_fast_compressor_and_others_hc(level, mode):
    chunk = REPETITIVE_1M[:65536]
    if mode == "default":
        expected = lz4.block.compress(chunk, mode="default", store_size=False)
    else:
        expected = lz4.block.compress(
            chunk, mode="high_compression", compression=level, store_size=False
        )
    assert lz4_blocks(compress(LZ4, chunk, level=level)) == [(False, expected)]


def test_lz4_rejects_blocks_past_the_end_and_missing_end_marks():
    frame = compress(LZ4, MIXED)
    with pytest.raises(
        CorruptRecordError,
        match=r"lz4: block of \d+ bytes runs past the end of the frame \(at byte 11 of 100\)",
    ):
        decompress(LZ4, frame[:100])
    with pytest.raises(CorruptRecordError, match="without its end mark"):
        decompress(LZ4, frame[:-4])
    assert decompress(LZ4, frame + b"trailing bytes are ignored") == MIXED


def test_xxh32_matches_reference_values():
    assert xxh32(b"") == 0x02CC5D05  # xxHash's published value for the empty input, seed 0
    for size in (0, 1, 5, 100, 1000, 70000):
        # lz4.frame's header checksum covers FLG, BD and the 8-byte content size (when present).
        frame = lz4.frame.compress(bytes(size), store_size=True)
        end = 14 if frame[4] & 0x08 else 6
        assert (xxh32(frame[4:end]) >> 8) & 0xFF == frame[end]
    if kc.xxhash is not None:
        for size in (0, 3, 4, 15, 16, 17, 33, 100):
            data = _rng.randbytes(size)
            for seed in (0, 1, 0xFFFFFFFF):
                assert xxh32(data, seed) == kc.xxhash.xxh32_intdigest(data, seed)


# --- zstd ----------------------------------------------------------------------------------------


def test_zstd_contexts_are_safe_to_use_from_several_threads():
    levels = [1, 3, 7, -5]

    def work(level: int) -> bool:
        for i in range(30):
            data = MIXED[i * 100 : i * 100 + 20000]
            if zstd_read_all(compress(ZSTD, data, level=level)) != data:
                return False
            if decompress(ZSTD, zstandard.ZstdCompressor(level=level).compress(data)) != data:
                return False
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(work, levels))


def test_zstd_writes_frames_without_content_size_as_java_does():
    params = zstandard.get_frame_parameters(compress(ZSTD, MIXED))
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_zstd_reads_frames_without_content_size_and_concatenated_frames():
    unsized = zstandard.ZstdCompressor(write_content_size=False)
    sized = zstandard.ZstdCompressor(level=1, write_checksum=True)
    assert decompress(ZSTD, unsized.compress(REPETITIVE_1M)) == REPETITIVE_1M
    frames = unsized.compress(MIXED) + sized.compress(SMALL) + unsized.compress(b"")
    assert decompress(ZSTD, frames) == MIXED + SMALL


def test_zstd_skips_skippable_frames():
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"skip!"
    assert decompress(ZSTD, skippable + kc.zstd_encode(SMALL) + skippable) == SMALL


def test_zstd_rejects_truncated_frames_and_trailing_garbage():
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(MIXED[:30000])
    for cut in range(0, len(frame)):
        with pytest.raises(CorruptRecordError, match="zstd: "):
            decompress(ZSTD, frame[:cut])
    with pytest.raises(CorruptRecordError, match=r"zstd: magic 0x[0-9a-f]+ at byte"):
        decompress(ZSTD, frame + b"\x00" * 8)


def _full_zstd_walk(frame: bytes, max_size: int):
    """The general path alone: every frame and block header walked, then decoded."""
    view = memoryview(frame)
    return decompress_frames(view, walk_frames(view), max_size)


ONE_BLOCK_WRITERS = {
    "java": lambda d: compress(ZSTD, d),  # no content size, as Kafka's Java client writes
    "java+checksum": lambda d: zstandard.ZstdCompressor(
        write_content_size=False, write_checksum=True
    ).compress(d),
    "kafka-python": kc.zstd_encode,  # a content size: 2 bytes up to 65791, 4 past it
    "sized+checksum": lambda d: zstandard.ZstdCompressor(write_checksum=True).compress(d),
}


@pytest.mark.parametrize("writer", sorted(ONE_BLOCK_WRITERS))
@pytest.mark.parametrize("size", [0, 1, 255, 256, 16_384, 65_791, 65_792, 100_000, 131_072])
def test_zstd_one_block_frames_take_the_short_path(writer, size):
    data = random.Random(size).randbytes(size // 2) + bytes(size - size // 2)
    frame = ONE_BLOCK_WRITERS[writer](data)
    one_block = decompress_one_block(memoryview(frame), DEFAULT_MAX_DECOMPRESSED_SIZE)
    params = zstandard.get_frame_parameters(frame)
    if len(frame) < 10 or (size <= 255 and params.content_size != zstandard.CONTENTSIZE_UNKNOWN):
        assert one_block is None  # an empty frame's 9 bytes or a 1-byte content size: the walk
    else:
        assert one_block == data
    assert decompress(ZSTD, frame) == data


@given(
    data=st.one_of(
        st.binary(max_size=3000),
        st.binary(max_size=64).map(lambda b: b * 2000),
        st.randoms().map(lambda r: r.randbytes(r.choice([70_000, 140_000]))),
    ),
    writer=st.sampled_from(sorted(ONE_BLOCK_WRITERS)),
    flips=FLIPS,
    cut=CUTS,
    max_size=CAPS,
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
def test_zstd_one_block_path_agrees_with_the_full_walk(data, writer, flips, cut, max_size):
    frame = damaged(ONE_BLOCK_WRITERS[writer](data), flips, cut)
    expected = outcome(_full_zstd_walk, frame, max_size)
    got = decompress_one_block(memoryview(frame), max_size)
    if got is not None:
        assert expected == ("ok", got)
    assert outcome(decompress, ZSTD, frame, max_size=max_size) == expected


# --- decompression bombs -------------------------------------------------------------------------

ZEROS_16M = bytes(16 * MIB)
BOMBS = {
    "gzip": (GZIP, lambda: kc.gzip_encode(ZEROS_16M)),
    "snappy-xerial": (SNAPPY, lambda: kc.snappy_encode(ZEROS_16M)),
    "snappy-raw": (SNAPPY, lambda: snappy.compress(ZEROS_16M)),
    "lz4": (LZ4, lambda: lz4.frame.compress(ZEROS_16M, block_linked=False, store_size=False)),
    "lz4-4mib-blocks": (
        LZ4,
        lambda: lz4.frame.compress(
            ZEROS_16M, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB
        ),
    ),
    "zstd-sized": (ZSTD, lambda: zstandard.ZstdCompressor().compress(ZEROS_16M)),
    "zstd-unsized": (
        ZSTD,
        lambda: zstandard.ZstdCompressor(write_content_size=False).compress(ZEROS_16M),
    ),
    "zstd-many-frames": (
        ZSTD,
        lambda: (
            zstandard.ZstdCompressor(write_content_size=False).compress(ZEROS_16M[: MIB // 2]) * 32
        ),
    ),
    "none": (NONE, lambda: ZEROS_16M[: 2 * MIB]),
}


@pytest.mark.parametrize("codec_id, make", BOMBS.values(), ids=BOMBS.keys())
def test_bombs_stop_at_max_size_without_allocating_the_output(codec_id, make):
    bomb = make()
    assert codec_id == NONE or len(bomb) < MIB
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="exceed max_size 1048576"):
            decompress(codec_id, bomb, max_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB + MIB


@pytest.mark.parametrize("codec_id", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_max_size_allows_exactly_max_size(codec_id):
    encoded = {
        NONE: MIXED,
        GZIP: kc.gzip_encode(MIXED),
        SNAPPY: kc.snappy_encode(MIXED),
        LZ4: kc.lz4_encode(MIXED),
        ZSTD: zstandard.ZstdCompressor(write_content_size=False).compress(MIXED),
    }[codec_id]
    assert decompress(codec_id, encoded, max_size=len(MIXED)) == MIXED
    with pytest.raises(CorruptRecordError, match="exceed max_size"):
        decompress(codec_id, encoded, max_size=len(MIXED) - 1)


# --- small inputs claiming more than they hold -------------------------------------------------

# A zstd compressed block of 8 raw literals and one sequence (offset 8, match 16): 24 bytes out,
# while the block header alone allows up to 128 KiB.
ZSTD_SEQUENCE_BLOCK = bytes.fromhex("4061626364656667680100430a17")


def zstd_sequence_frame(blocks: int, content_size: int | None = None) -> bytes:
    if content_size is None:  # 2 MiB window, no content size
        frame = bytearray(struct.pack("<I", 0xFD2FB528) + b"\x00\x58")
    else:  # single segment, 4-byte content size
        frame = bytearray(struct.pack("<IBI", 0xFD2FB528, 0xA0, content_size))
    for i in range(blocks):
        header = (1 if i == blocks - 1 else 0) | 2 << 1 | len(ZSTD_SEQUENCE_BLOCK) << 3
        frame += header.to_bytes(3, "little") + ZSTD_SEQUENCE_BLOCK
    return bytes(frame)


def peak_of(func) -> int:
    func()  # warm up codec contexts
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_zstd_sequence_frames_decode_and_allocate_what_they_produce():
    assert zstd_read_all(zstd_sequence_frame(3)) == b"abcdefgh" * 9
    frame = zstd_sequence_frame(2000)  # 34 KB whose blocks allow 250 MiB
    assert decompress(ZSTD, frame) == b"abcdefgh" * 6000
    peak = peak_of(lambda: decompress(ZSTD, frame))
    assert peak < 512 * 1024, peak
    peak = peak_of(lambda: decompress(ZSTD, frame, max_size=MIB))
    assert peak < 512 * 1024, peak


@pytest.mark.parametrize(
    "frame, message",
    [
        # 5 blocks may hold 640 KiB but hold 120 bytes: found by decoding, not by allocating.
        (zstd_sequence_frame(5, 5 * 128 * 1024), r"zstd: .*\(frame at byte 0 of 94\)"),
        (zstd_sequence_frame(300, 30 * MIB), r"zstd: .*\(frame at byte 0 of 5109\)"),
        (
            zstd_sequence_frame(5, 5 * 128 * 1024 + 1),
            "declares 655361 bytes of content, but its blocks hold at most 655360",
        ),
        # An RLE block past the 128 KiB block maximum, and past a 1 KiB window (libzstd agrees).
        (
            struct.pack("<I", 0xFD2FB528)
            + b"\x00\x58"
            + (1 | 1 << 1 | 131073 << 3).to_bytes(3, "little")
            + b"x",
            "block of 131073 bytes at byte 6 exceeds the frame's 131072-byte block maximum",
        ),
        (
            struct.pack("<I", 0xFD2FB528)
            + b"\x00\x00"
            + (1 | 1 << 1 | 1025 << 3).to_bytes(3, "little")
            + b"x",
            "block of 1025 bytes at byte 6 exceeds the frame's 1024-byte block maximum",
        ),
    ],
    ids=[
        "content size 640 KiB",
        "content size 30 MiB",
        "content size past the bound",
        "RLE past 128 KiB",
        "RLE past the window",
    ],
)
def test_zstd_frames_claiming_more_than_their_blocks_hold_are_corrupt(frame, message):
    def decode():
        with pytest.raises(CorruptRecordError, match=message):
            decompress(ZSTD, frame)

    assert peak_of(decode) < 512 * 1024
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(frame, max_output_size=8 * MIB)


@pytest.mark.parametrize("size", [300_000, MIB, 5 * MIB])
@pytest.mark.parametrize("sized", [False, True], ids=["unsized", "sized"])
def test_zstd_highly_compressible_frames_earn_a_one_shot_buffer(size, sized):
    # Far more than 64:1, so the block headers do not justify the buffer: the frame is streamed
    # until it has proven an eighth of it, then decoded in one shot.
    data = (REPETITIVE_1M * 5)[:size]
    frame = zstandard.ZstdCompressor(write_content_size=sized).compress(data)
    assert len(frame) * 64 < size
    assert decompress(ZSTD, frame) == data
    assert decompress(ZSTD, frame, max_size=size) == data
    with pytest.raises(CorruptRecordError, match="exceed max_size"):
        decompress(ZSTD, frame, max_size=size - 1)
    assert peak_of(lambda: decompress(ZSTD, frame)) < size + 256 * 1024


def test_snappy_block_declaring_more_than_it_can_expand_to_is_corrupt():
    block = b"\x80\x80\x80\x64" + bytes(40)  # declares 200 MiB
    for data in (block, compress(SNAPPY, b"")[:16] + struct.pack(">i", len(block)) + block):
        with pytest.raises(
            CorruptRecordError,
            match="block of 44 bytes declares 209715200 uncompressed bytes, but can expand to "
            "at most 1032",
        ):
            decompress(SNAPPY, data)
    # The densest real blocks (zeros) stay within the bound.
    assert decompress(SNAPPY, snappy.compress(ZEROS_16M)) == ZEROS_16M


def test_lz4_small_blocks_in_frames_declaring_4_mib_blocks_allocate_little():
    # lz4.frame shrinks the block size of small inputs, so the header (BD 0x70) is written here.
    header = struct.pack("<IBB", 0x184D2204, 0x60, 0x70)
    header += bytes(((xxh32(header[4:]) >> 8) & 0xFF,))
    data = SMALL * 3
    block = lz4.block.compress(data, store_size=False)
    frame = header + struct.pack("<I", len(block)) + block + b"\x00" * 4
    assert len(frame) < 200
    assert decompress(LZ4, frame) == data == lz4.frame.decompress(frame)
    assert peak_of(lambda: decompress(LZ4, frame)) < 64 * 1024
    # A block that would decode past 255 times its size is corrupt, and found so cheaply.
    cut = lz4.block.compress(bytes(4 * MIB), store_size=False)[:300]
    frame = header + struct.pack("<I", len(cut)) + cut + b"\x00" * 4

    def decode():
        with pytest.raises(
            CorruptRecordError, match="does not decompress into at most 76564 bytes"
        ):
            decompress(LZ4, frame)

    assert peak_of(decode) < 256 * 1024


# --- properties ----------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def codec_levels(draw):
    codec_id = draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
    codec = CODECS[codec_id]
    level = None
    if codec.min_level is not None:
        level = draw(st.none() | st.integers(codec.min_level, codec.max_level))
    magic = 2 if codec_id == ZSTD else draw(st.sampled_from([0, 1, 2]))
    return codec_id, level, magic


@FUZZ
@given(
    data=st.binary(max_size=3000) | st.binary(max_size=50).map(lambda b: b * 400),
    choice=codec_levels(),
)
def test_round_trip_through_every_codec_and_level(data, choice):
    codec_id, level, magic = choice
    encoded = compress(codec_id, data, level=level, magic=magic)
    assert decompress(codec_id, encoded, magic=magic) == data
    reference = {
        NONE: lambda e: e,
        GZIP: kc.gzip_decode,
        SNAPPY: kc.snappy_decode,
        LZ4: kc.lz4_decode,
        ZSTD: zstd_read_all,
    }[codec_id]
    if not (codec_id == SNAPPY and not data) and not (codec_id == LZ4 and magic == 0):
        assert reference(encoded) == data


def _samples() -> dict[str, tuple[int, int, bytes]]:
    """Small valid inputs with several blocks or members: (codec id, magic, bytes)."""
    text = MIXED[:5000]
    return {
        "gzip": (GZIP, 2, kc.gzip_encode(text[:2000]) + kc.gzip_encode(text[2000:])),
        "snappy-xerial": (SNAPPY, 2, kc.snappy_encode(text, xerial_blocksize=1024)),
        "snappy-raw": (SNAPPY, 2, snappy.compress(text)),
        "lz4-kafka": (LZ4, 2, compress(LZ4, text)),
        "lz4-magic0": (LZ4, 0, compress(LZ4, text, magic=0)),
        "lz4-checksums": (
            LZ4,
            2,
            lz4.frame.compress(
                text, block_linked=False, block_checksum=True, content_checksum=True
            ),
        ),
        "zstd": (ZSTD, 2, kc.zstd_encode(text) + compress(ZSTD, text[:100])),
    }


SAMPLES = _samples()


@pytest.mark.parametrize("codec_id, magic, sample", SAMPLES.values(), ids=SAMPLES.keys())
def test_truncation_at_every_length_gives_bytes_or_corrupt_record_error(codec_id, magic, sample):
    for cut in range(len(sample)):
        decode_or_corrupt(codec_id, sample[:cut], magic=magic, max_size=MIB)


@FUZZ
@given(
    sample=st.sampled_from(list(SAMPLES.values())),
    flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 7)), min_size=1, max_size=4),
)
def test_bit_flips_give_bytes_or_corrupt_record_error(sample, flips):
    codec_id, magic, data = sample
    data = bytearray(data)
    for index, bit in flips:
        data[index % len(data)] ^= 1 << bit
    decode_or_corrupt(codec_id, data, magic=magic, max_size=MIB)


@FUZZ
@given(
    sample=st.sampled_from(list(SAMPLES.values())),
    start=st.integers(0, 1 << 16),
    length=st.integers(1, 64),
    fill=st.sampled_from([0x00, 0xFF]),
)
def test_overwritten_ranges_give_bytes_or_corrupt_record_error(sample, start, length, fill):
    codec_id, magic, data = sample
    data = bytearray(data)
    start %= len(data)
    data[start : start + length] = bytes([fill]) * len(data[start : start + length])
    decode_or_corrupt(codec_id, data, magic=magic, max_size=MIB)


@FUZZ
@given(
    codec_id=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]),
    prefix=st.sampled_from(
        [
            b"",
            b"\x1f\x8b\x08",
            b"\x82SNAPPY\x00",
            b"\x04\x22\x4d\x18\x60\x40\x82",
            b"\x28\xb5\x2f\xfd",
        ]
    ),
    data=st.binary(max_size=200),
    magic=st.sampled_from([0, 2]),
)
def test_arbitrary_bytes_give_bytes_or_corrupt_record_error(codec_id, prefix, data, magic):
    if codec_id == ZSTD:
        magic = 2
    decode_or_corrupt(codec_id, prefix + data, magic=magic, max_size=MIB)
