"""The columnar decoder's decompression fast lane (lz4, snappy and large zstd frames into one
reused buffer, with a short path for the one-block frames clients write per batch) gives the
codec module's bytes, or the codec module's exception, for every framing clients write and for
damaged input."""

from __future__ import annotations

import aiokafka.codec
import kafka.codec
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codec_damage import CAPS, CUTS, FLIPS, damaged, outcome
from kafkalog.format._columnar_inflate import Inflater
from kafkalog.format.codecs import compress, decompress
from kafkalog.format.codecs.snappy import XERIAL_HEADER

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.data_too_large]
)
SNAPPY, LZ4, ZSTD = 2, 3, 4


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


@given(data=payloads())
@SETTINGS
def test_every_framing_inflates_to_the_codec_modules_bytes(data):
    inflater = Inflater()
    for codec, magic, frame in frames(data):
        got = inflater.inflate(codec, memoryview(frame), magic, 1 << 30)
        assert bytes(got) == data == decompress(codec, frame, magic=magic)


@given(
    data=payloads(),
    flips=FLIPS,
    cut=CUTS,
    max_size=CAPS,
)
@SETTINGS
def test_damaged_or_oversized_input_gives_the_codec_modules_result(data, flips, cut, max_size):
    inflater = Inflater()
    for codec, magic, frame in frames(data):
        # The undamaged frame first: the inflater learns its header, so that the damaged one
        # meets the short path for frames of a known kind too.
        assert bytes(inflater.inflate(codec, memoryview(frame), magic, 1 << 30)) == data
        bad = damaged(frame, flips, cut)
        expected = outcome(decompress, codec, bad, magic=magic, max_size=max_size)
        assert outcome(inflater.inflate, codec, memoryview(bad), magic, max_size) == expected


def test_views_handed_out_stay_valid_while_the_buffer_grows():
    inflater = Inflater()
    small = compress(LZ4, b"a" * 100)
    first = inflater.inflate(LZ4, memoryview(small), 2, 1 << 30)
    big = compress(LZ4, bytes(range(256)) * 2000)
    assert bytes(inflater.inflate(LZ4, memoryview(big), 2, 1 << 30)) == bytes(range(256)) * 2000
    assert bytes(first) == b"a" * 100
