"""``kafkalog serve`` on damaged data: indexes are hints, and a torn end is recovered.

A data directory is written by the log layer (small segments, an offset-index entry every 100
bytes) and shut down cleanly (``.kafka_cleanshutdown``), then damaged:

- a segment's ``.index`` replaced by garbage, by decreasing entries, or by plausible increasing
  entries whose positions point at later batches or inside batches: a kafka-python consumer
  reading from several offsets gets exactly the records kafka-python decodes from the ``.log``
  files (the index is rebuilt at load or at the first lookup that finds its position wrong);
- a zero-filled tail in the last segment (a crash with preallocated files, the marker stale): the
  server starts, recovers that partition (the zeros go to the quarantine, a warning names the
  file and position) and serves exactly the records before the zeros.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import pytest

from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

from .server_process import ServerProcess

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecords as KpRecords  # noqa: E402
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000
TOPIC = "t"
FAR = str(1 << 50)


def batch(values: list[bytes], ts: int) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30)
    for i, value in enumerate(values):
        assert builder.append(ts + i, b"k%d" % i, value, []) is not None
    builder.close()
    return bytes(builder.buffer())


def kp_batches(data: bytes) -> list[tuple[int, int, list[tuple[int, bytes]]]]:
    """(position, last offset, [(offset, value)]) of each batch kafka-python decodes."""
    out, pos, records = [], 0, KpRecords(data)
    while records.has_next():
        b = records.next_batch()
        if b is None:
            break
        assert b.validate_crc()
        out.append((pos, b.last_offset, [(r.offset, r.value) for r in b]))
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return out


def write_data(root: Path) -> Path:
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as logs:
        logs.create_topic(TOPIC, 1, {"internal.segment.bytes": "1500",
                                     "index.interval.bytes": "100",
                                     "message.timestamp.after.max.ms": FAR,
                                     "message.timestamp.before.max.ms": FAR})  # fmt: skip
        log = logs.get_log(TopicPartition(TOPIC, 0))
        for i in range(60):
            log.append_as_leader(batch([b"v%02d" % i * 8] * (1 + i % 3), T0 + 10 * i))
    assert (root / ".kafka_cleanshutdown").exists()
    return root / f"{TOPIC}-0"


def expected(part: Path, end: dict[str, int] | None = None) -> list[tuple[int, bytes]]:
    end = end or {}
    return [
        r
        for p in sorted(part.glob("*.log"))
        for _, _, recs in kp_batches(p.read_bytes()[: end.get(p.name)])
        for r in recs
    ]


def take(bootstrap: str, starts: list[int], n: int) -> dict[int, list[tuple[int, bytes]]]:
    """Up to ``n`` records from each offset of ``starts``, by one kafka-python consumer."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = kafka.TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    got = {}
    try:
        for start in starts:
            consumer.seek(tp, start)
            out: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + 15
            quiet = 0
            while len(out) < n and time.monotonic() < deadline and quiet < 4:
                polled = consumer.poll(500)
                quiet = 0 if polled else quiet + 1
                for records in polled.values():
                    out.extend((m.offset, m.value) for m in records)
            got[start] = out[:n]
    finally:
        consumer.close()
    return got


def index_damage(kind: str, segment: Path) -> bytes:
    base = int(segment.name[:20])
    batches = kp_batches(segment.read_bytes())
    rel = [(last - base, pos) for pos, last, _ in batches]
    if kind == "garbage":
        return bytes(random.Random(base).randrange(256) for _ in range(64))
    if kind == "decreasing":
        entries = [(9, 0), (5, 0), (1, 0)]
    elif kind == "later batches":
        entries = [(r[0], rel[i + 2][1]) for i, r in enumerate(rel[1:-2], 1)]
    else:  # inside batches
        entries = [(o, p + 30) for o, p in rel[1:]]
    return b"".join(struct.pack(">ii", o, p) for o, p in entries)


@pytest.mark.parametrize("damage", ["garbage", "decreasing", "later batches", "inside batches"])
def test_a_damaged_index_never_changes_what_is_served(tmp_path: Path, damage: str) -> None:
    part = write_data(tmp_path / "data")
    segments = sorted(part.glob("*.log"))
    for segment in (segments[0], segments[2]):
        segment.with_suffix(".index").write_bytes(index_damage(damage, segment))
    want = expected(part)
    starts = [0, 1, 5, 17, 40, len(want) - 1]
    with ServerProcess(tmp_path / "data") as server:
        got = take(server.bootstrap, starts, 30)
        alive = server.proc.poll() is None
    assert alive and "Traceback" not in server.log()
    for start in starts:
        assert got[start] == [r for r in want if r[0] >= start][:30], start


def test_a_zero_tail_behind_a_clean_marker_is_recovered_and_the_prefix_served(tmp_path: Path):
    part = write_data(tmp_path / "data")
    last = sorted(part.glob("*.log"))[-1]
    size = last.stat().st_size
    want = expected(part)
    with last.open("ab") as f:
        f.write(bytes(4096))  # preallocated, never written: a crash the marker does not tell
    with ServerProcess(tmp_path / "data") as server:
        got = take(server.bootstrap, [0, len(want) - 3], len(want) + 10)
        alive = server.proc.poll() is None
    log = server.log()
    assert alive and "Traceback" not in log
    assert f"{last}, position {size}: the end of the log cannot be read" in log
    assert got[0] == want  # exactly the prefix: nothing past the zeros
    assert got[len(want) - 3] == want[-3:]
    assert last.stat().st_size == size
    (kept,) = (part / "kafkalog-quarantine").rglob(f"{last.name}.cut-at-{size}")
    assert kept.read_bytes() == bytes(4096)
