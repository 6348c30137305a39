"""The streaming sink across SIGKILLs: a real Spark streaming query, in its own process group
(driver, JVM and Python workers), writes with the kafkalog sink and is killed with SIGKILL, once
while a micro-batch's tasks are staging files and once while its commit is appending; each time
the log must hold exactly the micro-batches the sink had committed (the killed one not at all, or
after the restart, once). A last run from the same checkpoint drains the source: every record is
in the output exactly once, as kafka-python decodes it, and kafkalog verify finds no error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kafkalog.spark.writer import SINK_STATE_PREFIX, STAGING_DIR

from .helpers import write_dir

pytest.importorskip("pyspark")
kafka_records = pytest.importorskip("kafka.record.memory_records")

pytestmark = pytest.mark.slow

PER_TRIGGER = 60
RECORDS = 180  # per partition: 6 micro-batches of PER_TRIGGER records
_QUERY = """
import os, sys, time
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession, functions as F
import kafkalog.spark

src, dst, ckpt, mode, per_trigger = sys.argv[1:6]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
kafkalog.spark.register(spark)
df = (spark.readStream.format("kafkalog").option("maxOffsetsPerTrigger", per_trigger)
      .option("startingOffsets", "earliest").load(src).select("key", "value", "timestamp"))
if mode == "slow":  # slow tasks: a kill lands while they stage files
    pause = F.udf(lambda v: (time.sleep(0.005), v)[1], "binary")
    df = df.withColumn("value", pause("value"))
writer = (df.writeStream.format("kafkalog").option("topic", "copy").option("numPartitions", "2")
          .option("checkpointLocation", ckpt))
if mode == "drain":
    query = writer.trigger(availableNow=True).start(dst)
else:
    query = writer.trigger(processingTime="0 seconds").start(dst)
query.awaitTermination()
print("drained" if query.exception() is None else f"failed: {query.exception()}")
"""


def _start(src: Path, dst: Path, ckpt: Path, mode: str) -> subprocess.Popen:
    per_trigger = PER_TRIGGER if mode == "slow" else 100 * PER_TRIGGER  # drain: the rest at once
    return subprocess.Popen(
        [sys.executable, "-c", _QUERY, str(src), str(dst), str(ckpt), mode, str(per_trigger)],
        start_new_session=True,  # its own process group: the JVM and workers die with it
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.time() + 30  # the JVM and workers go with the group; make sure
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _state(dst: Path) -> dict:
    files = list(dst.glob(f"{SINK_STATE_PREFIX}*.json"))
    if not files:
        return {}
    try:
        return json.loads(files[0].read_text())
    except (OSError, ValueError):  # replaced atomically, but read between list and open
        return {}


def _staging(dst: Path, batch_id: int) -> bool:
    """True once the tasks of micro-batch ``batch_id`` have started staging."""
    return any(dst.glob(f"{STAGING_DIR}/stream-*/{batch_id}/*"))


def _wait_then_kill(proc, dst: Path, *, in_commit: bool, timeout: float = 600) -> str:
    """SIGKILL the query's process group once the tasks of a micro-batch after one this run
    committed are staging (with ``in_commit``: while a commit is appending, if one is caught
    before a few batches went by); returns where it landed."""
    deadline = time.time() + timeout
    first = _state(dst).get("committed", -1)  # batches committed before this run
    while time.time() < deadline:
        state = _state(dst)
        committed = state.get("committed", -1)
        if in_commit and "pending" in state:
            _kill(proc)
            return "commit"
        if committed >= first + 1 and _staging(dst, committed + 1):
            if not in_commit or committed >= first + 3:  # no commit caught: settle for tasks
                _kill(proc)
                return "tasks"
        if proc.poll() is not None:
            raise AssertionError(f"the query exited by itself: {proc.stdout.read()}")
        time.sleep(0.001 if in_commit else 0.02)
    _kill(proc)
    raise AssertionError("the query made no progress")


def _output_values(dst: Path) -> Counter:
    """Values of every record of the output topic, decoded by kafka-python."""
    values: Counter = Counter()
    for segment in sorted(dst.glob("copy-*/*.log")):
        records = kafka_records.MemoryRecords(segment.read_bytes())
        while (batch := records.next_batch()) is not None:
            values.update(r.value for r in batch)
    return values


def _source_values(ckpt: Path, batch_id: int) -> Counter:
    """Values the micro-batches up to ``batch_id`` read: Spark's offset log holds each batch's
    end offsets (Spark's Kafka JSON)."""
    if batch_id < 0:
        return Counter()
    ends = json.loads((ckpt / "offsets" / str(batch_id)).read_text().splitlines()[-1])
    return Counter(f"a/{p}/{i}".encode() for p, end in ends["a"].items() for i in range(int(end)))


def test_sigkilled_streaming_sink_restarts_without_loss_or_duplicates(tmp_path):
    from kafkalog.log.verify.data_dir import verify

    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    write_dir(src, {"a": 2}, RECORDS)
    landed = []
    for in_commit in (False, True):
        proc = _start(src, dst, ckpt, "slow")
        landed.append(_wait_then_kill(proc, dst, in_commit=in_commit))
        state = _state(dst)
        committed = state.get("committed", -1)
        if "pending" not in state:  # killed outside a commit: the log is whole batches
            assert _output_values(dst) == _source_values(ckpt, committed), landed
        else:  # killed mid-append: at most the committed batches plus part of the next
            assert _output_values(dst) - _source_values(ckpt, committed + 1) == Counter()
    proc = _start(src, dst, ckpt, "drain")
    out, _ = proc.communicate(timeout=600)
    assert "drained" in out, out
    expected = Counter(f"a/{p}/{i}".encode() for p in range(2) for i in range(RECORDS))
    assert _output_values(dst) == expected, landed
    assert "pending" not in _state(dst)
    report = verify(dst)
    assert report.ok, [str(f) for f in report.errors]
    assert not any(p.is_file() for p in (dst / STAGING_DIR).glob("**/*"))
