"""``kafkalog dump`` on batches whose attributes were rewritten with a valid CRC: codec ids no
Kafka version defines (5-7 in magic 2, 4-7 in magic 1; Kafka's CompressionType.forId throws
"Unknown compression type id"), flags flipped. Every such batch is reported as damage (exit 1,
``Error in FILE at position P``) and never ends the command in a traceback.

The segments are written by ``kafkalog produce`` (magic 2) or kafka-python (magic 1); the CRCs
are recomputed here: CRC-32C over bytes [21, end) of a v2 batch, CRC-32 over magic..end of a
legacy message.
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from .dump_testing import run_dump

SEGMENT = "00000000000000000000.log"


def v2_batch_starts(data: bytes) -> list[tuple[int, int]]:
    """(position, end) of each entry, from the length fields."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, end))
        pos = end
    return out


def with_v2_attributes(data: bytes, which: int, attributes: int) -> bytes:
    buf = bytearray(data)
    pos, end = v2_batch_starts(data)[which]
    struct.pack_into(">h", buf, pos + 21, attributes)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
    return bytes(buf)


def with_legacy_attributes(data: bytes, which: int, attributes: int) -> bytes:
    buf = bytearray(data)
    pos, end = v2_batch_starts(data)[which]
    buf[pos + 17] = attributes & 0xFF
    struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
    return bytes(buf)


@pytest.fixture(scope="module")
def v2_segment(tmp_path_factory) -> bytes:
    """Four batches of five records, written by ``kafkalog produce``."""
    root = tmp_path_factory.mktemp("produced")
    src = root / "in.txt"
    src.write_text("".join(f"value-{i}\n" for i in range(20)))
    from kafkalog.cli.main import main

    status = main(["produce", str(root / "data"), "-t", "t", "-p", "0", "--format", "text",
                   "--batch-size", "120", "--file", str(src), "--quiet"])  # fmt: skip
    assert status == 0
    data = (root / "data" / "t-0" / SEGMENT).read_bytes()
    assert len(v2_batch_starts(data)) >= 3
    return data


def legacy_segment() -> bytes:
    """Three magic 1 messages (kafka-python), one per entry."""
    out = b""
    for offset in range(3):
        builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
        builder.append(0, timestamp=1_700_000_000_000 + offset, key=None, value=b"v%d" % offset)
        entry = bytearray(builder.build())
        struct.pack_into(">q", entry, 0, offset)
        out += bytes(entry)
    return out


def dump_status(path: Path, *flags: str) -> tuple[int, str, str]:
    status, out, err = run_dump(*flags, str(path))
    assert status in (0, 1), (status, out, err)
    assert str(path) in out  # "Dumping FILE"
    if status == 1:
        assert f"Error in {path}" in err, err
    return status, out, err


@pytest.mark.parametrize("codec", [5, 6, 7])
@pytest.mark.parametrize("deep", [False, True])
def test_unknown_v2_codec_is_reported_as_damage(tmp_path, v2_segment, codec, deep):
    pos, _ = v2_batch_starts(v2_segment)[1]
    attributes = struct.unpack_from(">h", v2_segment, pos + 21)[0]
    path = tmp_path / SEGMENT
    path.write_bytes(with_v2_attributes(v2_segment, 1, (attributes & ~7) | codec))
    flags = ("--deep-iteration",) if deep else ()
    status, out, err = dump_status(path, *flags)
    assert status == 1
    assert f"Error in {path} at position {pos}" in err
    assert f"Unknown compression type id {codec}" in err
    # the batches after the damaged one are still dumped
    assert out.count("baseOffset:") == len(v2_batch_starts(v2_segment)) - 1

    status, out, _ = run_dump("--json", *flags, str(path))
    assert status == 1
    assert f'"type":"error","position":{pos}' in out


@pytest.mark.parametrize("codec", [4, 5, 6, 7])
@pytest.mark.parametrize("deep", [False, True])
def test_unknown_legacy_codec_is_reported_as_damage(tmp_path, codec, deep):
    data = legacy_segment()
    pos, _ = v2_batch_starts(data)[1]
    path = tmp_path / SEGMENT
    path.write_bytes(with_legacy_attributes(data, 1, codec))
    flags = ("--deep-iteration",) if deep else ()
    status, out, err = dump_status(path, *flags)
    assert status == 1
    assert f"Error in {path} at position {pos}" in err
    assert out.count("offset:") >= 2  # the other two messages


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    which=st.integers(0, 3),
    attributes=st.integers(-(1 << 15), (1 << 15) - 1),
    deep=st.booleans(),
    as_json=st.booleans(),
)
def test_any_v2_attributes_never_end_in_a_traceback(v2_segment, which, attributes, deep, as_json):
    which %= len(v2_batch_starts(v2_segment))
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / SEGMENT
        path.write_bytes(with_v2_attributes(v2_segment, which, attributes))
        flags = (("--deep-iteration",) if deep else ()) + (("--json",) if as_json else ())
        status, out, err = run_dump(*flags, str(path))
        assert status in (0, 1), (status, out, err)
        assert "Traceback" not in err
        if as_json:
            assert f'"path":"{path}"' in out
        else:
            assert f"Dumping {path}" in out
            if status == 1:
                assert f"Error in {path}" in err, err


@settings(max_examples=40, deadline=None)
@given(which=st.integers(0, 2), attributes=st.integers(0, 255), deep=st.booleans())
def test_any_legacy_attributes_never_end_in_a_traceback(which, attributes, deep):
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / SEGMENT
        path.write_bytes(with_legacy_attributes(legacy_segment(), which, attributes))
        status, out, err = run_dump(*(("--deep-iteration",) if deep else ()), str(path))
        assert status in (0, 1), (status, out, err)
        assert f"Dumping {path}" in out
        if status == 1:
            assert f"Error in {path}" in err, err


def test_unexpected_typed_error_is_reported_not_raised(tmp_path, v2_segment, monkeypatch):
    """Whatever typed error a dumper lets escape is reported with the file (exit 1)."""
    from kafkalog.cli.dump.segments import LogDump
    from kafkalog.errors import KafkalogError

    def broken(self, progress):
        raise KafkalogError("something unforeseen", position=7)

    monkeypatch.setattr(LogDump, "dump", broken)
    path = tmp_path / SEGMENT
    path.write_bytes(v2_segment)
    status, _, err = run_dump(str(path))
    assert status == 1
    assert f"Error in {path} at position 7: something unforeseen" in err
