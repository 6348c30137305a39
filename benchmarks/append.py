"""Log append throughput against a plain file write, and lookup latency in a 1 GB segment.

    .venv/bin/python benchmarks/append.py [--mb 128] [--compressed-mb 64] [--general-mb 8]
                                          [--repeat 5] [--lookups 5000] [--cases 1 MB]
                                          [--segment-dir /tmp/kafkalog-bench-1g] [--json OUT]

Appends (no fsync: Kafka's default flush policy leaves flushing to the OS):

- raw: ``os.write`` of the very bytes the log would write, to a new file, append after append;
- raw + CRC: the same, after the CRC-32C of each batch (what any follower must compute at least:
  the ceiling of the follower's ratio);
- follower: ``Log.append_as_follower`` of batches whose offsets are set (each batch's CRC checked,
  the batch walk, index upkeep, producer state, roll checks), the replication path;
- leader: ``Log.append_as_leader`` of client batches (Kafka's full validation: CRC, batch header
  checks, every record walked for its timestamp and key, offsets and the leader epoch assigned in
  place; then the same append);
- leader, compressed: the same for one client batch of 1 MB of records (uncompressed) in gzip,
  snappy, lz4 or zstd; the topic keeps the producer's codec (records decompressed and checked, the
  header patched, nothing recompressed), or, in one case, compresses with another codec (the batch
  rebuilt). The general path (the validator's record-at-a-time path, what these appends took
  before the columnar one) runs as a fourth contender on ``--general-mb`` MB of the same appends.

Records have a 16-byte key and a 100-byte value (compressed cases: JSON-like values that lz4
compresses about 3:1; the others: one repeated value). A 1 KB append is one batch of 8 records. A 1
MB follower append is either 64 batches of 16 KB (a replica fetch of default-sized producer
batches) or one batch of ~8,300 records; a 1 MB leader append is one client batch (the v2 produce
path takes one batch per partition). Each run appends ``--mb`` MB (1 KB appends: at most 32 MB;
compressed: ``--compressed-mb`` MB of records) to a new log in a temporary directory. The
contenders of a case are run interleaved, one run each per repetition, in an order that alternates
between repetitions, so that the load of a shared machine falls on all of them alike. Throughput is
measured in CPU time of this process (time.process_time: user + system, so the kernel's copy into
the page cache counts), which the other work on a shared machine disturbs less than wall time; the
wall-clock ratio is printed next to it. Ratios are medians of the per-repetition ratios.

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
from kafkalog.format.validate import log_validator as validator_module
from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.log import Log

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


def batch(
    first: int, count: int, *, offset: int = 0, compression: str = "none", json: bool = False
) -> bytes:
    """One v2 batch of ``count`` records (keys and timestamps from ``first``); ``json``:
    JSON-like values (for compressed batches: a repeated value compresses 50:1, no real topic)."""
    builder = MemoryRecordsBuilder(base_offset=offset, compression=compression)
    for i in range(first, first + count):
        value = json_value(i) if json else VALUE
        builder.append(timestamp=T0 + i, key=b"key-%012d" % i, value=value)
    return builder.build()


def json_value(i: int) -> bytes:
    """About 100 bytes of an event, varying as real ones do (ids, amounts, a hash)."""
    rng = random.Random(i)
    return (
        b'{"id":%d,"user":"u%06d","amount":%d.%02d,"currency":"EUR","ref":"%016x","ok":%s}'
        % (i, rng.randrange(10**6), rng.randrange(10**4), rng.randrange(100),
           rng.getrandbits(64), b"true" if rng.random() < 0.9 else b"false")
    )  # fmt: skip


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


def compressed_appends(total: int, codec: str) -> list[bytes]:
    """One client batch of 1 MB of records (uncompressed) in ``codec`` per append, ``total``
    bytes of records in all."""
    count = round(MB / (len(batch(0, 1000, json=True)) - 61) * 1000)
    one = batch(0, count, compression=codec, json=True)
    return [one] * max(1, total // MB)


CASES = [  # (kind, append label, append size, batch size)
    ("follower", "1 KB", KB, KB),
    ("follower", "1 MB (64 x 16 KB batches)", MB, 16 * KB),
    ("follower", "1 MB (one batch)", MB, MB),
    ("leader", "1 KB", KB, KB),
    ("leader", "1 MB (one batch)", MB, MB),
    ("leader", "1 MB lz4 (one batch)", MB, MB),
    ("leader", "1 MB zstd (one batch)", MB, MB),
    ("leader", "1 MB gzip (one batch)", MB, MB),
    ("leader", "1 MB snappy (one batch)", MB, MB),
    ("leader", "1 MB lz4 (one batch), topic zstd", MB, MB),
]
CODECS = ("lz4", "zstd", "gzip", "snappy")


def new_log(directory: Path, topic: dict | None = None) -> Log:
    config = LogConfig({**CONFIG, **(topic or {})})
    return Log.open(
        directory, config=config, clock=MockClock(now_ms=T0), writable=True, create=True
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


def time_log(
    directory: Path, appends: list[bytes], leader: bool, topic: dict | None = None,
    general: bool = False,
) -> tuple[float, float]:  # fmt: skip
    """(wall, CPU) seconds to append every append to a new log (``general``: the validator's
    compressed batches take its record-at-a-time path, as before the columnar one)."""
    log = new_log(directory / "t-0", topic)
    array_path = validator_module.validate_v2_compressed
    if general:
        validator_module.validate_v2_compressed = lambda *args, **kwargs: None
    try:
        append = log.append_as_leader if leader else log.append_as_follower
        wall, cpu = time.perf_counter(), time.process_time()
        for data in appends:
            append(data)
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        validator_module.validate_v2_compressed = array_path
        log.close()


def bench_appends(args, results: dict) -> None:
    print(f"appends: ~{args.mb} MB per run (1 KB appends: ~{min(args.mb, 32)} MB; compressed:")
    print(f"{args.compressed_mb} MB of records, general path {args.general_mb} MB), medians of")
    print(f"{args.repeat} interleaved repetitions; MB/s (of appended bytes) by CPU time")
    print(
        f"{'append':36} {'raw MB/s':>9} {'+CRC MB/s':>9} {'log MB/s':>9} {'ratio':>6} "
        f"{'ceiling':>7} {'wall ratio':>10} {'us/append':>10} {'general':>8}"
    )
    total = args.mb * MB
    for kind, label, size, batch_size in CASES:
        name = f"{kind} {label}"
        if args.cases and not any(c in name for c in args.cases):
            continue
        codec = next((c for c in CODECS if f" {c} " in label), None)
        topic = {"compression.type": "zstd"} if "topic zstd" in label else None
        if codec is not None:
            appends = compressed_appends(args.compressed_mb * MB, codec)
        else:
            make = follower_appends if kind == "follower" else leader_appends
            appends = make(total if size == MB else min(total, 32 * MB), size, batch_size)
        log_append = functools.partial(time_log, leader=kind == "leader", topic=topic)
        contenders = {
            "raw": functools.partial(time_raw, appends=appends),
            "crc": functools.partial(time_raw, appends=appends, crc=True),
            "log": functools.partial(log_append, appends=appends),
        }
        sizes = dict.fromkeys(contenders, sum(map(len, appends)))
        if codec is not None:  # the record-at-a-time path: slow, so on fewer appends
            few = appends[: max(1, args.general_mb)]
            contenders["general"] = functools.partial(log_append, appends=few, general=True)
            sizes["general"] = sum(map(len, few))
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
        for rep in range(args.repeat):
            order = list(contenders) if rep % 2 == 0 else list(contenders)[::-1]
            for key in order:
                with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
                    runs[key].append(contenders[key](Path(tmp)))
        rates = {k: [(sizes[k] / w / MB, sizes[k] / c / MB) for w, c in v] for k, v in runs.items()}

        def ratio(k: str, clock: int = 1, rates=rates) -> float:
            """Median over repetitions of the contender's rate / the raw write's."""
            return statistics.median(g[clock] / r[clock] for r, g in zip(rates["raw"], rates[k]))

        med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in rates.items()}
        row = {
            "appends": len(appends),
            "bytes": sizes["raw"],
            "raw_mb_s": med["raw"][1],
            "raw_crc_mb_s": med["crc"][1],
            "log_mb_s": med["log"][1],
            "ratio": ratio("log"),
            "ratios": [g[1] / r[1] for r, g in zip(rates["raw"], rates["log"])],
            "ceiling": ratio("crc"),
            "wall_ratio": ratio("log", 0),
            "raw_wall_mb_s": med["raw"][0],
            "log_wall_mb_s": med["log"][0],
            "us_per_append": sizes["log"] / med["log"][1] / MB / len(appends) * 1e6,
        }
        if "general" in rates:
            row["general_mb_s"] = med["general"][1]
            row["general_ratio"] = ratio("general")
            row["general_us_per_append"] = (
                sizes["general"] / MB / med["general"][1] / len(few) * 1e6
            )
        results[name] = row
        general = f"{row['general_ratio']:8.1%}" if "general" in rates else ""
        print(
            f"{name:36} {row['raw_mb_s']:9.0f} {row['raw_crc_mb_s']:9.0f} {row['log_mb_s']:9.1f} "
            f"{row['ratio']:6.0%} {row['ceiling']:7.0%} {row['wall_ratio']:10.0%} "
            f"{row['us_per_append']:10.1f} {general}",
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
    parser.add_argument(
        "--compressed-mb", type=int, default=64, help="MB of records per compressed run"
    )
    parser.add_argument(
        "--general-mb", type=int, default=8, help="... of them through the general path"
    )
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
