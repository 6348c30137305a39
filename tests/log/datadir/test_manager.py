"""LogManager (kafkalog.log.datadir.manager): real broker data directories opened read-only and on
writable copies, the data directory lock across processes, checkpoints, the clean-shutdown marker
and recovery after an unclean stop.

Real data comes from ../shared/fixtures/kafka-data (20 data directories of Kafka 0.10.1 to 4.x);
it is hashed before and after every read-only open, and only copies are ever opened writable.
Records are compared through kafka-python's decoder, checkpoints parsed as text here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.errors import KafkalogError
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import DataDirLockedError, LogManager
from kafkalog.log.datadir.naming import TopicPartition
from kafkalog.log.partition.quarantine import QUARANTINE_DIR_NAME
from shared_fixtures import DATA_DIRS, KAFKA_DATA, requires_shared_fixtures

T0 = 1_700_000_000_000

SWAP_PARTITION = "getachew015+kafka-broker/__consumer_offsets-13"


def client_batch(values: list[bytes], ts: int = T0) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30)
    for i, value in enumerate(values):
        builder.append(ts + i, b"k%d" % i, value, [])
    builder.close()
    return bytes(builder.buffer())


def digest(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def kp_records(data: bytes) -> list[tuple]:
    out, records = [], KpRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    assert records.valid_bytes() == len(data)
    return out


def partition_records(partition: Path) -> list[tuple]:
    return [r for p in sorted(partition.glob("*.log")) for r in kp_records(p.read_bytes())]


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    version, count, *lines = path.read_text().splitlines()
    assert version == "0" and int(count) == len(lines)
    return {(t, int(p)): int(o) for t, p, o in (line.split(" ") for line in lines)}


def log_view(log) -> list[tuple]:
    """Every record the log serves from its start, through kafkalog's read path."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        if info.records is None:
            break
        records = kp_records_prefix(info.records.read(info.records.start, info.records.end))
        out += [r for r in records if r[0] >= offset]
        offset = records[-1][0] + 1 if records else log.log_end_offset
    return out


def batch_view(log) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, CRC, size) of every batch the log holds from its start."""
    return [
        (b.base_offset, b.last_offset, b.crc, b.size_in_bytes)
        for b in log.batches(log.log_start_offset)
    ]


def kp_records_prefix(data: bytes) -> list[tuple]:
    """Records of the whole batches at the front of a window (a fetch may end mid-batch)."""
    out, records = [], KpRecords(data)
    while records.has_next():
        out += [(r.offset, r.timestamp, r.key, r.value) for r in records.next_batch()]
    return out


# -- real data directories ------------------------------------------------------------------------
@requires_shared_fixtures
@pytest.mark.parametrize("name", DATA_DIRS)
def test_every_fixture_data_dir_opens_read_only_and_no_file_changes(name: str) -> None:
    directory = KAFKA_DATA / name
    before = digest(directory)
    with LogManager(directory) as manager:
        for log in manager.logs.values():
            assert log.log_start_offset <= log.last_stable_offset <= log.log_end_offset
            list(log.batches(0))
            log.fetch_offset_by_timestamp(0)
            if log.log_end_offset > log.log_start_offset:
                assert log.read(log.log_start_offset, 1 << 16).records is not None
            log.producer_state.first_unstable_offset()
    assert digest(directory) == before  # same files, same bytes: nothing created or changed


@requires_shared_fixtures
@pytest.mark.parametrize("name", DATA_DIRS)
def test_a_writable_copy_of_every_fixture_recovers_and_keeps_every_record(
    tmp_path: Path, name: str
) -> None:
    copy = tmp_path / name
    shutil.copytree(KAFKA_DATA / name, copy)
    with LogManager(KAFKA_DATA / name) as reader:
        served = {tp: batch_view(log) for tp, log in reader.logs.items()}
        dirs = {tp: log.dir.name for tp, log in reader.logs.items()}
    with LogManager(copy, writable=True, clock=MockClock(now_ms=T0)) as manager:
        assert set(manager.logs) == set(served)
        for tp, log in manager.logs.items():
            assert batch_view(log) == served[tp], tp
    for dirname in dirs.values():
        # Recovery cut nothing (every fixture log is whole); only leftovers were moved away.
        for note in (copy / dirname).glob(f"{QUARANTINE_DIR_NAME}/*/NOTE.txt"):
            assert "cut" not in note.read_text(), note.read_text()
        for segment in (KAFKA_DATA / name / dirname).glob("*.log"):
            assert (copy / dirname / segment.name).read_bytes() == segment.read_bytes()
    assert (copy / ".kafka_cleanshutdown").exists()


@requires_shared_fixtures
def test_cleaner_leftovers_are_resolved_as_kafkas_loader_does(tmp_path: Path) -> None:
    # A .cleaned file at offset 0 means the clean never finished: every .swap at or above it
    # is part of it and goes; the segments it would have replaced stay.
    data_dir, partition = SWAP_PARTITION.split("/")
    source = KAFKA_DATA / data_dir / partition
    copy = tmp_path / partition
    shutil.copytree(source, copy)
    with LogManager(KAFKA_DATA / data_dir) as reader:
        log = reader.logs[TopicPartition("__consumer_offsets", 13)]
        assert [s.base_offset for s in log.segments] == [0, 36]
        assert any(".log.swap" in note for note in log.load_notes)
        served = log_view(log)
    # Open the copy writable in a data directory of its own.
    (tmp_path / "data").mkdir()
    shutil.move(copy, tmp_path / "data" / partition)
    with LogManager(tmp_path / "data", writable=True, clock=MockClock(now_ms=T0)) as manager:
        log = manager.logs[TopicPartition("__consumer_offsets", 13)]
        assert [s.base_offset for s in log.segments] == [0, 36]
        assert log_view(log) == served
    moved = tmp_path / "data" / partition
    (stamp,) = (moved / QUARANTINE_DIR_NAME).iterdir()
    leftovers = ["00000000000000000000.index.swap", "00000000000000000000.log.swap",
                 "00000000000000000000.timeindex.cleaned"]  # fmt: skip
    # No clean-shutdown marker and a recovery point of 0: every segment is recovered, and the
    # recovery of the first one deletes every snapshot above offset 0 (Kafka's
    # rebuildProducerState), which recovery rewrites (kafkalog keeps the old ones).
    snapshots = ["00000000000000000036.snapshot", "00000000000000000038.snapshot"]
    assert sorted(p.name for p in stamp.iterdir() if p.name != "NOTE.txt") == sorted(
        leftovers + snapshots
    )
    for name in snapshots:
        assert (stamp / name).read_bytes() == (source / name).read_bytes()
        assert (moved / name).exists()
    for name in leftovers:
        assert (stamp / name).read_bytes() == (source / name).read_bytes()
        assert not (moved / name).exists()
    assert "unfinished" in (stamp / "NOTE.txt").read_text()
    for name in ("00000000000000000000.log", "00000000000000000036.log"):
        assert (moved / name).read_bytes() == (source / name).read_bytes()


# -- the lock -------------------------------------------------------------------------------------
OPEN_WRITABLE = textwrap.dedent(
    """
    import sys
    from kafkalog.log.datadir.manager import DataDirLockedError, LogManager
    try:
        manager = LogManager(sys.argv[1], writable=True)
    except DataDirLockedError as e:
        print("DataDirLockedError", e)
        sys.exit(3)
    print("opened", flush=True)
    sys.stdin.readline()  # hold the lock until told
    manager.close()
    """
)


def run_opener(directory: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", OPEN_WRITABLE, str(directory)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,
    )  # fmt: skip


def test_a_second_process_cannot_open_a_locked_data_dir_for_writing(tmp_path: Path) -> None:
    with LogManager(tmp_path, writable=True):
        other = run_opener(tmp_path)
        out, err = other.communicate(timeout=60)
        assert other.returncode == 3, err
        assert out.startswith("DataDirLockedError") and "Failed to acquire lock" in out
        LogManager(tmp_path).close()  # reading needs no lock
    # ... and the other way round: while another process holds it, this one cannot.
    holder = run_opener(tmp_path)
    try:
        assert holder.stdout.readline().strip() == "opened"
        with pytest.raises(DataDirLockedError):
            LogManager(tmp_path, writable=True)
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    LogManager(tmp_path, writable=True).close()  # released when the holder closed


# -- checkpoints, marker, recovery ----------------------------------------------------------------
def test_a_clean_close_writes_checkpoints_and_the_marker(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        logs = manager.create_topic("orders", 2, {"internal.segment.bytes": 500})
        for i in range(20):
            logs[i % 2].append_as_leader(client_batch([b"v" * 40]))
        logs[0].increment_log_start_offset(3)
        ends = [log.log_end_offset for log in logs]
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("orders", 0): ends[0], ("orders", 1): ends[1],
    }  # fmt: skip
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {
        ("orders", 0): 3, ("orders", 1): 0,
    }  # fmt: skip
    files = digest(tmp_path)
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        log = manager.get_log(TopicPartition("orders", 0))
        assert (log.log_start_offset, log.log_end_offset) == (3, ends[0])
        assert log.config["internal.segment.bytes"] == 500
        assert not any(QUARANTINE_DIR_NAME in p for p in digest(tmp_path))
    after = digest(tmp_path)
    assert after == files  # a clean reopen and close rewrites the same bytes


def test_altered_configs_reach_open_logs_and_survive_a_reopen(tmp_path: Path) -> None:
    with LogManager(tmp_path, writable=True, clock=MockClock(now_ms=T0)) as manager:
        logs = manager.create_topic("orders", 2, {"retention.ms": "1000"})
        manager.alter_topic_configs("orders", {"retention.ms": "5000", "cleanup.policy": "compact"})
        assert [log.config["retention.ms"] for log in logs] == [5000, 5000]
        with pytest.raises(KafkalogError):
            manager.alter_topic_configs("orders", {"retention.ms": "soon"})
        assert logs[0].config["retention.ms"] == 5000  # a refused change leaves the old one
    with LogManager(tmp_path, clock=MockClock(now_ms=T0)) as manager:
        assert manager.config_for("orders").as_strings() == {
            "retention.ms": "5000", "cleanup.policy": "compact"}  # fmt: skip


def test_a_deleted_topic_leaves_no_directory_config_or_checkpoint_entry(tmp_path: Path) -> None:
    with LogManager(tmp_path, writable=True, clock=MockClock(now_ms=T0)) as manager:
        manager.create_topic("gone", 3)
        manager.create_topic("kept", 1)
        assert manager.delete_topic("gone") == 3
        assert manager.topics() == {"kept": [0]}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]
    topics = json.loads((tmp_path / "kafkalog-topics.json").read_text())["topics"]
    assert sorted(topics) == ["kept"]
    assert set(read_checkpoint(tmp_path / "recovery-point-offset-checkpoint")) == {("kept", 0)}


def test_after_a_crash_recovery_keeps_what_was_written_and_rebuilds_indexes(
    tmp_path: Path,
) -> None:
    # What a SIGKILL leaves is what the page cache holds: a copy taken while the manager is
    # open, without the marker, checkpoints as of the last checkpoint(), indexes preallocated.
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    clock = MockClock(now_ms=T0)
    manager = LogManager(live, writable=True, create=True, clock=clock)
    (log,) = manager.create_topic("t", 1, {"internal.segment.bytes": 600,
                                           "index.interval.bytes": 100})  # fmt: skip
    for i in range(12):
        log.append_as_leader(client_batch([b"v" * 60], ts=T0 + i))
    log.flush()
    manager.checkpoint()
    checkpointed = log.recovery_point
    for i in range(12, 30):
        log.append_as_leader(client_batch([b"v" * 60], ts=T0 + i))
    shutil.copytree(live, crashed, ignore=shutil.ignore_patterns(".lock"))
    manager.close()
    assert read_checkpoint(crashed / "recovery-point-offset-checkpoint") == {("t", 0): checkpointed}
    active = max(crashed.glob("t-0/*.index"))
    assert active.stat().st_size == 10 << 20  # untrimmed, as a crashed broker leaves it
    with LogManager(crashed, writable=True, clock=clock) as reopened:
        log = reopened.get_log(TopicPartition("t", 0))
        assert log.log_end_offset == 30
        assert [r[0] for r in log_view(log)] == list(range(30))
    assert partition_records(crashed / "t-0") == partition_records(live / "t-0")
    for index in (crashed / "t-0").glob("*.index"):
        assert index.read_bytes() == (live / "t-0" / index.name).read_bytes()


def test_internal_topics_are_compacted_when_nothing_records_their_configs(tmp_path: Path) -> None:
    # Kafka creates them with cleanup.policy=compact (GroupCoordinatorService,
    # TransactionCoordinator); a copied disk without metadata must not look like delete topics.
    from kafkalog.log.datadir.manager import (
        CONFIG_FROM_DEFAULTS,
        CONFIG_FROM_INTERNAL_TOPIC,
        CONFIG_FROM_TOPICS_FILE,
        TOPICS_FILE_NAME,
    )

    with LogManager(tmp_path, writable=True, clock=MockClock(now_ms=T0)) as manager:
        manager.create_topic("orders", 1, {"retention.ms": "1000"})
        manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "delete"})
    manager = LogManager(tmp_path)
    assert manager.config_source("orders") == CONFIG_FROM_TOPICS_FILE
    assert manager.config_for("__consumer_offsets")["cleanup.policy"] == ("delete",)  # recorded
    (tmp_path / TOPICS_FILE_NAME).unlink()
    manager = LogManager(tmp_path)
    for topic in ("__consumer_offsets", "__transaction_state"):
        assert manager.config_source(topic) == CONFIG_FROM_INTERNAL_TOPIC
        assert manager.config_for(topic)["cleanup.policy"] == ("compact",)
        assert manager.config_for(topic)["segment.bytes"] == 100 * 1024 * 1024
    assert manager.config_source("orders") == CONFIG_FROM_DEFAULTS
    assert manager.config_for("orders")["cleanup.policy"] == ("delete",)


@pytest.mark.parametrize(
    "name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint"]
)
def test_a_malformed_offset_checkpoint_is_reset_with_a_warning(tmp_path: Path, name: str) -> None:
    # Kafka's LogManager.loadLogs: "Error occurred while reading ... resetting", then it loads.
    clock = MockClock(now_ms=T0)
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        (log,) = manager.create_topic("orders", 1)
        for _ in range(5):
            log.append_as_leader(client_batch([b"v" * 40]))
    (tmp_path / name).write_text("0\n1\norders 0 x\n")
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        assert len(manager.warnings) == 1 and name in manager.warnings[0]
        assert manager.get_log(TopicPartition("orders", 0)).log_end_offset == 5
    assert read_checkpoint(tmp_path / name) == {("orders", 0): 5 if "recovery" in name else 0}


def test_prepare_runs_before_each_partition_opens(tmp_path: Path) -> None:
    with LogManager(tmp_path, writable=True, clock=MockClock(now_ms=T0)) as manager:
        manager.create_topic("orders", 2)
    seen: list[str] = []
    with LogManager(tmp_path, writable=True, prepare=lambda d: seen.append(d.name)) as manager:
        assert sorted(seen) == ["orders-0", "orders-1"] and len(manager.logs) == 2


def test_a_malformed_clean_shutdown_marker_still_means_a_clean_shutdown(tmp_path: Path) -> None:
    # Kafka's LogManager.loadLogs checks the marker's existence; CleanShutdownFileHandler.read
    # only logs a content it cannot parse.
    clock = MockClock(now_ms=T0)
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        (log,) = manager.create_topic("orders", 1)
        log.append_as_leader(client_batch([b"v"]))
    (tmp_path / ".kafka_cleanshutdown").write_text("{not json")
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        assert len(manager.warnings) == 1 and ".kafka_cleanshutdown" in manager.warnings[0]
        assert manager.get_log(TopicPartition("orders", 0)).load_notes == []  # nothing recovered
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_the_broker_epoch_of_the_marker_found_is_written_back(tmp_path: Path) -> None:
    """A KRaft broker registers with the epoch its marker holds (KIP-966): a kafkalog writer in
    between keeps it, so the controller still sees a clean shutdown."""
    clock = MockClock(now_ms=T0)
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        manager.create_topic("orders", 1)
    marker = tmp_path / ".kafka_cleanshutdown"
    marker.write_text('{"version":0,"brokerEpoch":42}')  # as Kafka writes it
    with LogManager(tmp_path, writable=True, clock=clock) as manager:
        assert not marker.exists()
        manager.get_log(TopicPartition("orders", 0)).append_as_leader(client_batch([b"v"]))
    assert marker.read_text() == '{"version":0,"brokerEpoch":42}'
    marker.write_text("")  # a pre-3.6 broker's: stays empty
    with LogManager(tmp_path, writable=True, clock=clock):
        pass
    assert marker.read_text() == ""


# -- the lock of the data directory that really holds a partition (symlinks) -----------------------
def _symlinked(tmp_path: Path) -> tuple[Path, Path]:
    """DATA with a topic, and other/ holding ``t-0`` as a symlink to DATA/t-0."""
    data = tmp_path / "DATA"
    with LogManager(data, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        manager.create_topic("t", 1, {})
    other = tmp_path / "other"
    other.mkdir()
    (other / "t-0").symlink_to(data / "t-0", target_is_directory=True)
    return data, other


def test_a_symlinked_partition_makes_a_writer_lock_its_real_data_dir(tmp_path: Path) -> None:
    """A broker holds DATA/.lock; opening other/ (whose t-0 is DATA's) for writing must fail,
    not lock other/.lock and change the live partition."""
    data, other = _symlinked(tmp_path)
    holder = run_opener(data)
    try:
        assert holder.stdout.readline().strip() == "opened"
        with pytest.raises(DataDirLockedError, match=f"lock on file .lock in .*{data.name}"):
            LogManager(other, writable=True)
        LogManager(other).close()  # reading needs no lock
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    with LogManager(other, writable=True) as manager:  # free again: both locks taken
        assert TopicPartition("t", 0) in manager.logs
        other_process = run_opener(data)
        out, _ = other_process.communicate(timeout=60)
        assert other_process.returncode == 3 and out.startswith("DataDirLockedError")


def test_a_data_dir_given_twice_through_a_symlink_is_locked_once(tmp_path: Path) -> None:
    data = tmp_path / "DATA"
    LogManager(data, writable=True, create=True).close()
    alias = tmp_path / "alias"
    alias.symlink_to(data, target_is_directory=True)
    LogManager([data], writable=True).close()
    from kafkalog.log.datadir.dir_lock import real_data_dirs

    assert real_data_dirs([data, alias]) == [data.resolve()]


def test_a_deeply_nested_topics_file_is_a_typed_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    LogManager(data, writable=True, create=True).close()
    topics = data / "kafkalog-topics.json"
    topics.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(KafkalogError, match="JSON nested 100000 deep") as info:
        LogManager(data)
    assert info.value.path == str(topics)


def test_a_fifo_named_like_a_segment_is_refused_unopened(tmp_path: Path) -> None:
    import os

    data = tmp_path / "data"
    with LogManager(data, writable=True, create=True) as manager:
        manager.create_topic("t", 1, {})
    fifo = data / "t-0" / "00000000000000000000.log"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=r"not a regular file \(a FIFO\)") as info:
        LogManager(data)
    assert info.value.filename == str(fifo)
