"""The columnar decoder's decompression fast lane (lz4, snappy and large zstd frames into one
reused buffer, with a short path for the one-block frames clients write per batch) gives the
codec module's bytes, or the codec module's exception, for every framing clients write and for
damaged input, with either kernel twin walking lz4 frames' blocks."""

from __future__ import annotations

import aiokafka.codec
import cramjam
import kafka.codec
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec_damage import CAPS, CUTS, FLIPS, damaged, outcome
from kafkalog.format.codecs import compress, decompress, libzstd
from kafkalog.format.codecs.snappy import XERIAL_HEADER
from kafkalog.format.columnar.inflate import Inflater

from .fastcheck import TWINS, twin

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.data_too_large]
)
SNAPPY, LZ4, ZSTD = 2, 3, 4
# How a zstd frame past one block is decoded: in one shot by the system's libzstd, or streamed
# by zstandard (where there is no system libzstd, or it is turned off).
ZSTD_LANES = ("one-shot", "stream")


def make_inflater(kernels: str, lane: str = "one-shot") -> Inflater:
    if lane == "one-shot" and not libzstd.available():
        pytest.skip("no system libzstd (libzstd.so.1) on this machine: nothing to compare")
    inflater = Inflater(twin(kernels))
    if lane == "stream":
        inflater._one_shot = False
    return inflater


def payloads():
    """Compressible and incompressible bytes, from empty to several lz4, snappy and zstd blocks."""
    text = st.binary(max_size=64).map(lambda b: b * 2000)
    large = st.tuples(st.binary(min_size=1, max_size=64), st.integers(2100, 6000))
    return st.one_of(
        st.binary(max_size=3000),
        text,
        large.map(lambda t: t[0] * t[1]),
        st.randoms().map(lambda r: r.randbytes(90_000)),
        st.randoms().map(lambda r: r.randbytes(300_000)),
    )


def frames(data: bytes) -> list[tuple[int, int, bytes]]:
    """(codec, magic, compressed) as kafkalog, Java, kafka-python, aiokafka and librdkafka
    write them."""
    out = [
        (codec, magic, compress(codec, data, magic=magic))
        for codec in (LZ4, SNAPPY)
        for magic in (0, 1, 2)
    ]
    out.append((LZ4, 2, kafka.codec.lz4_encode(data)))  # content size in the header
    out.append((LZ4, 2, aiokafka.codec.lz4_encode(data)))  # block checksums
    out.append((SNAPPY, 2, kafka.codec.snappy_encode(data, xerial_compatible=False)))  # raw
    out.append(
        (SNAPPY, 2, XERIAL_HEADER + kafka.codec.snappy_encode(data, xerial_compatible=True)[16:])
    )
    out.append((ZSTD, 2, compress(ZSTD, data)))  # no content size, as Java writes
    sized = zstandard.ZstdCompressor(write_content_size=True, write_checksum=True).compress(data)
    out.append((ZSTD, 2, sized))
    out.append((ZSTD, 2, b"\x50\x2a\x4d\x18\x02\x00\x00\x00ab" + sized))  # skippable first
    half = len(data) // 2
    out.append((ZSTD, 2, compress(ZSTD, data[:half]) + compress(ZSTD, data[half:])))  # two frames
    return out


@pytest.mark.parametrize("lane", ZSTD_LANES)
@pytest.mark.parametrize("kernels", TWINS)
@given(data=payloads())
@SETTINGS
def test_every_framing_inflates_to_the_codec_modules_bytes(kernels, lane, data):
    inflater = make_inflater(kernels, lane)
    for codec, magic, frame in frames(data):
        got = inflater.inflate(codec, memoryview(frame), magic, 1 << 30)
        assert bytes(got) == data == decompress(codec, frame, magic=magic)


@given(
    data=payloads(),
    flips=FLIPS,
    cut=CUTS,
    max_size=CAPS,
)
@pytest.mark.parametrize("lane", ZSTD_LANES)
@pytest.mark.parametrize("kernels", TWINS)
@SETTINGS
def test_damaged_or_oversized_input_gives_the_codec_modules_result(
    kernels, lane, data, flips, cut, max_size
):
    inflater = make_inflater(kernels, lane)
    for codec, magic, frame in frames(data):
        # The undamaged frame first: the inflater learns its header, so that the damaged one
        # meets the short path for frames of a known kind too.
        assert bytes(inflater.inflate(codec, memoryview(frame), magic, 1 << 30)) == data
        bad = damaged(frame, flips, cut)
        expected = outcome(decompress, codec, bad, magic=magic, max_size=max_size)
        assert outcome(inflater.inflate, codec, memoryview(bad), magic, max_size) == expected


@pytest.mark.parametrize("lane", ZSTD_LANES)
@pytest.mark.parametrize("descriptor", [0x88, 0x89, 0xF8])
def test_zstd_windows_past_the_streaming_limit_fail_as_the_codec_module_does(lane, descriptor):
    """libzstd streams frames of windows up to 128 MiB (its default limit, zstandard's and Java's
    zstd-jni's); one-shot decoding has no limit, so the one-shot lane leaves larger windows to
    zstandard, which refuses them."""
    data = b"".join(b"%08d," % (i * 7919 % 100_003) for i in range(60_000))  # 4 blocks
    frame = bytearray(compress(ZSTD, data))
    assert frame[4] & 0x20 == 0  # a window descriptor, no single segment
    frame[5] = descriptor  # 128 MiB, 144 MiB, 3.75 TiB
    expected = outcome(decompress, ZSTD, bytes(frame), magic=2, max_size=1 << 30)
    assert (expected[0] == "ok") == (descriptor == 0x88)
    got = outcome(make_inflater("compiled", lane).inflate, ZSTD, memoryview(frame), 2, 1 << 30)
    assert got == expected


def test_a_zstd_frame_past_one_block_takes_the_one_shot_lane_where_there_is_libzstd():
    inflater = make_inflater("compiled")
    data = b"".join(b"%08d," % (i * 7919 % 100_003) for i in range(60_000))  # 4 blocks
    assert bytes(inflater.inflate(ZSTD, memoryview(compress(ZSTD, data)), 2, 1 << 30)) == data
    assert isinstance(inflater._one_shot, libzstd.OneShot)


def test_views_handed_out_stay_valid_while_the_buffer_grows():
    inflater = Inflater()
    small = compress(LZ4, b"a" * 100)
    first = inflater.inflate(LZ4, memoryview(small), 2, 1 << 30)
    big = compress(LZ4, bytes(range(256)) * 2000)
    assert bytes(inflater.inflate(LZ4, memoryview(big), 2, 1 << 30)) == bytes(range(256)) * 2000
    assert bytes(first) == b"a" * 100


@pytest.mark.parametrize("kernels", TWINS)
@pytest.mark.parametrize("max_size", [-1, 0, 1000, (1 << 63) - 1, 1 << 63, 1 << 70])
def test_any_cap_gives_the_codec_modules_result(kernels, max_size):
    data = bytes(range(256)) * 1000
    inflater = Inflater(twin(kernels))
    for codec, magic, frame in frames(data):
        expected = outcome(decompress, codec, frame, magic=magic, max_size=max_size)
        assert outcome(inflater.inflate, codec, memoryview(frame), magic, max_size) == expected


def lz4_frame_blocks(data: bytes) -> tuple[bytes, int]:
    """kafkalog's lz4 frame of ``data`` and where its blocks start (after the 7-byte header)."""
    return compress(LZ4, data, magic=2), 7


@pytest.mark.parametrize("kernels", TWINS)
def test_lz4_blocks_asks_for_room_then_fills_it(kernels):
    lz4_blocks = twin(kernels).lz4_blocks
    data = bytes(range(256)) * 1000  # four 64 KiB blocks
    frame, pos = lz4_frame_blocks(data)
    args = (memoryview(frame), pos, 0, 0, 65536, 1 << 30, 255, 64)
    need = -lz4_blocks(*args, bytearray(10), cramjam.lz4.decompress_block_into)
    assert need == 4 * 65536  # each block's room: the block size
    out = bytearray(need)
    assert lz4_blocks(*args, out, cramjam.lz4.decompress_block_into) == len(data)
    assert out[: len(data)] == data
    capped = (memoryview(frame), pos, 0, 0, 65536, 1000, 255, 64)  # max_size caps the room
    assert lz4_blocks(*capped, bytearray(10), cramjam.lz4.decompress_block_into) == -1000
    unbounded = (memoryview(frame), pos, 0, 0, 65536, (1 << 63) - 1, 255, 64)  # no overflow
    assert lz4_blocks(*unbounded, bytearray(10), cramjam.lz4.decompress_block_into) == -need


@pytest.mark.parametrize("kernels", TWINS)
def test_lz4_blocks_leaves_what_it_cannot_trust_to_the_codec_module(kernels):
    lz4_blocks = twin(kernels).lz4_blocks
    frame, pos = lz4_frame_blocks(b"kafka" * 3000)
    view, out = memoryview(frame), bytearray(1 << 17)

    def run(view=view, checksum=0, trailer=0, max_block=65536, into=None):
        into = into or cramjam.lz4.decompress_block_into
        return lz4_blocks(view, pos, checksum, trailer, max_block, 1 << 30, 255, 64, out, into)

    assert run() == 15000
    assert run(view=view[:-1]) is None  # the end mark cut
    assert run(trailer=4) is None  # a content checksum missing
    assert run(checksum=4) is None  # block checksums that are not there
    assert run(max_block=16) is None  # a block longer than the frame allows
    assert run(into=lambda src, dst: len(dst) + 1) is None  # more than the room: not trusted
    assert run(into=lambda src, dst: -1) is None

    def interrupted(src, dst):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(into=interrupted)
