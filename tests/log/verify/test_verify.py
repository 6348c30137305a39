"""kafkalog.log.verify.data_dir: real broker data dirs report only what MISSING.json explains, and
every defect planted in a valid data dir is found with its code and location, without changing a
file.

Valid data dirs are written by kafkalog's LogManager/Log (clean shutdown) or, for hand-made
segments, from batches built by kafka-python; expected locations are computed here from the bytes
with ``struct``, and the fixture expectations from MISSING.json, EXPECTED.json and the files
present, never from verify's own output. Every verify call checks that no file changed.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecordsBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.format import ControlRecordType, build_end_txn_marker_batch
from kafkalog.format.batch import RecordBatch
from kafkalog.format.crc import crc32c
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.kafka_uuid import uuid_to_kafka_string
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.verify import segment as verify_segment
from kafkalog.log.verify.data_dir import VerifyReport, verify
from kafkalog.log.verify.tail import DEFAULT_MAX_MESSAGE_BYTES, partial_tail_problem
from shared_fixtures import DATA_DIRS, EXPECTED, KAFKA_DATA, MISSING, requires_shared_fixtures

T0 = 1_700_000_000_000

TOPIC_CONFIGS = {
    "internal.segment.bytes": "4000",  # several segments
    "index.interval.bytes": "300",  # several index entries per segment
    "message.timestamp.after.max.ms": str(1 << 50),
    "message.timestamp.before.max.ms": str(1 << 50),
}


# -- helpers -------------------------------------------------------------------------------------
def tree_state(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``root``: sha256, size, mtime (ns)."""
    return {
        str(p.relative_to(root)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_size,
            p.stat().st_mtime_ns,
        )
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_verify(path: Path, root: Path | None = None, **kw) -> VerifyReport:
    """verify(path), asserting that nothing under ``root`` (default: path) changed."""
    root = root or (path if path.is_dir() else path.parent)
    before = tree_state(root)
    report = verify(path, **kw)
    assert tree_state(root) == before, "verify changed a file"
    return report


def located(report: VerifyReport, severity: str | None = None) -> set[tuple]:
    return {
        (f.code, f.path, f.position, f.offset)
        for f in report.findings
        if severity in (None, f.severity)
    }


def kp_batch(
    values: int, *, offset: int, ts: int = T0, pid: int = -1, seq: int = -1, codec: int = 0
) -> bytes:
    builder = KpBuilder(2, codec, 1 << 30, producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)  # fmt: skip
    for i in range(values):
        assert builder.append(ts + i, b"k%d" % (i % 7), b"value-%d " % i * 8, []) is not None
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, offset)  # baseOffset is outside the CRC
    return bytes(data)


def entries(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every v2 batch, read with struct."""
    data, out, pos = path.read_bytes(), [], 0
    while pos + 12 <= len(data):
        base, size = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, base + struct.unpack_from(">i", data, pos + 23)[0]))
        pos += 12 + size
    return out


def index_entries(path: Path, entry_size: int) -> list[tuple[int, int]]:
    data, base = path.read_bytes(), int(path.name[:20])
    fmt = ">ii" if entry_size == 8 else ">qi"
    raw = [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - entry_size + 1,
                                                             entry_size)]  # fmt: skip
    return [(a, base + b) if entry_size == 12 else (base + a, b) for a, b in raw]


def build_data_dir(root: Path) -> Path:
    """Two partitions of 40 batches (3 records, idempotent producer) in 4 segments each, with
    indexes, snapshots, leader epochs, checkpoints and a clean shutdown: a valid data dir."""
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        logs = manager.create_topic("orders", 2, TOPIC_CONFIGS)
        for j in range(40):
            for p, log in enumerate(logs):
                batch = kp_batch(3, offset=0, ts=T0 + 3 * j, pid=1000 + p, seq=3 * j)
                log.append_as_leader(batch, leader_epoch=j // 15)
    return root


@pytest.fixture(scope="module")
def valid_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_data_dir(tmp_path_factory.mktemp("valid") / "data")


@pytest.fixture
def data_dir(valid_data_dir: Path, tmp_path: Path) -> Path:
    """A fresh copy of the valid data dir, for one test to damage."""
    return Path(shutil.copytree(valid_data_dir, tmp_path / "data"))


def seg(root: Path, base: int, suffix: str = ".log", partition: int = 0) -> Path:
    return root / f"orders-{partition}" / f"{base:020d}{suffix}"


# The segments build_data_dir writes (both partitions alike): 0, ROLLED, NEXT, then the ACTIVE
# one; the log ends at offset 120.
ROLLED, NEXT, ACTIVE, LOG_END = 39, 78, 117, 120


def test_the_valid_data_dir_has_the_layout_the_tests_assume(data_dir: Path) -> None:
    for partition in (0, 1):
        logs = sorted((data_dir / f"orders-{partition}").glob("*.log"))
        assert [int(p.name[:20]) for p in logs] == [0, ROLLED, NEXT, ACTIVE]
        assert entries(logs[-1])[-1][2] + 1 == LOG_END
        assert len(index_entries(seg(data_dir, ROLLED, ".index", partition), 8)) >= 3


def write_partition(directory: Path, segments: dict[int, list[bytes]]) -> Path:
    """Hand-made segments from kafka-python batches, with empty (trimmed) indexes."""
    directory.mkdir(parents=True)
    for base, batches in segments.items():
        (directory / f"{base:020d}.log").write_bytes(b"".join(batches))
        (directory / f"{base:020d}.index").write_bytes(b"")
        (directory / f"{base:020d}.timeindex").write_bytes(b"")
    return directory


# -- a valid data dir ----------------------------------------------------------------------------
def test_a_cleanly_closed_data_dir_has_no_findings(data_dir: Path) -> None:
    report = run_verify(data_dir)
    assert report.findings == []
    assert report.ok and report.counts == {"error": 0, "warning": 0, "info": 0}
    summaries = {Path(p.path).name: p for p in report.partitions}
    assert sorted(summaries) == ["orders-0", "orders-1"]
    for p in summaries.values():
        assert (p.segments, p.batches, p.records, p.log_start_offset, p.log_end_offset) == (
            4, 40, 120, 0, 120)  # fmt: skip
    assert not (data_dir / "orders-0" / "00000000000000000000.index").stat().st_size % 8


def test_kafkalogs_own_root_files_are_known(data_dir: Path) -> None:
    (data_dir / "kafkalog-topics.json").write_text('{"version": 1, "topics": {}}')
    (data_dir / "kafkalog-producer-ids.json").write_text('{"version": 1, "next_block": 1000}')
    assert run_verify(data_dir).findings == []


def test_partition_dirs_and_single_files_verify_alone(data_dir: Path) -> None:
    part = data_dir / "orders-0"
    assert run_verify(part, data_dir).findings == []
    files = [seg(data_dir, ROLLED, suffix) for suffix in (".log", ".index", ".timeindex",
                                                          ".snapshot")]  # fmt: skip
    for path in [*files, part / "leader-epoch-checkpoint", part / "partition.metadata"]:
        assert run_verify(path, data_dir).findings == [], path
    for name in ("recovery-point-offset-checkpoint", "meta.properties", ".kafka_cleanshutdown"):
        assert run_verify(data_dir / name, data_dir).findings == [], name
    with pytest.raises(FileNotFoundError):
        verify(data_dir / "nope")
    with pytest.raises(ValueError, match="not a file kafkalog verify knows"):
        verify(data_dir / "kafkalog-topics.json")


# -- planted defects -----------------------------------------------------------------------------
def test_bit_flip_in_a_batch_is_a_crc_mismatch(data_dir: Path) -> None:
    log = seg(data_dir, ROLLED)
    position, base, _ = entries(log)[3]
    data = bytearray(log.read_bytes())
    data[position + 70] ^= 0x10  # inside the records, covered by the CRC
    log.write_bytes(data)
    report = run_verify(data_dir)
    assert located(report, "error") == {("crc-mismatch", str(log), position, base)}
    assert not report.ok


def test_torn_tail_of_the_active_segment_is_a_warning(data_dir: Path) -> None:
    log = seg(data_dir, ACTIVE)
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(kp_batch(3, offset=LOG_END)[:40])  # the broker died appending
    report = run_verify(data_dir)
    assert located(report) == {("torn-tail", str(log), size, LOG_END)}
    assert report.warnings[0].severity == "warning" and report.ok


def test_torn_tail_of_a_rolled_segment_is_an_error(data_dir: Path) -> None:
    log = seg(data_dir, ROLLED)
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(kp_batch(3, offset=NEXT)[:40])
    assert located(run_verify(data_dir), "error") == {("torn-tail", str(log), size, NEXT)}


def test_zero_filled_tail_of_the_active_segment_is_a_torn_tail_warning(data_dir: Path) -> None:
    # What Kafka's recovery cuts, and where every reader ends the log (docs/reading.md).
    log = seg(data_dir, ACTIVE)
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(bytes(4096))  # preallocated, never written
    report = run_verify(data_dir)
    assert located(report) == {("zero-tail", str(log), size, None)}
    assert [f.severity for f in report.findings] == ["warning"] and report.ok


def test_zero_filled_tail_of_a_rolled_segment_is_an_error(data_dir: Path) -> None:
    log = seg(data_dir, ROLLED)
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(bytes(4096))  # Kafka completed this segment before rolling
    report = run_verify(data_dir)
    assert located(report, "error") == {("zero-tail", str(log), size, None)}
    assert not report.ok


def test_corrupt_framing_and_the_index_entries_past_it(data_dir: Path) -> None:
    log = seg(data_dir, ROLLED)
    position, base, _ = entries(log)[5]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + 8, 5)  # a size below any batch
    log.write_bytes(data)
    index, timeindex = seg(data_dir, ROLLED, ".index"), seg(data_dir, ROLLED, ".timeindex")
    past_index = [o for o, pos in index_entries(index, 8) if pos >= position]
    past_time = [o for _, o in index_entries(timeindex, 12) if o >= base]
    assert past_index and past_time
    report = run_verify(data_dir)
    # One error for the root cause; the index entries past it are one summary each, not one
    # error per entry.
    assert located(report, "error") == {("corrupt-framing", str(log), position, base)}
    summaries = {
        (f.path, f.offset, int(f.message.split()[0]))
        for f in report.findings
        if f.code == "index-past-unreadable"
    }
    assert summaries == {
        (str(index), min(past_index), len(past_index)),
        (str(timeindex), min(past_time), len(past_time)),
    }
    # The offsets after the cut are in the unreadable bytes, not a compaction gap.
    assert not [f for f in report.findings if f.code == "offset-gaps"]


def test_damaged_size_field_is_corruption_not_a_torn_tail(data_dir: Path) -> None:
    # A size far beyond max.message.bytes in the active segment: the bytes after it are records
    # Kafka's recovery would throw away, so it is an error, not the torn-tail warning.
    log = seg(data_dir, ACTIVE)
    with log.open("ab") as f:
        f.write(kp_batch(3, offset=LOG_END) + kp_batch(3, offset=LOG_END + 3))
    position, base, _ = entries(log)[1]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + 8, 0x7FFFFF00)
    log.write_bytes(data)
    report = run_verify(data_dir)
    assert located(report, "error") == {("corrupt-framing", str(log), position, base)}
    assert not report.ok and "max.message.bytes" in report.errors[0].message


def test_small_size_damage_found_by_the_complete_batch_after_it(data_dir: Path) -> None:
    # A size a few bytes past the end of the file, but a whole batch (CRC matching) follows
    # inside the bytes it claims: a damaged length, not the last append.
    log = seg(data_dir, ACTIVE)
    with log.open("ab") as f:
        f.write(kp_batch(3, offset=LOG_END) + kp_batch(3, offset=LOG_END + 3))
    found = entries(log)
    position, base, _ = found[-2]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + 8, len(data) - position)
    log.write_bytes(data)
    report = run_verify(data_dir)
    assert located(report, "error") == {("corrupt-framing", str(log), position, base)}
    assert f"starts at position {found[-1][0]}" in report.errors[0].message


def test_bad_index_entries_are_mismatches(data_dir: Path) -> None:
    index = seg(data_dir, ROLLED, ".index")
    (o1, p1), (o2, p2) = index_entries(index, 8)[1:3]
    data = bytearray(index.read_bytes())
    struct.pack_into(">ii", data, 8, o1 - ROLLED, p1 + 1)  # not a batch start
    struct.pack_into(">ii", data, 16, o2 - ROLLED - 1, p2)  # inside the batch, neither end
    index.write_bytes(data)
    assert located(run_verify(data_dir), "error") == {
        ("index-entry-mismatch", str(index), 8, o1),
        ("index-entry-mismatch", str(index), 16, o2 - 1),
    }


def test_index_entries_of_older_brokers_are_accepted(tmp_path: Path) -> None:
    """0.10 indexed an append's first offset; 1.x-3.x an append's last offset (several batches)."""
    batches = [kp_batch(3, offset=3 * i) for i in range(6)]
    part = write_partition(tmp_path / "t-0", {0: batches})
    positions = [p for p, _, _ in entries(part / f"{0:020d}.log")]
    entries_ = [(3, positions[1]), (11, positions[2]), (12, positions[4])]  # first, multi, first
    (part / f"{0:020d}.index").write_bytes(b"".join(struct.pack(">ii", *e) for e in entries_))
    assert run_verify(part).findings == []


def test_truncated_index_fails_kafkas_sanity_check(data_dir: Path) -> None:
    index = seg(data_dir, ROLLED, ".index")
    data = index.read_bytes()[:-3]
    index.write_bytes(data)
    expected = ("index-corrupt", str(index), len(data) - len(data) % 8, None)
    assert located(run_verify(data_dir), "error") == {expected}


def test_time_index_timestamp_that_is_not_its_batch_max(data_dir: Path) -> None:
    timeindex = seg(data_dir, ROLLED, ".timeindex")
    ts, offset = index_entries(timeindex, 12)[0]
    data = bytearray(timeindex.read_bytes())
    struct.pack_into(">q", data, 0, ts - 1)
    timeindex.write_bytes(data)
    assert located(run_verify(data_dir), "error") == {
        ("time-index-entry-mismatch", str(timeindex), 0, offset)
    }


def test_missing_indexes_are_warnings(data_dir: Path) -> None:
    seg(data_dir, ROLLED, ".index").unlink()
    seg(data_dir, ACTIVE, ".timeindex").unlink()
    report = run_verify(data_dir)
    assert located(report) == {
        ("index-missing", str(seg(data_dir, ROLLED, ".index")), None, None),
        ("time-index-missing", str(seg(data_dir, ACTIVE, ".timeindex")), None, None),
    }
    assert report.ok and {f.severity for f in report.findings} == {"warning"}


def test_preallocated_indexes_of_a_live_broker(data_dir: Path) -> None:
    """A running broker's active segment has indexes preallocated with zero slots: normal, even
    for a new empty segment; a rolled segment whose index was never trimmed is a warning."""
    for suffix in (".index", ".timeindex"):
        with seg(data_dir, ACTIVE, suffix).open("ab") as f:
            f.write(bytes(240))
        seg(data_dir, LOG_END, suffix, partition=1).write_bytes(bytes(240))
    seg(data_dir, LOG_END, partition=1).write_bytes(b"")  # rolled, nothing appended yet
    rolled = seg(data_dir, ROLLED, ".index")
    size = rolled.stat().st_size
    with rolled.open("ab") as f:
        f.write(bytes(80))
    report = run_verify(data_dir)
    assert located(report) == {("index-untrimmed", str(rolled), size, None)}
    assert report.partitions[1].segments == 5 and report.partitions[1].log_end_offset == LOG_END


def test_future_replicas_are_verified_and_deleted_dirs_only_named(data_dir: Path) -> None:
    future = data_dir / f"orders-0.{uuid.uuid4().hex}-future"
    deleted = data_dir / f"orders-1.{uuid.uuid4().hex}-delete"
    shutil.copytree(data_dir / "orders-0", future)
    (data_dir / "orders-1").rename(deleted)
    (future / f"{ROLLED:020d}.index").unlink()
    report = run_verify(data_dir)
    assert [Path(p.path).name for p in report.partitions] == ["orders-0", future.name]
    assert {(f.code, Path(f.path).name) for f in report.findings} == {
        ("partition-dir-future", future.name),
        ("partition-dir-delete", deleted.name),
        ("index-missing", f"{ROLLED:020d}.index"),
        ("checkpoint-partition-missing", "orders-1"),
    }


def test_stale_recovery_point_past_the_log_end_is_an_error(data_dir: Path) -> None:
    checkpoint = data_dir / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n2\norders 0 500\norders 1 120\n")
    assert located(run_verify(data_dir), "error") == {
        ("recovery-point-beyond-log-end", str(checkpoint), None, 500)
    }


def test_offsets_going_back_across_and_within_segments(tmp_path: Path) -> None:
    across = write_partition(tmp_path / "a-0", {
        0: [kp_batch(5, offset=0), kp_batch(5, offset=5)],
        5: [kp_batch(5, offset=10)],  # segment 0 already holds 5..9
    })  # fmt: skip
    assert located(run_verify(across), "error") == {
        ("segment-overlap", str(across / f"{5:020d}.log"), 0, 5)  # its first batch offends
    }
    within = write_partition(tmp_path / "b-0", {0: [kp_batch(5, offset=0), kp_batch(5, offset=3)]})
    position = entries(within / f"{0:020d}.log")[1][0]
    assert located(run_verify(within), "error") == {
        ("offset-order", str(within / f"{0:020d}.log"), position, 3)
    }


def test_corrupt_producer_snapshot(data_dir: Path) -> None:
    snapshot = seg(data_dir, ROLLED, ".snapshot")
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 1
    snapshot.write_bytes(data)
    truncated = seg(data_dir, NEXT, ".snapshot", partition=1)
    truncated.write_bytes(truncated.read_bytes()[:20])
    report = run_verify(data_dir)
    assert located(report, "error") == {
        ("snapshot-corrupt", str(snapshot), None, None),
        ("snapshot-corrupt", str(truncated), None, None),
    }
    assert "CRC" in report.errors[0].message and "truncated" in report.errors[1].message


def test_missing_segment_with_its_indexes_left(data_dir: Path) -> None:
    seg(data_dir, NEXT).unlink()
    report = run_verify(data_dir)
    assert located(report, "error") == {("segment-missing", str(seg(data_dir, NEXT)), None, NEXT)}
    assert f"offsets from {NEXT} to {ACTIVE - 1} " in report.errors[0].message
    assert ("offset-gaps", str(data_dir / "orders-0"), None, NEXT - 1) in located(report, "info")


def test_missing_first_segment_with_its_indexes_left_is_lost_data(data_dir: Path) -> None:
    # consume raises DataLossError for these offsets: the log began at the missing segment.
    seg(data_dir, 0).unlink()
    report = run_verify(data_dir)
    assert located(report, "error") == {("segment-missing", str(seg(data_dir, 0)), None, 0)}
    assert f"offsets from 0 to {ROLLED - 1} " in report.errors[0].message
    assert not [f for f in report.findings if f.code == "orphan-index"]


def test_an_index_below_the_log_start_offset_is_a_leftover(data_dir: Path) -> None:
    # Retention moved the log start past the segment: Kafka's loader deletes the orphan index.
    seg(data_dir, 0).unlink()
    (data_dir / "log-start-offset-checkpoint").write_text(f"0\n2\norders 0 {ROLLED}\norders 1 0\n")
    report = run_verify(data_dir / "orders-0", data_dir)
    assert report.ok
    assert {(f.code, Path(f.path).name) for f in report.warnings} == {
        ("orphan-index", f"{0:020d}.index"),
        ("orphan-index", f"{0:020d}.timeindex"),
    }


def test_a_directory_named_like_a_segment_is_an_error(data_dir: Path) -> None:
    folder = seg(data_dir, LOG_END)
    folder.mkdir()
    report = run_verify(data_dir)
    assert located(report, "error") == {("not-regular-file", str(folder), None, None)}
    assert "directory" in report.errors[0].message and not report.ok
    assert run_verify(data_dir / "orders-0", data_dir).errors == report.errors


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        (57, 2**31 - 1, "records count 2147483647 is more than"),
        (57, -1, "Found invalid record count -1"),
        (23, -1, "lastOffsetDelta -1 is negative"),
    ],
    ids=["count-int32-max", "count-negative", "delta-negative"],
)
def test_a_v2_header_that_disagrees_with_itself(
    tmp_path: Path, field: int, value: int, words: str
) -> None:
    # DefaultRecordBatch: lastOffsetDelta >= 0, 0 <= recordsCount <= lastOffsetDelta + 1.
    batch = bytearray(kp_batch(3, offset=2))
    struct.pack_into(">i", batch, field, value)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))  # the CRC vouches for it
    part = write_partition(tmp_path / "h-0", {0: [kp_batch(2, offset=0), bytes(batch)]})
    log = part / f"{0:020d}.log"
    position = entries(log)[1][0]
    for deep in (True, False):
        report = run_verify(part, deep=deep)
        assert located(report, "error") == {("batch-header", str(log), position, 2)}
        assert words in report.errors[0].message


def test_more_records_than_an_uncompressed_batch_can_hold(tmp_path: Path) -> None:
    # The smallest v2 record takes 7 bytes: (size - 61) / 7 records at most, uncompressed.
    batch = bytearray(kp_batch(2, offset=0))
    count = (len(batch) - 61) // 7 + 1
    struct.pack_into(">i", batch, 23, count)  # lastOffsetDelta leaves room for them
    struct.pack_into(">i", batch, 57, count)  # recordsCount
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    part = write_partition(tmp_path / "u-0", {0: [bytes(batch)]})
    report = run_verify(part, deep=False)
    assert located(report, "error") == {("batch-header", str(part / f"{0:020d}.log"), 0, 0)}
    assert "does not fit" in report.errors[0].message


def test_records_that_do_not_decode_need_deep(tmp_path: Path) -> None:
    batch = bytearray(kp_batch(2, offset=0))
    struct.pack_into(">i", batch, 57, 3)  # claims 3 records; the CRC is made to match
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    part = write_partition(tmp_path / "d-0", {0: [bytes(batch)]})
    log = part / f"{0:020d}.log"
    assert {(c, p, o) for c, p, _, o in located(run_verify(part), "error")} == {
        ("batch-header", str(log), 0)  # 3 records cannot fit offsets 0..1
    }
    struct.pack_into(">ii", batch, 23, 2, 3)  # lastOffsetDelta 2: now only decoding can tell
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    log.write_bytes(bytes(batch))
    assert [f.code for f in run_verify(part).errors] == ["record-corrupt"]
    assert run_verify(part, deep=False).findings == []


# -- deep checks of large batches, through the fast path's kernels -------------------------------
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def zigzag_varint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at ``pos``."""
    shift = raw = 0
    while True:
        byte = data[pos]
        raw |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def record_starts(batch: bytes | bytearray) -> list[int]:
    """Where each record of an uncompressed v2 batch starts."""
    starts, pos = [], 61
    while pos < len(batch):
        starts.append(pos)
        length, after = zigzag_varint(batch, pos)
        pos = after + length
    return starts


def reseal(batch: bytearray) -> bytes:
    """The batch with a CRC that matches its bytes again: only decoding can find the damage."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_deep_verify_reads_large_batches_without_a_record_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: int
) -> None:
    """Batches of 40 records are decoded by the kernels; the record-at-a-time decoder (which
    made a million-record check take seconds) is not called for them."""
    part = write_partition(tmp_path / "big-0", {
        0: [kp_batch(40, offset=0, codec=codec), kp_batch(40, offset=40, codec=codec)],
    })  # fmt: skip

    def refuse(self):
        raise AssertionError("decoded record by record")

    monkeypatch.setattr(RecordBatch, "records", refuse)
    report = run_verify(part)
    assert report.findings == []
    assert report.partitions[0].records == 80


def test_deep_verify_names_a_record_offset_out_of_order_in_a_large_batch(tmp_path: Path) -> None:
    batch = bytearray(kp_batch(20, offset=100))
    start = record_starts(batch)[5]
    _, after_length = zigzag_varint(batch, start)
    _, after_ts = zigzag_varint(batch, after_length + 1)  # past the attributes byte
    assert batch[after_ts] == 2 * 5  # record 5's offsetDelta, zigzag-encoded
    batch[after_ts] = 2 * 3  # now offset 103, after 104
    part = write_partition(tmp_path / "o-0", {100: [reseal(batch)]})
    (finding,) = run_verify(part).errors
    # the record's position in the file, its batch's offset
    assert (finding.code, finding.position, finding.offset) == ("batch-record-offsets", start, 100)
    assert "offset delta 3 at position" in finding.message
    assert "previous record's 4" in finding.message


@settings(max_examples=80, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    records=st.integers(min_value=16, max_value=60),
    damage=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=0.999), st.sampled_from(["flip", "zero"])),
        min_size=1,
        max_size=3,
    ),
)
def test_deep_verify_finds_what_the_record_at_a_time_check_finds(codec, records, damage) -> None:
    """Damage behind a matching CRC (flipped or zeroed bytes in the records): the findings are
    the same with and without the kernels, which hand whatever they do not accept to the
    record-at-a-time check."""
    batch = bytearray(kp_batch(records, offset=3, codec=codec))
    for where, how in damage:
        i = 61 + int(where * (len(batch) - 61))
        batch[i] = batch[i] ^ 0x40 if how == "flip" else 0
    with tempfile.TemporaryDirectory() as tmp:
        part = write_partition(Path(tmp) / "h-0", {0: [kp_batch(3, offset=0), reseal(batch)]})
        fast = run_verify(part)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(verify_segment, "_COLUMNAR_MIN_RECORDS", 1 << 62)
            reference = run_verify(part)
    assert [(f.code, f.position, f.offset, f.message) for f in fast.findings] == [
        (f.code, f.position, f.offset, f.message) for f in reference.findings
    ]


def test_legacy_message_sets_are_checked_too(tmp_path: Path) -> None:
    builder = LegacyRecordBatchBuilder(magic=0, compression_type=1, batch_size=1 << 20)
    for i in range(5):
        builder.append(10 + i, timestamp=None, key=b"k", value=b"v%d" % i)
    wrapper = bytearray(builder.build())
    struct.pack_into(">q", wrapper, 0, 14)  # a magic 0 wrapper carries its last inner offset
    part = write_partition(tmp_path / "old-0", {10: [bytes(wrapper)]})
    report = run_verify(part)
    assert report.findings == [] and report.partitions[0].records == 5
    wrapper[-3] ^= 0xFF
    (part / f"{10:020d}.log").write_bytes(bytes(wrapper))
    assert [(f.code, f.position) for f in run_verify(part).errors] == [("crc-mismatch", 0)]


def test_aborted_transactions_and_the_transaction_index(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        (log,) = manager.create_topic("t", 1, TOPIC_CONFIGS)
        builder = KpBuilder(2, 0, 1 << 30, transactional=True, producer_id=7,
                            producer_epoch=0, base_sequence=0)  # fmt: skip
        builder.append(T0, b"k", b"v", [])
        builder.close()
        log.append_as_leader(bytes(builder.buffer()))
        abort = build_end_txn_marker_batch(
            ControlRecordType.ABORT,
            producer_id=7,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=T0,
        )
        log.append_as_leader(abort, origin=AppendOrigin.COORDINATOR)  # offset 1
    txn = root / "t-0" / f"{0:020d}.txnindex"
    assert txn.stat().st_size == 34 and run_verify(root).findings == []
    txn.write_bytes(txn.read_bytes()[:-5])
    assert located(run_verify(root)) == {
        ("txn-index-corrupt", str(txn), 0, None),
        ("txn-index-entry-missing", str(txn), None, 1),
    }
    txn.unlink()
    report = run_verify(root)
    assert located(report) == {("txn-index-entry-missing", str(txn), None, 1)} and report.ok


def test_leftovers_are_described_as_kafkas_loader_handles_them(data_dir: Path) -> None:
    (data_dir / "orders-0" / "00000000000000000000.log.deleted").write_bytes(b"")
    seg(data_dir, ROLLED, ".timeindex.cleaned", partition=1).write_bytes(b"")
    seg(data_dir, NEXT, ".log.swap", partition=1).write_bytes(b"")  # above the .cleaned: unfinished
    (data_dir / "orders-0" / "00000000000000000500.index").write_bytes(b"")  # orphan past LEO
    report = run_verify(data_dir)
    assert {(f.severity, f.code) for f in report.findings} == {
        ("warning", "leftover-deleted"),
        ("warning", "leftover-cleaned"),
        ("warning", "leftover-swap"),
        ("error", "segment-missing"),
    }


def test_topic_ids_and_leader_epochs(data_dir: Path) -> None:
    metadata = data_dir / "orders-1" / "partition.metadata"
    metadata.write_text(f"version: 0\ntopic_id: {uuid_to_kafka_string(uuid.uuid4())}")
    epochs = data_dir / "orders-0" / "leader-epoch-checkpoint"
    epochs.write_text("0\n3\n0 0\n2 30\n1 60\n")
    report = run_verify(data_dir)
    assert {(f.code, f.path, f.offset) for f in report.errors} == {
        ("topic-id-mismatch", str(metadata), None),
        ("leader-epoch-not-monotonic", str(epochs), 60),
    }


# -- real broker data ----------------------------------------------------------------------------
EXPECTED_LOGS = EXPECTED.get("logs", {})
MISSING_CODES = {"index-missing", "time-index-missing", "orphan-index", "segment-missing"}
LOST_OFFSET_CODES = {"snapshot-beyond-log-end", "leader-epoch-beyond-log-end"}
# Findings the fixtures have besides MISSING.json's gaps, all warnings or info (why, per code):
# unclean-shutdown: no .kafka_cleanshutdown (copied from a running broker); high-watermark- and
# leader-epoch-beyond-log-end: Danielowo2000's empty .log files under a high watermark of up to
# 16 (and VolodymyrZee@7712094's 290 records under 293): unflushed records, never in the copy;
# checkpoint-partition-missing: Niloufar1171's checkpoints name __consumer_offsets-14, which has
# no directory; leftover-*: getachew015's unfinished clean and two cleaner-offset-checkpoint.tmp;
# snapshot-stray: producer snapshots Kafka's loader deletes; offset-gaps: compacted
# __consumer_offsets partitions.
OTHER_CODES = {
    "BiggerBrain+kafka": {"unclean-shutdown"},
    "Danielowo2000+BigDataTechnologies-Version-2": {
        "unclean-shutdown", "high-watermark-beyond-log-end", "leader-epoch-beyond-log-end"},
    "Jeong-Rae+KafkaDemo": {"unclean-shutdown"},
    "KAIPASUBHASH+kafka-logs": {"unclean-shutdown"},
    "LanXuage+dspider": {"unclean-shutdown"},
    "NikhilDighe9975+kafka_setup": {"leftover-tmp", "snapshot-stray"},
    "Niloufar1171+LDI-POC": {"unclean-shutdown", "checkpoint-partition-missing"},
    "SharaWeil+kafka-0.11.0": set(),
    "VolodymyrZee+kafka": {"unclean-shutdown"},
    "VolodymyrZee+kafka@7712094": {"unclean-shutdown", "high-watermark-beyond-log-end"},
    "VolodymyrZee+kafka@f6e2174": set(),
    "William0423+kafka": {"snapshot-stray"},
    "aviramcohenwork+Pizza-Project-MS": {"unclean-shutdown"},
    "duongnvt2110+ms-practice": set(),
    "getachew015+kafka-broker": {
        "unclean-shutdown", "leftover-tmp", "leftover-cleaned", "leftover-swap"},
    "mscaldas2012+kafka-connect-spooldir": {"unclean-shutdown", "snapshot-stray"},
    "niknameovich+agro-server": {"offset-gaps", "snapshot-stray"},
    "ronem123+rupia-transaction-service": {"offset-gaps", "snapshot-stray"},
    "seanorth+kafka-server": {"unclean-shutdown"},
    "xpxwo100+bullShit": {"unclean-shutdown"},
}  # fmt: skip


def present_log_end(name: str, partition: str, bases: list[int]) -> int:
    """Where the log present on disk ends, from EXPECTED.json (0 when no .log is left)."""
    if not bases:
        return 0
    facts = EXPECTED_LOGS[f"{name}/{partition}/{bases[-1]:020d}.log"]
    return facts["last_offset"] + 1 if facts["batches"] else bases[-1]


def explained_by_missing(name: str) -> dict[tuple, str]:
    """(code, path relative to the data dir, offset) -> severity, for what MISSING.json's files
    leave: a missing index; a .log missing below the first present segment leaves orphan
    indexes, one at or past the end leaves lost records, and every offset the partition wrote
    down past the end of what is left (producer snapshots, leader epochs) points into them."""
    expected: dict[tuple, str] = {}
    for rel in MISSING.get(name, []):
        partition, file_name = rel.split("/")
        directory = KAFKA_DATA / name / partition
        stem, kind = file_name.split(".", 1)
        if kind != "log":
            expected[(f"{'time-' if kind == 'timeindex' else ''}index-missing", rel, None)] = (
                "warning")  # fmt: skip
            continue
        bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
        remnants = sorted(p.name for p in directory.glob(f"{stem}.*index"))
        if bases and int(stem) < bases[0]:
            for remnant in remnants:
                expected[("orphan-index", f"{partition}/{remnant}", None)] = "warning"
            continue
        expected[("segment-missing", rel, int(stem))] = "error"
        log_end = present_log_end(name, partition, bases)
        for snapshot in directory.glob("*.snapshot"):
            if int(snapshot.name[:20]) > log_end:
                key = ("snapshot-beyond-log-end", f"{partition}/{snapshot.name}")
                expected[(*key, int(snapshot.name[:20]))] = "warning"
        lines = (directory / "leader-epoch-checkpoint").read_text().split("\n")[2:]
        for start in (int(line.split()[1]) for line in lines if line.strip()):
            if start > log_end:
                key = ("leader-epoch-beyond-log-end", f"{partition}/leader-epoch-checkpoint")
                expected[(*key, start)] = "warning"
    return expected


@pytest.fixture(scope="module")
def fixture_reports() -> dict[str, VerifyReport]:
    before = tree_state(KAFKA_DATA)
    reports = {name: verify(KAFKA_DATA / name) for name in DATA_DIRS}
    assert tree_state(KAFKA_DATA) == before, "verify changed a fixture file"
    return reports


@requires_shared_fixtures
@pytest.mark.parametrize("name", DATA_DIRS)
def test_fixture_findings_are_what_missing_json_explains(name: str, fixture_reports) -> None:
    report = fixture_reports[name]
    expected = explained_by_missing(name)
    lost_in = {key[1].split("/")[0] for key in expected if key[0] == "segment-missing"}

    def key(f) -> tuple:
        return (f.code, str(Path(f.path).relative_to(KAFKA_DATA / name)), f.offset)

    def explainable(f) -> bool:
        partition = key(f)[1].split("/")[0]
        return f.code in MISSING_CODES or (f.code in LOST_OFFSET_CODES and partition in lost_in)

    explained = {key(f): f.severity for f in report.findings if explainable(f)}
    assert explained == expected
    assert {key(f) for f in report.errors} <= set(expected)
    others = {f.code for f in report.findings if key(f) not in expected}
    assert others == OTHER_CODES[name]
    assert {f.severity for f in report.findings if key(f) not in expected} <= {"warning", "info"}


@requires_shared_fixtures
def test_fixture_summaries_count_what_expected_json_counts(fixture_reports) -> None:
    by_partition: dict[str, list[dict]] = {}
    for path, facts in EXPECTED_LOGS.items():
        if path.endswith(".log"):
            by_partition.setdefault(path.rsplit("/", 1)[0], []).append(facts)
    for report in fixture_reports.values():
        for summary in report.partitions:
            rel = Path(summary.path).relative_to(KAFKA_DATA).as_posix()
            logs = by_partition.get(rel, [])
            assert summary.segments == len(logs), rel
            assert summary.batches == sum(v["batches"] for v in logs), rel
            assert summary.records == sum(v["records"] for v in logs), rel


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.binary(max_size=300), min_size=1, max_size=12),
    cut=st.floats(min_value=0.0, max_value=0.999),
    bad_size=st.integers(min_value=DEFAULT_MAX_MESSAGE_BYTES - 11, max_value=2**31 - 1),
)
def test_torn_appends_and_damaged_sizes_are_told_apart(values, cut, bad_size) -> None:
    # Two whole batches, then a third cut anywhere after its 17-byte header: a torn append,
    # never damage. The same third batch whole but with a size beyond max.message.bytes: damage.
    whole = kp_batch(2, offset=0) + kp_batch(2, offset=2)
    builder = KpBuilder(2, 0, 1 << 30)
    for i, value in enumerate(values):
        assert builder.append(T0 + i, None, value, []) is not None
    builder.close()
    third = bytearray(builder.buffer())
    struct.pack_into(">q", third, 0, 4)
    keep = 17 + int(cut * (len(third) - 17))
    torn = memoryview(whole + bytes(third[:keep]))
    assert partial_tail_problem(torn, len(whole), max_batch_size=DEFAULT_MAX_MESSAGE_BYTES) is None
    struct.pack_into(">i", third, 8, bad_size)
    damaged = memoryview(whole + bytes(third))
    found = partial_tail_problem(damaged, len(whole), max_batch_size=DEFAULT_MAX_MESSAGE_BYTES)
    assert found is not None and str(bad_size + 12) in found


# -- declared record counts against the records a batch holds (hostile inputs) ---------------------
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("records", [5, 40])  # the record-at-a-time check, and the kernels
@pytest.mark.parametrize("declared", [0, 1, 4])
def test_deep_verify_compares_the_declared_count_with_the_records(
    tmp_path: Path, codec: int, records: int, declared: int
) -> None:
    """A header claiming fewer records than the batch holds (CRC made to match): Kafka's
    DefaultRecordBatch throws InvalidRecordException("Incorrect declared batch size, records still
    remaining in file") after ``count`` records; with a count of 0 its readers return no record at
    all (a compressed section is not even decompressed), so every record is hidden."""
    batch = bytearray(kp_batch(records, offset=0, codec=codec))
    struct.pack_into(">i", batch, 57, declared)
    part = write_partition(tmp_path / "n-0", {0: [reseal(batch)]})
    log = part / f"{0:020d}.log"
    errors = run_verify(part).errors
    assert len(errors) == 1, errors
    (error,) = errors
    assert error.path == str(log) and error.offset == 0
    assert error.code in ("record-corrupt", "batch-records-count")
    assert "records still remaining" in error.message
    if declared == 0 and codec != 0:
        assert error.code == "batch-records-count" and error.position == 0
        assert f"holding {records} records" in error.message
    assert run_verify(part, deep=False).findings == []  # records are not decoded without --deep


def test_an_empty_compressed_batch_is_not_a_mismatch(tmp_path: Path) -> None:
    """Count 0 and a compressed section that decompresses to nothing: an empty batch."""
    import gzip as gzip_module

    batch = bytearray(kp_batch(3, offset=0, codec=1))
    payload = gzip_module.compress(b"")
    batch = batch[:61] + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, 0)
    part = write_partition(tmp_path / "e-0", {0: [reseal(batch)]})
    assert run_verify(part).errors == []


# -- files that are not regular files ------------------------------------------------------------
def test_a_fifo_named_like_a_segment_is_reported_not_opened(data_dir: Path) -> None:
    import os

    fifo = seg(data_dir, 500)
    os.mkfifo(fifo)
    report = run_verify(data_dir)  # opening the FIFO would block: this returning is the test
    found = [f for f in report.errors if f.code == "not-regular-file"]
    assert [(f.path, f.severity) for f in found] == [(str(fifo), "error")]
    assert "not a regular file (a FIFO)" in found[0].message
    with pytest.raises(OSError, match=r"not a regular file \(a FIFO\)") as info:
        verify(fifo)
    assert info.value.filename == str(fifo)


def test_a_symlink_loop_named_like_a_segment_is_reported(data_dir: Path) -> None:
    import os

    loop = seg(data_dir, 500)
    os.symlink(loop.name, loop)  # ln -s 00000000000000000500.log 00000000000000000500.log
    found = [f for f in run_verify(data_dir).errors if f.code == "not-regular-file"]
    assert [f.path for f in found] == [str(loop)]
    assert "symbolic link loop" in found[0].message
    with pytest.raises(OSError, match="symbolic link loop") as info:
        verify(loop)
    assert info.value.filename == str(loop)
