"""What the first Spark read of a tiny data directory costs, and where it goes (docs/benchmarks.md).

Run by hand (never from the tests)::

    python benchmarks/spark_first_read.py [--runs 5] [--records 100] [--partitions 3]
        [--compare NAME=SRC ...] [--no-floor] [--worker-imports] [--json out.json]

Builds a data directory with ``kafkalog produce`` (one topic of ``--partitions`` partitions,
``--records`` text records), then, ``--runs`` times and each in a fresh Python process with a
fresh local[2] SparkSession, times: starting the session, ``register()``, ``load()`` (Spark asks
the source for its schema in a Python worker), the first ``count()`` (a planning worker, then the
executor's Python workers), and a second ``count()``. Variants run interleaved (run 1 of every
variant, then run 2, ...), so a slow moment of the machine hits them all alike:

* ``installed``: the kafkalog the interpreter imports (when no ``--compare`` is given);
* each ``--compare NAME=SRC``: kafkalog from ``SRC`` (a directory holding a ``kafkalog``
  package, e.g. a copy of ``src`` with an older ``kafkalog/spark``), put first on PYTHONPATH,
  which Spark's Python workers inherit (each run checks which one it imported);
* ``floor``: a Python data source of the same schema and row count that imports nothing of
  kafkalog: what the Python Data Source API costs by itself, which kafkalog cannot go under.

Then, without Spark, each in a fresh interpreter (``--runs`` times): importing
``pyspark.sql.datasource`` (every Python Data Source worker imports it), importing
``kafkalog.spark.datasource`` after it (what unpickling kafkalog's source costs a worker), the
schema (options and directory listing), planning (``partitions()``) and reading every input
partition. Prints medians (seconds) and, for compared variants, ratios to the first one.
``--worker-imports`` adds one untimed run of each variant in which every Python process Spark
starts reports its imports (``PYTHONPROFILEIMPORTTIME``), summed by top-level package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

PHASES = ("session", "register", "load", "count1", "count2")
PARTS = ("import_pyspark_ds", "import_kafkalog", "schema", "plan", "read")


def build(root: Path, partitions: int, records: int) -> None:
    text = "".join(f"record {i}\n" for i in range(records))
    subprocess.run(
        [sys.executable, "-c", "from kafkalog.cli.main import main; raise SystemExit(main())",
         "produce", "--topic", "t", "--partitions", str(partitions), "--format", "text",
         "--quiet", str(root)],
        input=text.encode(), check=True,
    )  # fmt: skip


def floor_source(records: int, partitions: int):
    """A data source with kafkalog's schema and row count that imports nothing of kafkalog."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            import datetime

            t = datetime.datetime(2026, 1, 1)
            rows = records // partitions + (partition.value < records % partitions)
            for i in range(rows):
                yield (None, b"record", "t", partition.value, i, t, 0)

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "floor"

        def schema(self):
            return (
                "key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int"
            )

        def reader(self, schema):
            return FloorReader()

    return FloorSource


def child_spark(variant: str, data: str, partitions: int, records: int) -> dict:
    out: dict = {}
    if os.environ.get("FIRST_READ_WORKER_IMPORTS"):
        # read at start-up by every Python process Spark starts from now on (this one started
        # without it): their import times go to their stderr, which Spark relays to ours
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"
    t = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("first-read")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out["session"] = time.perf_counter() - t
    t = time.perf_counter()
    if variant == "floor":
        spark.dataSource.register(floor_source(records, partitions))
        fmt = "floor"
    else:
        import kafkalog.spark

        out["kafkalog"] = str(Path(kafkalog.spark.__file__).parent)
        kafkalog.spark.register(spark)
        fmt = "kafkalog"
    out["register"] = time.perf_counter() - t
    t = time.perf_counter()
    df = spark.read.format(fmt).load(data)
    out["load"] = time.perf_counter() - t
    for phase in ("count1", "count2"):
        t = time.perf_counter()
        out["rows"] = df.count()
        out[phase] = time.perf_counter() - t
    spark.stop()
    return out


def child_parts(data: str) -> dict:
    out: dict = {}
    t = time.perf_counter()
    import pyspark.sql.datasource  # noqa: F401

    out["import_pyspark_ds"] = time.perf_counter() - t
    t = time.perf_counter()
    from kafkalog.spark.datasource import KafkaLogDataSource

    out["import_kafkalog"] = time.perf_counter() - t
    heavy = ("numpy", "pyarrow", "pandas", "kafkalog.cli", "kafkalog.dataset.reader")
    out["loaded_at_import"] = [m for m in heavy if m in sys.modules]
    t = time.perf_counter()
    source = KafkaLogDataSource({"path": data})
    source.schema()
    out["schema"] = time.perf_counter() - t
    out["loaded_after_schema"] = [m for m in heavy if m in sys.modules]
    t = time.perf_counter()
    reader = source.reader(None)
    parts = reader.partitions()
    out["plan"] = time.perf_counter() - t
    t = time.perf_counter()
    rows = 0
    for p in parts:
        for batch in reader.read(p):
            rows += batch.num_rows
    out["read"] = time.perf_counter() - t
    out["loaded_after_read"] = [m for m in heavy if m in sys.modules]
    out["rows"] = rows
    return out


def run_child(args: list[str], src: str | None, worker_imports: bool = False) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    if worker_imports:
        env["FIRST_READ_WORKER_IMPORTS"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"child {args} failed")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if worker_imports:
        out["worker_imports"] = worker_import_times(proc.stderr)
    return out


def worker_import_times(stderr: str) -> dict:
    """Seconds of imports in the Python processes Spark started, by top-level package (the
    cumulative time of each import done at top level, ``-X importtime``), and how many
    processes were started (each imports ``site``; forked workers are counted in their
    daemon's)."""
    by: dict[str, float] = {}
    processes = 0
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if name.startswith("  "):  # not top level: counted in its importer
            continue
        name = name.strip()
        processes += name == "site"
        if cumulative.strip().isdigit():
            root = name.split(".")[0]
            group = (
                root if root in ("pyspark", "kafkalog", "pandas", "pyarrow", "numpy") else "other"
            )
            by[group] = by.get(group, 0.0) + int(cumulative) / 1e6
    return {"processes": processes, **{k: round(v, 3) for k, v in sorted(by.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=SRC")
    ap.add_argument("--no-floor", action="store_true")
    ap.add_argument(
        "--worker-imports",
        action="store_true",
        help="one more run of each variant, untimed, with the import times of Spark's Python "
        "processes",
    )
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--child-parts", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        variant, data, partitions, records = args.child
        print(json.dumps(child_spark(variant, data, int(partitions), int(records))))
        return
    if args.child_parts:
        print(json.dumps(child_parts(args.child_parts)))
        return

    variants: list[tuple[str, str | None]] = []
    for item in args.compare:
        name, _, src = item.partition("=")
        variants.append((name, str(Path(src).resolve())))
    variants = variants or [("installed", None)]
    spark_variants = list(variants) + ([] if args.no_floor else [("floor", None)])
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-first-read-"))
    try:
        data = tmp / "data"
        build(data, args.partitions, args.records)
        spark_runs: dict[str, list[dict]] = {name: [] for name, _ in spark_variants}
        part_runs: dict[str, list[dict]] = {name: [] for name, _ in variants}
        for i in range(args.runs):
            for name, src in spark_variants:
                kind = "floor" if name == "floor" else "kafkalog"
                r = run_child(
                    ["--child", kind, str(data), str(args.partitions), str(args.records)], src
                )
                assert r["rows"] == args.records, r
                if src:
                    assert r["kafkalog"].startswith(src), (src, r["kafkalog"])
                spark_runs[name].append(r)
                print(f"run {i + 1} {name}: " + " ".join(f"{p} {r[p]:.2f}" for p in PHASES),
                      flush=True)  # fmt: skip
            for name, src in variants:
                r = run_child(["--child-parts", str(data)], src)
                assert r["rows"] == args.records, r
                part_runs[name].append(r)
        report: dict = {"runs": args.runs, "records": args.records,
                        "partitions": args.partitions, "spark": {}, "parts": {}}  # fmt: skip
        print(f"\nmedians of {args.runs} runs (s), {args.records} records, "
              f"{args.partitions} partitions, local[2]")  # fmt: skip
        first = spark_variants[0][0]
        for name, runs in spark_runs.items():
            med = {p: statistics.median(r[p] for r in runs) for p in PHASES}
            med["load+count1"] = statistics.median(r["load"] + r["count1"] for r in runs)
            report["spark"][name] = med
            line = " ".join(f"{p} {v:.2f}" for p, v in med.items())
            if name != first:
                base = report["spark"][first]
                line += "  (load+count1 x{:.2f} of {})".format(
                    med["load+count1"] / base["load+count1"], first
                )
            print(f"  spark {name:10s} {line}")
        for name, runs in part_runs.items():
            med = {p: statistics.median(r[p] for r in runs) for p in PARTS}
            med["total"] = statistics.median(sum(r[p] for p in PARTS) for r in runs)
            report["parts"][name] = med
            report["parts"][name]["loaded_at_import"] = runs[-1]["loaded_at_import"]
            report["parts"][name]["loaded_after_schema"] = runs[-1]["loaded_after_schema"]
            report["parts"][name]["loaded_after_read"] = runs[-1]["loaded_after_read"]
            cols = " ".join(f"{p} {med[p]:.3f}" for p in (*PARTS, "total"))
            print(f"  no spark {name:8s} " + cols
                  + f"  imported by the import: {runs[-1]['loaded_at_import']}"
                  + f", after schema(): {runs[-1]['loaded_after_schema']}"
                + f", after reading: {runs[-1]['loaded_after_read']}")  # fmt: skip
        if args.worker_imports:
            print("\nimports in the Python processes Spark started (one run each, seconds):")
            for name, src in spark_variants:
                kind = "floor" if name == "floor" else "kafkalog"
                r = run_child(
                    ["--child", kind, str(data), str(args.partitions), str(args.records)],
                    src,
                    worker_imports=True,
                )
                report.setdefault("worker_imports", {})[name] = r["worker_imports"]
                print(f"  {name:10s} {r['worker_imports']}")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
