"""A PySpark application run by ``spark-submit --master spark://...`` against the standalone
cluster of test_standalone_cluster.py: the driver is this process, the work runs in the
cluster's executors (separate JVMs, each with its own Python workers that have only the
installed kafkalog). It reads, writes and streams with the kafkalog source and records what it
got, and where it ran, as JSON; the tests compare that with independent truth.

    spark-submit --master spark://127.0.0.1:PORT cluster_app.py REQUEST.json RESULT.json

Each scenario's outcome is recorded on its own (its result, or its traceback), so that one
failing scenario fails only its test.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def executor_of(pid: int) -> dict | None:
    """The executor JVM (``CoarseGrainedExecutorBackend``) that ``pid`` descends from: its pid,
    its ``--executor-id`` and its parent's pid (the worker that launched it)."""
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            return None
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
            executor_id = args[args.index(b"--executor-id") + 1].decode()
            return {"jvm_pid": pid, "executor_id": executor_id, "jvm_parent": _ppid(pid)}
        pid = _ppid(pid)
    return None


def _hex(b) -> str | None:
    return None if b is None else bytes(b).hex()


def _sha(b) -> str | None:
    return None if b is None else hashlib.sha256(bytes(b)).hexdigest()


def scenario_read(spark, req: dict) -> dict:
    """Every record of a kafkalog read, with, per partition of the DataFrame, the process that
    handled its rows in the task (the Python worker, its executor JVM, the kafkalog it
    imported): one job."""
    df = spark.read.format("kafkalog").option("includeHeaders", "true").load(req["data"])

    def probe(rows):
        import os
        import sys

        import kafkalog

        rows = [
            [r.topic, r.partition, r.offset, _hex(r.key), _hex(r.value), r.timestamp.timestamp(),
             [[h.key, _hex(h.value)] for h in (r.headers or [])]]
            for r in rows
        ]  # fmt: skip
        where = {
            "rows": len(rows),
            "python_pid": os.getpid(),
            "python": sys.executable,
            "kafkalog": kafkalog.__file__,
            "cwd": os.getcwd(),
            "executor": executor_of(os.getpid()),
        }
        yield where, rows

    tasks = df.rdd.mapPartitions(probe).collect()
    return {"rows": sorted(r for _, rows in tasks for r in rows), "tasks": [t for t, _ in tasks]}


def scenario_damaged(spark, req: dict) -> dict:
    """A damaged batch, skipped with failOnDataLoss=false: the task that meets it writes the
    dataLossLog line into a file named after its own process id."""
    rows = (
        spark.read.format("kafkalog")
        .option("failOnDataLoss", "false")
        .option("dataLossLog", req["loss_log"])
        .load(req["damaged"])
        .select("offset")
        .collect()
    )
    owners = {}
    for name in sorted(os.listdir(req["loss_log"])):
        pid = int(name.rsplit("-", 1)[1].split(".")[0])
        owners[name] = {"pid": pid, "executor": executor_of(pid)}
    return {"offsets": sorted(r.offset for r in rows), "files": owners}


def scenario_fixtures(spark, req: dict) -> dict:
    """Every fixture directory read whole (one DataFrame each, unioned: one job)."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [
        spark.read.format("kafkalog").option("includeHeaders", "true").load(path).select(
            F.lit(name), "topic", "partition", "offset",
            (F.unix_micros("timestamp") / 1000).cast("long"), "key", "value",
            F.coalesce(F.size("headers"), F.lit(0)),
        )
        for name, path in req["fixtures"]
    ]  # fmt: skip
    out = {name: [] for name, _ in req["fixtures"]}
    for r in reduce(lambda a, b: a.union(b), frames).collect():
        out[r[0]].append([r[1], r[2], r[3], r[4], _hex(r[5]), _sha(r[6]), r[7]])
    return {name: sorted(rows) for name, rows in out.items()}


def scenario_write(spark, req: dict) -> dict:
    from pyspark.sql import functions as F

    n = req["write_rows"]
    df = spark.range(0, n, 1, 4).select(
        F.concat(F.lit("k"), (F.col("id") % 97).cast("string")).cast("binary").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
    )
    (df.write.format("kafkalog").option("topic", "written").option("numPartitions", 3)
       .option("codec", "lz4").mode("append").save(req["write_out"]))  # fmt: skip
    back = spark.read.format("kafkalog").load(req["write_out"])
    rows = back.select("partition", "offset", "key", "value").collect()
    return {"rows": sorted([r[0], r[1], _hex(r[2]), _hex(r[3])] for r in rows)}


def scenario_stream(spark, req: dict) -> dict:
    query = (
        spark.readStream.format("kafkalog")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", req["max_per_trigger"])
        .load(req["data"])
        .select("key", "value")
        .writeStream.format("kafkalog")
        .option("topic", "streamed")
        .option("numPartitions", 2)
        .option("checkpointLocation", req["checkpoint"])
        .trigger(availableNow=True)
        .start(req["stream_out"])
    )
    query.awaitTermination(120)
    if query.isActive:
        query.stop()
        raise TimeoutError("the availableNow query did not finish within 120 s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    batches = [p for p in query.recentProgress if p.numInputRows]
    return {"batches": len(batches), "input_rows": sum(p.numInputRows for p in batches)}


def scenario_s3(spark, req: dict) -> dict:
    """The data directory uploaded to S3, read by the executors (each task's process recorded),
    then written back to S3 by them and committed by the driver, and read again."""
    df = spark.read.format("kafkalog").load(req["s3_data"])

    def probe(rows):
        import os

        yield (
            [os.getpid(), executor_of(os.getpid())],
            [[r.topic, r.partition, r.offset, _hex(r.key), _hex(r.value)] for r in rows],
        )

    tasks = df.rdd.mapPartitions(probe).collect()
    (df.select("key", "value").write.format("kafkalog").option("topic", "copied")
       .option("numPartitions", 2).mode("append").save(req["s3_out"]))  # fmt: skip
    back = spark.read.format("kafkalog").load(req["s3_out"]).select("key", "value").collect()
    return {
        "rows": sorted(row for _where, rows in tasks for row in rows),
        "tasks": [where for where, rows in tasks if rows],
        "copied": sorted(([_hex(r.key), _hex(r.value)] for r in back), key=repr),
    }


SCENARIOS = {
    "read": scenario_read,
    "s3": scenario_s3,
    "damaged": scenario_damaged,
    "fixtures": scenario_fixtures,
    "write": scenario_write,
    "stream": scenario_stream,
}


def wait_for_executors(spark, count: int, timeout: float = 60.0) -> list[str]:
    """Block until ``count`` executors have registered (the driver counts as one more)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        infos = tracker.getExecutorInfos()
        found = [f"{infos[i].host()}:{infos[i].port()}" for i in range(len(infos))]
        if len(found) >= count + 1 or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def main(request_path: str, result_path: str) -> None:
    from pyspark.sql import SparkSession

    import kafkalog.spark

    with open(request_path) as f:
        req = json.load(f)
    started = time.monotonic()
    spark = SparkSession.builder.appName("kafkalog-cluster-test").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    result = {
        "driver": {
            "python_pid": os.getpid(),
            "jvm_pid": spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(),
            "master": spark.sparkContext.master,
            "executors": wait_for_executors(spark, req["executors"]),
        },
        "timings": {"session": time.monotonic() - started},
    }
    for name in req["scenarios"]:
        t = time.monotonic()
        try:
            result[name] = SCENARIOS[name](spark, req)
        except Exception:
            result[name] = {"error": traceback.format_exc()}
        result["timings"][name] = time.monotonic() - t
    spark.stop()
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
