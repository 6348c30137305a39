"""Spark scan and write rates of the kafkalog data source on local[2] (docs/benchmarks.md).

Generates a data directory of about ``--gb`` GB (8 partitions, 8-byte keys, 100-byte values) per
codec with kafkalog's columnar encoder, then measures, interleaved (one round runs every
contender once; ``--warmup`` rounds let the JVM's JIT settle and are dropped; medians of
``--repeat`` rounds):

- ``kafkalog``: Spark ``count()`` over ``spark.read.format("kafkalog")``;
- ``arrow ceiling``: the same count over a source with the same schema and partitions whose
  read() yields one already decoded Arrow batch again and again (Spark's cost of taking the rows,
  without any decoding: the ceiling of any Python data source with this schema);
- ``decode alone``: the same input partitions decoded by ``read_partition`` in this process,
  without Spark (one core);
- kafka-python decoding the same files (one process, a sample of segments).

Wall-clock rates depend on what else runs on the machine, so every Spark count also records the
CPU time of the JVM and its Python workers (from /proc): CPU microseconds per row, and the rate
the two cores would give if that CPU were all the count needed ("CPU-bound rate").
Then Spark writes a generated DataFrame with ``df.write.format("kafkalog")`` (lz4 at level 1)
against a do-nothing Arrow writer over the same DataFrame in the same run.

Usage: python benchmarks/spark_scan.py [--gb 1.0] [--repeat 3] [--warmup 2] [--json out.json]
       [--no-write] [--java-options "-D..."]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

VALUE = 100
KEY = 8


def generate(root: Path, target_bytes: int, codec: str) -> int:
    """A data dir of 8 partitions filled to about ``target_bytes``; returns the record count."""
    import numpy as np

    from kafkalog.format import columnar as fast
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    rng = np.random.default_rng(1)
    rows = 100_000
    pool = rng.integers(32, 127, size=(rows, VALUE), dtype=np.uint8)
    values = [bytes(r) for r in pool]
    keys = [i.to_bytes(KEY, "big") for i in range(rows)]
    total = 0
    per_partition = target_bytes // 8
    with LogManager(root, writable=True, create=True) as manager:
        manager.create_topic("bench", 8)
        for p in range(8):
            log = manager.get_log(TopicPartition("bench", p))
            ts = 1_767_225_600_000
            while log.size_in_bytes() < per_partition:
                data = fast.encode_columnar(
                    keys, values, np.full(rows, ts, np.int64), base_offset=log.log_end_offset,
                    compression=codec, batch_bytes=16384,
                )  # fmt: skip
                log.append_as_follower(data)
                total += rows
                ts += 1000
    return total


def kafka_python_rate(root: Path, seconds: float = 8.0) -> float:
    from kafka.record.memory_records import MemoryRecords

    n, start = 0, time.perf_counter()
    for seg in sorted(root.glob("bench-*/*.log")):
        data = seg.read_bytes()
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            for r in batch:
                _ = (r.key, r.value, r.offset, r.timestamp)
                n += 1
            if time.perf_counter() - start > seconds:
                return n / (time.perf_counter() - start)
    return n / (time.perf_counter() - start)


def spark_cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system, finished children included) of this process's descendants
    by command name: ``java`` (the Spark JVM) and ``python*`` (its Python workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, str, float]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        cpu = sum(int(x) for x in fields[11:15]) / tick
        children.setdefault(int(fields[1]), []).append((int(text.split()[0]), name, cpu))
    out = {"java": 0.0, "python": 0.0}
    stack = [os.getpid()]
    while stack:
        for pid, name, cpu in children.get(stack.pop(), []):
            kind = "java" if name == "java" else "python" if name.startswith("python") else None
            if kind:
                out[kind] += cpu
            stack.append(pid)
    return out


def plan(root: Path) -> list:
    from kafkalog.dataset.options import parse_read_options
    from kafkalog.dataset.reader import open_selected, plan_input_partitions, resolve_ranges

    options = parse_read_options({"path": str(root)})
    logs = open_selected(options)
    try:
        return plan_input_partitions(options, logs, resolve_ranges(options, logs))
    finally:
        for log in logs.values():
            log.close()


def decode_alone(parts: list) -> tuple[float, int]:
    """Seconds to decode ``parts`` with read_partition in this process, and the row count."""
    from kafkalog.dataset.reader import read_partition

    t, rows = time.perf_counter(), 0
    for part in parts:
        for batch in read_partition(part):
            rows += batch.num_rows
    return time.perf_counter() - t, rows


def ceiling_source():
    """A source with kafkalog's schema and input partitions whose read() yields one decoded
    Arrow batch over and over (as many rows as the partition holds): Spark's own cost."""
    from pyspark.sql.datasource import DataSourceReader, InputPartition

    from kafkalog.dataset.options import parse_read_options
    from kafkalog.spark.datasource import KafkaLogDataSource

    class CeilingReader(DataSourceReader):
        def __init__(self, path: str) -> None:
            self.path = path

        def partitions(self):  # wrapped as kafkalog's reader wraps its plan
            return [InputPartition(p) for p in plan(Path(self.path))]

        def read(self, partition):
            from kafkalog.dataset.reader import read_partition

            planned = partition.value
            for part in getattr(planned, "parts", [planned]):
                batch = next(read_partition(part))
                left = part.end_offset - part.start_offset
                while left > 0:
                    out = batch.slice(0, left)
                    left -= out.num_rows
                    yield out

    class CeilingSource(KafkaLogDataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkalog_arrow_ceiling"

        def reader(self, schema):
            return CeilingReader(parse_read_options(self.options).paths[0])

    return CeilingSource


def scan(spark, root: Path, n: int, warmup: int, repeat: int) -> dict:
    """Interleaved rounds of every scan contender over ``root``; medians of the kept rounds."""
    parts = plan(root)
    runs: dict[str, list] = {"kafkalog": [], "arrow_ceiling": [], "decode_alone": []}
    for round_ in range(warmup + repeat):
        for name, fmt in (("kafkalog", "kafkalog"), ("arrow_ceiling", "kafkalog_arrow_ceiling")):
            df = spark.read.format(fmt).load(str(root))
            cpu, t = spark_cpu_seconds(), time.perf_counter()
            count = df.count()
            wall, after = time.perf_counter() - t, spark_cpu_seconds()
            assert count == n, (name, count, n)
            used = {k: after[k] - cpu[k] for k in cpu}
            runs[name].append((wall, used["java"], used["python"]))
        wall, rows = decode_alone(parts)
        assert rows == n
        runs["decode_alone"].append((wall, 0.0, 0.0))
        print(
            f"  round {round_}{' (warm-up)' if round_ < warmup else ''}: "
            + ", ".join(f"{k} {n / v[-1][0] / 1e6:.2f} M rows/s" for k, v in runs.items()),
            flush=True,
        )
    out = {}
    for name, rows in runs.items():
        kept = rows[warmup:]
        wall, java, python = (statistics.median(r[i] for r in kept) for i in range(3))
        out[name] = {"rows_per_s": n / wall, "wall_s": [round(r[0], 3) for r in kept]}
        if name != "decode_alone":
            out[name].update({
                "jvm_us_per_row": java / n * 1e6, "python_us_per_row": python / n * 1e6,
                "cpu_bound_rows_per_s": n / ((java + python) / 2),
            })  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    parser.add_argument("--no-write", action="store_true", help="measure the scans only")
    parser.add_argument(
        "--java-options",
        default="",
        help="extra JVM options of the local Spark (spark.driver.extraJavaOptions), e.g. "
        "Arrow's -Darrow.enable_unsafe_memory_access=true",
    )
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    import kafkalog.spark

    class NullWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class NullSource(DataSource):
        @classmethod
        def name(cls):
            return "nullsink"

        def writer(self, schema, overwrite):
            return NullWriter()

    builder = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )  # fmt: skip
    if args.java_options:
        builder = builder.config("spark.driver.extraJavaOptions", args.java_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    spark.dataSource.register(NullSource)
    spark.dataSource.register(ceiling_source())
    base = Path(args.dir or tempfile.mkdtemp(prefix="kafkalog-bench-"))
    results: dict = {"gb": args.gb, "cpus": os.cpu_count(), "warmup": args.warmup,
                     "repeat": args.repeat, "java_options": args.java_options,
                     "load_before": os.getloadavg()}  # fmt: skip
    try:
        for codec in ("none", "lz4"):
            root = base / codec
            shutil.rmtree(root, ignore_errors=True)
            t = time.perf_counter()
            n = generate(root, int(args.gb * 1e9), codec)
            size = sum(p.stat().st_size for p in root.glob("*/*.log"))
            print(f"{codec}: generated {n:,} records, {size / 1e9:.2f} GB in "
                  f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
            measured = scan(spark, root, n, args.warmup, args.repeat)
            kp = kafka_python_rate(root)
            results[f"scan_{codec}"] = {"records": n, "bytes": size, **measured,
                                        "kafka_python_rows_per_s": kp}  # fmt: skip
            k, c = measured["kafkalog"], measured["arrow_ceiling"]
            print(f"{codec}: Spark count() {k['rows_per_s'] / 1e6:.2f} M rows/s "
                  f"(CPU-bound {k['cpu_bound_rows_per_s'] / 1e6:.2f}; JVM "
                  f"{k['jvm_us_per_row']:.2f} + Python {k['python_us_per_row']:.2f} us/row); "
                  f"Arrow ceiling {c['rows_per_s'] / 1e6:.2f} M rows/s (CPU-bound "
                  f"{c['cpu_bound_rows_per_s'] / 1e6:.2f}; JVM {c['jvm_us_per_row']:.2f} + "
                  f"Python {c['python_us_per_row']:.2f} us/row); decode alone "
                  f"{measured['decode_alone']['rows_per_s'] / 1e6:.2f} M rows/s on one core; "
                  f"kafka-python {kp / 1e6:.2f} M records/s", flush=True)  # fmt: skip
            shutil.rmtree(root, ignore_errors=True)
        if not args.no_write:
            results["write"] = measure_write(spark, F, base, args.repeat)
    finally:
        results["load_after"] = os.getloadavg()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def measure_write(spark, F, base: Path, repeat: int) -> dict:
    rows = 4_000_000
    frame = spark.range(rows, numPartitions=4).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.concat(F.col("id").cast("string"), F.lit("x" * 90)).cast("binary").alias("value"),
    )  # fmt: skip
    null_t, write_t = [], []
    for i in range(repeat):
        t = time.perf_counter()
        frame.write.format("nullsink").mode("append").save()
        null_t.append(time.perf_counter() - t)
        out = base / f"write-{i}"
        t = time.perf_counter()
        (frame.write.format("kafkalog").option("topic", "w").option("numPartitions", "8")
         .option("codec", "lz4").option("compressionLevel", "1").mode("append")
         .save(str(out)))  # fmt: skip
        write_t.append(time.perf_counter() - t)
        shutil.rmtree(out, ignore_errors=True)
    null_rate, write_rate = rows / statistics.median(null_t), rows / statistics.median(write_t)
    print(f"write: kafkalog {write_rate / 1e6:.2f} M rows/s; do-nothing Arrow writer "
          f"{null_rate / 1e6:.2f} M rows/s ({write_rate / null_rate:.0%})")  # fmt: skip
    return {"rows": rows, "null_writer_rows_per_s": null_rate, "kafkalog_rows_per_s": write_rate}


if __name__ == "__main__":
    sys.exit(main())
