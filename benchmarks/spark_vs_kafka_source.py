"""The kafkalog Spark source over a broker's data directory against Spark's own Kafka source
reading the same topics from that broker (docs/benchmarks.md).

    scripts/kafka.sh          # Kafka's jars (Maven Central), once per machine
    .venv/bin/python benchmarks/spark_vs_kafka_source.py [--records 4000000] [--repeat 3]
        [--warmup 1] [--codec lz4] [--spark-kafka 4.2.0]
        [--json benchmarks/results/spark_vs_kafka_source.json]

One single-node KRaft broker (tests/apache_kafka/conftest.py's ``KafkaBroker``, Kafka from
scripts/kafka.sh) on this machine. librdkafka's producer (confluent_kafka) loads it once:

- topic ``bench``, 4 partitions: ``--records`` records round-robin over the partitions, keys
  ``key-00000`` .. ``key-09999``, values of 100 bytes (a pool of printable random ones), explicit
  CreateTime timestamps rising evenly over the hour before the load, ``--codec`` compression,
  librdkafka's batching defaults (``linger.ms`` 5, up to 1 MB batches);
- topic ``txn``, 4 partitions: a quarter as many records from one transactional producer, in
  transactions of 10,000 records of which every third is aborted.

Then one Spark session (local[2], Spark's Kafka source from ``spark.jars.packages``:
``org.apache.spark:spark-sql-kafka-0-10_2.13:<--spark-kafka>``) runs every query once through
each source per round, the two interleaved (kafkalog, Kafka, kafkalog, Kafka, ...), while the
broker keeps running: Spark's Kafka source fetches from it over loopback and kafkalog reads the
broker's ``log.dirs`` directory (its live segments, read-only). ``--warmup`` rounds let the JVM's
JIT settle and are dropped; medians of ``--repeat`` rounds. Queries:

- ``count``: ``count()`` of ``bench``;
- ``group_by_key``: ``groupBy("key").count()``, its groups counted and summed on the driver;
- ``time_range``: ``startingTimestamp``/``endingTimestamp`` (10% of the hour, in the middle) and
  a filter on the ``timestamp`` column with the same bounds, counted;
- ``read_committed``: ``count()`` of ``txn`` with ``kafka.isolation.level=read_committed``;
- ``stream_available_now``: ``readStream`` of ``bench`` from ``earliest`` to a ``noop`` sink
  with ``trigger(availableNow=True)`` (a fresh checkpoint each run), until it terminates;
- ``empty_range`` (not a goal): ``time_range`` with its end at its start, no record: what a
  query costs whatever it reads.

Every run checks its result against the other source's and the records produced. Besides
wall-clock time, each run records the CPU seconds of Spark's JVM, of its Python workers and of
the broker (from /proc). For kafkalog's time range, the bytes of the segment ranges its plan
reads (``kafkalog.arrow.plan_scan`` with the same options: the planner the Spark source uses).
``KAFKALOG_BENCH_KEEP=1`` keeps the work directory (broker and data) for a look afterwards.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from apache_kafka.conftest import KafkaBroker, KafkaDist  # noqa: E402

PARTITIONS = 4
KEYS = 10_000
VALUE = 100
SPAN_MS = 3_600_000  # timestamps rise evenly over the hour before the load starts
TXN_SIZE = 10_000
QUERIES = (
    "count", "group_by_key", "time_range", "read_committed", "stream_available_now", "empty_range",
)  # fmt: skip
GOALS = QUERIES[:5]  # empty_range: what a query costs whatever it reads (not a goal)


def kafka_dist() -> KafkaDist:
    home = (
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "kafka.sh")], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return KafkaDist(Path(home), Path(home).name.removeprefix("kafka-"))


def timestamp_of(i: int, n: int, t0: int) -> int:
    return t0 + i * SPAN_MS // n


def produce(broker: KafkaBroker, records: int, codec: str) -> dict:
    """Load ``bench`` and ``txn`` through the broker with librdkafka; what was written."""
    import random

    from confluent_kafka import Producer

    for topic in ("bench", "txn"):
        broker.create_topic(topic, PARTITIONS)
    rnd = random.Random(1)
    alphabet = bytes(range(32, 127))
    values = [bytes(rnd.choices(alphabet, k=VALUE)) for _ in range(4096)]
    keys = [b"key-%05d" % k for k in range(KEYS)]
    common = {
        "bootstrap.servers": broker.bootstrap,
        "compression.codec": codec,
        "queue.buffering.max.messages": 1_000_000,
        "log_level": 3,
    }
    t0 = (int(time.time()) - SPAN_MS // 1000 - 60) * 1000
    t = time.perf_counter()
    p = Producer({**common, "acks": 1})
    for i in range(records):
        while True:
            try:
                p.produce(
                    "bench", values[i & 4095], keys[i % KEYS], partition=i % PARTITIONS,
                    timestamp=timestamp_of(i, records, t0),
                )  # fmt: skip
                break
            except BufferError:
                p.poll(0.05)
        if i & 0xFFFF == 0:
            p.poll(0)
    assert p.flush(120) == 0, "bench: records left unsent"
    bench_s = time.perf_counter() - t

    t = time.perf_counter()
    txn_records = max(records // 4, 3 * TXN_SIZE)
    tp = Producer({**common, "transactional.id": "bench-txn"})
    tp.init_transactions(60)
    committed = aborted = 0
    for number, start in enumerate(range(0, txn_records, TXN_SIZE)):
        size = min(TXN_SIZE, txn_records - start)
        tp.begin_transaction()
        for i in range(start, start + size):
            while True:
                try:
                    tp.produce(
                        "txn", values[i & 4095], keys[i % KEYS], partition=i % PARTITIONS,
                        timestamp=timestamp_of(i, txn_records, t0),
                    )  # fmt: skip
                    break
                except BufferError:
                    tp.poll(0.05)
        if number % 3 == 2:
            assert tp.flush(60) == 0  # librdkafka 2.16 aborts an unflushed one wrongly on Kafka 4
            tp.abort_transaction(60)
            aborted += size
        else:
            tp.commit_transaction(60)
            committed += size
    txn_s = time.perf_counter() - t
    return {
        "t0_ms": t0,
        "bench_records": records,
        "bench_produce_s": round(bench_s, 1),
        "txn_records": txn_records,
        "txn_committed": committed,
        "txn_aborted": aborted,
        "txn_produce_s": round(txn_s, 1),
    }


def process_cpu(broker_pid: int) -> dict[int, tuple[str, float]]:
    """Every descendant of this process: pid -> (kind, CPU seconds of its own, user + system),
    kind ``spark_jvm`` (``java`` outside the broker), ``python_workers`` (``python*``: Spark's
    Python workers and the Python processes it starts to plan) or ``broker``."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, str, float]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        children.setdefault(int(fields[1]), []).append((int(text.split()[0]), name, cpu))
    out: dict[int, tuple[str, float]] = {}
    stack = [(os.getpid(), False)]
    while stack:
        parent, in_broker = stack.pop()
        for pid, name, cpu in children.get(parent, []):
            broker = in_broker or pid == broker_pid
            if broker:
                out[pid] = ("broker", cpu)
            elif name == "java":
                out[pid] = ("spark_jvm", cpu)
            elif name.startswith("python"):
                out[pid] = ("python_workers", cpu)
            stack.append((pid, broker))
    return out


class CpuMeter:
    """CPU seconds by kind used between ``start()`` and ``stop()``, sampling /proc every 0.2 s
    so that the Python processes Spark starts and ends within a query are counted (up to their
    last sample)."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid

    def start(self) -> None:
        import threading

        self.before = process_cpu(self.broker_pid)
        self.last = dict(self.before)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.2):
            self.last.update(process_cpu(self.broker_pid))

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.thread.join()
        self.last.update(process_cpu(self.broker_pid))
        out = {"spark_jvm": 0.0, "python_workers": 0.0, "broker": 0.0}
        for pid, (kind, cpu) in self.last.items():
            out[kind] += cpu - self.before.get(pid, (kind, 0.0))[1]
        return {k: round(v, 2) for k, v in out.items()}


class Bench:
    def __init__(self, spark, broker: KafkaBroker, work: Path, written: dict) -> None:
        self.spark = spark
        self.broker = broker
        self.data = str(broker.data_dir)
        self.work = work
        self.n = n = written["bench_records"]
        t0 = written["t0_ms"]
        lo, hi = timestamp_of(n * 45 // 100, n, t0), timestamp_of(n * 55 // 100, n, t0)
        self.time_range = (lo, hi)
        self.expected = {
            "count": self.n,
            "group_by_key": (KEYS, self.n),
            "time_range": sum(1 for i in range(n) if lo <= timestamp_of(i, n, t0) < hi),
            "read_committed": written["txn_committed"],
            "stream_available_now": self.n,
            "empty_range": 0,
        }
        self.streams = 0

    def reader(self, source: str, topic: str, stream: bool = False):
        r = (self.spark.readStream if stream else self.spark.read).format(source)
        if source == "kafka":
            r = r.option("kafka.bootstrap.servers", self.broker.bootstrap)
        return r.option("subscribe", topic)

    def load(self, r, source: str):
        return r.load(self.data) if source == "kafkalog" else r.load()

    def run(self, query: str, source: str):
        from pyspark.sql import functions as F

        if query == "count":
            return self.load(self.reader(source, "bench"), source).count()
        if query == "group_by_key":
            df = self.load(self.reader(source, "bench"), source).groupBy("key").count()
            row = df.agg(F.count("*"), F.sum("count")).collect()[0]
            return (row[0], row[1])
        if query in ("time_range", "empty_range"):
            lo, hi = self.time_range
            if query == "empty_range":
                hi = lo
            r = self.reader(source, "bench")
            r = r.option("startingTimestamp", str(lo)).option("endingTimestamp", str(hi))
            df = self.load(r, source)
            ts = F.col("timestamp")
            low = F.timestamp_millis(F.lit(lo))
            high = F.timestamp_millis(F.lit(hi))
            return df.where((ts >= low) & (ts < high)).count()
        if query == "read_committed":
            r = self.reader(source, "txn").option("kafka.isolation.level", "read_committed")
            return self.load(r, source).count()
        if query == "stream_available_now":
            self.streams += 1
            r = self.reader(source, "bench", stream=True).option("startingOffsets", "earliest")
            q = (
                self.load(r, source).writeStream.format("noop")
                .option("checkpointLocation", str(self.work / f"checkpoint-{self.streams}"))
                .trigger(availableNow=True).start()
            )  # fmt: skip
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(f"{source} stream failed: {q.exception()}")
            # the micro-batches' share of the query's wall-clock (the rest: starting and ending it)
            self.stream_ms = {
                key: sum(p.durationMs.get(key, 0) for p in q.recentProgress)
                for key in ("triggerExecution", "addBatch", "latestOffset", "queryPlanning")
            }
            return sum(p.numInputRows for p in q.recentProgress)
        raise ValueError(query)

    def measure(self, queries: list[str], warmup: int, repeat: int) -> dict:
        runs: dict[str, dict[str, list]] = {q: {"kafkalog": [], "kafka": []} for q in queries}
        meter = CpuMeter(self.broker.proc.pid)
        for round_ in range(warmup + repeat):
            line = []
            for query in queries:
                for source in ("kafkalog", "kafka"):
                    meter.start()
                    t = time.perf_counter()
                    result = self.run(query, source)
                    wall = time.perf_counter() - t
                    cpu = meter.stop()
                    want = self.expected[query]
                    if result != want:
                        raise AssertionError(f"{query} via {source}: {result}, expected {want}")
                    run = {"wall_s": round(wall, 3), **cpu}
                    if query == "stream_available_now":
                        run["progress_ms"] = self.stream_ms
                    runs[query][source].append(run)
                    line.append(f"{query}/{source} {wall:.2f}s")
            tag = " (warm-up)" if round_ < warmup else ""
            print(f"round {round_}{tag}: " + ", ".join(line), flush=True)
        out = {}
        for query, by_source in runs.items():
            row: dict = {"result": self.expected[query]}
            for source, kept in by_source.items():
                kept = kept[warmup:]
                row[source] = {
                    "median_s": round(statistics.median(r["wall_s"] for r in kept), 3),
                    **{
                        f"median_cpu_{k}_s": round(statistics.median(r[k] for r in kept), 2)
                        for k in ("spark_jvm", "python_workers", "broker")
                    },
                    "runs": kept,
                }
            row["speedup"] = round(row["kafka"]["median_s"] / row["kafkalog"]["median_s"], 2)
            if query in GOALS:
                row["goal_3x_met"] = row["speedup"] >= 3
            out[query] = row
        return out

    def planned_bytes(self) -> dict:
        """The byte ranges kafkalog's plan reads for the time range, against the whole topic."""
        import kafkalog.arrow

        lo, hi = self.time_range
        whole = kafkalog.arrow.plan_scan(self.data, topics="bench")
        ranged = kafkalog.arrow.plan_scan(
            self.data, topics="bench", starting_timestamp=lo, ending_timestamp=hi
        )

        def segments(scan) -> int:
            return len({p.path for part in scan.parts for p in getattr(part, "parts", [part])})

        on_disk = sum(f.stat().st_size for f in Path(self.data).glob("bench-*/*.log"))
        return {
            "topic_log_bytes": on_disk,
            "topic_segments": len(list(Path(self.data).glob("bench-*/*.log"))),
            "whole_scan_planned_bytes": whole.total_bytes,
            "time_range_planned_bytes": ranged.total_bytes,
            "time_range_segments": segments(ranged),
            "time_range_offsets": sum(e - s for s, e in ranged.ranges.values()),
        }

    def in_process(self, repeat: int = 5) -> dict:
        """The kafkalog source's own work for the time range, its methods called in this process
        as Spark's Python processes call them (medians, ms): schema() at load(), the reader's
        partitions() (listings, indexes, timestamps to offsets), pickling the reader and the
        partitions, and read() of every partition (reading, CRC, lz4, decoding, Arrow)."""
        import pickle

        from kafkalog.spark import KafkaLogDataSource

        lo, hi = self.time_range
        options = {"path": self.data, "subscribe": "bench", "startingTimestamp": str(lo),
                   "endingTimestamp": str(hi)}  # fmt: skip
        runs: dict[str, list[float]] = {}

        def timed(name, fn, *args):
            t = time.perf_counter()
            out = fn(*args)
            runs.setdefault(name, []).append((time.perf_counter() - t) * 1000)
            return out

        def pickle_all(reader, parts) -> list[bytes]:
            return [pickle.dumps(reader)] + [pickle.dumps(p) for p in parts]

        def read_all(reader, parts) -> int:
            return sum(b.num_rows for p in parts for b in reader.read(p))

        for _ in range(repeat):
            source = KafkaLogDataSource(options)
            timed("schema_ms", source.schema)
            reader = source.reader(None)
            parts = timed("partitions_ms", reader.partitions)
            pickled = timed("pickle_ms", pickle_all, reader, parts)
            rows = timed("read_ms", read_all, reader, parts)
        out = {k: round(statistics.median(v), 1) for k, v in runs.items()}
        return {**out, "tasks": len(parts), "pickled_bytes": sum(map(len, pickled)), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000, help="records of topic bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--codec", default="lz4", help="librdkafka's compression.codec")
    ap.add_argument(
        "--spark-kafka",
        default="4.2.0",
        help="version of org.apache.spark:spark-sql-kafka-0-10_2.13 (4.3.0 is not on Maven "
        "Central yet; 4.2.0 is the newest release there)",
    )
    ap.add_argument("--queries", default=",".join(QUERIES), help="comma-separated subset")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    queries = [q for q in args.queries.split(",") if q]
    unknown = set(queries) - set(QUERIES)
    if unknown:
        ap.error(f"unknown queries {sorted(unknown)}; known: {', '.join(QUERIES)}")

    import pyspark
    from pyspark.sql import SparkSession

    import kafkalog.spark

    started = time.perf_counter()
    dist = kafka_dist()
    work = Path(tempfile.mkdtemp(prefix="kafkalog-vs-kafka-"))
    broker = KafkaBroker(dist, work / "broker")
    spark = None
    try:
        broker.start()
        written = produce(broker, args.records, args.codec)
        print(json.dumps(written), flush=True)
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{args.spark_kafka}"
        spark = (
            SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.jars.packages", package).getOrCreate()
        )  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(spark)
        workers_kafkalog = (
            spark.sparkContext.parallelize([0], 1)
            .map(lambda _: __import__("kafkalog").__file__).collect()[0]
        )  # fmt: skip
        bench = Bench(spark, broker, work, written)
        load_before = os.getloadavg()
        rows = bench.measure(queries, args.warmup, args.repeat)
        load_after = os.getloadavg()
        planned = bench.planned_bytes() if "time_range" in queries else None
        in_process = bench.in_process() if "time_range" in queries else None
        for query, row in rows.items():
            print(
                f"{query}: kafkalog {row['kafkalog']['median_s']:.2f} s, Spark's Kafka source "
                f"{row['kafka']['median_s']:.2f} s, {row['speedup']:.2f}x",
                flush=True,
            )
        if planned:
            print(json.dumps(planned), flush=True)
            print(json.dumps(in_process), flush=True)
        doc = {
            "command": " ".join(["benchmarks/spark_vs_kafka_source.py", *sys.argv[1:]]),
            "versions": {
                "pyspark": pyspark.__version__,
                "spark_sql_kafka": package,
                "kafka_broker": dist.version,
                "python": platform.python_version(),
                "java": subprocess.run(
                    ["java", "-version"], capture_output=True, text=True
                ).stderr.splitlines()[0],
                "confluent_kafka": importlib.metadata.version("confluent-kafka"),
                "librdkafka": __import__("confluent_kafka").libversion()[0],
            },
            "machine": {
                "nproc": os.cpu_count(),
                "load_before": load_before,
                "load_after": load_after,
            },
            "kafkalog": {"driver": kafkalog.__file__, "workers": workers_kafkalog},
            "master": "local[2]",
            "codec": args.codec,
            "partitions": PARTITIONS,
            "warmup": args.warmup,
            "repeat": args.repeat,
            "written": written,
            "time_range_ms": list(bench.time_range),
            "kafkalog_time_range_plan": planned,
            "kafkalog_time_range_in_process": in_process,
            "queries": rows,
            "total_s": round(time.perf_counter() - started, 1),
        }
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if not os.environ.get("KAFKALOG_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
