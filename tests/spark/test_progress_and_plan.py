"""What Spark's Kafka source shows beside the rows, and what a Python data source can show of it
(issue 28, point 6; docs/spark.md "Progress, plan and metrics"): the lag in streaming progress,
the plan's scan node, task input metrics, and the traceback after show()."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from kafkalog.spark import lag_metrics

from .helpers import write_dir

LAG_KEYS = ("avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "minOffsetsBehindLatest")


def test_lag_metrics_as_kafka_micro_batch_stream_computes_them():
    source = {
        "endOffset": '{"a": {"0": 75, "1": 100}}',
        "latestOffset": {"a": {"0": 200, "1": 100}},
    }
    assert lag_metrics(source) == {
        "avgOffsetsBehindLatest": "62.5",
        "maxOffsetsBehindLatest": "125",
        "minOffsetsBehindLatest": "0",
    }
    # Scala's Double.toString: plain below 10^7, then scientific
    big = {"endOffset": {"a": {"0": 0}}, "latestOffset": {"a": {"0": 12_345_678}}}
    assert lag_metrics(big)["avgOffsetsBehindLatest"] == "1.2345678E7"
    # no batch yet, or a source that reported no latest offset: no metrics, as Spark's source
    for missing in (None, "null", "None", ""):
        assert lag_metrics({"endOffset": missing, "latestOffset": '{"a": {"0": 1}}'}) == {}
        assert lag_metrics({"endOffset": '{"a": {"0": 1}}', "latestOffset": missing}) == {}


@pytest.mark.slow
def test_progress_reports_latest_offsets_and_the_lag_follows(spark, tmp_path):
    write_dir(tmp_path / "src", {"a": 2}, 200)
    q = (spark.readStream.format("kafkalog").option("maxOffsetsPerTrigger", "150")
         .option("startingOffsets", "earliest").load(str(tmp_path / "src"))
         .writeStream.format("memory").queryName("lagged").trigger(availableNow=True)
         .start())  # fmt: skip
    q.awaitTermination(180)
    assert q.exception() is None
    batches = [p.sources[0] for p in q.recentProgress if p.numInputRows]
    q.stop()
    assert [json.loads(s.endOffset) for s in batches] == [
        {"a": {"0": n, "1": n}} for n in (75, 150, 200)
    ]
    for source in batches:
        # what Spark's Kafka source reports as latestOffset: what was there, not the batch's end
        assert json.loads(source.latestOffset) == {"a": {"0": 200, "1": 200}}
        # A Python source cannot fill sources[].metrics (PythonMicroBatchStream does not
        # implement ReportsSourceMetrics): when pyspark lets it, this fails and docs/spark.md
        # and the source should change.
        assert not set(LAG_KEYS) & set(source.metrics)
    assert [lag_metrics(s) for s in batches] == [
        dict(zip(LAG_KEYS, (f"{n}.0", str(n), str(n)), strict=True)) for n in (125, 50, 0)
    ]


@pytest.mark.slow
def test_plan_and_task_metrics_show_what_pyspark_lets_a_python_source_show(spark, tmp_path):
    write_dir(tmp_path, {"a": 2, "b": 1}, 30)
    df = spark.read.format("kafkalog").load(str(tmp_path))
    plan = df._jdf.queryExecution().executedPlan().toString()
    # The node is named after the source and described by pyspark as "(Python)" (PythonScan's
    # description is fixed): no topics or offset ranges, unlike Spark's KafkaScan.
    assert re.search(r"BatchScan kafkalog\[.*\] \(Python\)", plan), plan
    sc = spark.sparkContext
    sc.setJobGroup("kafkalog-input-metrics", "count")
    try:
        assert df.count() == 90
    finally:
        sc.setJobGroup("", "")
    store = sc._jsc.sc().statusStore()
    stages = [
        sid
        for job in sc.statusTracker().getJobIdsForGroup("kafkalog-input-metrics")
        for sid in sc.statusTracker().getJobInfo(job).stageIds
    ]
    deadline = time.time() + 30
    while True:  # the status store is fed by the listener bus, a little after the job
        data = [store.lastStageAttempt(sid) for sid in stages]
        if sum(d.inputRecords() for d in data) == 90 or time.time() > deadline:
            break
        time.sleep(0.2)
    # Records read are counted by Spark's DataSourceRDD for every v2 source; bytes read come
    # from the JVM thread's Hadoop FileSystem statistics, and the Python worker reads the
    # segments itself: 0, and no API to report them.
    assert sum(d.inputRecords() for d in data) == 90
    assert sum(d.inputBytes() for d in data) == 0


_SHOW = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafkalog.spark
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
kafkalog.spark.register(spark)
df = spark.read.format("kafkalog").load(sys.argv[1])
df.selectExpr("CAST(value AS STRING) v").show(5)
print("ROWS", [r.offset for r in df.limit(3).collect()])
spark.stop()
"""


@pytest.mark.slow
def test_show_adds_no_error_of_kafkalog_only_pysparks_own_broken_pipe(tmp_path):
    """show() and limit() stop reading a task's rows early; Spark then closes the Python
    worker's socket while the worker still writes the rest, and pyspark's daemon (4.1+,
    SPARK-54344) prints the BrokenPipeError of its last flush: any Python source or mapInArrow
    does so (docs/spark.md). What kafkalog answers for: the rows are right, and nothing of it
    is in any traceback."""
    from kafkalog.cli.main import main

    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"record {i}\n" for i in range(100_000)))
    data = tmp_path / "data"
    assert main(["produce", "--topic", "t", "--file", str(lines), "--format", "text",
                 "--quiet", str(data)]) in (0, None)  # fmt: skip
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_SHOW), str(data)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "|record 0|" in proc.stdout and "|record 4|" in proc.stdout
    assert "ROWS [0, 1, 2]" in proc.stdout
    tracebacks = re.findall(r"Traceback \(most recent call last\):\n((?:  .*\n)+)(\S.*)",
                            proc.stderr)  # fmt: skip
    for frames, error in tracebacks:
        files = set(re.findall(r'File "([^"]+)"', frames))
        assert files and all(f.endswith("pyspark/daemon.py") for f in files), proc.stderr
        assert error.startswith(("BrokenPipeError", "ConnectionResetError")), proc.stderr
    assert "kafkalog" not in "".join(f + e for f, e in tracebacks)


def test_registering_imports_neither_the_log_layer_nor_numpy_nor_pyarrow():
    """The driver only registers the class; the log layer, planner and decoder are imported by
    the Python processes that use them (docs/benchmarks.md, first read)."""
    code = (
        "import sys, kafkalog.spark, kafkalog.spark.datasource as d; d.KafkaLogDataSource.name(); "
        "print(sorted(m for m in sys.modules if m in ('numpy', 'pyarrow', 'pandas') "
        "or m.startswith(('kafkalog.dataset', 'kafkalog.log', 'kafkalog.format'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
