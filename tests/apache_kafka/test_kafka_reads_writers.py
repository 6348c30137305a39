"""kafkalog's other writers, Apache Kafka reads: the adopt workflow for each of them.

One broker run: a KRaft broker creates a topic per writer and Kafka's producer writes their
records (keys with several versions and tombstones for the compacted topic, old timestamps and
small segments for the retention topics), then the broker stops cleanly. While it is down, each
writer acts on its own topic's partitions in the broker's own data directory:

- the Spark writer (``df.write.format("kafkalog").mode("append").save(DATA)``) appends rows
  with keys, values, headers and timestamps to ``spark``, and the streaming sink (two
  micro-batches, Trigger.AvailableNow over two JSON files) to ``spark-stream`` (when pyspark
  imports and a local SparkSession starts);
- ``kafkalog compact --apply --force`` compacts ``compacted`` (cleanup.policy=compact): partition
  0 now; partition 1 with ``--now-ms`` a day past the delete horizon a clean sets (a first clean
  keeps tombstones whatever the time), then again (nothing dirty is left: nothing changes);
- ``kafkalog retention --apply`` deletes the oldest segments of ``retention-ms`` (retention.ms)
  and ``retention-bytes`` (retention.bytes), as of a fixed ``--now-ms``;
- ``kafkalog rebuild-index --apply`` rewrites the indexes of ``reindexed`` (deleted in partition 0,
  truncated to a size Kafka refuses in partition 1);
- ``kafkalog recover --apply`` repairs ``recovered`` (a segment without indexes and a leftover
  ``.cleaned`` file in partition 0; with ``--full``, a zero-filled tail after the last batch of
  partition 1).

The broker restarts once, Kafka's Java consumer reads every topic, and the broker's log is read
for what it did at start-up. Every expected record comes from what the test fed (Kafka's producer
acknowledgements give the offsets of Kafka's records; segment boundaries are those of the files
Kafka wrote, listed before kafkalog acts), the compaction and retention outcomes from Kafka's
rules applied to that input, never from kafkalog reading its own output.

Then ``kafkalog serve`` on an empty directory takes librdkafka's producers (idempotent; a
transactional one: commit, abort, commit) and a consumer group's commit, stops cleanly, ``kafkalog
make-bootable`` makes the directory a new node's, and a fresh Kafka broker boots from it and
serves the records fed, at both isolation levels, and the group's offsets.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_kafka_reads_ours import (
    Rec,
    _b64,
    _consumer_rows,
    _explicit,
    _kafka_lines,
    _kafkalog_bin,
    make_records,
)

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000
HOUR = 3_600_000

# The broker runs no retention and no cleaner of its own: what the restarted broker serves is
# what kafkalog left (retention's first check comes an hour after start-up).
BROKER = {
    "log.cleaner.enable": "false",
    "log.initial.task.delay.ms": str(HOUR),
    "log.retention.check.interval.ms": str(HOUR),
}
SMALL = {"internal.segment.bytes": "2048", "index.interval.bytes": "256"}
RETENTION_MS = 20 * DAY
RETENTION_NOW = T0 + 40 * DAY  # kafkalog retention --now-ms
RETENTION_BYTES = 4000
DELETE_RETENTION_MS = DAY  # Kafka's default delete.retention.ms


def _kafkalog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_kafkalog_bin(), *args], capture_output=True, encoding="utf-8", check=False, timeout=300
    )


@dataclass
class Fed:
    """What one topic-partition holds as fed: (offset, record) in offset order."""

    records: list[tuple[int, Rec]] = field(default_factory=list)


def _by_partition(topic: str, records: list[Rec], acks: list[dict]) -> dict[int, list]:
    """Kafka's acknowledgements (in send order) give each fed record its offset."""
    assert len(acks) == len(records), (topic, len(acks), len(records))
    out: dict[int, list[tuple[int, Rec]]] = defaultdict(list)
    for ack, r in zip(acks, records):
        assert ack["topic"] == topic and ack["partition"] == r.partition, (ack, r)
        out[r.partition].append((ack["offset"], r))
    for p in out:
        out[p].sort(key=lambda x: x[0])
    return dict(out)


def _segments(partition_dir: Path) -> list[tuple[int, int]]:
    """(base offset, size in bytes) of each .log file, in offset order."""
    return sorted((int(f.stem), f.stat().st_size) for f in partition_dir.glob("*.log"))


# --- Inputs --------------------------------------------------------------------------------------


def compacted_records(n: int, partitions: int) -> list[Rec]:
    """Keys with several versions each, tombstones (some keys written again after theirs)."""
    out = []
    for i in range(n):
        p = i % partitions
        j = i // partitions
        key = f"user-{(j * 7) % 17}".encode()
        value = None if j % 9 == 8 else f"v{j} of {key.decode()} ✓ ".encode() * (1 + j % 3)
        headers = (("rev", str(j).encode()),) if j % 4 == 1 else ()
        out.append(Rec(p, T0 + i * 1000, key, value, headers))
    return out


def spark_rows(n: int) -> list[Rec]:
    out = []
    for i in range(n):
        key = None if i % 10 == 0 else f"spark-key-{i % 23}".encode()
        if i % 4 == 3:
            key = bytes([0, 255, i % 256])
        value = None if i % 17 == 5 else f"row {i} from Spark é ✓ ".encode() * (1 + i % 5)
        if i % 3 == 0:
            headers = ()
        elif i % 3 == 1:
            headers = (("trace", f"t-{i}".encode()), ("nul", None))
        else:
            headers = (("dup", b"a"), ("dup", b""), ("ключ", bytes([0, 255, i % 256])))
        out.append(Rec(i % 2, T0 + DAY + i * 13, key, value, headers))
    return out


def _start_spark(box: dict) -> None:
    """A local SparkSession (tests/spark/conftest.py's settings), started in a thread while the
    broker runs; ``box`` gets the session or the reason there is none."""
    try:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        import kafkalog.spark

        # Another module's session (tests/spark's) is used, and left running, if there is one.
        box["ours"] = SparkContext._active_spark_context is None
        session = (
            SparkSession.builder.master("local[2]")
            .appName("kafkalog-kafka-reads-writers")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        if box["ours"]:
            session.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(session)
        box["spark"] = session
    except Exception as exc:  # pyspark missing or Spark unable to start
        box["error"] = f"{type(exc).__name__}: {exc}"


def spark_write(spark, data_dir: Path, topic: str, rows: list[Rec]) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("partition", IntegerType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("headers", ArrayType(header)),
            StructField("ts", LongType()),
        ]
    )
    data = [
        (r.partition, r.key, r.value, [(k, v) for k, v in r.headers] or None, r.timestamp)
        for r in rows
    ]
    df = spark.createDataFrame(data, schema).select(
        "partition", "key", "value", "headers", F.timestamp_millis("ts").alias("timestamp")
    )
    (
        df.write.format("kafkalog")
        .option("topic", topic)
        .option("codec", "lz4")
        .option("batchSize", "2048")
        .mode("append")
        .save(str(data_dir))
    )


def spark_stream_write(spark, data_dir: Path, workdir: Path, topic: str, rows: list[Rec]) -> None:
    """The streaming sink: JSON-lines files (two, one micro-batch each: maxFilesPerTrigger=1)
    read by Spark's file source with Trigger.AvailableNow, written by ``writeStream``."""
    import json

    from pyspark.sql import functions as F

    source = workdir / "stream-in"
    source.mkdir()
    half = len(rows) // 2
    for i, part in enumerate((rows[:half], rows[half:])):
        f = source / f"part-{i}.json"
        f.write_text(
            "".join(
                json.dumps({
                    "partition": r.partition, "key": _b64(r.key), "value": _b64(r.value),
                    "headers": [{"key": k, "value": _b64(v)} for k, v in r.headers] or None,
                    "ts": r.timestamp,
                }) + "\n"
                for r in part
            )
        )  # fmt: skip
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    schema = (
        "partition int, key string, value string, "
        "headers array<struct<key:string,value:string>>, ts long"
    )
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    df = df.select(
        "partition",
        F.unbase64("key").alias("key"),
        F.unbase64("value").alias("value"),
        F.transform(
            "headers",
            lambda h: F.struct(h["key"].alias("key"), F.unbase64(h["value"]).alias("value")),
        ).alias("headers"),
        F.timestamp_millis("ts").alias("timestamp"),
    )
    query = (
        df.writeStream.format("kafkalog")
        .option("topic", topic)
        .option("checkpointLocation", str(workdir / "stream-checkpoint"))
        .trigger(availableNow=True)
        .start(str(data_dir))
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert len(query.recentProgress) >= 2, query.recentProgress


# --- Kafka's rules, applied to the input ---------------------------------------------------------


def compacted_expected(fed: list[tuple[int, Rec]], active_base: int) -> list[tuple[int, Rec]]:
    """Kafka's log cleaner over [0, active segment): the last record of each key stays (the
    active segment is not cleaned and its records do not count); a tombstone stays on the first
    clean whatever the time (LogCleaner.shouldRetainRecord: a magic 2 batch without a delete
    horizon keeps its tombstones, and the clean sets the horizon)."""
    last: dict[bytes, int] = {}
    for offset, r in fed:
        if offset < active_base:
            last[r.key] = offset
    out = []
    for offset, r in fed:
        if offset >= active_base:
            out.append((offset, r))
        elif last[r.key] == offset:
            out.append((offset, r))
    return out


def retention_ms_start(
    fed: list[tuple[int, Rec]], segments: list[tuple[int, int]], now: int, retention: int
) -> int:
    """UnifiedLog.deleteRetentionMsBreachedSegments: the oldest segments whose largest timestamp
    is more than retention.ms before now go, up to the first that stays (never the active one
    here). Returns the new log start offset."""
    bases = [b for b, _ in segments]
    for i, base in enumerate(bases[:-1]):
        end = bases[i + 1]
        largest = max(r.timestamp for o, r in fed if base <= o < end)
        if not now - largest > retention:
            return base
    raise AssertionError("the test meant to keep the active segment")


def retention_bytes_start(segments: list[tuple[int, int]], retention: int) -> int:
    """UnifiedLog.deleteRetentionSizeBreachedSegments: with diff = size - retention.bytes, the
    oldest segments go while diff - segment size >= 0."""
    diff = sum(size for _, size in segments) - retention
    for base, size in segments[:-1]:
        if diff - size < 0:
            return base
        diff -= size
    raise AssertionError("the test meant to keep the active segment")


# --- The broker run ------------------------------------------------------------------------------


@dataclass
class Writers:
    broker_log: Path
    restart_from: int
    expected: dict[tuple[str, int], list[tuple[int, Rec]]]
    log_start: dict[tuple[str, int], int]
    log_end: dict[tuple[str, int], int]
    read: list[dict]
    outputs: dict[str, subprocess.CompletedProcess]
    spark_skipped: str | None
    index_bytes_before: dict[str, bytes]
    index_bytes_after: dict[str, bytes]
    active_base: dict[tuple[str, int], int]
    retention_expect: dict[tuple[str, int], int]
    timings: dict[str, float]


def _index_files(partition_dir: Path) -> dict[str, bytes]:
    return {
        f"{partition_dir.name}/{f.name}": f.read_bytes()
        for f in sorted(partition_dir.iterdir())
        if f.suffix in (".index", ".timeindex")
    }


@pytest.fixture(scope="module")
def writers(broker_factory, tmp_path_factory) -> Writers:
    timings: dict[str, float] = {}
    t = time.monotonic()
    spark_box: dict = {}
    spark_thread = threading.Thread(target=_start_spark, args=(spark_box,), daemon=True)
    spark_thread.start()

    workdir = tmp_path_factory.mktemp("kafka-reads-writers")
    broker = broker_factory(workdir / "broker", **BROKER)
    dist = broker.dist
    plain = {"enable.idempotence": "false", "acks": "1", "linger.ms": "0"}
    inputs: dict[str, list[Rec]] = {}
    try:
        broker.create_topic("spark", partitions=2)
        broker.create_topic("spark-stream", partitions=2)
        broker.create_topic("compacted", partitions=2, **{"cleanup.policy": "compact"}, **SMALL)
        broker.create_topic("retention-ms", partitions=1, **{"retention.ms": str(RETENTION_MS)},
                            **SMALL)  # fmt: skip
        broker.create_topic(
            "retention-bytes", partitions=1,
            **{"retention.bytes": str(RETENTION_BYTES), "retention.ms": "-1"}, **SMALL,
        )  # fmt: skip
        broker.create_topic("reindexed", partitions=2, **SMALL)
        broker.create_topic("recovered", partitions=2, **SMALL)

        inputs["spark"] = _explicit(make_records(8, 2, 100, T0), T0)
        inputs["spark-stream"] = _explicit(make_records(6, 2, 101, T0), T0)
        inputs["compacted"] = compacted_records(240, 2)
        # Five rounds 8 days apart (segment.ms rolls a segment per round, size rolls others).
        inputs["retention-ms"] = [
            Rec(0, T0 + k * 8 * DAY + i, r.key, r.value, r.headers)
            for k in range(5)
            for i, r in enumerate(make_records(14, 1, 110 + k, T0))
        ]
        inputs["retention-bytes"] = _explicit(make_records(150, 1, 120, T0 + DAY), T0 + DAY)
        inputs["reindexed"] = _explicit(make_records(120, 2, 130, T0 + 2 * DAY), T0 + 2 * DAY)
        inputs["recovered"] = _explicit(make_records(120, 2, 140, T0 + 3 * DAY), T0 + 3 * DAY)
        lines: list[dict] = [{"op": "producer", "configs": {**plain, "compression.type": "lz4"}}]
        for topic, records in inputs.items():
            for i, line in enumerate(_kafka_lines(topic, records)):
                lines.append(line)
                if i % 6 == 5:
                    lines.append({"op": "flush"})  # small batches: several per segment
            lines.append({"op": "flush"})
        acks = dist.produce(broker.bootstrap, lines)
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    timings["kafka wrote"] = time.monotonic() - t

    acks_by_topic: dict[str, list[dict]] = defaultdict(list)
    for ack in acks:
        acks_by_topic[ack["topic"]].append(ack)
    fed: dict[tuple[str, int], list[tuple[int, Rec]]] = {}
    for topic, records in inputs.items():
        for p, recs in _by_partition(topic, records, acks_by_topic[topic]).items():
            fed[(topic, p)] = recs
    data = broker.data_dir
    segments = {tp: _segments(data / f"{tp[0]}-{tp[1]}") for tp in fed}
    outputs: dict[str, subprocess.CompletedProcess] = {}
    expected: dict[tuple[str, int], list[tuple[int, Rec]]] = dict(fed)
    log_start = {tp: 0 for tp in fed}
    log_end = {tp: recs[-1][0] + 1 for tp, recs in fed.items()}

    # 1. The Spark writer appends to `spark`.
    t = time.monotonic()
    spark_thread.join(timeout=180)
    spark = spark_box.get("spark")
    spark_skipped = None
    if spark is None:
        spark_skipped = spark_box.get("error", "SparkSession did not start in 180 s")
    else:
        rows = spark_rows(300)
        stream_rows = [Rec(r.partition, r.timestamp + DAY, r.value, r.key, r.headers)
                       for r in spark_rows(120)]  # fmt: skip
        try:
            spark_write(spark, data, "spark", rows)
            spark_stream_write(spark, data, workdir, "spark-stream", stream_rows)
        finally:
            if spark_box["ours"]:
                spark.stop()
        for topic, written in (("spark", rows), ("spark-stream", stream_rows)):
            for p in (0, 1):
                next_offset = log_end[(topic, p)]
                for r in written:
                    if r.partition == p:
                        expected[(topic, p)] = [*expected[(topic, p)], (next_offset, r)]
                        next_offset += 1
                log_end[(topic, p)] = next_offset
    timings["spark"] = time.monotonic() - t

    # 2. compact: partition 0 once; partition 1 as of a day past the delete horizon a first
    # clean would set, then again (nothing dirty is left: Kafka's cleaner would not pick the
    # log, and an empty offset map keeps every record, expired tombstones included).
    t = time.monotonic()
    active_base = {}
    later = int(time.time() * 1000) + DELETE_RETENTION_MS + DAY
    for p, now in ((0, []), (1, ["--now-ms", str(later)]), (1, ["--now-ms", str(later + DAY)])):
        tp = ("compacted", p)
        active_base[tp] = segments[tp][-1][0]
        assert len(segments[tp]) >= 4, segments[tp]
        name = f"compact-{p}" + ("-again" if f"compact-{p}" in outputs else "")
        outputs[name] = _kafkalog(
            "compact", "--apply", "--force", "--quiet", *now, str(data / f"compacted-{p}")
        )
        expected[tp] = compacted_expected(fed[tp], active_base[tp])

    # 3. retention: by time as of RETENTION_NOW, and by size.
    retention_expect = {
        ("retention-ms", 0): retention_ms_start(
            fed[("retention-ms", 0)], segments[("retention-ms", 0)], RETENTION_NOW, RETENTION_MS
        ),
        ("retention-bytes", 0): retention_bytes_start(
            segments[("retention-bytes", 0)], RETENTION_BYTES
        ),
    }
    for topic in ("retention-ms", "retention-bytes"):
        outputs[f"retention-{topic}"] = _kafkalog(
            "retention", "--apply", "--quiet", "--now-ms", str(RETENTION_NOW), "--topic", topic,
            str(data),
        )  # fmt: skip
        tp = (topic, 0)
        log_start[tp] = retention_expect[tp]
        expected[tp] = [(o, r) for o, r in fed[tp] if o >= retention_expect[tp]]

    # 4. rebuild-index and recover.
    index_before: dict[str, bytes] = {}
    for name in ("reindexed-0", "reindexed-1", "recovered-0", "recovered-1"):
        index_before.update(_index_files(data / name))
    for f in (data / "reindexed-0").iterdir():
        if f.suffix in (".index", ".timeindex"):
            f.unlink()
    for f in (data / "reindexed-1").iterdir():
        if f.suffix in (".index", ".timeindex") and f.stat().st_size > 0:
            os.truncate(f, f.stat().st_size - (3 if f.suffix == ".index" else 5))
    for p in (0, 1):
        outputs[f"rebuild-index-{p}"] = _kafkalog(
            "rebuild-index", "--apply", "--quiet", str(data / f"reindexed-{p}")
        )
    rec0 = data / "recovered-0"
    first = rec0 / f"{segments[('recovered', 0)][0][0]:020d}.log"
    first.with_suffix(".index").unlink()
    first.with_suffix(".timeindex").unlink()
    shutil.copy2(first, rec0 / f"{segments[('recovered', 0)][1][0]:020d}.log.cleaned")
    rec1_active = data / "recovered-1" / f"{segments[('recovered', 1)][-1][0]:020d}.log"
    with open(rec1_active, "ab") as f:
        f.write(bytes(4096))
    outputs["recovered-0"] = _kafkalog("recover", "--apply", "--quiet", str(rec0))
    outputs["recovered-1"] = _kafkalog("recover", "--apply", "--full", "--quiet",
                                     str(data / "recovered-1"))  # fmt: skip
    index_after: dict[str, bytes] = {}
    for name in ("reindexed-0", "reindexed-1", "recovered-0", "recovered-1"):
        index_after.update(_index_files(data / name))
    timings["kafkalog commands"] = time.monotonic() - t

    # The broker again, on what the writers left.
    t = time.monotonic()
    restart_from = broker.log_file.stat().st_size
    try:
        broker.restart()
        for topic, n in (("spark", 2), ("spark-stream", 2), ("compacted", 2), ("retention-ms", 1),
                         ("retention-bytes", 1), ("reindexed", 2), ("recovered", 2)):  # fmt: skip
            broker.wait_for_leaders(topic, n)
        read = dist.consume(broker.bootstrap, sorted({t for t, _ in fed}))
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    timings["restart and read"] = time.monotonic() - t
    return Writers(
        broker.log_file, restart_from, expected, log_start, log_end, read, outputs,
        spark_skipped, index_before, index_after, active_base, retention_expect, timings,
    )  # fmt: skip


# --- The checks ----------------------------------------------------------------------------------


def _rows_of(topic: str, p: int, entries: list[tuple[int, Rec]]) -> list[tuple]:
    return [
        (topic, p, o, r.timestamp, "CreateTime", r.key, r.value, r.headers) for o, r in entries
    ]  # fmt: skip


def _check_topic(writers: Writers, topic: str) -> None:
    got = [row for row in _consumer_rows(writers.read) if row[0] == topic]
    want = [
        row
        for (t, p), entries in sorted(writers.expected.items())
        if t == topic
        for row in _rows_of(t, p, entries)
    ]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"{topic} record {i}:\n  Kafka's consumer {g!r}\n  expected         {w!r}"
    assert len(got) == len(want), f"{topic}: Kafka's consumer read {len(got)}, want {len(want)}"


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, (
        proc.args,
        proc.returncode,
        proc.stdout[-2000:],
        proc.stderr[-2000:],
    )


def test_spark_writer_appends_are_served_by_kafka(writers):
    """Kafka's own records, then the Spark writer's rows in input order per partition, with
    their keys, values (null ones too), headers (null values, repeated keys) and timestamps."""
    if writers.spark_skipped:
        pytest.skip(f"no SparkSession: {writers.spark_skipped}")
    _check_topic(writers, "spark")


def test_spark_streaming_sink_appends_are_served_by_kafka(writers):
    """The streaming sink's two micro-batches (Trigger.AvailableNow over two files), after
    Kafka's own records, in input order per partition."""
    if writers.spark_skipped:
        pytest.skip(f"no SparkSession: {writers.spark_skipped}")
    _check_topic(writers, "spark-stream")


def test_compact_apply_is_served_by_kafka(writers):
    """What Kafka's cleaner rules keep: the last record of each key below the active segment
    (tombstones too, on the first clean even past delete.retention.ms; a second clean with
    nothing dirty changes nothing), and the active segment whole, at their original offsets."""
    for name in ("compact-0", "compact-1", "compact-1-again"):
        _ok(writers.outputs[name])
    for p in (0, 1):
        kept = len(writers.expected[("compacted", p)])
        assert kept < writers.log_end[("compacted", p)] // 2, "the scenario removes most records"
    for p in (0, 1):
        assert any(r.value is None for _, r in writers.expected[("compacted", p)])
    _check_topic(writers, "compacted")


def test_retention_apply_is_served_by_kafka_from_the_new_log_start(writers):
    """The input minus the whole segments below the log start offset Kafka's retention rules
    give; Kafka's consumer starts there."""
    for topic in ("retention-ms", "retention-bytes"):
        _ok(writers.outputs[f"retention-{topic}"])
        assert writers.retention_expect[(topic, 0)] > 0, "the scenario deletes segments"
        _check_topic(writers, topic)


def test_rebuild_index_and_recover_are_served_by_kafka(writers):
    for name in ("rebuild-index-0", "rebuild-index-1", "recovered-0"):
        _ok(writers.outputs[name])
    # Exit status 1: the zero-filled tail was cut (nothing but those 4096 bytes).
    cut = writers.outputs["recovered-1"]
    assert cut.returncode == 1 and "1 of 1 partitions changed" in cut.stdout, cut
    assert re.search(r"\b4096 bytes cut\b", cut.stdout), cut.stdout
    _check_topic(writers, "reindexed")
    _check_topic(writers, "recovered")


def test_rebuilt_indexes_are_kafkas_bytes(writers):
    """The indexes kafkalog rebuilt are the ones Kafka wrote before the damage, byte for byte."""
    before, after = writers.index_bytes_before, writers.index_bytes_after
    rebuilt = [n for n in before if n.startswith(("reindexed-", "recovered-0/"))]
    assert len(rebuilt) >= 8, rebuilt
    diff = [n for n in before if after.get(n) != before[n]]
    assert not diff, diff


def _restart_log(writers: Writers) -> list[str]:
    with open(writers.broker_log, "rb") as f:
        f.seek(writers.restart_from)
        return f.read().decode("utf-8", "replace").splitlines()


# What the broker logs when it does not take a log as it is: recovery, truncation, an index it
# rebuilds ("rebuilding index files", "Found a corrupted index file"), corrupt or invalid bytes,
# segments it deletes, leftovers of a clean it finishes or removes, a stray partition; and any
# WARN or ERROR. ("Deleted producer state snapshot" of a snapshot below the newest is Kafka's
# normal clean-up at every load, as after its own appends.)
BAD = re.compile(
    r"\] (WARN|ERROR) |[Tt]runcat|Recovering|recovering|[Cc]orrupt|[Ii]nvalid|unflushed|[Ss]tray"
    r"|index file|[Rr]ebuilding index|[Dd]elet(?!ed producer state snapshot)|\.swap|\.cleaned"
)


def test_broker_loads_every_written_partition_as_is(writers):
    """At the restart Kafka loads each partition once, with the log start and end offsets the
    writers left, and logs no recovery, truncation, index rebuild, corruption, deletion or stray
    partition about them, no WARN or ERROR."""
    lines = _restart_log(writers)
    text = "\n".join(lines)
    assert "since clean shutdown file was found" in text, text[-3000:]
    problems = []
    for (topic, p), end in sorted(writers.log_end.items()):
        if topic.startswith("spark") and writers.spark_skipped:
            continue
        name = f"{topic}-{p}"
        loaded = [ln for ln in lines if "Completed load of Log(dir=" in ln and f"/{name}," in ln]
        if len(loaded) != 1:
            problems.append((name, "loaded", loaded))
            continue
        if f"logEndOffset={end})" not in loaded[0]:
            problems.append((name, f"logEndOffset {end}", loaded[0]))
        start = writers.log_start[(topic, p)]
        if f"logStartOffset={start}," not in loaded[0]:
            problems.append((name, f"logStartOffset {start}", loaded[0]))
        about = [ln for ln in lines if re.search(rf"\b{re.escape(name)}\b", ln)]
        problems += [(name, "bad line", ln) for ln in about if BAD.search(ln)]
    assert not problems, "\n".join(map(str, problems))


# --- kafkalog serve writes, make-bootable, a new Kafka node serves -------------------------------

SERVE_NODE = 1


@dataclass
class Served:
    serve_status: int
    serve_log: str
    made: subprocess.CompletedProcess
    expected: dict[tuple[str, int], list[tuple[int, Rec, str | None]]]  # (offset, record, txn end)
    delivered: list[tuple[str, int, int]]
    broker_log: Path
    read_uncommitted: list[dict]
    read_committed: list[dict]
    group_offsets: dict[tuple[str, int], int]


def _serve_produce(bootstrap: str) -> tuple[list[tuple[str, list[Rec], str | None]], list]:
    """librdkafka's producers through ``kafkalog serve``: an idempotent one (lz4), then a
    transactional one (commit, abort, commit); a consumer group commits an offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    topics = [NewTopic("served", 2, 1), NewTopic("served-txn", 2, 1, config=SMALL)]
    for f in admin.create_topics(topics, operation_timeout=30).values():
        f.result(timeout=60)
    delivered: list = []

    def on_delivery(err, msg):
        delivered.append((err, msg.topic(), msg.partition(), msg.offset()))

    def send(producer, topic: str, records: list[Rec]) -> None:
        for r in records:
            producer.produce(
                topic, key=r.key, value=r.value, partition=r.partition,
                headers=list(r.headers) or None, timestamp=r.timestamp, on_delivery=on_delivery,
            )  # fmt: skip

    runs: list[tuple[str, list[Rec], str | None]] = []
    idem = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.codec": "lz4",
        "linger.ms": 5, "log_level": 0,
    })  # fmt: skip
    records = _explicit(make_records(120, 2, 150, T0 + 5 * DAY), T0 + 5 * DAY)
    send(idem, "served", records)
    assert idem.flush(30) == 0
    runs.append(("served", records, None))
    txn = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": "kafkalog-served", "linger.ms": 5,
        "compression.codec": "zstd", "log_level": 0,
    })  # fmt: skip
    txn.init_transactions(30)
    for seed, end in enumerate(("commit", "abort", "commit")):
        records = _explicit(make_records(20, 2, 160 + seed, T0 + 6 * DAY), T0 + 6 * DAY)
        txn.begin_transaction()
        send(txn, "served-txn", records)
        assert txn.flush(30) == 0
        (txn.commit_transaction if end == "commit" else txn.abort_transaction)(30)
        runs.append(("served-txn", records, end.upper()))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-served",
                         "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    consumer.commit(offsets=[TopicPartition("served", 0, 7), TopicPartition("served", 1, 3)],
                    asynchronous=False)  # fmt: skip
    consumer.close()
    del idem, txn
    return runs, delivered


@pytest.fixture(scope="module")
def served(kafka_dist, tmp_path_factory) -> Served:
    from test_kafka_boots_ours import _new_node, _wait_for_leaders

    workdir = tmp_path_factory.mktemp("kafka-reads-served")
    data_dir = workdir / "data"
    serve_err = workdir / "serve.err"
    cmd = [*_kafkalog_bin(), "serve", str(data_dir), "--listen", "127.0.0.1:0",
           "--offsets-topic-num-partitions", "2", "--transaction-state-log-num-partitions", "2",
           "--no-auto-create-topics"]  # fmt: skip
    with open(serve_err, "w") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"kafkalog serving (\S+)", serve_err.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, serve_err.read_text()
            time.sleep(0.05)
        runs, delivered = _serve_produce(m[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            status = proc.wait()

    # Offsets by counting per partition in input order; a marker per partition a transaction
    # touched.
    expected: dict[tuple[str, int], list[tuple[int, Rec, str | None]]] = defaultdict(list)
    for topic, records, end in runs:
        touched = []
        for r in records:
            tp = (topic, r.partition)
            expected[tp].append((len(expected[tp]), r, end))
            touched.append(tp)
        for tp in sorted(set(touched)) if end else ():
            expected[tp].append((len(expected[tp]), None, end))

    made = _kafkalog("make-bootable", str(data_dir), "--node-id", str(SERVE_NODE), "--json")
    broker = _new_node(kafka_dist, workdir / "broker", data_dir, SERVE_NODE)
    dist = kafka_dist
    try:
        if made.returncode == 0:
            broker.start()
            for topic in ("served", "served-txn"):
                _wait_for_leaders(broker, topic, 2, SERVE_NODE)
            read_uncommitted = dist.consume(broker.bootstrap, ["served", "served-txn"])
            read_committed = dist.consume(
                broker.bootstrap, ["served", "served-txn"], "read_committed"
            )
            group_offsets = _group_offsets(broker.bootstrap, "kafkalog-served")
        else:
            read_uncommitted = read_committed = []
            group_offsets = {}
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    return Served(
        status, serve_err.read_text(), made, dict(expected),
        [(t, p, o) for err, t, p, o in delivered if err is None], broker.log_file,
        read_uncommitted, read_committed, group_offsets,
    )  # fmt: skip


def _group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + 30
    while True:
        try:
            futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            result = futures[group].result(timeout=10)
            return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _served_rows(served: Served, committed: bool) -> list[tuple]:
    return [
        (t, p, o, r.timestamp, "CreateTime", r.key, r.value, r.headers)
        for (t, p), entries in sorted(served.expected.items())
        for o, r, end in entries
        if r is not None and not (committed and end == "ABORT")
    ]


def test_serve_stopped_cleanly_and_acknowledged_the_offsets_fed(served):
    assert served.serve_status == 0, served.serve_log[-3000:]
    assert "stopped cleanly" in served.serve_log, served.serve_log[-3000:]
    want = sorted(
        (t, p, o) for (t, p), es in served.expected.items() for o, r, _ in es if r is not None
    )
    assert sorted(served.delivered) == want


def test_kafka_boots_from_what_serve_wrote(served):
    """``kafkalog make-bootable`` on serve's data directory, and a new Kafka node serves exactly
    the records librdkafka's producers sent to ``kafkalog serve``, at both isolation levels, with
    the consumer group's committed offsets."""
    _ok(served.made)
    reads = {"uncommitted": served.read_uncommitted, "committed": served.read_committed}
    for level, read in reads.items():
        got = _consumer_rows(read)
        want = _served_rows(served, level == "committed")
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"read_{level} record {i}:\n  Kafka {g!r}\n  fed   {w!r}"
        assert len(got) == len(want), (level, len(got), len(want))
    assert served.group_offsets == {("served", 0): 7, ("served", 1): 3}


def test_kafka_loads_what_serve_wrote_as_is(served):
    """Every partition serve wrote (the internal topics' too: kafkalog's group and transaction
    coordinators wrote them) loads once at the log end offset fed, with no recovery, truncation,
    index rebuild, corruption, deletion, stray partition, WARN or ERROR about it."""
    _ok(served.made)
    with open(served.broker_log, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    problems = []
    for (topic, p), entries in sorted(served.expected.items()):
        name = f"{topic}-{p}"
        loaded = [ln for ln in lines if "Completed load of Log(dir=" in ln and f"/{name}," in ln]
        if len(loaded) != 1 or f"logEndOffset={len(entries)})" not in loaded[0]:
            problems.append((name, len(entries), loaded))
    internal = ("__consumer_offsets", "__transaction_state", "served", "served-txn")
    for name in (f"{topic}-{p}" for topic in internal for p in (0, 1)):
        about = [ln for ln in lines if re.search(rf"\b{re.escape(name)}\b", ln)]
        problems += [(name, "bad line", ln) for ln in about if BAD.search(ln)]
    problems += [("coordinator", ln) for ln in lines if "] ERROR " in ln]
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.xfail(
    strict=True,
    reason="Kafka 4.x takes a bootstrapped node's leadership at its registration: "
    "ClusterControlManager.registerBroker passes every new incarnation (a random id per "
    "process) to ReplicationControlManager.handleBrokerShutdown (KAFKA-18106), whose "
    "generateLeaderAndIsrUpdates over BrokersToIsrs.partitionsWithBrokerInIsr(node) makes the "
    "node no acceptable leader, and the broker publishes its first metadata image only once "
    "caught up past that registration. So no bootstrap makes the node lead from its first "
    "image: with leader = node (releases 3.9, 4.1+) each partition goes to epoch 1 without a "
    "leader at registration and to epoch 2 at unfencing; with leader = -1 (release 4.0, what "
    "make-bootable writes) the first image has no leader (the group coordinator logs an "
    "ignored unload of __consumer_offsets) and the unfencing elects the node at epoch 1, as "
    "at a restart of a single-node Kafka. Only a topic created after the broker unfenced, as "
    "Kafka creates its own, keeps its epoch-0 leader; a node outside the ISR would escape the "
    "registration but fail every acks=all produce",
)
def test_new_node_keeps_its_leadership_at_first_start(served):
    """A node that boots from a bootstrapped directory leads its partitions from its first
    metadata image on, with no leader change and a single coordinator load."""
    _ok(served.made)
    text = served.broker_log.read_text(errors="replace")
    lost = re.findall(r"Scheduling unloading of metadata for __consumer_offsets-\d+ .*", text)
    assert not lost, lost
