"""``kafkalog stats`` tells what the other readers tell (docs/reading.md): offsets that go back,
overflow or are negative, and a v2 header that disagrees with itself are damage (an error naming
file, position and offset, exit 1); a missing segment and a directory named like one are errors
naming the file; a bad ``.index`` is a hint set aside (every record still counted); a zero-filled
end of a compacted topic's active segment is the torn tail it is (a warning).

Positions and offsets come from the bytes (``struct``), record counts from kafka-python, and the
rules from Kafka: offsets increase through a log and fit int64 (the log's next offset too);
DefaultRecordBatch's lastOffsetDelta >= 0, 0 <= recordsCount <= lastOffsetDelta + 1, and an
uncompressed record takes at least 7 bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalog.format.crc import crc32c

from .operate_support import batch_positions, build, copy, json_lines, kp_records, run_main

INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("stats-contract") / "data", {"t": (1, {})})


@pytest.fixture(scope="module")
def compact_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stats-compact") / "data"
    return build(root, {"c": (1, {"cleanup.policy": "compact"})})


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def partition(out: str) -> dict:
    (found,) = [o for o in json_lines(out) if o["type"] == "partition"]
    return found


def logs(part: Path) -> list[Path]:
    return sorted(part.glob("*.log"))


def all_records(part: Path) -> int:
    return sum(len(kp_records(p)) for p in logs(part))


def records_before(part: Path, log: Path, position: int) -> int:
    """kafka-python's records of the segments before ``log`` and of ``log`` before
    ``position`` (a batch start)."""
    earlier = sum(len(kp_records(p)) for p in logs(part) if p.name < log.name)
    starts = [pos for pos, _, _ in batch_positions(log)]
    head = log.with_name("head.bin")
    head.write_bytes(log.read_bytes()[: max([p for p in starts if p <= position], default=0)])
    try:
        return earlier + len(kp_records(head))
    finally:
        head.unlink()


def fix_crc(data: bytearray, position: int) -> None:
    """Recompute a v2 batch's CRC (attributes to the end of the batch)."""
    size = struct.unpack_from(">i", data, position + 8)[0]
    struct.pack_into(
        ">I", data, position + 17, crc32c(bytes(data[position + 21 : position + 12 + size]))
    )


# -- item 5: the offset rule -------------------------------------------------------------------
def test_a_duplicated_last_batch_is_damage(data_dir: Path) -> None:
    part = data_dir / "t-0"
    log = logs(part)[-1]
    position, base, size = batch_positions(log)[-1]
    data = log.read_bytes()
    end = len(data)
    log.write_bytes(data + data[position : position + size])  # the same offsets again
    out, err = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {end}, offset {base}" in found["error"]
    assert "increase" in found["error"] and str(log) in err
    assert found["records"] == all_records(part) - 2  # kafka-python: the copy holds 2 more


@pytest.mark.parametrize("base", [-1, INT64_MAX], ids=["negative", "int64-max"])
def test_a_base_offset_outside_a_log_is_damage(data_dir: Path, base: int) -> None:
    part = data_dir / "t-0"
    log = logs(part)[1]
    position, _, _ = batch_positions(log)[2]
    data = bytearray(log.read_bytes())
    struct.pack_into(">q", data, position, base)  # baseOffset: outside the CRC
    log.write_bytes(data)
    out, _ = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {position}, offset {base}" in found["error"]
    assert found["records"] == records_before(part, log, position)


# -- item 6: the v2 header rule ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        (57, INT32_MAX, "records count"),  # recordsCount
        (57, -1, "invalid record count"),
        (23, -1, "lastOffsetDelta"),  # lastOffsetDelta
    ],
    ids=["count-int32-max", "count-negative", "delta-negative"],
)
def test_a_v2_header_that_disagrees_with_itself_is_damage(
    data_dir: Path, field: int, value: int, words: str
) -> None:
    part = data_dir / "t-0"
    log = logs(part)[1]
    position, base, _ = batch_positions(log)[1]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + field, value)
    fix_crc(data, position)  # a header the CRC vouches for: only the rule tells
    log.write_bytes(data)
    out, _ = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {position}, offset {base}" in found["error"]
    assert words in found["error"]
    assert found["records"] == records_before(part, log, position)
    assert found["records"] < INT32_MAX


def test_more_records_than_an_uncompressed_batch_holds_is_damage(data_dir: Path) -> None:
    part = data_dir / "t-0"
    log = logs(part)[0]
    position, base, size = batch_positions(log)[0]
    data = bytearray(log.read_bytes())
    count = (size - 61) // 7 + 1  # one more than 7-byte records fit
    struct.pack_into(">i", data, position + 23, count + 5)  # lastOffsetDelta leaves room
    struct.pack_into(">i", data, position + 57, count)
    fix_crc(data, position)
    log.write_bytes(data)
    out, _ = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{log}, position {position}, offset {base}" in found["error"]
    assert "does not fit" in found["error"] and found["records"] == 0


# -- item 7: indexes are hints -----------------------------------------------------------------
@pytest.mark.parametrize("segment", [0, -1], ids=["first", "active"])
@pytest.mark.parametrize(
    "entries",
    [[(1, -70), (3, -1)], [(1, 1 << 30)], [(9, 0), (5, 0), (1, 0)]],
    ids=["negative-positions", "past-the-end", "decreasing"],
)
def test_a_bad_offset_index_does_not_change_the_numbers(
    data_dir: Path, segment: int, entries: list
) -> None:
    part = data_dir / "t-0"
    log = logs(part)[segment]
    last_offset = batch_positions(logs(part)[-1])[-1][1] + 1  # 2 records per batch
    log.with_suffix(".index").write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    out, err = run_main("stats", "--json", data_dir, status=0)
    found = partition(out)
    assert found["error"] is None and err == ""
    assert found["records"] == all_records(part)
    assert found["logEndOffset"] == last_offset + 1


# -- item 8: a zero-filled tail of a compacted topic ---------------------------------------------
def test_a_zero_filled_tail_of_a_compacted_topic_is_a_warning(
    compact_dir: Path, tmp_path: Path
) -> None:
    data_dir = copy(compact_dir, tmp_path)
    part = data_dir / "c-0"
    log = logs(part)[-1]
    size, records = log.stat().st_size, all_records(part)
    with log.open("ab") as f:
        f.write(bytes(4096))  # preallocated, never written
    out, err = run_main("stats", "--json", data_dir, status=0)
    found = partition(out)
    assert found["error"] is None and found["dirtyRatio"] is not None
    assert found["records"] == records
    (warning,) = found["warnings"]
    assert f"{log}: position {size}" in warning and "zero bytes" in warning
    assert str(log) in err


# -- missing data the other readers refuse ------------------------------------------------------
@pytest.mark.parametrize("which", [0, 1], ids=["first", "middle"])
def test_a_missing_segment_whose_index_remains_is_an_error(data_dir: Path, which: int) -> None:
    part = data_dir / "t-0"
    segments = logs(part)
    gone, following = segments[which], segments[which + 1]
    gone.unlink()
    first, nxt = int(gone.name[:20]), int(following.name[:20])
    out, err = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert f"{gone}: offsets from {first} to {nxt - 1}" in found["error"]
    assert "missing" in found["error"] and str(gone) in err
    assert found["records"] == sum(len(kp_records(p)) for p in segments[:which])


def test_a_directory_named_like_a_segment_is_an_error(data_dir: Path) -> None:
    part = data_dir / "t-0"
    folder = part / f"{batch_positions(logs(part)[-1])[-1][1] + 2:020d}.log"
    folder.mkdir()
    out, err = run_main("stats", "--json", data_dir, status=1)
    found = partition(out)
    assert str(folder) in found["error"] and "directory" in found["error"]
    assert str(folder) in err


def test_an_open_that_trusted_a_bad_index_is_retried_from_the_log(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only open that follows the active segment's .index to a position outside the file
    # fails (pread: EINVAL); stats opens the partition again with the offset indexes set aside.
    from kafkalog.log.partition.log import Log

    read_end = Log._read_log_end_offset

    def trusting(self) -> int:
        if any(s.offset_index is not None for s in self.segments):
            raise OSError(22, "Invalid argument")
        return read_end(self)

    monkeypatch.setattr(Log, "_read_log_end_offset", trusting)
    part = data_dir / "t-0"
    out, err = run_main("stats", "--json", data_dir, status=0)
    found = partition(out)
    assert found["error"] is None and err == ""
    assert found["records"] == all_records(part) and found["configsAssumed"] is False
    assert found["logEndOffset"] == batch_positions(logs(part)[-1])[-1][1] + 2
