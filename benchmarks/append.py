"""Log append throughput against a plain file write, and lookup latency in a 1 GB segment.

    .venv/bin/python benchmarks/append.py [--mb 128] [--repeat 5] [--lookups 5000]
                                          [--cases 1 MB] [--segment-dir /tmp/kafkalog-bench-1g]
                                          [--json OUT]

Appends (no fsync: Kafka's default flush policy leaves flushing to the OS):

- raw: ``os.write`` of the very bytes the log would write, to a new file, append after append;
- raw + CRC: the same, after the CRC-32C of each batch (what any follower must compute at least:
  the ceiling of the follower's ratio);
- follower: ``Log.append_as_follower`` of batches whose offsets are set (each batch's CRC checked,
  the batch walk, index upkeep, producer state, roll checks), the replication path;
- leader: ``Log.append_as_leader`` of client batches (Kafka's full validation: CRC, batch header
  checks, every record walked for its timestamp and key, offsets and the leader epoch assigned in
  place; then the same append).

Records have a 16-byte key and a 100-byte value. A 1 KB append is one batch of 8 records. A 1 MB
follower append is either 64 batches of 16 KB (a replica fetch of default-sized producer
batches) or one batch of ~8,300 records; a 1 MB leader append is one client batch (the v2
produce path takes one batch per partition). Each run appends ``--mb`` MB (1 KB appends: at most
32 MB) to a new log in a temporary directory. The contenders of a case are run interleaved, one
run each per repetition, in an order that alternates between repetitions, so that the load of a
shared machine falls on all of them alike. Throughput is measured in CPU time of this process
(time.process_time: user + system, so the kernel's copy into the page cache counts), which the
other work on a shared machine disturbs less than wall time; the wall-clock ratio is printed next
to it. Ratios are medians of the per-repetition ratios.

Lookups: a 1 GB segment of 1 KB batches (index.interval.bytes 4096, so an offset-index entry
every ~4 KB) is built once under ``--segment-dir`` and reused. Random offsets are looked up
with ``LogSegment.translate_offset`` (index, then a scan to the batch) and ``Log.read``; random
record timestamps with ``Log.fetch_offset_by_timestamp``. The log is opened read-only (as a
reader of a broker's disk does); the page cache is warm.

Times are medians over ``--repeat`` runs (appends) or over all lookups (wall clock, with the 99th
percentile, and CPU time). Results go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from kafkalog.format import MemoryRecordsBuilder
from kafkalog.log.clock import MockClock
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log

T0 = 1_700_000_000_000
KB, MB = 1 << 10, 1 << 20
VALUE = b"v" * 100
CONFIG = {
    "message.timestamp.after.max.ms": 1 << 50,
    "message.timestamp.before.max.ms": 1 << 50,
    "max.message.bytes": 2 * MB,
    "internal.segment.bytes": (1 << 31) - 1,  # one segment per run: no rolls in the way
}
SEGMENT_META = "bench-segment.json"


def batch(first: int, count: int, *, offset: int = 0) -> bytes:
    """One uncompressed v2 batch of ``count`` records (keys and timestamps from ``first``)."""
    builder = MemoryRecordsBuilder(base_offset=offset)
    for i in range(first, first + count):
        builder.append(timestamp=T0 + i, key=b"key-%012d" % i, value=VALUE)
    return builder.build()


def records_per(size: int) -> int:
    return max(1, round(size / len(batch(0, 100)) * 100))


def follower_appends(total: int, append_size: int, batch_size: int) -> list[bytes]:
    """Appends of ``append_size`` bytes of ``batch_size`` batches, offsets assigned, together
    ~``total`` bytes (baseOffset is outside the CRC, so one template batch serves)."""
    per_batch = records_per(batch_size)
    batches_per_append = max(1, append_size // batch_size)
    template = batch(0, per_batch)
    appends, offset, size = [], 0, 0
    while size < total:
        chunk = bytearray()
        for _ in range(batches_per_append):
            data = bytearray(template)
            struct.pack_into(">q", data, 0, offset)
            chunk += data
            offset += per_batch
        appends.append(bytes(chunk))
        size += len(chunk)
    return appends


def leader_appends(total: int, append_size: int, batch_size: int) -> list[bytes]:
    one = batch(0, records_per(batch_size))  # a client batch: baseOffset 0, one per append
    return [one] * max(1, total // len(one))


CASES = [  # (kind, append label, append size, batch size)
    ("follower", "1 KB", KB, KB),
    ("follower", "1 MB (64 x 16 KB batches)", MB, 16 * KB),
    ("follower", "1 MB (one batch)", MB, MB),
    ("leader", "1 KB", KB, KB),
    ("leader", "1 MB (one batch)", MB, MB),
]


def new_log(directory: Path) -> Log:
    return Log.open(
        directory, config=LogConfig(CONFIG), clock=MockClock(now_ms=T0), writable=True, create=True
    )


def time_raw(directory: Path, appends: list[bytes], crc: bool = False) -> tuple[float, float]:
    """(wall, CPU) seconds to os.write every append to a new file (``crc``: after the CRC-32C
    of each of its batches)."""
    fd = os.open(directory / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    spans = [_batch_spans(data) for data in appends] if crc else None
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for i, data in enumerate(appends):
            if spans is not None:
                view = memoryview(data)
                for start, end in spans[i]:
                    crc32c(view[start + 21 : end])
            os.write(fd, data)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        os.close(fd)


def _batch_spans(data: bytes) -> list[tuple[int, int]]:
    spans, pos = [], 0
    while pos < len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        spans.append((pos, end))
        pos = end
    return spans


def time_log(directory: Path, appends: list[bytes], leader: bool) -> tuple[float, float]:
    """(wall, CPU) seconds to append every append to a new log."""
    log = new_log(directory / "t-0")
    try:
        append = log.append_as_leader if leader else log.append_as_follower
        wall, cpu = time.perf_counter(), time.process_time()
        for data in appends:
            append(data)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        log.close()


def bench_appends(args, results: dict) -> None:
    print(f"appends: ~{args.mb} MB per run (1 KB appends: ~{min(args.mb, 32)} MB), medians of")
    print(f"{args.repeat} interleaved repetitions; MB/s by CPU time (process_time)")
    print(
        f"{'append':36} {'raw MB/s':>9} {'+CRC MB/s':>9} {'log MB/s':>9} {'ratio':>6} "
        f"{'ceiling':>7} {'wall ratio':>10} {'us/append':>10}"
    )
    total = args.mb * MB
    for kind, label, size, batch_size in CASES:
        name = f"{kind} {label}"
        if args.cases and not any(c in name for c in args.cases):
            continue
        make = follower_appends if kind == "follower" else leader_appends
        appends = make(total if size == MB else min(total, 32 * MB), size, batch_size)
        nbytes = sum(map(len, appends))
        runs: dict[str, list[tuple[float, float]]] = {"raw": [], "crc": [], "log": []}
        contenders = {
            "raw": functools.partial(time_raw, appends=appends),
            "crc": functools.partial(time_raw, appends=appends, crc=True),
            "log": functools.partial(time_log, appends=appends, leader=kind == "leader"),
        }
        for rep in range(args.repeat):
            order = list(contenders) if rep % 2 == 0 else list(contenders)[::-1]
            for key in order:
                with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
                    runs[key].append(contenders[key](Path(tmp)))
        med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in runs.items()}
        row = {
            "appends": len(appends),
            "bytes": nbytes,
            "raw_mb_s": nbytes / med["raw"][1] / MB,
            "raw_crc_mb_s": nbytes / med["crc"][1] / MB,
            "log_mb_s": nbytes / med["log"][1] / MB,
            "ratio": statistics.median(r[1] / g[1] for r, g in zip(runs["raw"], runs["log"])),
            "ratios": [r[1] / g[1] for r, g in zip(runs["raw"], runs["log"])],
            "ceiling": statistics.median(r[1] / c[1] for r, c in zip(runs["raw"], runs["crc"])),
            "wall_ratio": statistics.median(r[0] / g[0] for r, g in zip(runs["raw"], runs["log"])),
            "raw_wall_mb_s": nbytes / med["raw"][0] / MB,
            "log_wall_mb_s": nbytes / med["log"][0] / MB,
            "us_per_append": med["log"][1] / len(appends) * 1e6,
        }
        results[name] = row
        print(
            f"{name:36} {row['raw_mb_s']:9.0f} {row['raw_crc_mb_s']:9.0f} {row['log_mb_s']:9.1f} "
            f"{row['ratio']:6.0%} {row['ceiling']:7.0%} {row['wall_ratio']:10.0%} "
            f"{row['us_per_append']:10.1f}",
            flush=True,
        )


def build_segment(directory: Path, size: int) -> dict:
    """A segment of ~``size`` bytes of 1 KB batches with increasing timestamps (reused)."""
    meta_path = directory / SEGMENT_META
    want = {"size": size, "interval": 4096, "format": 1}
    if meta_path.exists() and json.loads(meta_path.read_text()).get("want") == want:
        return json.loads(meta_path.read_text())
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    per_batch = records_per(KB)
    template = bytearray(batch(0, per_batch))
    log = new_log(directory / "t-0")
    offset, written = 0, 0
    print(f"building a {size // MB} MB segment in {directory} (once) ...", flush=True)
    while written < size - MB:
        chunk = bytearray()
        for _ in range(MB // len(template)):
            data = bytearray(template)
            # baseOffset, baseTimestamp and maxTimestamp follow the offsets; CRC recomputed.
            struct.pack_into(">q", data, 0, offset)
            struct.pack_into(">qq", data, 27, T0 + offset, T0 + offset + per_batch - 1)
            struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
            chunk += data
            offset += per_batch
        log.append_as_follower(bytes(chunk))
        written += len(chunk)
    log.close()
    meta = {"want": want, "records": offset, "bytes": written}
    meta_path.write_text(json.dumps(meta))
    return meta


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_lookups(args, results: dict) -> None:
    meta = build_segment(Path(args.segment_dir), 1 << 30)
    log = Log.open(Path(args.segment_dir) / "t-0", config=LogConfig(CONFIG))
    (segment,) = log.segments
    rng = random.Random(1)
    n = meta["records"]
    print(
        f"lookups in one {segment.size() / MB:.0f} MB segment, {n} records, "
        f"{segment.offset_index.entries} offset-index entries, {args.lookups} lookups each"
    )
    print(f"{'lookup':38} {'median us':>10} {'p99 us':>8} {'CPU median us':>14}")
    cases = {
        "offset: translate_offset": lambda o: segment.translate_offset(o),
        "offset: Log.read (1 MB max)": lambda o: log.read(o, MB),
        "timestamp: fetch_offset_by_timestamp": lambda o: log.fetch_offset_by_timestamp(T0 + o),
    }
    for name, fn in cases.items():
        targets = [rng.randrange(n) for _ in range(args.lookups)]
        for t in targets[:100]:  # warm up
            fn(t)
        times, cpu_times = [], []
        for t in targets:
            start, cpu = time.perf_counter(), time.process_time()
            fn(t)
            cpu_times.append((time.process_time() - cpu) * 1e6)
            times.append((time.perf_counter() - start) * 1e6)
        row = {
            "median_us": statistics.median(times),
            "p99_us": percentile(times, 0.99),
            "cpu_median_us": statistics.median(cpu_times),
        }
        results[name] = row
        print(
            f"{name:38} {row['median_us']:10.1f} {row['p99_us']:8.1f} {row['cpu_median_us']:14.1f}"
        )
    log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=128, help="MB appended per run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lookups", type=int, default=5000)
    parser.add_argument("--segment-dir", default="/tmp/kafkalog-bench-1g")
    parser.add_argument("--tmp", default=None, help="where append runs write (default: $TMPDIR)")
    parser.add_argument(
        "--cases", nargs="*", default=[], help="only append cases whose name contains one of these"
    )
    parser.add_argument("--skip-appends", action="store_true")
    parser.add_argument("--skip-lookups", action="store_true")
    parser.add_argument("--json", help="write raw results here")
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    results: dict = {}
    if not args.skip_lookups:  # first: the appends' writeback would disturb them
        bench_lookups(args, results)
    if not args.skip_appends:
        bench_appends(args, results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
