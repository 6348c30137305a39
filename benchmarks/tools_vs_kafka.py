"""kafkalog's tools against Apache Kafka's on the same segment: dump and log recovery.

    scripts/kafka.sh          # Kafka's jars (Maven Central), once per machine
    .venv/bin/python benchmarks/tools_vs_kafka.py [--size-mb 1024] [--runs 3] [--codec none]
        [--json benchmarks/results/tools_vs_kafka.json]

One segment of ``--size-mb`` (batches of 200 records with 100-byte values, a single batch built
by kafkalog and repeated with consecutive base offsets; the CRC does not cover them) is:

- dumped with ``--deep-iteration`` by ``kafkalog dump`` and by Kafka's DumpLogSegments (the class
  behind kafka-dump-log, run as ``java -Xmx512m -cp <Kafka's jars>``: the JVM's default JIT and
  GC), stdout to /dev/null, whole processes timed, the two interleaved;
- recovered after an unclean shutdown (no indexes, no clean-shutdown marker, the last batch torn)
  by ``kafkalog recover --apply --full`` (the whole process) and by a Kafka broker starting on a
  copy of the same partition directory: Kafka's own figure, the "Completed load of log ... in N
  ms" line its LogManager writes once the partition's recovery is done (its JVM start and the
  rest of its start-up are not counted; the partition's topic is not in the broker's metadata,
  so after loading it Kafka renames it a stray log), interleaved, each on a fresh copy.

kafkalog runs as an installed one does, its bytecode compiled (pip compiles it at install): with
``PYTHONDONTWRITEBYTECODE`` unset and a bytecode cache in the work directory, filled by a run
before the timed ones (an environment that forbids writing bytecode would otherwise make every
run compile each module it imports anew).

Medians and ratios are printed as JSON lines (and written with ``--json``).
``KAFKALOG_BENCH_KEEP=1`` keeps the work directory (the broker's log) for a look afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from apache_kafka.conftest import UTF8, KafkaBroker, KafkaDist  # noqa: E402

_COMPLETED = re.compile(r"Completed load of Log\(dir=[^,]*bench-0.*? in (\d+)ms")


def kafka_dist() -> KafkaDist:
    home = (
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "kafka.sh")], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    version = Path(home).name.removeprefix("kafka-")
    return KafkaDist(Path(home), version)


def write_segment(path: Path, size: int, codec: str) -> tuple[int, int]:
    """A segment of about ``size`` bytes; (batches, records)."""
    from kafkalog.format import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(compression=codec, base_offset=0)
    for i in range(200):
        b.append(timestamp=1_767_225_600_000 + i, key=b"key-%06d" % i, value=bytes(100))
    batch = bytearray(b.build())
    count = (size + len(batch) - 1) // len(batch)
    with open(path, "wb") as f:
        for n in range(count):
            struct.pack_into(">q", batch, 0, n * 200)
            f.write(batch)
    return count, count * 200


_ENV: dict[str, str] | None = None  # kafkalog's environment (see the module's docstring)


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_ENV)
    return time.perf_counter() - t


def compiled_bytecode(work: Path) -> dict[str, str]:
    """kafkalog's environment with a bytecode cache in ``work`` (filled by the first run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def bench_dump(dist: KafkaDist, segment: Path, runs: int) -> dict:
    kafkalog = [str(Path(sys.executable).with_name("kafkalog")), "dump", "--deep-iteration"]
    kafka = ["java", "-Xmx512m", *UTF8, "-cp", f"{dist.lib}/*", dump_class(dist)]
    timed([*kafkalog, str(segment)])  # fills the bytecode cache
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(timed([*kafkalog, str(segment)]))
        theirs.append(timed([*kafka, "--deep-iteration", "--files", str(segment)]))
    return summary("dump --deep-iteration", ours, theirs)


def dump_class(dist: KafkaDist) -> str:
    import zipfile

    for jar in sorted(dist.lib.glob("kafka-tools-*.jar")):
        with zipfile.ZipFile(jar) as z:
            if "org/apache/kafka/tools/DumpLogSegments.class" in z.namelist():
                return "org.apache.kafka.tools.DumpLogSegments"
    return "kafka.tools.DumpLogSegments"


def unclean_partition(segment: Path, into: Path) -> Path:
    """``into/bench-0`` holding the segment with its last 100 bytes cut (a torn append)."""
    part = into / "bench-0"
    part.mkdir(parents=True)
    target = part / "00000000000000000000.log"
    shutil.copyfile(segment, target)
    os.truncate(target, target.stat().st_size - 100)
    return part


def bench_recover(dist: KafkaDist, segment: Path, runs: int, work: Path) -> dict:
    kafkalog = [str(Path(sys.executable).with_name("kafkalog")), "recover", "--apply", "--full"]
    broker = KafkaBroker(dist, work / "broker")
    broker.start()  # formats the data directory; then stopped, the partition copied in each run
    broker.stop()
    warm = unclean_partition(segment, work / "warm-up")
    timed([*kafkalog, "--quiet", str(warm)])  # fills the bytecode cache
    shutil.rmtree(warm.parent)
    ours, theirs = [], []
    for run in range(runs):
        data = work / f"ours-{run}"
        part = unclean_partition(segment, data)
        ours.append(timed([*kafkalog, "--quiet", str(part)]))
        shutil.rmtree(data)
        for stale in broker.data_dir.glob("bench-0*"):
            shutil.rmtree(stale)
        unclean_partition(segment, broker.data_dir)
        marker = broker.data_dir / ".kafka_cleanshutdown"
        if marker.exists():
            marker.unlink()
        before = broker.log_file.stat().st_size if broker.log_file.exists() else 0
        broker.restart()
        text = broker.log_file.read_text(errors="replace")[before:]
        broker.stop()
        found = _COMPLETED.findall(text)
        if not found:
            raise SystemExit(f"no 'Completed load of log' line for bench-0:\n{text[-3000:]}")
        theirs.append(int(found[-1]) / 1000)
    return summary("recover (unclean, torn tail)", ours, theirs)


def summary(name: str, ours: list[float], theirs: list[float]) -> dict:
    a, b = statistics.median(ours), statistics.median(theirs)
    return {
        "benchmark": name,
        "kafkalog_s": [round(x, 3) for x in ours],
        "kafka_s": [round(x, 3) for x in theirs],
        "kafkalog_median_s": round(a, 3),
        "kafka_median_s": round(b, 3),
        "speedup": round(b / a, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--skip-recover", action="store_true")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    dist = kafka_dist()
    work = Path(tempfile.mkdtemp(prefix="kafkalog-tools-"))
    global _ENV
    _ENV = compiled_bytecode(work)
    try:
        segment = work / "00000000000000000000.log"
        batches, records = write_segment(segment, args.size_mb << 20, args.codec)
        rows = [bench_dump(dist, segment, args.runs)]
        print(json.dumps(rows[-1]))
        if not args.skip_recover:
            rows.append(bench_recover(dist, segment, args.runs, work))
            print(json.dumps(rows[-1]))
        if args.json:
            doc = {
                "kafka": dist.version,
                "segment_bytes": segment.stat().st_size,
                "batches": batches,
                "records": records,
                "codec": args.codec,
                "python": platform.python_version(),
                "java": subprocess.run(
                    ["java", "-version"], capture_output=True, text=True
                ).stderr.splitlines()[0],
                "rows": rows,
            }
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    finally:
        if not os.environ.get("KAFKALOG_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
