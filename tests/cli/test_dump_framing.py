"""``kafkalog dump`` where a segment's framing ends: torn appends, damaged size fields, where
``--max-bytes`` cuts, and what is not a file to dump. Batches are built by kafka-python and
positions read with struct, never from kafkalog's own output."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from .console import run_console
from .dump_testing import json_lines, kp_v2_batch, run_dump

T0 = 1_700_000_000_000


def kp_batch(base_offset: int, n: int, *, key: bytes | None = b"k") -> bytes:
    return kp_v2_batch(base_offset, [(T0 + i, key, b"v" * 40) for i in range(n)])


def positions(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return out


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(kp_batch(0, 3) + kp_batch(3, 4) + kp_batch(7, 2) + kp_batch(9, 5))
    return path


def test_a_size_beyond_any_batch_is_an_error_not_a_torn_tail(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    second = positions(bytes(data))[1]
    struct.pack_into(">i", data, second + 8, 0x7FFFFF00)  # the review's c6 damage
    segment.write_bytes(bytes(data))
    status, out, err = run_dump("--json", str(segment))
    assert status == 1
    objs = json_lines(out)
    errors = [o for o in objs if o["type"] == "error"]
    assert [(e["position"], e["offset"]) for e in errors] == [(second, 3)]
    assert "--max-message-size" in errors[0]["message"]
    assert objs[-1]["error"] == errors[0]["message"]
    status, out, err = run_dump(str(segment))
    assert status == 1
    assert f"Found {len(data) - second} invalid bytes at the end of {segment.name}" in out
    assert f"Error in {segment} at position {second} (offset 3):" in err


def test_a_size_overlapping_a_whole_batch_is_an_error(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    found = positions(bytes(data))
    struct.pack_into(">i", data, found[2] + 8, len(data) - found[2])  # 12 bytes too many
    segment.write_bytes(bytes(data))
    status, out, _ = run_dump("--json", str(segment))
    assert status == 1
    error = next(o for o in json_lines(out) if o["type"] == "error")
    assert error["position"] == found[2] and f"position {found[3]}" in error["message"]


def test_a_torn_append_stays_a_partial_tail(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data + kp_batch(14, 3)[:50])
    status, out, _ = run_dump("--json", str(segment))
    assert status == 0
    assert json_lines(out)[-1]["tail"] == "partial" and json_lines(out)[-1]["error"] is None


@pytest.mark.parametrize("cut", [4, 8, 11, 12, 17, 30])
def test_max_bytes_inside_a_whole_batch_is_not_a_problem(tmp_path: Path, cut: int) -> None:
    # The next batch's base offset starts with zero bytes: cut there, they look like a zero tail.
    path = tmp_path / "00000000000000000000.log"
    data = kp_batch(0, 3) + kp_batch(3, 4)
    path.write_bytes(data)
    first = positions(data)[1]
    status, out, err = run_dump("--json", "--max-bytes", str(first + cut), str(path))
    assert (status, err) == (0, "")
    summary = json_lines(out)[-1]
    assert summary["error"] is None and summary["tail"] == "partial"
    assert summary["validBytes"] == first and summary["invalidBytes"] == cut


def test_max_bytes_still_reports_a_real_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = kp_batch(0, 3)
    path.write_bytes(data + bytes(4096))
    status, out, _ = run_dump("--json", "--max-bytes", str(len(data) + 100), str(path))
    assert status == 1
    assert json_lines(out)[-1]["tail"] == "zeros"


def test_a_directory_is_a_usage_error(segment: Path) -> None:
    proc = run_console("dump", segment.parent, status=2)
    assert proc.stdout == ""
    assert str(segment.parent) in proc.stderr and "kafkalog verify" in proc.stderr


def test_an_unknown_option_prints_the_commands_usage(segment: Path) -> None:
    proc = run_console("dump", "--bogus", "x", segment, status=2)
    assert proc.stderr.startswith("usage: kafkalog dump ")
    assert "unrecognized arguments: --bogus" in proc.stderr
