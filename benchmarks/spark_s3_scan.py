"""The Spark scan of one data directory from S3 against the same scan from local files
(docs/benchmarks.md, "Spark scan from S3").

Writes ``--records`` records (100-byte values, 8-byte keys, ``--partitions`` partitions, lz4 or
``--codec``) with :func:`kafkalog.arrow.write_data_dir` twice from the same table: to a local
directory, and to ``s3://`` on moto's S3 server on loopback (the object-storage writer: staged,
then committed by a manifest). A counting TCP proxy (tests/objectstore/s3_endpoint.py) sits in
front of the server, so every byte the Spark scan fetches (planning's listings and index reads,
the ranged reads of segments, HTTP headers) is counted where it arrives. Then, interleaved (a
round counts each directory once; ``--warmup`` rounds dropped; medians of ``--repeat``), Spark
``count()`` over ``spark.read.format("kafkalog").load(path)`` on local[2].

moto is a Python server on the same machine as the scan: the S3 figures are an upper bound on
what a real object store costs in CPU here, and say nothing of a network's latency.

Usage: python benchmarks/spark_s3_scan.py [--records 400000] [--partitions 4] [--codec lz4]
       [--repeat 3] [--warmup 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

HERE = Path(__file__).resolve().parent
BUCKET = "kafkalog-bench"
ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
       "AWS_EC2_METADATA_DISABLED")  # fmt: skip


def start_s3():
    """(moto's server, the counting proxy in front of it), the environment pointing at it."""
    import boto3
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, str(HERE.parent / "tests" / "objectstore"))
    from s3_endpoint import Proxy

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    proxy = Proxy(server.get_host_and_port())
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_SESSION_TOKEN"):
        os.environ.pop(name, None)
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=proxy.endpoint, AWS_EC2_METADATA_DISABLED="true",
    )  # fmt: skip
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return server, proxy


def table(records: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(1)
    pool = rng.integers(32, 127, size=(min(records, 50_000), 100), dtype=np.uint8)
    values = [bytes(pool[i % len(pool)]) for i in range(records)]
    keys = [i.to_bytes(8, "big") for i in range(records)]
    stamps = pa.array(1_700_000_000_000 + np.arange(records, dtype=np.int64) // 10)
    return pa.table({"key": keys, "value": values, "timestamp": stamps})


def session():
    from pyspark.sql import SparkSession

    import kafkalog.spark

    builder = (
        SparkSession.builder.master("local[2]").appName("kafkalog-spark-s3-scan")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    )  # fmt: skip
    for name in ENV:  # the Python workers' S3 client reads the same environment
        builder = builder.config(f"spark.executorEnv.{name}", os.environ[name])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codec", default="lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()

    import kafkalog.arrow

    server, proxy = start_s3()
    work = Path(tempfile.mkdtemp(prefix="kafkalog-s3-bench-"))
    try:
        data = table(args.records)
        local, remote = str(work / "local"), f"s3://{BUCKET}/data"
        written = {}
        for name, path in (("local", local), ("s3", remote)):
            t0 = time.perf_counter()
            kafkalog.arrow.write_data_dir(
                data, path, topic="bench", num_partitions=args.partitions, codec=args.codec,
                compression_level=1 if args.codec == "lz4" else None,
            )  # fmt: skip
            written[name] = time.perf_counter() - t0
        log_bytes = sum(p.stat().st_size for p in Path(local).rglob("*.log"))
        spark = session()
        times: dict[str, list[float]] = {"local": [], "s3": []}
        fetched: list[int] = []
        for round_ in range(args.warmup + args.repeat):
            for name, path in (("local", local), ("s3", remote)):
                before = proxy.answered
                t0 = time.perf_counter()
                n = spark.read.format("kafkalog").load(path).count()
                took = time.perf_counter() - t0
                assert n == args.records, (name, n)
                if round_ >= args.warmup:
                    times[name].append(took)
                    if name == "s3":
                        fetched.append(proxy.answered - before)
                print(f"round {round_} {name}: {took:.2f} s", flush=True)
        spark.stop()
        med = {k: statistics.median(v) for k, v in times.items()}
        result = {
            "records": args.records,
            "partitions": args.partitions,
            "codec": args.codec,
            "log_bytes": log_bytes,
            "write_seconds": written,
            "scan_seconds": times,
            "median_seconds": med,
            "s3_over_local": med["s3"] / med["local"],
            "records_per_second": {k: args.records / v for k, v in med.items()},
            "s3_bytes_per_scan": statistics.median(fetched),
            "s3_bytes_per_record": statistics.median(fetched) / args.records,
            "log_bytes_per_record": log_bytes / args.records,
        }
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    finally:
        proxy.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
