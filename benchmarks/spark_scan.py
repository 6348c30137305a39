"""Spark scan and write rates of the kafkalog data source on local[2] (docs/benchmarks.md).

Generates a data directory of about ``--gb`` GB (8 partitions, 8-byte keys, 100-byte values) per
codec with kafkalog's columnar encoder, then measures, each warm (median of ``--repeat``):

- Spark ``count()`` over ``spark.read.format("kafkalog")`` (rows/s), against the 2.66 M rows/s
  Arrow ceiling of the reference and kafka-python decoding the same files (records/s, one
  process, on a sample of segments);
- Spark writing a generated DataFrame with ``df.write.format("kafkalog")`` (lz4 at Kafka's
  default level) against a do-nothing Arrow writer over the same DataFrame in the same run.

Usage: python benchmarks/spark_scan.py [--gb 1.0] [--repeat 3] [--json out.json]
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

    from kafkalog.format import fast
    from kafkalog.log.manager import LogManager
    from kafkalog.log.naming import TopicPartition

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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
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

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    spark.dataSource.register(NullSource)
    base = Path(args.dir or tempfile.mkdtemp(prefix="kafkalog-bench-"))
    results: dict = {"gb": args.gb, "cpus": os.cpu_count()}
    try:
        for codec in ("none", "lz4"):
            root = base / codec
            shutil.rmtree(root, ignore_errors=True)
            t = time.perf_counter()
            n = generate(root, int(args.gb * 1e9), codec)
            size = sum(p.stat().st_size for p in root.glob("*/*.log"))
            print(f"{codec}: generated {n:,} records, {size / 1e9:.2f} GB in "
                  f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
            times = []
            for _ in range(args.repeat + 1):
                df = spark.read.format("kafkalog").load(str(root))
                t = time.perf_counter()
                assert df.count() == n
                times.append(time.perf_counter() - t)
            scan = n / statistics.median(times[1:])
            kp = kafka_python_rate(root)
            results[f"scan_{codec}"] = {"records": n, "bytes": size, "rows_per_s": scan,
                                        "kafka_python_rows_per_s": kp}  # fmt: skip
            print(f"{codec}: Spark count() {scan / 1e6:.2f} M rows/s; kafka-python "
                  f"{kp / 1e6:.2f} M records/s", flush=True)  # fmt: skip
            shutil.rmtree(root, ignore_errors=True)

        rows = 4_000_000
        frame = spark.range(rows, numPartitions=4).select(
            F.col("id").cast("string").cast("binary").alias("key"),
            F.concat(F.col("id").cast("string"), F.lit("x" * 90)).cast("binary").alias("value"),
        )  # fmt: skip
        null_t, write_t = [], []
        for i in range(args.repeat):
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
        results["write"] = {"rows": rows, "null_writer_rows_per_s": null_rate,
                            "kafkalog_rows_per_s": write_rate}  # fmt: skip
        print(f"write: kafkalog {write_rate / 1e6:.2f} M rows/s; do-nothing Arrow writer "
              f"{null_rate / 1e6:.2f} M rows/s ({write_rate / null_rate:.0%})")  # fmt: skip
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
