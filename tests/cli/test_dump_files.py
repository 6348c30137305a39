"""``kafkalog dump`` of indexes, transaction indexes and producer snapshots built byte by byte
from Kafka's layouts, with kafka-dump-log's verification reports; corrupt files of every kind;
the progress bar.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.format.crc import crc32c

from .console import kafkalog_exe
from .dump_testing import json_lines, kp_v2_batch, run_dump

BASE = 100


def v2_batch(base_offset: int, timestamps: list[int]) -> bytes:
    return kp_v2_batch(base_offset, [(ts, None, b"v%d" % i) for i, ts in enumerate(timestamps)])


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, list[tuple[int, int, int, int]]]:
    """A .log of three batches; returns it with (position, base, last, max timestamp) of each."""
    batches = [
        v2_batch(BASE, [1000, 1002, 1001]),
        v2_batch(BASE + 3, [2000, 2001]),
        v2_batch(BASE + 5, [3000, 3005, 3002, 3001]),
    ]
    facts, position = [], 0
    for data, (first, last, ts) in zip(
        batches, [(BASE, BASE + 2, 1002), (BASE + 3, BASE + 4, 2001), (BASE + 5, BASE + 8, 3005)]
    ):
        facts.append((position, first, last, ts))
        position += len(data)
    log = tmp_path / f"{BASE:020d}.log"
    log.write_bytes(b"".join(batches))
    return log, facts


def write_index(log: Path, entries: list[tuple[int, int]], pad_slots: int = 0) -> Path:
    path = log.with_suffix(".index")
    data = b"".join(struct.pack(">ii", o - BASE, p) for o, p in entries)
    path.write_bytes(data + bytes(8 * pad_slots))
    return path


def write_time_index(log: Path, entries: list[tuple[int, int]]) -> Path:
    path = log.with_suffix(".timeindex")
    path.write_bytes(b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries))
    return path


def test_offset_index_lines_and_zero_slots(segment) -> None:
    log, facts = segment
    entries = [(last, pos) for pos, _, last, _ in facts]
    index = write_index(log, entries, pad_slots=5)  # preallocated, not trimmed
    status, out, err = run_dump(str(index))
    assert (status, err) == (0, "")
    assert out.splitlines() == [f"Dumping {index}"] + [
        f"offset: {o} position: {p}" for o, p in entries
    ]
    objs = json_lines(run_dump("--json", str(index))[1])
    assert objs[0] == {"type": "file", "path": str(index), "kind": "index"}
    assert objs[1:-1] == [
        {"type": "indexEntry", "entry": i, "offset": o, "position": p, "batchLastOffset": o}
        for i, (o, p) in enumerate(entries)
    ]
    assert objs[-1] == {"type": "indexSummary", "entries": 3, "error": None}


def test_offset_index_mismatches_are_reported_like_kafka_dump_log(segment) -> None:
    log, facts = segment
    # Kafka 1.x-3.x style entries: an append's last offset at its first batch's position.
    entries = [(facts[0][2], facts[0][0]), (facts[2][2], facts[1][0])]
    index = write_index(log, entries)
    status, out, err = run_dump("--verify-index-only", str(index))
    assert status == 1
    assert out == f"Dumping {index}\n"
    assert err == (
        f"Mismatches in :{os.path.abspath(index)}\n"
        f"  Index offset: {facts[2][2]}, log offset: {facts[1][2]}\n"
    )
    objs = json_lines(run_dump("--json", "--verify-index-only", str(index))[1])
    errors = [o for o in objs if o["type"] == "error"]
    assert [(e["position"], e["offset"]) for e in errors] == [(8, facts[2][2])]
    assert objs[-1]["error"] == f"Index offset: {facts[2][2]}, log offset: {facts[1][2]}"


def test_offset_index_entry_past_the_log(segment) -> None:
    log, facts = segment
    index = write_index(log, [(facts[0][2], facts[0][0]), (BASE + 50, log.stat().st_size + 10)])
    status, out, err = run_dump(str(index))
    assert status == 1
    assert out.splitlines()[-1] == f"offset: {BASE + 50} position: {log.stat().st_size + 10}"
    assert f"Error in {index} at position 8 (offset {BASE + 50}): no batch at log position" in err


def test_sanity_check(segment, tmp_path: Path) -> None:
    log, facts = segment
    good = write_index(log, [(facts[0][2], 0)])
    status, out, _ = run_dump("--index-sanity-check", str(good))
    assert (status, out) == (0, f"Dumping {good}\n{good} passed sanity check.\n")
    time_index = write_time_index(log, [(1002, facts[0][2])])
    status, out, _ = run_dump("--index-sanity-check", str(time_index))
    assert (status, out) == (0, f"Dumping {time_index}\n{time_index} passed sanity check.\n")
    good.write_bytes(struct.pack(">ii", 5, 0) + b"\x00\x00\x00\x01")  # 12 bytes
    status, out, err = run_dump("--index-sanity-check", str(good))
    assert status == 1 and "passed" not in out and "not a multiple of 8" in err
    good.write_bytes(b"")
    assert run_dump("--index-sanity-check", str(good))[1].endswith(f"{good} is empty.\n")
    time_index.write_bytes(struct.pack(">qi", 5000, 1) + struct.pack(">qi", 4000, 2))
    status, _, err = run_dump("--index-sanity-check", str(time_index))
    assert status == 1 and "last timestamp" in err


def test_time_index_reports_like_kafka_dump_log(segment) -> None:
    log, facts = segment
    entries = [
        (1002, facts[0][2]),  # right
        (1500, facts[1][2]),  # a timestamp the batch does not have
        (1400, facts[2][2]),  # goes back in time (and does not match)
        (9000, facts[2][1]),  # an offset inside a batch, not its last
    ]
    time_index = write_time_index(log, entries)
    write_index(log, [(facts[1][2], facts[1][0])])
    status, out, err = run_dump(str(time_index))
    assert status == 1
    assert out.splitlines()[1:] == [f"timestamp: {t} offset: {o}" for t, o in entries]
    abs_path = os.path.abspath(time_index)
    assert err == (
        f"Found timestamp mismatch in :{abs_path}\n"
        f"  Index timestamp: 1500, log timestamp: {facts[1][3]}\n"
        f"  Index timestamp: 1400, log timestamp: {facts[2][3]}\n"
        f"Found out of order timestamp in :{abs_path}\n"
        "  Index timestamp: 1400, Previously indexed timestamp: 1500\n"
        f"The following indexed offsets are not found in :{abs_path}\n"
        f"Indexed offset: {facts[2][1]}, found log offset: {facts[2][2]}\n"
    )
    log.with_suffix(".index").unlink()  # without it the log is scanned: the same findings
    assert run_dump(str(time_index)) == (status, out, err)
    objs = json_lines(run_dump("--json", str(time_index))[1])
    first = next(o for o in objs if o["type"] == "timeIndexEntry")
    assert first == {
        "type": "timeIndexEntry",
        "entry": 0,
        "timestamp": 1002,
        "offset": facts[0][2],
        "batchLastOffset": facts[0][2],
        "batchMaxTimestamp": 1002,
    }
    assert sum(o["type"] == "error" for o in objs) == 4


def test_reports_come_after_every_file_in_kafka_order(segment) -> None:
    log, facts = segment
    index = write_index(log, [(facts[2][2], facts[1][0])])
    status, out, err = run_dump("--deep-iteration", str(index), str(log))
    assert status == 1
    assert out.startswith(f"Dumping {index}\n") and f"Dumping {log}\n" in out
    assert err.startswith(f"Mismatches in :{os.path.abspath(index)}\n")


def txn_entry(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    return struct.pack(">hqqqq", version, pid, first, last, lso)


def test_txn_index(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.txnindex"
    entries = [(7, 100, 104, 100), (9, 101, 110, 105)]
    path.write_bytes(b"".join(txn_entry(*e) for e in entries))
    status, out, err = run_dump(str(path))
    assert (status, err) == (0, "")
    assert out.splitlines()[1:] == [
        f"version: 0 producerId: {p} firstOffset: {f} lastOffset: {last} lastStableOffset: {s}"
        for p, f, last, s in entries
    ]
    objs = json_lines(run_dump("--json", str(path))[1])
    assert objs[1] == {
        "type": "abortedTxn",
        "version": 0,
        "producerId": 7,
        "firstOffset": 100,
        "lastOffset": 104,
        "lastStableOffset": 100,
    }
    assert objs[-1] == {"type": "indexSummary", "entries": 2, "error": None}
    path.write_bytes(path.read_bytes() + b"\x00" * 10)
    status, out, err = run_dump(str(path))
    assert status == 1 and len(out.splitlines()) == 3 and "10 bytes after" in err
    path.write_bytes(txn_entry(7, 1, 2, 1) + txn_entry(7, 3, 4, 3, version=3))
    status, out, err = run_dump(str(path))
    assert status == 1 and len(out.splitlines()) == 2 and "version 3" in err


def snapshot_bytes(entries: list[tuple]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_producer_snapshot_with_a_transaction_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.snapshot"
    path.write_bytes(
        snapshot_bytes([(5, 2, 9, 120, 3, 1_700_000, 4, 117), (6, 0, -1, -1, 0, 1_600_000, -1, -1)])
    )
    status, out, err = run_dump(str(path))
    assert (status, err) == (0, "")
    assert out.splitlines()[1:] == [
        "producerId: 5 producerEpoch: 2 coordinatorEpoch: 4 currentTxnFirstOffset: "
        "OptionalLong[117] lastTimestamp: 1700000 firstSequence: 6 lastSequence: 9 "
        "lastOffset: 120 offsetDelta: 3 timestamp: 1700000",
        # Kafka 4.3+ (DumpLogSegments in Java) ends an entry without batch metadata here; 3.9
        # to 4.2 printed a space after it (tests/apache_kafka compares with the real tool).
        "producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1600000",
    ]
    data = bytearray(path.read_bytes())
    data[20] ^= 1
    path.write_bytes(bytes(data))
    status, out, err = run_dump(str(path))
    assert status == 1 and out == f"Dumping {path}\n" and "CRC" in err


def test_unknown_files_are_named_and_skipped(tmp_path: Path) -> None:
    other = tmp_path / "partition.metadata"
    other.write_text("version: 0\n")
    status, out, err = run_dump(str(other))
    assert (status, out, err) == (0, f"Dumping {other}\n", f"Ignoring unknown file {other}\n")


SUFFIXES = [".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    suffix=st.sampled_from(SUFFIXES),
    data=st.binary(max_size=300),
    log=st.binary(max_size=300),
    json_mode=st.booleans(),
)
def test_any_bytes_give_output_or_errors_never_a_crash(
    tmp_path_factory, suffix: str, data: bytes, log: bytes, json_mode: bool
) -> None:
    directory = tmp_path_factory.mktemp("any")
    name = "00000000000000000000-0000000001" if suffix == ".checkpoint" else f"{BASE:020d}"
    path = directory / (name + suffix)
    path.write_bytes(data)
    if suffix != ".log":
        (directory / f"{BASE:020d}.log").write_bytes(log)
    argv = ["--deep-iteration", "--offsets-decoder", str(path)]
    status, out, _ = run_dump(*(["--json", *argv] if json_mode else argv))
    assert status in (0, 1)
    if json_mode:
        objs = json_lines(out)
        assert objs[0]["type"] == "file"


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal_and_identical_stdout(tmp_path: Path) -> None:
    big = tmp_path / f"{0:020d}.log"
    with open(big, "wb") as f:
        f.truncate(65 * 1024 * 1024)  # sparse: a preallocated, never written segment
    command = [*kafkalog_exe(), "dump", str(big)]
    piped = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    master, slave = os.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    stdout, _ = proc.communicate(timeout=120)
    seen = b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == piped.returncode == 1
    assert stdout.decode() == piped.stdout
    assert "Found 68157440 invalid bytes" in piped.stdout
    assert b"dump" in seen and b"%" in seen  # tqdm's bar
    assert "%|" not in piped.stderr


@settings(max_examples=50, deadline=None)
@given(
    deltas=st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 2**31 - 1)), max_size=30),
    base=st.integers(0, 2**40),
)
def test_index_entries_round_trip(deltas: list[tuple[int, int]], base: int) -> None:
    """Any increasing entries written as Kafka lays them out come back as kafka-dump-log's lines
    (without a .log they are reported as unchecked, never dropped)."""
    import tempfile

    offsets, offset = [], base
    for delta, _ in deltas:
        offset += delta
        offsets.append(offset)
    with tempfile.TemporaryDirectory() as directory:
        index = Path(directory) / f"{base:020d}.index"
        index.write_bytes(
            b"".join(struct.pack(">ii", o - base, p) for o, (_, p) in zip(offsets, deltas))
        )
        time_index = index.with_suffix(".timeindex")
        time_index.write_bytes(b"".join(struct.pack(">qi", 10 * o, o - base) for o in offsets))
        status, out, err = run_dump(str(index), str(time_index))
    lines = out.splitlines()
    cut = lines.index(f"Dumping {time_index}")
    expected = [f"offset: {o} position: {p}" for o, (_, p) in zip(offsets, deltas)]
    assert lines[1:cut] == (expected or [f"{index} is empty."])
    assert lines[cut + 1 :] == [f"timestamp: {10 * o} offset: {o}" for o in offsets]
    assert status == (1 if offsets else 0) and ("does not exist" in err) == bool(offsets)
