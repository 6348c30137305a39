"""Every kafkalog reader against Kafka's Java consumer on the whole ``kafka_written`` corpus
(tests/apache_kafka/conftest.py: every codec, idempotent, LogAppendTime, transactions, librdkafka,
a compacted topic Kafka's log cleaner cleaned twice, a partition whose log start DeleteRecords
moved into a segment and one it emptied), at both isolation levels where the reader has one:

- the Spark source (``spark.read.format("kafkalog")`` in a local SparkSession): every column;
- ``kafkalog serve`` on a copy of the data directory, read by Kafka's Java consumer through
  Fetch: the very records (and leader epochs) it read from the broker;
- ``kafkalog export --to csv`` (Parquet and JSON lines are test_kafka_recovery_parity.py's);
- ``kafkalog stats``: each partition's log start and end offsets are Kafka's (ListOffsets), and
  its record count, less the control records and the records below the log start that Kafka's
  DumpLogSegments finds in the same files, is the number of records Kafka's consumer read.

``kafkalog consume``, ``open_data_dir`` and ``verify`` are test_kafka_writes_kafkalog_reads.py's.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LEVELS = ("read_uncommitted", "read_committed")
COMPACTED, DELETE_RECORDS = "compacted", "delete-records"  # conftest.py's topics
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _kafkalog_bin() -> list[str]:
    exe = Path(sys.executable).with_name("kafkalog")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]


def _kafkalog(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*_kafkalog_bin(), *args], capture_output=True, encoding="utf-8", check=False
    )
    if check:
        assert proc.returncode == 0, (args, proc.returncode, proc.stderr[-3000:])
    return proc


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


def _java_rows(records: list[dict]) -> list[tuple]:
    return [
        (
            r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"],
            _bytes(r["key"]), _bytes(r["value"]),
            tuple((k, _bytes(v)) for k, v in r["headers"]),
        )
        for r in records
    ]  # fmt: skip


def _first_difference(got: list[tuple], want: list[tuple]) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"record {i}: kafkalog {g!r}\n          kafka    {w!r}"
    return f"kafkalog has {len(got)} records, Kafka's consumer {len(want)}"


# --- The corpus itself ----------------------------------------------------------------------


def test_corpus_has_a_cleaned_compacted_topic_and_deleted_records(kafka_written):
    """What the readers below are held to: Kafka's cleaner really cleaned ``compacted`` (offset
    gaps, aborted records gone below the checkpoint, replaced segments left as ``.deleted``),
    and DeleteRecords moved ``delete-records``' log start (into a segment on partition 0, to the
    end on partition 1), with the segments below it still on disk."""
    exp = kafka_written.expected
    data = kafka_written.data_dir
    for p in (0, 1):
        tp = f"{COMPACTED}-{p}"
        cleaned = kafka_written.cleaned[tp]
        offsets = [r["offset"] for r in exp["read_uncommitted"] if r["topic"] == COMPACTED
                   and r["partition"] == p]  # fmt: skip
        below = [o for o in offsets if o < cleaned]
        assert below and len(below) < cleaned, (tp, cleaned, offsets)  # gaps below the checkpoint
        assert any(f.name.endswith(".log.deleted") for f in (data / tp).iterdir()), tp
    # The second clean of partition 0 went past the first round's abort: nothing aborted is left
    # below its checkpoint, so both levels read the same records there.
    assert kafka_written.cleaned[f"{COMPACTED}-0"] > 50
    per_level = [
        [r["offset"] for r in exp[level] if r["topic"] == COMPACTED and r["partition"] == 0]
        for level in LEVELS
    ]
    assert per_level[0] == per_level[1]
    # Partition 1 was cleaned once, up to its active segment, which holds an aborted
    # transaction: read_committed reads fewer records.
    counts = [
        len([r for r in exp[level] if r["topic"] == COMPACTED and r["partition"] == 1])
        for level in LEVELS
    ]
    assert counts[0] > counts[1], counts

    start0, end0 = kafka_written.offsets[f"{DELETE_RECORDS}-0"]
    start1, end1 = kafka_written.offsets[f"{DELETE_RECORDS}-1"]
    assert kafka_written.deleted == {f"{DELETE_RECORDS}-0": start0, f"{DELETE_RECORDS}-1": end1}
    assert 0 < start0 < end0 and start1 == end1 > 0
    bases = sorted(int(f.name[:20]) for f in (data / f"{DELETE_RECORDS}-0").glob("*.log"))
    assert bases[0] == 0 and start0 not in bases and bases[1] < start0, bases
    got = [r["offset"] for r in exp["read_uncommitted"] if r["topic"] == DELETE_RECORDS]
    assert got == list(range(start0, end0)), got


# --- kafkalog stats ---------------------------------------------------------------------------


def _kafka_dump_counts(kafka_written) -> dict[str, Counter]:
    """Per partition, from Kafka's DumpLogSegments --deep-iteration over its .log files:
    records, control records, and data records below the log start offset."""
    data = kafka_written.data_dir
    files = sorted(
        f"{part.name}/{f.name}"
        for part in data.iterdir()
        if part.is_dir() and not part.name.startswith("__")
        for f in part.iterdir()
        if f.name.endswith(".log")
    )
    proc = subprocess.run(
        kafka_written.dist.command(
            kafka_written.dist.dump_class, "--deep-iteration", "--files", ",".join(files)
        ),
        cwd=data,
        capture_output=True,
        encoding="utf-8",
        timeout=300,
        check=True,
    )
    counts: dict[str, Counter] = {}
    part = control = None
    for line in proc.stdout.splitlines():
        if line.startswith("Dumping "):
            part = line[len("Dumping ") :].split("/")[0]
            counts.setdefault(part, Counter())
        elif line.startswith("baseOffset: "):
            control = " isControl: true " in line
        elif line.startswith("| offset: "):
            offset = int(line.split()[2])
            c = counts[part]
            c["records"] += 1
            if control:
                c["control"] += 1
            elif offset < kafka_written.offsets[part][0]:
                c["below_start"] += 1
    return counts


def test_stats_counts_what_kafka_reads(kafka_written):
    proc = _kafkalog("stats", "--json", "--quiet", str(kafka_written.data_dir))
    stats = {
        f"{o['topic']}-{o['partition']}": o
        for o in map(json.loads, proc.stdout.splitlines())
        if o.get("type") == "partition" and not o["topic"].startswith("__")
    }
    assert sorted(stats) == sorted(kafka_written.offsets)
    read = Counter(f"{r['topic']}-{r['partition']}" for r in kafka_written.expected[LEVELS[0]])
    dumped = _kafka_dump_counts(kafka_written)
    wrong = []
    for tp, o in sorted(stats.items()):
        start, end = kafka_written.offsets[tp]
        d = dumped[tp]
        got = (o["logStartOffset"], o["logEndOffset"], o["records"], o["error"], o["warnings"])
        want = (start, end, d["records"], None, [])
        if got != want or d["records"] - d["control"] - d["below_start"] != read[tp]:
            wrong.append((tp, got, want, dict(d), read[tp]))
    assert not wrong, "\n".join(map(repr, wrong))
    assert sum(read.values()) == len(kafka_written.expected[LEVELS[0]])


# --- kafkalog export --to csv -----------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_export_csv_matches_kafka_consumer(kafka_written, tmp_path, level):
    """CSV, read back with pyarrow: a null key or value is an empty field, an empty one ``""``;
    keys and values base64, headers a JSON array of [key, base64 or null]."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    out = tmp_path / "export.csv"
    _kafkalog(
        "export", str(kafka_written.data_dir), "--to", "csv", str(out),
        "--topic", ",".join(kafka_written.topics), "--isolation-level", level,
        "--include-headers", "--quiet",
    )  # fmt: skip
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    types = {c: pa.string() for c in [*columns, "headers"]}
    types.update(partition=pa.int64(), offset=pa.int64(), timestampType=pa.int64())
    table = pacsv.read_csv(
        out,
        convert_options=pacsv.ConvertOptions(
            column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False
        ),
    )
    assert table.column_names == [*columns, "headers"]
    got = sorted(
        (
            r["topic"], r["partition"], r["offset"], _csv_millis(r["timestamp"]),
            TIMESTAMP_TYPES[r["timestampType"]], _bytes(r["key"]), _bytes(r["value"]),
            tuple((k, _bytes(v)) for k, v in json.loads(r["headers"] or "[]")),
        )
        for r in table.to_pylist()
    )  # fmt: skip
    want = _java_rows(kafka_written.expected[level])
    assert got == want, _first_difference(got, want)


def _csv_millis(text: str) -> int:
    """``2026-01-01 00:00:11.700000Z`` in milliseconds since the epoch."""
    import datetime as dt

    when = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return (when - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)


# --- kafkalog serve's Fetch, read by Kafka's Java consumer ------------------------------------


@pytest.fixture(scope="module")
def served_copy(kafka_written, tmp_path_factory):
    """``kafkalog serve`` on a copy of the data directory (no retention or cleaner pass while
    the test reads: the first one an hour away), its bootstrap address."""
    copy = tmp_path_factory.mktemp("served-copy") / "data"
    shutil.copytree(kafka_written.data_dir, copy)
    err_path = copy.parent / "serve.err"
    cmd = [*_kafkalog_bin(), "serve", str(copy), "--listen", "127.0.0.1:0",
           "--no-auto-create-topics", "--config", "log.initial.task.delay.ms=3600000",
           "--config", "log.cleaner.enable=false"]  # fmt: skip
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    box: dict = {"proc": proc, "err": err_path}
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"kafkalog serving (\S+)", err_path.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        box["bootstrap"] = m[1]
        yield box
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("level", LEVELS)
def test_serve_fetch_matches_kafka_consumer(kafka_written, served_copy, level):
    """Kafka's Java consumer reads from ``kafkalog serve`` exactly what it read from the broker
    (every field it prints, leader epochs included)."""
    got = kafka_written.dist.consume(served_copy["bootstrap"], kafka_written.topics, level)
    want = kafka_written.expected[level]
    assert got == want, _first_difference(_java_rows(got), _java_rows(want))


def test_serve_stops_cleanly(served_copy):
    proc = served_copy["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, served_copy["err"].read_text()[-3000:]
    log = served_copy["err"].read_text()
    bad = [
        line for line in log.splitlines()
        if re.search(r"\b(ERROR|CRITICAL|Traceback)\b", line)
    ]  # fmt: skip
    assert not bad, bad


# --- The Spark source ---------------------------------------------------------------------------

_SPARK: dict = {}


def _start_spark() -> None:
    """A local SparkSession (tests/spark/conftest.py's settings); ``_SPARK`` gets it or the
    reason there is none. Another module's session is used, and left running, if there is one."""
    try:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        import kafkalog.spark

        _SPARK["ours"] = SparkContext._active_spark_context is None
        session = (
            SparkSession.builder.master("local[2]")
            .appName("kafkalog-kafka-corpus-readers")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        if _SPARK["ours"]:
            session.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(session)
        _SPARK["spark"] = session
    except Exception as exc:  # pyspark missing or Spark unable to start
        _SPARK["error"] = f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="session")
def spark_starting():
    """Starts the SparkSession in a thread (it takes 15-25 s) while the tests before the Spark
    ones run; stopped at the end of the session if this module started it."""
    thread = threading.Thread(target=_start_spark, daemon=True)
    thread.start()
    yield thread
    if _SPARK.get("ours") and "spark" in _SPARK:
        _SPARK["spark"].stop()


@pytest.fixture(scope="module", autouse=True)
def _spark_starts_early(request):
    """The module's first test starts Spark when a Spark test of this module will run."""
    if any(
        item.module is request.module and "spark" in item.fixturenames
        for item in request.session.items
    ):
        request.getfixturevalue("spark_starting")


@pytest.fixture
def spark(spark_starting):
    spark_starting.join(timeout=300)
    if "spark" not in _SPARK:
        pytest.skip(f"no SparkSession: {_SPARK.get('error', 'not started in 300 s')}")
    return _SPARK["spark"]


@pytest.mark.parametrize("level", LEVELS)
def test_spark_source_matches_kafka_consumer(kafka_written, spark, level):
    df = (
        spark.read.format("kafkalog")
        .option("subscribe", ",".join(kafka_written.topics))
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", level)
        .load(str(kafka_written.data_dir))
    )
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    rows = df.selectExpr("*", "unix_millis(timestamp) AS millis").collect()
    got = sorted(
        (
            r["topic"], r["partition"], r["offset"], r["millis"],
            TIMESTAMP_TYPES[r["timestampType"]],
            None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
            tuple(
                (h["key"], None if h["value"] is None else bytes(h["value"]))
                for h in r["headers"] or ()
            ),
        )
        for r in rows
    )  # fmt: skip
    want = _java_rows(kafka_written.expected[level])
    assert got == want, _first_difference(got, want)
