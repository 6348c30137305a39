"""Crash safety of the log layer: a writer killed at random moments, and simulated power loss.

1. A real writer process (crash_writer.py: LogManager writable, append, flush, print ``ack <last
   offset>``) is killed with SIGKILL 100 times, mostly 20-200 ms into its appends, sometimes while
   it opens the directory. After each kill the data directory is reopened writable (recovery),
   checked and closed, and the next writer continues appending to it; one crash in ten is left to
   the next writer to recover instead, and that writer is killed while it opens the directory, so
   recovery itself gets cut short and must be recoverable.
2. Power loss: an in-process writer runs with os.pwrite, os.fsync, os.ftruncate and os.open
   wrapped so that every write to a ``.log`` file (file, position, bytes), every fsync and every
   file creation is recorded; at a random operation the directory's bytes are captured (what the
   page cache held) and the writer stopped. The disk after the power cut is rebuilt from that:
   each ``.log`` is what its last fsync made durable plus an arbitrary prefix of the bytes written
   after it, then maybe a zero-filled or garbage tail; files created since their directory was
   last fsynced may be gone; indexes are kept, cut, emptied, zero-filled or deleted (those of
   segments below the checkpointed recovery point only in the ways their flush allows). The
   recording stands in for the disk, so fsyncs and index msyncs are recorded, not performed.

Writers are forked by crash_writer.py's server mode from a process that has imported kafkalog
already (each is still a process of its own, killed by pid): that keeps 100 kills well under a
minute. Checks after recovery, with kafka-python's decoder as the independent reader: every segment
decodes to its last byte with valid CRCs; offsets run without gaps and every record is the one
the writer wrote at that offset (key = sequence number = offset); every acknowledged (flushed)
offset is there; offset and time index entries point at the batches they name and lookups agree
with a scan; checkpoints agree with the log; bytes cut by recovery are in the quarantine folder.
"""

from __future__ import annotations

import hashlib
import os
import queue
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KpRecords

from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.partition.log import Log
from kafkalog.log.partition.quarantine import QUARANTINE_DIR_NAME
from kafkalog.log.segment.index import AbstractIndex

from . import crash_writer

pytestmark = pytest.mark.slow

WRITER = Path(crash_writer.__file__).resolve()
PARTITION_DIR = "crash-0"
KILLS = 100
POWER_CUTS = 60
INDEX_BYTES = 1 << 16  # the power-loss topic's segment.index.bytes: an untrimmed index's size


# -- checking a partition -------------------------------------------------------------------------
class Checker:
    """Checks a partition directory; segments already decoded (same bytes) are not decoded again."""

    def __init__(self) -> None:
        self.decoded: dict[tuple[str, str], list[tuple]] = {}

    def segment_batches(self, path: Path) -> list[tuple]:
        """(position, size, base offset, last offset, max timestamp) per batch, by kafka-python;
        fails unless every CRC is valid, every record is the writer's and the bytes end whole."""
        data = path.read_bytes()
        key = (path.name, hashlib.sha256(data).hexdigest())
        if key not in self.decoded:
            out, pos, records = [], 0, KpRecords(data)
            while records.has_next():
                batch = records.next_batch()
                assert batch.validate_crc(), f"{path.name}: bad CRC at {pos}"
                size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
                for r in batch:
                    assert (r.key, r.value) == (
                        crash_writer.key_for(r.offset), crash_writer.value_for(r.offset),
                    ), f"{path.name}: record at offset {r.offset} is not the writer's"  # fmt: skip
                out.append((pos, size, batch.base_offset, batch.last_offset, batch.max_timestamp))
                pos += size
            assert pos == len(data), f"{path.name}: torn bytes from {pos} to {len(data)}"
            self.decoded[key] = out
        return self.decoded[key]

    def check(self, partition: Path, acked: int, *, trimmed: bool) -> int:
        """Check a closed (``trimmed``) or open partition; returns its log end offset."""
        segments = sorted(partition.glob("*.log"))
        assert segments, "no segment"
        expected_next = int(segments[0].name[:20])
        for path in segments:
            base = int(path.name[:20])
            batches = self.segment_batches(path)
            # Offsets run on without gaps from segment to segment.
            assert base == expected_next, f"{path.name}: gap or overlap before it"
            for _, _, first, last, _ in batches:
                assert first == expected_next
                expected_next = last + 1
            self.check_indexes(path, base, batches, trimmed=trimmed)
        assert expected_next > acked, f"acknowledged offset {acked} lost (log ends {expected_next})"
        return expected_next

    @staticmethod
    def check_indexes(path: Path, base: int, batches: list[tuple], *, trimmed: bool) -> None:
        by_position = {b[0]: b for b in batches}
        index, timeindex = path.with_suffix(".index"), path.with_suffix(".timeindex")
        if trimmed:
            assert index.stat().st_size % 8 == 0 and timeindex.stat().st_size % 12 == 0
        previous = -1
        for slot, (offset, position) in enumerate(entries(index, ">ii", base)):
            batch = by_position.get(position)
            assert batch is not None and batch[3] == offset, f"{index.name}: entry {slot}"
            assert offset > previous
            previous = offset
        previous_ts = -1
        last_offsets = [b[3] for b in batches]
        for slot, (ts, offset) in enumerate(entries(timeindex, ">qi", base)):
            assert offset in last_offsets, f"{timeindex.name}: entry {slot} names no batch end"
            holder = batches[last_offsets.index(offset)]
            assert holder[4] == ts and ts > previous_ts, f"{timeindex.name}: entry {slot}"
            previous_ts = ts


def entries(path: Path, layout: str, base: int) -> list[tuple[int, int]]:
    """Absolute entries of an index file, ending at the first unwritten slot (Kafka's rule)."""
    size = struct.calcsize(layout)
    data = path.read_bytes() if path.exists() else b""
    out = []
    for i in range(len(data) // size):
        a, b = struct.unpack_from(layout, data, i * size)
        relative = a if layout == ">ii" else b
        if (i > 0 and relative == 0) or (a, b) == (0, 0):
            break
        out.append((base + a, b) if layout == ">ii" else (a, base + b))
    return out


def check_lookups(log: Log, checker: Checker, rng: random.Random, samples: int = 40) -> None:
    """Reads by offset and lookups by timestamp through kafkalog agree with a scan."""
    scan = []
    for path in sorted(log.dir.glob("*.log")):
        scan += [(int(path.name[:20]), b) for b in checker.segment_batches(path)]
    if not scan:
        return
    for _ in range(samples):
        base, (position, _size, first, last, _max_ts) = rng.choice(scan)
        target = rng.randint(first, last)
        info = log.read(target, 1)
        assert (info.fetch_offset_metadata.segment_base_offset, info.records.start) == (
            base, position,
        )  # fmt: skip
        # Timestamps are T0 + offset: the first record at or after a time is at that offset.
        found = log.fetch_offset_by_timestamp(crash_writer.T0 + target)
        assert (found.timestamp, found.offset) == (crash_writer.T0 + target, target)


def read_checkpoint(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    version, count, *lines = path.read_text().splitlines()
    assert version == "0" and int(count) == len(lines)
    return {f"{t}-{p}": int(o) for t, p, o in (line.split(" ") for line in lines)}


def check_closed_checkpoints(data: Path, log_end: int) -> None:
    assert (data / ".kafka_cleanshutdown").exists()
    assert read_checkpoint(data / "recovery-point-offset-checkpoint") == {PARTITION_DIR: log_end}
    assert read_checkpoint(data / "log-start-offset-checkpoint") == {PARTITION_DIR: 0}
    snapshots = [int(p.name[:20]) for p in (data / PARTITION_DIR).glob("*.snapshot")]
    assert snapshots and max(snapshots) == log_end  # written at close
    epochs = (data / PARTITION_DIR / "leader-epoch-checkpoint").read_text().split()
    assert epochs[:4] == ["0", "1", "0", "0"]  # one epoch, 0, from offset 0


# -- 1. SIGKILL -----------------------------------------------------------------------------------
class Lines:
    """The lines a process prints, read by a thread (select() cannot see what a buffered
    reader already holds)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.queue.put(line)
        self.queue.put("")  # end of output

    def next(self, timeout: float = 60, *, seen: list[str] = ()) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            line = ""
        assert line, f"no answer from the writer server (exit {self.proc.poll()}) after {seen}"
        return line


def test_a_writer_killed_at_random_moments_loses_no_acknowledged_record(tmp_path: Path) -> None:
    rng = random.Random(20260401)
    data = tmp_path / "data"
    checker = Checker()
    acked = -1
    kills_in_appends = 0
    started = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, str(WRITER), "--serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
    )  # fmt: skip
    lines_of = Lines(server)
    try:
        for cycle in range(KILLS):
            server.stdin.write(f"run {data} {rng.randrange(1 << 30)}\n")
            server.stdin.flush()
            line = lines_of.next()
            assert line.startswith("pid "), line
            writer = int(line.split()[1])
            lines = []
            if cycle % 5 == 4:  # while it opens (after cycles 3, 13, ...: and recovers) the dir
                time.sleep(rng.uniform(0.0, 0.03))
            else:
                lines.append(lines_of.next(seen=lines))
                assert lines[0].startswith("open "), lines
                time.sleep(rng.uniform(0.02, 0.2))
            os.kill(writer, signal.SIGKILL)
            while not lines or not lines[-1].startswith("exit "):
                lines.append(lines_of.next(seen=lines))
            status = int(lines[-1].split()[1])
            # It died of the kill, not of an error (a traceback would be on stderr).
            assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL, lines
            acks = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
            kills_in_appends += bool(acks)
            acked = max([acked, *acks])
            partition = data / PARTITION_DIR
            if not partition.is_dir():
                continue  # killed before the topic existed
            # The disk as the kill left it: checkpoints never ahead of what is there.
            crashed_points = read_checkpoint(data / "recovery-point-offset-checkpoint")
            if cycle % 10 == 3:
                # Leave this crash to the next writer, which recovers the directory itself and
                # is killed while it opens it: recovery must survive being cut short too. Here
                # only a read-only look, which changes nothing.
                before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
                with LogManager(data) as reader:
                    assert reader.get_log(crash_writer.PARTITION).log_end_offset > acked
                assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
                continue
            # Reopen writable: recovery. Then the log must hold every acknowledged record.
            with LogManager(data, writable=True) as manager:
                log = manager.get_log(crash_writer.PARTITION)
                assert log.log_end_offset > acked
                assert crashed_points.get(PARTITION_DIR, 0) <= log.log_end_offset
                assert log.recovery_point == log.log_end_offset
                check_lookups(log, checker, rng)
                log_end = log.log_end_offset
            assert checker.check(partition, acked, trimmed=True) == log_end
            check_closed_checkpoints(data, log_end)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert acked > 0 and kills_in_appends >= KILLS // 2
    cuts = len(list((data / PARTITION_DIR).glob(f"{QUARANTINE_DIR_NAME}/*/*.cut-at-*")))
    print(f"{KILLS} kills ({kills_in_appends} while appending), {acked + 1} records acknowledged, "
          f"{cuts} torn tails cut, {time.monotonic() - started:.1f} s")  # fmt: skip


# -- 2. power loss --------------------------------------------------------------------------------
class Crash(BaseException):
    """Raised inside a wrapped system call when the power goes."""


class RecordingDisk:
    """What the writer asked of the disk, and what had been made durable, for files under root."""

    def __init__(self, root: Path, budget: int) -> None:
        self.root = str(root)
        self.budget = budget
        self.ops = 0
        self.durable: dict[str, bytes] = {}  # .log -> its bytes when last fsynced
        self.after: dict[str, list[tuple[str, int, bytes]]] = {}  # .log -> writes since
        self.created: list[tuple[int, str]] = []  # (op number, path) of files os.open created
        self.dir_synced: dict[str, int] = {}  # directory -> op number of its last fsync
        self.image: dict[str, bytes] | None = None  # every file's bytes when the power went
        self.acked = 0  # log end offset when the last Log.flush returned

    def _path(self, fd: int) -> str:
        return os.readlink(f"/proc/self/fd/{fd}")

    def _mine(self, path: str) -> bool:
        return path.startswith(self.root + os.sep)

    def _tick(self) -> None:
        self.ops += 1
        if self.ops >= self.budget:
            self.power_off()

    def power_off(self) -> None:
        if self.image is None:
            self.image = {
                str(p): p.read_bytes()
                for p in Path(self.root).rglob("*")
                if p.is_file() and p.name != ".lock"
            }
        raise Crash

    def install(self, monkeypatch) -> None:
        real_pwrite, real_fsync = os.pwrite, os.fsync
        real_ftruncate, real_open = os.ftruncate, os.open

        def pwrite(fd, data, position):
            path = self._path(fd)
            if self._mine(path):
                self._tick()
                if path.endswith(".log"):
                    self.after.setdefault(path, []).append(("write", position, bytes(data)))
            return real_pwrite(fd, data, position)

        def fsync(fd):
            path = self._path(fd)
            if not self._mine(path):
                return real_fsync(fd)
            # This model is the disk: what the fsync makes durable is recorded here, so the real
            # (slow) fsync is not needed.
            self._tick()
            if os.path.isdir(path):
                self.dir_synced[path] = self.ops
            elif path.endswith(".log"):
                self.durable[path] = Path(path).read_bytes()
                self.after[path] = []

        def ftruncate(fd, length):
            path = self._path(fd)
            if self._mine(path):
                self._tick()
                if path.endswith(".log"):
                    self.after.setdefault(path, []).append(("truncate", length, b""))
            return real_ftruncate(fd, length)

        def open_(path, flags, mode=0o777, *args, **kw):
            path = os.fspath(path)
            new = bool(flags & os.O_CREAT) and not os.path.exists(path)
            if new and self._mine(os.path.abspath(path)):
                self._tick()
            fd = real_open(path, flags, mode, *args, **kw)
            if new and self._mine(os.path.abspath(path)):
                self.created.append((self.ops, os.path.abspath(path)))
            return fd

        def index_flush(index):
            # An index msync: what indexes hold after the cut is drawn in after_power_cut (in
            # the ways their flushes allow), so it is an operation the power can cut before,
            # and nothing more.
            if self._mine(str(index.file)):
                self._tick()

        monkeypatch.setattr(AbstractIndex, "flush", index_flush)
        monkeypatch.setattr(os, "pwrite", pwrite)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "ftruncate", ftruncate)
        monkeypatch.setattr(os, "open", open_)

    def after_power_cut(self, target: Path, rng: random.Random) -> dict[str, tuple[bytes, int]]:
        """Write the disk as found after the cut under ``target``; returns, per ``.log`` left,
        (its bytes, the length of its durable part)."""
        assert self.image is not None
        files = dict(self.image)
        # Files created after their directory's last fsync may have no directory entry: drop
        # a suffix of them, in creation order.
        volatile = [p for op, p in self.created
                    if op > self.dir_synced.get(os.path.dirname(p), -1) and p in files]  # fmt: skip
        if volatile and rng.random() < 0.5:
            for path in volatile[rng.randrange(len(volatile)) :]:
                del files[path]
        checkpoint = files.get(os.path.join(self.root, "recovery-point-offset-checkpoint"))
        recovery_point = 0
        if checkpoint is not None:
            lines = checkpoint.decode().splitlines()[2:]
            recovery_point = int(lines[0].split()[2]) if lines else 0
        logs = sorted(p for p in files if p.endswith(".log"))
        bases = [int(os.path.basename(p)[:20]) for p in logs]
        first_recovered = max([b for b in bases if b <= recovery_point], default=0)
        result = {}
        for path in logs:
            durable = self.durable.get(path, b"")
            writes = self.after.get(path, [])
            later = b"".join(data for kind, _, data in writes)
            if any(kind != "write" for kind, _, _ in writes) or files[path] != durable + later:
                data = files[path]  # not plain appends after the fsync: keep what was there
            else:
                # A prefix of what was written since; then, within what those writes extended
                # the file to, blocks that never got their data: zeros, or stale garbage.
                kept = rng.randint(0, len(later))
                data = durable + later[:kept]
                room = len(later) - kept
                tail = rng.choice(["none", "none", "zeros", "garbage"]) if room else "none"
                if tail == "zeros":
                    data += bytes(rng.randint(1, room))
                elif tail == "garbage":
                    data += rng.randbytes(rng.randint(1, room))
            files[path] = data
            result[path] = (data, len(durable))
        for path in list(files):
            if not path.endswith((".index", ".timeindex")):
                if path.endswith(".snapshot") and rng.random() < 0.2:
                    del files[path]
                continue
            base = int(os.path.basename(path)[:20])
            entry = 8 if path.endswith(".index") else 12
            data = files[path]
            if base < first_recovered:  # flushed: only what a flushed file can look like
                choice = rng.choice(["keep", "keep", "fewer entries", "delete", "untrimmed"])
            else:
                choice = rng.choice(["keep", "cut", "delete", "zeros", "garbage"])
            if choice == "delete":
                del files[path]
            elif choice == "fewer entries":
                files[path] = data[: entry * rng.randint(0, len(data) // entry)]
            elif choice == "untrimmed":
                files[path] = data + bytes(INDEX_BYTES - len(data))
            elif choice == "cut":
                files[path] = data[: rng.randint(0, len(data))]
            elif choice == "zeros":
                files[path] = bytes(len(data))
            elif choice == "garbage":
                files[path] = rng.randbytes(len(data))
        for path, data in files.items():
            out = target / os.path.relpath(path, self.root)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        return {os.path.relpath(p, self.root): v for p, v in result.items()}


def powerloss_writer(root: Path, disk: RecordingDisk, rng: random.Random) -> None:
    manager = LogManager(root, writable=True, create=True, clock=MockClock(now_ms=crash_writer.T0))
    configs = {**crash_writer.TOPIC_CONFIGS, "internal.segment.bytes": "4096",
               "index.interval.bytes": "300", "segment.index.bytes": str(INDEX_BYTES)}  # fmt: skip
    (log,) = manager.create_topic(crash_writer.TOPIC, 1, configs)
    seq = 0
    for _ in range(150):
        count = rng.randint(1, 4)
        log.append_as_leader(crash_writer.build_batch(seq, count, 77, seq))
        seq += count
        if rng.random() < 0.35:
            log.flush()
            disk.acked = log.log_end_offset  # the flush returned
        if rng.random() < 0.1:
            manager.checkpoint()
    disk.power_off()


def valid_prefix(data: bytes) -> int:
    """Bytes of whole batches with valid CRCs at the front of ``data`` (kafka-python)."""
    pos, records = 0, KpRecords(data)
    try:
        while records.has_next():
            batch = records.next_batch()
            if batch is None or not batch.validate_crc():
                break
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    except Exception:  # a size field kafka-python cannot take: the batch is not valid
        pass
    return pos


@pytest.mark.parametrize("seed", range(POWER_CUTS))
def test_after_a_power_cut_recovery_keeps_every_flushed_record(
    tmp_path: Path, monkeypatch, seed: int
) -> None:
    rng = random.Random(seed)
    live, after = tmp_path / "live", tmp_path / "after"
    disk = RecordingDisk(live, budget=rng.randint(1, 700))
    with monkeypatch.context() as patched:
        disk.install(patched)
        with pytest.raises(Crash):
            powerloss_writer(live, disk, rng)
    found = disk.after_power_cut(after, rng)
    rel = f"{PARTITION_DIR}/"
    logs = {p: v for p, v in found.items() if p.startswith(rel)}
    if not logs:
        assert disk.acked == 0
        return
    checker = Checker()
    with LogManager(after, writable=True, clock=MockClock(now_ms=crash_writer.T0)) as manager:
        log = manager.get_log(crash_writer.PARTITION)
        assert log.log_end_offset >= disk.acked, "a flushed record was lost"
        check_lookups(log, checker, rng)
        log_end = log.log_end_offset
        # The log takes appends again where it ends.
        info = log.append_as_leader(crash_writer.build_batch(log_end, 2, 78, 0))
        assert info.first_offset == log_end
        log_end += 2
    partition = after / PARTITION_DIR
    assert checker.check(partition, disk.acked - 1, trimmed=True) == log_end
    check_closed_checkpoints(after, log_end)
    # Everything recovery cut is in the quarantine folder: the bytes after the last whole batch
    # of the first damaged segment, and every later segment whole.
    quarantined = {p.name: p.read_bytes() for p in partition.glob(f"{QUARANTINE_DIR_NAME}/*/*")}
    damaged = False
    for path in sorted(logs):
        data, durable = logs[path]
        name = os.path.basename(path)
        valid = valid_prefix(data)
        assert valid >= durable, f"{name}: fsynced bytes are not whole batches"
        if damaged:
            assert quarantined.get(name) == data, f"{name}: not moved to quarantine"
            assert not (partition / name).exists() or int(name[:20]) >= log_end - 2
        elif valid < len(data):
            damaged = True
            assert quarantined.get(f"{name}.cut-at-{valid}") == data[valid:], name
            assert (partition / name).read_bytes()[:valid] == data[:valid]
        else:
            assert (partition / name).read_bytes()[: len(data)] == data
