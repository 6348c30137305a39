"""The main job: a Kafka data directory written, verified and read back with Spark.

1. generate a realistic event dataset in Spark (page views, orders and payments of a web shop:
   keyed by user, JSON values, two headers each, one day of timestamps);
2. write it with ``df.write.format("kafkalog")`` into a Kafka data directory: 3 topics x 8
   partitions, lz4, segments of 1 MiB so every partition has several;
3. verify the directory with kafkalog's verifier, and decode every segment with kafka-python;
4. read it back with ``spark.read.format("kafkalog")`` and print counts per partition and an
   hourly aggregate.

Usage: python examples/spark_pipeline.py [--records N] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

TOPICS = ("page-views", "orders", "payments")
PARTITIONS = 8
T0_SECONDS = 1_767_225_600  # 2026-01-01T00:00:00Z


def step(message: str, started: list[float]) -> None:
    now = time.monotonic()
    print(f"[{now - started[0]:6.1f}s] {message}", flush=True)


def decode_with_kafka_python(segment: str) -> tuple[int, int]:
    """(records, batches) of one segment, decoded by kafka-python (an independent decoder)."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(Path(segment).read_bytes())
    n = batches = 0
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise ValueError(f"CRC mismatch in {segment}")
        batches += 1
        for _ in batch:
            n += 1
    return n, batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_100_000)
    parser.add_argument("--out", default="out/spark-demo")
    args = parser.parse_args()
    started = [time.monotonic()]
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)

    step("starting Spark (local[2])", started)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkalog.spark

    spark = (
        SparkSession.builder.master("local[2]").appName("kafkalog-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)

    step(f"generating {args.records:,} keyed events with headers", started)
    n = args.records
    ids = spark.range(n, numPartitions=8)
    topic = F.element_at(F.array(*[F.lit(t) for t in TOPICS]), (F.col("id") % 3 + 1).cast("int"))
    user = F.concat(F.lit("user-"), F.lpad((F.hash(F.col("id")) % 50000).cast("string"), 5, "0"))
    ts = (F.lit(T0_SECONDS) + (F.col("id") * 86400 / n).cast("long")).cast("timestamp")
    amount = F.round((F.abs(F.hash(F.col("id"), F.lit(7))) % 20000) / 100.0, 2)
    value = F.to_json(F.struct(
        F.col("id").alias("event_id"), user.alias("user"),
        F.element_at(F.array(F.lit("/"), F.lit("/cart"), F.lit("/search"), F.lit("/item")),
                     (F.col("id") % 4 + 1).cast("int")).alias("page"),
        amount.alias("amount"),
    ))  # fmt: skip
    headers = F.array(
        F.struct(F.lit("source").alias("key"),
                 F.when(F.col("id") % 2 == 0, F.lit(b"web")).otherwise(F.lit(b"app"))
                 .alias("value")),
        F.struct(F.lit("trace-id").alias("key"),
                 F.unhex(F.lpad(F.hex(F.col("id")), 16, "0")).alias("value")),
    )  # fmt: skip
    events = ids.select(topic.alias("topic"), user.alias("key"), value.alias("value"),
                        headers.alias("headers"), ts.alias("timestamp"))  # fmt: skip

    step(f"writing them with Spark into {out} (lz4, 3 topics x {PARTITIONS} partitions)", started)
    (events.write.format("kafkalog").option("numPartitions", str(PARTITIONS))
     .option("codec", "lz4").option("segmentBytes", str(1 << 20)).mode("append")
     .save(str(out)))  # fmt: skip
    segments = sorted(str(p) for p in out.glob("*-*/*.log"))
    per_partition = {}
    for s in segments:
        per_partition[Path(s).parent.name] = per_partition.get(Path(s).parent.name, 0) + 1
    size = sum(os.path.getsize(s) for s in segments)
    step(f"wrote {len(segments)} segments, {size / 1e6:.1f} MB; segments per partition: "
         f"{min(per_partition.values())} to {max(per_partition.values())}", started)  # fmt: skip

    step("verifying the data directory (kafkalog verify)", started)
    try:
        from kafkalog.log.verify.data_dir import verify
    except ImportError:
        verify = None
    if verify is not None:
        report = verify(out, deep=False)
        counts = report.counts() if callable(getattr(report, "counts", None)) else {}
        step(f"verify: {'OK' if report.ok else 'PROBLEMS'} {counts}", started)
        if not report.ok:
            for finding in report.errors[:10]:
                print("   ", finding)
            return 1

    step(f"decoding all {len(segments)} segments with kafka-python", started)
    with ProcessPoolExecutor(max_workers=2) as pool:
        decoded = list(pool.map(decode_with_kafka_python, segments, chunksize=4))
    total = sum(r for r, _ in decoded)
    step(f"kafka-python decoded {total:,} records in {sum(b for _, b in decoded):,} batches",
         started)  # fmt: skip
    if total != n:
        print(f"expected {n} records, kafka-python found {total}", file=sys.stderr)
        return 1

    step("reading the data directory back with Spark", started)
    raw = spark.read.format("kafkalog").option("includeHeaders", "true").load(str(out))
    amount = F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double")
    source = F.expr("filter(headers, h -> h.key = 'source')[0].value").cast("string")
    df = raw.select(
        "topic", "partition", "offset", "timestamp", amount.alias("amount"), source.alias("source")
    ).cache()  # one scan serves both reports
    counts = df.groupBy("topic", "partition").agg(
        F.count("*").alias("records"), F.min("offset").alias("first"),
        F.max("offset").alias("last"),
    ).orderBy("topic", "partition").collect()  # fmt: skip
    print(f"{'topic':<12} {'partition':>9} {'records':>9} {'offsets':>17}")
    for r in counts:
        print(f"{r.topic:<12} {r.partition:>9} {r.records:>9,} {r.first:>8}-{r.last:<8}")
    read_total = sum(r.records for r in counts)
    print(f"{'total':<12} {'':>9} {read_total:>9,}")
    if read_total != n:
        print(f"expected {n} records, Spark read {read_total}", file=sys.stderr)
        return 1

    step("events and order revenue per 4 hours (time-bucketed aggregate)", started)
    buckets = (
        df.select("topic", F.window("timestamp", "4 hours").start.alias("bucket"), "amount",
                  "source")
        .groupBy("bucket")
        .agg(*[F.sum((F.col("topic") == t).cast("int")).alias(t) for t in TOPICS],
             F.round(F.sum(F.when(F.col("topic") == "orders", F.col("amount"))), 2)
             .alias("order_revenue"),
             F.round(F.avg((F.col("source") == "app").cast("int")) * 100, 1).alias("app_pct"))
        .orderBy("bucket").collect()
    )  # fmt: skip
    print(f"{'bucket (UTC)':<17} {'page-views':>10} {'orders':>8} {'payments':>9} "
          f"{'order revenue':>14} {'from app':>8}")  # fmt: skip
    for b in buckets:
        print(f"{b.bucket:%Y-%m-%d %H:%M}  {b['page-views']:>10,} {b.orders:>8,} "
              f"{b.payments:>9,} {b.order_revenue:>14,.2f} {b.app_pct:>7}%")  # fmt: skip
    step("done", started)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
