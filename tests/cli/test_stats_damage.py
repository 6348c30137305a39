"""``kafkalog stats`` on damaged data: a CRC mismatch or an unframeable length field is an error
naming the file and position (exit 1), counted up to it; a torn end of the active segment is a
warning; a bad ``--plot`` file fails before anything is read. Positions come from the bytes,
counts from kafka-python."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from .operate_support import batch_positions, build, copy, json_lines, kp_records, run_main


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("stats-damage") / "data", {"t": (1, {})})


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def partition(out: str) -> dict:
    (found,) = [o for o in json_lines(out) if o["type"] == "partition"]
    return found


def records_before(part: Path, log: Path, position: int) -> int:
    """Records of the segments before ``log`` and of ``log``'s batches before ``position``."""
    earlier = sum(len(kp_records(p)) for p in sorted(part.glob("*.log")) if p.name < log.name)
    return earlier + len(kp_records_of(log.read_bytes()[:position]))


def kp_records_of(data: bytes) -> list:
    from kafka.record import MemoryRecords

    records, found = MemoryRecords(data), []
    while records.has_next():
        found.extend(records.next_batch())
    return found


def test_a_crc_mismatch_in_a_rolled_segment_is_an_error(data_dir: Path) -> None:
    part = data_dir / "t-0"
    log = sorted(part.glob("*.log"))[1]
    position, base, _ = batch_positions(log)[1]
    data = bytearray(log.read_bytes())
    data[position + 70] ^= 0x10  # inside the records: only the CRC tells
    log.write_bytes(data)
    out, err = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {position}, offset {base}" in found["error"]
    assert "corrupt" in found["error"] and str(log) in err
    assert found["records"] == records_before(part, log, position)


def test_a_damaged_length_field_in_a_rolled_segment_is_an_error(data_dir: Path) -> None:
    part = data_dir / "t-0"
    log = sorted(part.glob("*.log"))[0]
    position, _base, _ = batch_positions(log)[1]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + 8, 0x7FFFFF00)
    log.write_bytes(data)
    out, _ = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {position}" in found["error"]
    assert found["records"] == records_before(part, log, position)


def test_a_torn_end_of_the_active_segment_is_a_warning(data_dir: Path) -> None:
    part = data_dir / "t-0"
    log = sorted(part.glob("*.log"))[-1]
    position, _base, size = batch_positions(log)[-1]
    with open(log, "r+b") as f:
        f.truncate(position + size - 5)  # the last append, torn
    out, err = run_main("stats", "--json", data_dir, status=0)
    found = partition(out)
    assert found["error"] is None and len(found["warnings"]) == 1
    assert f"{log}: position {position}: an incomplete last batch" in found["warnings"][0]
    assert found["records"] == records_before(part, log, position) and "warning" in err


def test_plot_file_checked_before_reading(data_dir: Path, tmp_path: Path) -> None:
    _, err = run_main("stats", "--plot", tmp_path / "x.txt", tmp_path / "no-such-dir", status=2)
    assert ".png" in err and "Traceback" not in err
    run_main("stats", "--plot", tmp_path / "x", data_dir, status=2)  # no extension
    run_main("stats", "--plot", tmp_path / "nowhere" / "x.png", data_dir, status=3)
    run_main("stats", "--plot", tmp_path / "x.svg", data_dir, status=0)
    assert (tmp_path / "x.svg").read_bytes().lstrip().startswith(b"<?xml")


def test_a_long_zero_filled_end_of_the_active_segment_is_a_warning(tmp_path: Path) -> None:
    # A preallocated segment (preallocate=true) left by an unclean shutdown: more zeros than any
    # batch could be long, which is still not damage to the records before them.
    root = build(tmp_path / "data", {"t": (1, {"max.message.bytes": "1000"})}, batches=6)
    log = sorted((root / "t-0").glob("*.log"))[-1]
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(bytes(5000))
    out, _ = run_main("stats", "--json", root, status=0)
    found = partition(out)
    assert found["error"] is None
    assert found["warnings"] == [
        f"{log}: position {size}: 5000 zero bytes at the end (preallocated space left by an "
        f"unclean shutdown; recovery trims them)"
    ]
    first = sorted((root / "t-0").glob("*.log"))[0]
    if first != log:  # the same zeros inside a rolled segment are damage
        with open(first, "ab") as f:
            f.write(bytes(5000))
        out, _ = run_main("stats", "--json", root, status=1)
        assert f"{first}, position" in partition(out)["error"]
