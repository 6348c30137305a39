"""Planning of the kafkalog data source on a directory of many small segments (docs/benchmarks.md).

Builds a data directory of ``--partitions`` partitions (400) of one topic, each of ``--segments``
segments (8: 3,200 segments in all) of ``--records`` records (1,000 per partition, 100-byte
values, 25 records per batch), with kafkalog's log layer and a tiny ``internal.segment.bytes`` so
that every append rolls a segment. Then times Spark ``count()`` on local[2] with no option,
``minPartitions`` 2, 10 and 64 and ``maxRecordsPerPartition`` (one value that splits every
partition in two, one above every partition's size), printing the number of tasks
(``df.rdd.getNumPartitions()``) and the median wall time of ``--repeat`` runs (after one warm-up
run of the first case), checking every count.

Spark's Kafka source plans one task per topic-partition offset range and divides ranges only for
minPartitions (when there are fewer ranges than it asks) or maxRecordsPerPartition: the task
counts printed are those.

Usage: python benchmarks/spark_planning.py [--partitions 400] [--segments 8] [--records 1000]
       [--repeat 3] [--json out.json]
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

BATCH = 25


def build(root: Path, partitions: int, segments: int, records: int) -> int:
    """One topic ``p`` of ``partitions`` partitions, each ``segments`` segments of
    ``records // segments`` records; returns the number of segment files."""
    from kafkalog.format import columnar as fast
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    per_segment = records // segments
    values = [(b"v%07d-" % i).ljust(100, b"x") for i in range(per_segment)]
    keys = [b"k%d" % (i % 97) for i in range(per_segment)]
    stamps = [1_767_225_600_000 + i for i in range(per_segment)]
    with LogManager(root, writable=True, create=True) as manager:
        # every append (one segment's batches) is larger than this: each append rolls a segment
        manager.create_topic("p", partitions, {"internal.segment.bytes": "1024"})
        for p in range(partitions):
            log = manager.get_log(TopicPartition("p", p))
            for s in range(segments):
                data = fast.encode_columnar(
                    keys, values, stamps, base_offset=s * per_segment,
                    batch_bytes=1 << 20, max_records_per_batch=BATCH, partition_leader_epoch=0,
                )  # fmt: skip
                log.append_as_follower(data)
    return sum(1 for _ in root.glob("p-*/*.log"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=400)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    import kafkalog.spark

    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-planning-"))
    try:
        started = time.perf_counter()
        n_segments = build(tmp / "data", args.partitions, args.segments, args.records)
        took = time.perf_counter() - started
        print(f"built {args.partitions} partitions, {n_segments} segments, "
              f"{args.partitions * args.records} records in {took:.1f} s")  # fmt: skip
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafkalog-planning")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(spark)
        half = args.records // 2
        cases = [
            ("no option", {}),
            ("minPartitions=2", {"minPartitions": "2"}),
            ("minPartitions=10", {"minPartitions": "10"}),
            ("minPartitions=64", {"minPartitions": "64"}),
            (f"maxRecordsPerPartition={args.records}",
             {"maxRecordsPerPartition": str(args.records)}),
            (f"maxRecordsPerPartition={half}", {"maxRecordsPerPartition": str(half)}),
        ]  # fmt: skip
        results = []
        expected = args.partitions * args.records
        for name, options in cases:

            def frame(options=options):
                reader = spark.read.format("kafkalog")
                for k, v in options.items():
                    reader = reader.option(k, v)
                return reader.load(str(tmp / "data"))

            tasks = frame().rdd.getNumPartitions()
            if not results:
                assert frame().count() == expected  # one warm-up run: the JVM and workers
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                got = frame().count()
                times.append(time.perf_counter() - t)
                assert got == expected, (name, got)
            median = statistics.median(times)
            results.append({"case": name, "tasks": tasks, "median_s": round(median, 2),
                            "times_s": [round(x, 2) for x in times]})  # fmt: skip
            print(f"{name:28s} tasks {tasks:5d}  count() median {median:6.2f} s  "
                  f"({', '.join(f'{x:.2f}' for x in times)})")  # fmt: skip
        spark.stop()
        if args.json:
            args.json.write_text(json.dumps({"partitions": args.partitions,
                                             "segments": n_segments, "records": expected,
                                             "results": results}, indent=1) + "\n")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
