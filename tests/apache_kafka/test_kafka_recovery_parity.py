"""Kafka's recovery and Kafka's indexes are the reference for kafkalog's.

- *Index byte-equality*: ``kafkalog rebuild-index --apply`` on a copy of each partition Kafka
  wrote must write the ``.index`` and ``.timeindex`` files Kafka wrote: byte for byte for the
  segments Kafka trimmed (rolled segments, and every segment after a clean shutdown); for an
  active segment a SIGKILL left preallocated, Kafka's entries up to its first empty slot must be
  ours, and we may add only the max-timestamp entry Kafka appends when it closes a segment.
- *SIGKILL recovery parity*: a broker loaded by Kafka's producers (plain, idempotent,
  LogAppendTime, transactional with a transaction open; every codec; segments rolled on size,
  time and full index) is killed with SIGKILL in the middle of the load. The tail of several
  partitions is then damaged as a crash could leave it (torn batch, zero tail, bad CRC, partial
  header, absurd length), a byte flipped in an old segment below the recovery point (which
  Kafka trusts), and in a middle segment of a partition whose recovery point is dropped from
  the checkpoint (cut there, later segments deleted); the directory is copied twice, and
  ``kafkalog recover --apply`` runs on one copy while a Kafka broker restarts on the other
  (Kafka's own log recovery) and stops cleanly. Every partition's ``.log`` files, log end
  offsets and indexes must then be identical, ``kafkalog verify`` must find no error in Kafka's
  result but the damage Kafka trusted, and kafkalog must read from its copy what Kafka's
  consumer read from the restarted broker. The producer snapshots differ (a strict xfail).
- *Export*: ``kafkalog export`` (Parquet and JSON lines) returns what Kafka's Java consumer read
  from the cleanly stopped broker of the ``kafka_written`` run (consume, open_data_dir and verify
  on that directory are test_kafka_writes_kafkalog_reads.py's).

Every expected value comes from Kafka: its files, its recovery (and its log lines), its consumer.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import io
import json
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.cli.main import main as kafkalog_main

pytestmark = pytest.mark.slow

LEVELS = ("read_uncommitted", "read_committed")
DAY = 86_400_000
# The load's first timestamps: 400 days ago (midnight UTC), so that 8 days a round stays in the
# past (Kafka refuses timestamps more than an hour ahead) and every producer is long expired
# (producer.id.expiration.ms, a day) when the broker restarts.
T0 = (time.time_ns() // 1_000_000 // DAY - 400) * DAY
OFFSET_ENTRY, TIME_ENTRY = 8, 12

# The topics of the killed load (2 partitions each): topic configs, and the configs of the
# Kafka producer writing them. Small index intervals give many index entries per segment;
# internal.segment.bytes (Kafka 4.x's test-only size below segment.bytes' 1 MiB minimum) rolls
# on size, segment.index.bytes on a full index, timestamps 8 days apart per round on segment.ms.
PLAIN = {"enable.idempotence": "false", "acks": "1", "linger.ms": "5"}
IDEMPOTENT = {"enable.idempotence": "true", "acks": "all", "linger.ms": "5"}
LOAD = {
    "plain": (
        {"index.interval.bytes": "256", "internal.segment.bytes": "65536"},
        {**PLAIN, "compression.type": "none", "batch.size": "4096"},
    ),
    "lz4": (
        {"index.interval.bytes": "128", "segment.index.bytes": "1000"},
        {**IDEMPOTENT, "compression.type": "lz4", "batch.size": "2048"},
    ),
    "zstd": (
        {"index.interval.bytes": "100"},
        {**PLAIN, "compression.type": "zstd", "batch.size": "8192"},
    ),
    "gzip-lat": (
        {
            "index.interval.bytes": "512",
            "internal.segment.bytes": "49152",
            "message.timestamp.type": "LogAppendTime",
        },
        {**IDEMPOTENT, "compression.type": "gzip", "batch.size": "4096"},
    ),
}
TXN_TOPIC = "txn"
TXN_TOPIC_CONFIGS = {"index.interval.bytes": "200", "internal.segment.bytes": "32768"}
TXN_PRODUCER = {
    "compression.type": "snappy",
    "linger.ms": "5",
    # The transaction left open by the kill must not time out (and be aborted by the restarted
    # broker's coordinator, which would append markers) while the test looks.
    "transaction.timeout.ms": "600000",
}
TOPICS = [*LOAD, TXN_TOPIC]
# What Kafka's consumer reads from the restarted broker: not zstd, whose partition 1 keeps the
# damage Kafka's recovery trusted (below the recovery point): Kafka serves that batch and its
# consumer stops there (a CRC error).
READ = [t for t in TOPICS if t != "zstd"]
KILL_AT_BYTES = 1_500_000  # the load topics' .log bytes on disk when the broker is killed
# The broker checkpoints recovery points every second from its first second on (not every
# minute after 30 s): the kill leaves segments below the recovery point (trusted by Kafka's
# recovery) and above it (re-checked). The killed broker's registration holds the restarted one
# off until its session expires (DUPLICATE_BROKER_REGISTRATION): 3 s, not 9.
BROKER = {
    "log.flush.offset.checkpoint.interval.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
}


def _kafkalog(*args: str, check_rc: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("kafkalog")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]
    proc = subprocess.run(
        [*cmd, *args], capture_output=True, encoding="utf-8", check=False, timeout=600
    )
    assert proc.returncode in check_rc, (args, proc.returncode, proc.stdout[-3000:], proc.stderr)
    return proc


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _record(topic: str, partition: int, i: int, ts: int | None, rnd: random.Random) -> dict:
    kind = (i // 2) % 6  # every shape in each of the two partitions
    key = None if kind == 0 else f"{topic}-key-{i % 17}".encode()
    if kind == 1:
        value = None
    elif kind == 2:
        value = rnd.randbytes(rnd.randrange(1, 400))
    else:
        value = (f"{topic} record {i} ✓ " * rnd.randrange(1, 30)).encode()
    headers = [["h", _b64(str(i).encode())], ["n", None]] if i // 2 % 4 == 1 else []
    rec = {"topic": topic, "partition": partition, "key": _b64(key), "value": _b64(value)}
    rec["headers"] = headers
    if ts is not None:
        rec["timestamp"] = ts
    return rec


def _load_lines(rounds: int = 400, per_round: int = 120):
    """Kafka's producers in turn, one stretch per topic and round, until the broker dies:
    each round's timestamps 8 days after the last one's (a segment.ms roll per round)."""
    rnd = random.Random(23)
    for r in range(rounds):
        for topic, (_, producer) in LOAD.items():
            yield {"op": "producer", "configs": producer}
            for i in range(per_round):
                # Explicit timestamps (a producer-set "now" would hold off segment.ms rolls
                # until the rounds catch up with it), some of them out of order.
                ts = T0 + r * 8 * DAY + i * 10 - (5000 if i % 11 == 5 else 0)
                yield _record(topic, i % 2, r * per_round + i, ts, rnd)
                if i % 40 == 39:
                    yield {"op": "flush"}


def _txn_lines():
    """A transactional producer: committed, aborted, committed, then a transaction that stays
    open (records trickling in) until the broker is killed."""
    rnd = random.Random(24)
    yield {"op": "producer", "configs": TXN_PRODUCER, "transactionalId": "recovery-parity-txn"}
    i = 0
    for end, n in (("commit", 40), ("abort", 30), ("commit", 30)):
        yield {"op": "begin"}
        for _ in range(n):
            yield _record(TXN_TOPIC, i % 2, i, T0 + i, rnd)
            i += 1
        yield {"op": end}
    yield {"op": "begin"}
    while True:
        for _ in range(10):
            yield _record(TXN_TOPIC, i % 2, i, T0 + i, rnd)
            i += 1
        yield {"op": "flush"}
        yield ("sleep", 0.05)


def _feed(proc: subprocess.Popen, lines, stop: threading.Event) -> None:
    try:
        for line in lines:
            if stop.is_set():
                return
            if isinstance(line, tuple):
                time.sleep(line[1])
                continue
            proc.stdin.write((json.dumps(line) + "\n").encode())
    except (BrokenPipeError, ValueError, OSError):
        pass  # the producer was killed


def _sparse_copy(src: str, dst: str) -> None:
    """shutil.copy2 that leaves a zero tail as a hole: a killed broker's active segments have
    10 MiB .index and .timeindex files, preallocated, mostly zeros (copies stay small)."""
    data = Path(src).read_bytes()
    end = len(data.rstrip(b"\0"))
    with open(dst, "wb") as out:
        out.write(data[:end])
        out.truncate(len(data))
    shutil.copystat(src, dst)


def _copytree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=_sparse_copy)


def _log_bytes(data_dir: Path, topics) -> int:
    total = 0
    for topic in topics:
        for p in data_dir.glob(f"{topic}-*/*.log"):
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
    return total


# --- Kafka's segments, read with nothing but the format's framing ----------------------------


def _batches(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, last offset) of each whole batch of a .log, by its framing only."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if size < 61 or pos + size > len(data):
            break
        last_delta = int.from_bytes(data[pos + 23 : pos + 27], "big")
        out.append((pos, size, base + last_delta))
        pos += size
    return out


def _segments(partition: Path) -> list[Path]:
    return sorted(partition.glob("*.log"))


def _entries(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data) - len(data) % size, size)]


def _kafka_entries(raw: bytes, size: int, preallocated: bool) -> list[bytes]:
    """Kafka's index entries: the whole file of a trimmed index, the entries before the first
    empty (all-zero) slot of a preallocated one (an entry never is: its relative offset or
    timestamp is never 0 here)."""
    entries = _entries(raw, size)
    if preallocated:
        empty = bytes(size)
        entries = entries[: entries.index(empty)] if empty in entries else entries
    return entries


def _describe_entry(kind: str, entry: bytes | None) -> str:
    if entry is None:
        return "none"
    if kind == ".index":
        rel, pos = int.from_bytes(entry[:4], "big"), int.from_bytes(entry[4:], "big")
        return f"{entry.hex()} (relative offset {rel}, position {pos})"
    ts, rel = int.from_bytes(entry[:8], "big", signed=True), int.from_bytes(entry[8:], "big")
    return f"{entry.hex()} (timestamp {ts}, relative offset {rel})"


@dataclass
class IndexComparison:
    segments: int = 0
    files: int = 0
    entries: int = 0
    preallocated: int = 0  # Kafka's index files still preallocated (compared up to their end)
    never_created: int = 0  # the active segment's index files Kafka had not created yet
    closing_entries: int = 0  # our last time index entry, the one Kafka appends at a close
    killed_entries: int = 0  # ours for the last batch, which the kill left out of Kafka's index
    differences: list[str] = field(default_factory=list)


def _compare_rebuilt_indexes(data_dir: Path, copy: Path) -> IndexComparison:
    """Let ``kafkalog rebuild-index --apply`` rebuild every segment's indexes in ``copy`` (a copy
    of ``data_dir``, so that the topics' configs in its KRaft metadata log are there), one
    partition at a time, and compare them with Kafka's in ``data_dir``."""
    result = IndexComparison()
    partitions = [p for p in sorted(data_dir.iterdir()) if p.is_dir() and _segments(p)]
    for partition in partitions:
        # kafkalog's command line, in-process (a process per partition would take longer than
        # everything else here): the copies rebuild one after the other, under the copy's lock.
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = kafkalog_main(["rebuild-index", "--apply", "--quiet", str(copy / partition.name)])
        assert rc == 0, (partition.name, rc, out.getvalue()[-2000:])
    for partition in partitions:
        segments = _segments(partition)
        for log in segments:
            result.segments += 1
            for kind, size in ((".index", OFFSET_ENTRY), (".timeindex", TIME_ENTRY)):
                theirs_file = log.with_suffix(kind)
                ours_file = copy / partition.name / theirs_file.name
                active = log == segments[-1]
                if active and not theirs_file.exists():
                    # Kafka's indexes are lazy (LazyIndex): a rolled-in segment's files are
                    # created at their first use, so a kill right after a roll leaves a .log
                    # without them. That is an index with no entries yet, still open.
                    raw, result.never_created = b"", result.never_created + 1
                else:
                    raw = theirs_file.read_bytes()
                preallocated = active and (not raw or raw[-size:] == bytes(size))
                theirs = _kafka_entries(raw, size, preallocated)
                ours_raw = ours_file.read_bytes()
                ours = _entries(ours_raw, size)
                result.files += 1
                result.entries += len(theirs)
                result.preallocated += preallocated
                if len(ours_raw) % size:
                    result.differences.append(f"{ours_file}: {len(ours_raw)} bytes")
                if preallocated and len(ours) > len(theirs) and ours[: len(theirs)] == theirs:
                    # Kafka appends a batch to the .log, then its index entries: a SIGKILL in
                    # between leaves the active segment's last batch without them. Allowed only
                    # for entries of that batch (the time index's closing entry is below).
                    last = _batches(log.read_bytes())[-1]
                    extra = [e for e in ours[len(theirs) :] if not _of_batch(kind, e, log, last)]
                    result.killed_entries += len(ours) - len(theirs) - len(extra)
                    ours = theirs + extra
                if preallocated and kind == ".timeindex" and len(ours) == len(theirs) + 1:
                    # Kafka appends the largest timestamp when it rolls or closes a segment (its
                    # recovery too, and so does our rebuild): a preallocated index of a killed
                    # broker's active segment never got it. Allowed only if it is that entry.
                    if ours[-1] == _max_timestamp_entry(log):
                        ours = ours[:-1]
                        result.closing_entries += 1
                for k in range(max(len(theirs), len(ours))):
                    t = theirs[k] if k < len(theirs) else None
                    o = ours[k] if k < len(ours) else None
                    if t != o:
                        result.differences.append(
                            f"{partition.name}/{theirs_file.name}"
                            f"{' (preallocated)' if preallocated else ''} entry {k} of "
                            f"{len(theirs)} (Kafka) / {len(ours)} (kafkalog): "
                            f"Kafka {_describe_entry(kind, t)}, "
                            f"kafkalog {_describe_entry(kind, o)}"
                        )
                        break
    return result


def _of_batch(kind: str, entry: bytes, log: Path, batch: tuple[int, int, int]) -> bool:
    """Whether an index entry points at ``batch`` (position, size, last offset) of ``log``:
    an offset index entry at its position, a time index entry at its last offset."""
    position, _, last = batch
    if kind == ".index":
        return int.from_bytes(entry[4:], "big") == position
    return int.from_bytes(entry[8:], "big") == last - int(log.stem)


def _max_timestamp_entry(log: Path) -> bytes:
    """The time index entry Kafka appends at a segment's close: the largest batch max
    timestamp and the last offset of the (first) batch holding it, relative to the base."""
    data = log.read_bytes()
    base = int(log.stem)
    best = None
    for pos, _, last in _batches(data):
        max_ts = int.from_bytes(data[pos + 35 : pos + 43], "big", signed=True)
        if best is None or max_ts > best[0]:
            best = (max_ts, last)
    assert best is not None, log
    return best[0].to_bytes(8, "big", signed=True) + (best[1] - base).to_bytes(4, "big")


# --- The killed load and the two recoveries -------------------------------------------------


@dataclass
class Recoveries:
    killed: Path  # the data directory as the SIGKILL left it (never touched again)
    damaged_dir: Path  # a copy of it, damaged (see _damage), copied again to the next two
    kafka: Path  # a copy, damaged, then recovered by a Kafka broker restarting on it
    ours: Path  # the same damaged copy, recovered by kafkalog recover --apply
    damaged: dict[str, str]  # partition -> what was done to it
    kafka_log: str  # the restarted broker's server.log
    kafka_read: dict[str, list[dict]]  # Kafka's consumer on the restarted broker, per level
    ours_report: list[dict]  # kafkalog recover --apply --json
    stop_status: int | None  # the killed broker's exit status
    seconds: dict[str, float]  # how long each step took


def _damage(data_dir: Path) -> dict[str, str]:
    """What a crash (or a disk) may leave at the end of a log, one case per partition; the
    other partitions stay as the SIGKILL left them."""
    done = {}

    def active(name: str) -> tuple[Path, bytes, list]:
        # The last segment holding a batch: the active one, unless it was just rolled (then
        # the cut also takes the empty segment after it, in Kafka as in kafkalog).
        log = [p for p in _segments(data_dir / name) if p.stat().st_size][-1]
        data = log.read_bytes()
        batches = _batches(data)
        assert batches and batches[-1][0] + batches[-1][1] == len(data), (log, batches)
        return log, data, batches

    log, data, b = active("plain-0")
    pos, size, _ = b[-1]
    log.write_bytes(data[: pos + size // 2])
    done["plain-0"] = f"{log.name}: last batch torn at half ({size // 2} of {size} bytes)"

    log, data, _ = active("plain-1")
    log.write_bytes(data + bytes(4096))
    done["plain-1"] = f"{log.name}: 4096 zero bytes after the last batch"

    # lz4-0: a flipped byte in a segment in the middle, and its recovery point lost (below):
    # the recovery re-checks it, cuts it there and drops every segment after it.
    segments = [p for p in _segments(data_dir / "lz4-0") if p.stat().st_size]
    log = segments[len(segments) // 2]
    data = log.read_bytes()
    b = _batches(data)
    pos, size, _ = b[len(b) // 2]
    flip = pos + 61 + (size - 61) // 2
    log.write_bytes(data[:flip] + bytes([data[flip] ^ 0x55]) + data[flip + 1 :])
    done["lz4-0"] = (
        f"{log.name} (segment {len(segments) // 2 + 1} of {len(segments)}): a byte of batch "
        f"{len(b) // 2 + 1} of {len(b)} flipped"
    )

    log, data, b = active("lz4-1")
    pos, size, _ = b[-1]
    flip = pos + 61 + (size - 61) // 2
    log.write_bytes(data[:flip] + bytes([data[flip] ^ 0x55]) + data[flip + 1 :])
    done["lz4-1"] = f"{log.name}: a byte of the last batch's records flipped (CRC mismatch)"

    log, data, b = active("zstd-0")
    pos, _, _ = b[-1]
    log.write_bytes(data[: pos + 11])
    done["zstd-0"] = f"{log.name}: only 11 bytes of the last batch's header left"

    log, data, b = active("gzip-lat-0")
    pos, _, _ = b[-2] if len(b) > 1 else b[-1]
    absurd = (0x7FFFFF00).to_bytes(4, "big")
    log.write_bytes(data[: pos + 8] + absurd + data[pos + 12 :])
    done["gzip-lat-0"] = (
        f"{log.name}: second-to-last batch's (or only batch's) length field set to 0x7fffff00"
    )

    first = _segments(data_dir / "zstd-1")[0]
    data = first.read_bytes()
    pos, size, _ = _batches(data)[1]
    flip = pos + size - 3
    first.write_bytes(data[:flip] + bytes([data[flip] ^ 0xFF]) + data[flip + 1 :])
    done["zstd-1"] = f"{first.name} (first segment): a byte of its second batch flipped"

    log, data, _ = active("txn-0")
    log.write_bytes(data[:-3])
    done["txn-0"] = f"{log.name}: last 3 bytes gone (the open transaction's last batch)"

    # A recovery point lost (a partition missing from the checkpoint counts as 0): lz4-0 is
    # re-checked from its first segment, whatever the kill left checkpointed.
    checkpoint = data_dir / "recovery-point-offset-checkpoint"
    lines = checkpoint.read_text().splitlines() or ["0", "0"]
    kept = [line for line in lines[2:] if line.split()[:2] != ["lz4", "0"]]
    checkpoint.write_text("".join(f"{line}\n" for line in [lines[0], str(len(kept)), *kept]))
    done["lz4-0"] += "; its recovery point left out of the checkpoint"
    return done


@pytest.fixture(scope="module")
def recoveries(broker_factory, tmp_path_factory) -> Recoveries:
    workdir = tmp_path_factory.mktemp("kafka-killed")
    clock = [time.monotonic()]
    seconds: dict[str, float] = {}
    broker = broker_factory(workdir / "broker", **BROKER)
    dist = broker.dist
    producers: list[subprocess.Popen] = []
    stop = threading.Event()
    threads = []

    def lap(step: str) -> None:
        now = time.monotonic()
        seconds[step] = round(now - clock[0], 1)
        clock[0] = now

    lap("broker started")
    try:
        for topic, (configs, _) in LOAD.items():
            broker.create_topic(topic, partitions=2, **configs)
        broker.create_topic(TXN_TOPIC, partitions=2, **TXN_TOPIC_CONFIGS)
        lap("topics created")
        for lines in (_txn_lines(), _load_lines()):
            cmd = dist.command("kafkalog.it.RefProducer", "--bootstrap-server", broker.bootstrap)
            err = open(workdir / f"producer-{len(producers)}.err", "wb")
            proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
            )
            err.close()
            producers.append(proc)
            t = threading.Thread(target=_feed, args=(proc, lines, stop), daemon=True)
            t.start()
            threads.append(t)
        deadline = time.monotonic() + 120
        # The kill waits for the transactional producer to be well into its open transaction
        # (its three finished ones take about 6 KB a partition).
        while (
            _log_bytes(broker.data_dir, LOAD) < KILL_AT_BYTES
            or _log_bytes(broker.data_dir, [TXN_TOPIC]) < 30_000
        ):
            assert time.monotonic() < deadline, "the load did not reach its size in 120 s"
            assert all(p.poll() is None for p in producers), "a producer exited early"
            time.sleep(0.05)
        status = broker.stop(kill=True)  # SIGKILL in the middle of the load
        lap("load until the kill")
    finally:
        stop.set()
        for proc in producers:
            proc.kill()
            proc.wait(timeout=30)
        for t in threads:
            t.join(timeout=30)
        broker.stop(kill=True)

    killed = broker.data_dir
    damaged_dir = workdir / "damaged"
    _copytree(killed, damaged_dir)
    damaged = _damage(damaged_dir)
    ours = workdir / "kafkalog-recovered"
    _copytree(damaged_dir, ours)
    lap("copies")
    # kafkalog's recovery on one copy, while a broker starts on the other.
    exe = Path(sys.executable).with_name("kafkalog")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]
    recover = subprocess.Popen(
        [*cmd, "recover", "--apply", "--json", "--quiet", str(ours)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
    )  # fmt: skip

    # Kafka's recovery: the same node restarts on a copy (same configs and ports, the copied
    # data directory), then stops cleanly.
    kafka_workdir = workdir / "kafka-recovered"
    kafka_workdir.mkdir()
    _copytree(damaged_dir, kafka_workdir / "data")
    for name in ("server.properties", "log4j2.properties", "log4j.properties"):
        text = (broker.workdir / name).read_text()
        (kafka_workdir / name).write_text(text.replace(str(broker.workdir), str(kafka_workdir)))
    again = type(broker)(
        dist, kafka_workdir, configs=dict(broker.configs), port=broker.port,
        controller_port=broker.controller_port,
    )  # fmt: skip
    try:
        again.restart()
        for topic in TOPICS:
            again.wait_for_leaders(topic, 2)
        lap("Kafka's recovery (restart)")
        kafka_read = {level: dist.consume(again.bootstrap, READ, level) for level in LEVELS}
        lap("Kafka's consumer on it")
    except BaseException:
        again.stop(kill=True)
        recover.kill()
        raise
    again.stop()
    lap("clean stop")
    out, err = recover.communicate(timeout=600)
    # 1: recovery cut records (as it must here).
    assert recover.returncode in (0, 1), (recover.returncode, out[-3000:], err)
    report = [json.loads(line) for line in out.splitlines() if line.strip()]
    lap("kafkalog recover")
    server_log = again.log_file.read_text(errors="replace")
    return Recoveries(
        killed, damaged_dir, kafka_workdir / "data", ours, damaged, server_log, kafka_read,
        report, status, seconds,
    )  # fmt: skip


def _partitions(data_dir: Path) -> list[str]:
    return sorted(
        p.name for p in data_dir.iterdir() if p.is_dir() and p.name != "__cluster_metadata-0"
        if _segments(p)
    )  # fmt: skip


# Kafka's LogLoader: "Completed load of Log(dir=..., topic=T, partition=P, ...) with N segments,
# local-log-start-offset X and log-end-offset Y in Z ms".
LOADED = re.compile(
    r"Completed load of Log\(dir=\S+?/([^/,]+), .*? with (\d+) segments, "
    r"local-log-start-offset (\d+) and log-end-offset (\d+)"
)


def _kafka_loaded(server_log: str) -> dict[str, tuple[int, int, int]]:
    return {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in LOADED.finditer(server_log)}


def _checkpoint(path: Path) -> dict[str, int]:
    """Kafka's offset checkpoint file: version, count, then "topic partition offset" lines."""
    lines = path.read_text().splitlines() if path.exists() else []
    return {f"{t}-{p}": int(o) for t, p, o in (line.split() for line in lines[2:])}


def test_load_was_killed_with_everything_in_it(recoveries):
    """The scenario: the SIGKILL hit the running load; Kafka's recovery ran on every partition
    and cut every damaged tail; the transactions are there (the aborted one is read only at
    read_uncommitted, the open one holds the last stable offset back)."""
    assert recoveries.stop_status == -9, recoveries.stop_status
    log = recoveries.kafka_log
    loaded = _kafka_loaded(log)
    assert set(_partitions(recoveries.killed)) <= set(loaded), sorted(loaded)
    for name in recoveries.damaged:
        if name != "zstd-1":
            assert f"[LogLoader partition={name}, " in log and re.search(
                rf"partition={re.escape(name)}, .*Corruption found in segment", log
            ), f"Kafka's recovery did not cut {name}: {recoveries.damaged[name]}"
    # lz4-0: re-checked from its first segment, cut in the middle, later segments deleted.
    assert re.search(r"partition=lz4-0, .*Recovering unflushed segment 0\. ", log)
    assert re.search(r"partition=lz4-0, .*Deleting segments as part of log recovery", log)
    # The damage in zstd-1's first segment lies below the recovery point Kafka checkpointed:
    # Kafka's recovery trusts that segment and keeps it (and so must kafkalog).
    points = _checkpoint(recoveries.killed / "recovery-point-offset-checkpoint")
    second = _segments(recoveries.killed / "zstd-1")[1]
    assert points.get("zstd-1", 0) >= int(second.stem), (points, second)
    ru, rc = (recoveries.kafka_read[level] for level in LEVELS)
    txn_ru = [r for r in ru if r["topic"] == TXN_TOPIC]
    txn_rc = [r for r in rc if r["topic"] == TXN_TOPIC]
    assert len(txn_rc) == 70, len(txn_rc)  # the two committed transactions: 40 + 30
    assert len(txn_ru) > 100 + 20, len(txn_ru)  # the aborted one (30) and the open one too
    segments = {name: len(_segments(recoveries.killed / name)) for name in loaded}
    assert all(segments[f"{t}-{p}"] >= 2 for t in TOPICS for p in (0, 1)), segments
    print("recovery parity steps (s):", recoveries.seconds, "segments:", segments)


def test_recover_cuts_what_kafka_cuts(recoveries):
    """Every partition's .log files after ``kafkalog recover --apply`` are Kafka's after its
    own recovery: the same segments, lengths and bytes."""
    kafka, ours = recoveries.kafka, recoveries.ours
    assert _partitions(ours) == _partitions(kafka)
    problems = []
    for name in _partitions(kafka):
        theirs = {p.name: p for p in _segments(kafka / name)}
        mine = {p.name: p for p in _segments(ours / name)}
        if sorted(theirs) != sorted(mine):
            problems.append(
                f"{name}: Kafka kept segments {sorted(theirs)}, kafkalog {sorted(mine)}"
            )
            continue
        for seg, t in theirs.items():
            tb, ob = t.read_bytes(), mine[seg].read_bytes()
            if tb != ob:
                at = next(
                    (k for k, (x, y) in enumerate(zip(tb, ob)) if x != y), min(len(tb), len(ob))
                )
                problems.append(
                    f"{name}/{seg}: Kafka {len(tb)} bytes, kafkalog {len(ob)} bytes, first "
                    f"difference at byte {at}"
                )
    assert not problems, "\n".join(problems) + f"\ndamage: {recoveries.damaged}"


def test_recover_log_end_offsets_are_kafkas(recoveries):
    """kafkalog recover's log end offsets are the ones Kafka's loader logged."""
    loaded = _kafka_loaded(recoveries.kafka_log)
    ours = {
        r["partition"]: r["logEndOffset"]
        for r in recoveries.ours_report
        if r["type"] == "partition"
    }
    names = _partitions(recoveries.kafka)
    got = {name: ours.get(name) for name in names}
    want = {name: loaded[name][2] for name in names}
    assert got == want


def test_recovered_indexes_are_kafkas(recoveries):
    """The .index, .timeindex and .txnindex files kafkalog's recovery left are the ones Kafka's
    recovery (its rebuild of every segment from the recovery point on) and its clean shutdown
    left, byte for byte."""
    kafka, ours = recoveries.kafka, recoveries.ours
    problems, compared = [], 0
    for name in _partitions(kafka):
        for log in _segments(kafka / name):
            for kind, size in (
                (".index", OFFSET_ENTRY),
                (".timeindex", TIME_ENTRY),
                (".txnindex", 34),
            ):
                t, o = log.with_suffix(kind), ours / name / log.with_suffix(kind).name
                if not t.exists() and not o.exists():
                    continue
                compared += 1
                tb = t.read_bytes() if t.exists() else None
                ob = o.read_bytes() if o.exists() else None
                if tb == ob:
                    continue
                if tb is None or ob is None:
                    problems.append(f"{name}/{t.name}: Kafka {tb!r:.60}, kafkalog {ob!r:.60}")
                    continue
                te, oe = _entries(tb, size), _entries(ob, size)
                k = next(
                    (k for k, (x, y) in enumerate(zip(te, oe)) if x != y), min(len(te), len(oe))
                )
                problems.append(
                    f"{name}/{t.name}: {len(te)} entries (Kafka), {len(oe)} (kafkalog); entry {k}: "
                    f"Kafka {_describe_entry(kind, te[k] if k < len(te) else None)}, "
                    f"kafkalog {_describe_entry(kind, oe[k] if k < len(oe) else None)}"
                )
    assert compared > 0
    assert not problems, "\n".join(problems)


def test_recovered_producer_snapshots_are_kafkas(recoveries):
    """The producer state snapshots (.snapshot) after both recoveries: the same files, the same
    bytes. (lz4-0's recovery point is left out of the checkpoint, so both recoveries re-check
    every segment of an idempotent producer's partition.)"""
    kafka, ours = recoveries.kafka, recoveries.ours
    problems, compared = [], 0
    for name in _partitions(kafka):
        theirs = sorted(p.name for p in (kafka / name).glob("*.snapshot"))
        mine = sorted(p.name for p in (ours / name).glob("*.snapshot"))
        if theirs != mine:
            problems.append(f"{name}: Kafka has {theirs}, kafkalog {mine}")
            continue
        for snapshot in theirs:
            compared += 1
            if (kafka / name / snapshot).read_bytes() != (ours / name / snapshot).read_bytes():
                problems.append(f"{name}/{snapshot}")
    assert compared > 0
    assert not problems, f"{len(problems)} of {compared} snapshots differ: " + ", ".join(problems)


def _verify_problems(data_dir: Path) -> tuple[list[dict], list[dict]]:
    proc = _kafkalog("verify", "--json", "--quiet", str(data_dir), check_rc=(0, 1))
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    errors = [f for f in found if f.get("severity") == "error"]
    warnings = [f for f in found if f.get("severity") == "warning"]
    return errors, warnings


def _trusted_damage(recoveries: Recoveries, data_dir: Path) -> list[str]:
    """The damaged file Kafka's recovery kept (zstd-1's first segment, below the recovery
    point), if it kept it, as it lies in ``data_dir``."""
    first = _segments(recoveries.killed / "zstd-1")[0].name
    damaged = (recoveries.damaged_dir / "zstd-1" / first).read_bytes()
    kept = (recoveries.kafka / "zstd-1" / first).read_bytes() == damaged
    return [str(data_dir / "zstd-1" / first)] if kept else []


@pytest.mark.parametrize("copy", ["kafka", "ours"])
def test_verify_finds_nothing_but_the_trusted_damage(recoveries, copy):
    """``kafkalog verify`` on the directory Kafka recovered and stopped cleanly (and on
    kafkalog's): no warning, and no error but one for the damage Kafka's recovery trusted."""
    data_dir = getattr(recoveries, copy)
    errors, warnings = _verify_problems(data_dir)
    trusted = _trusted_damage(recoveries, data_dir)
    assert sorted({e["path"] for e in errors}) == trusted, errors
    assert len(errors) == len(trusted), errors
    assert not warnings, warnings


def test_kafkalog_reads_what_kafka_serves_after_recovery(recoveries):
    """kafkalog consume on its recovered copy returns what Kafka's consumer read from the broker
    restarted on the other copy, at both isolation levels."""
    for level in LEVELS:
        proc = _kafkalog(
            "consume", str(recoveries.ours), "--json", "--quiet", "--isolation-level", level,
            *[arg for t in READ for arg in ("--topic", t)],
        )  # fmt: skip
        got = sorted(_consume_row(json.loads(line)) for line in proc.stdout.splitlines() if line)
        want = [_java_row(r) for r in recoveries.kafka_read[level]]
        assert got == want, (level, _first_difference(got, want))


def _java_row(r: dict) -> tuple:
    headers = tuple((k, _unb64(v)) for k, v in r["headers"])
    return (
        r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"],
        _unb64(r["key"]), _unb64(r["value"]), headers,
    )  # fmt: skip


def _shown(value: str | None, encoding: str | None) -> bytes | None:
    if value is None:
        return None
    return base64.b64decode(value) if encoding == "base64" else value.encode("utf-8")


def _consume_row(r: dict) -> tuple:
    headers = tuple((h["key"], _shown(h["value"], h["valueEncoding"])) for h in r["headers"])
    return (
        r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"],
        _shown(r["key"], r["keyEncoding"]), _shown(r["value"], r["valueEncoding"]), headers,
    )  # fmt: skip


def _first_difference(got: list[tuple], want: list[tuple]) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"record {i}: kafkalog {g!r}\n          Kafka    {w!r}"
    return f"kafkalog has {len(got)} records, Kafka's consumer {len(want)}"


# --- Index byte-equality --------------------------------------------------------------------


def _rebuild_and_compare(data_dir: Path, work: Path) -> IndexComparison:
    copy = work / "data"
    _copytree(data_dir, copy)
    return _compare_rebuilt_indexes(data_dir, copy)


def test_rebuilt_indexes_equal_kafkas_after_clean_shutdown(kafka_written, tmp_path):
    """kafka_written's partitions (default index.interval.bytes, 4096), every segment trimmed by
    Kafka's clean shutdown; the KRaft metadata log's active segment stays preallocated."""
    result = _rebuild_and_compare(kafka_written.data_dir, tmp_path)
    assert result.entries > 0
    assert not result.differences, "\n".join(result.differences)


def test_rebuilt_indexes_equal_kafkas_after_sigkill(recoveries, tmp_path):
    """The killed load's partitions: small index intervals (many entries), rolled segments
    (size, time, full index) trimmed by Kafka at the roll, active ones preallocated."""
    result = _rebuild_and_compare(recoveries.killed, tmp_path)
    assert result.preallocated > 0 and result.segments > 50 and result.entries > 500, result
    assert not result.differences, "\n".join(result.differences)


# --- Export: the reader test_kafka_writes_kafkalog_reads.py leaves out ----------------------

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


@pytest.mark.parametrize("level", LEVELS)
def test_export_matches_kafka_consumer(kafka_written, tmp_path, level):
    """``kafkalog export`` to Parquet and to JSON lines returns what Kafka's Java consumer read
    from the broker before its clean shutdown (topic, partition, offset, timestamp and type,
    key, value, headers)."""
    import pyarrow.parquet as pq

    want = [_java_row(r) for r in kafka_written.expected[level]]
    args = [
        str(kafka_written.data_dir), "--topic", ",".join(kafka_written.topics),
        "--isolation-level", level, "--include-headers", "--quiet",
    ]  # fmt: skip
    out = tmp_path / "export.parquet"
    _kafkalog("export", *args, "--to", "parquet", str(out))
    epoch, ms = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc), dt.timedelta(milliseconds=1)
    rows = pq.read_table(out).to_pylist()
    got = sorted(
        (
            r["topic"], r["partition"], r["offset"],
            (r["timestamp"] - epoch) // ms,
            TIMESTAMP_TYPES[r["timestampType"]], r["key"], r["value"],
            tuple((h["key"], h["value"]) for h in r["headers"] or ()),
        )
        for r in rows
    )  # fmt: skip
    assert got == want, ("parquet", _first_difference(got, want))

    proc = _kafkalog(
        "export", *args, "--to", "jsonl", "-", "--key-decoder", "base64",
        "--value-decoder", "base64",
    )  # fmt: skip
    got = sorted(_consume_row(json.loads(line)) for line in proc.stdout.splitlines() if line)
    assert got == want, ("jsonl", _first_difference(got, want))
