"""The columnar fast path (kafkalog.format.columnar) against kafka-python and aiokafka, same bytes.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/fast.py --json benchmarks/results/fast.json [--records N]

Every dataset is generated (v2 by kafkalog's encoder, v1 by kafka-python's builder) and measured in
a fresh process of its own (this script with --row), and decoded there by each library; aiokafka
and kafka-python touch every record's offset, timestamp, key, value and headers, kafkalog builds
the Arrow columns, all records as one batch. Also timed: kafkalog with CRC validation, kafkalog
streamed as a reader loops (chunks of 65,536 rows, each held while the next decodes), and two
floors for compressed data: the decompressor alone (kafkalog.format.codecs.decompress over every
batch's records section) and the decoder's own decompression alone (the same sections through the
decoder's Inflater: lz4, snappy and large zstd frames into one reused buffer). Encode builds v2
batches from Python lists (the list -> Arrow conversion is included) at Kafka's default levels
(gzip 6, lz4 9, zstd 3). Times are CPU-time medians (time.process_time) of --repeat runs, the
contenders' runs interleaved so that a noisy machine weighs on all alike (kafka-python:
--slow-repeat runs). Finally a ~1 GiB segment file is walked through an mmap in bounded chunks in
a subprocess, reporting its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from kafkalog.format import MemoryRecords
from kafkalog.format import columnar as fast
from kafkalog.format.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from kafkalog.format.columnar.inflate import Inflater

STREAM_ROWS = 65_536  # rows per chunk of the streamed decode
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KB16, MB1 = 16_384, 1_048_576
DECODE = [
    (2, batch, codec, headers) for headers in (0, 2) for batch in (KB16, MB1) for codec in CODECS
] + [(1, KB16, "none", 0), (1, KB16, "gzip", 0), (1, MB1, "none", 0), (1, MB1, "gzip", 0)]
ENCODE = [(batch, codec) for batch in (KB16, MB1) for codec in CODECS]


def columns(n: int, headers: int) -> tuple[list, list, list, list | None]:
    """The rows of benchmarks/decode.py: 16-byte keys, 100-byte JSON-like values."""
    keys = [b"key-%012d" % i for i in range(n)]
    values = [
        (
            b'{"user":%08d,"event":"page_view","page":"/item/%06d","ms":%013d}'
            % (i, i * 7 % 999_999, 1_700_000_000_000 + i)
        ).ljust(100, b" ")
        for i in range(n)
    ]
    stamps = [1_700_000_000_000 + i // 50 for i in range(n)]
    hdrs = None
    if headers:
        one = [(f"h{j}", b"header-value-%d" % j) for j in range(headers)]
        hdrs = [one] * n
    return keys, values, stamps, hdrs


def make_legacy(n: int, magic: int, batch: int, codec: str) -> bytes:
    """The rows of columns() as magic 0/1 message sets by kafka-python's builder: compressed
    wrappers of about ``batch`` bytes (inner offsets relative, the wrapper's the last one), or
    plain messages."""
    keys, values, stamps, _ = columns(n, 0)
    per_wrapper = max(1, batch // (len(keys[0]) + len(values[0]) + 8))
    step = per_wrapper if codec != "none" else n
    out = bytearray()
    for start in range(0, n, step):
        b = KpLegacyBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 62)
        count = min(step, n - start)
        for i in range(start, start + count):
            rel = i - start if codec != "none" else i
            b.append(rel, timestamp=stamps[i], key=keys[i], value=values[i])
        data = bytearray(b.build())
        if codec != "none":
            struct.pack_into(">q", data, 0, start + count - 1)
        out += data
    return bytes(out)


def make(n: int, magic: int, batch: int, codec: str, headers: int) -> bytes:
    if magic != 2:
        return make_legacy(n, magic, batch, codec)
    keys, values, stamps, hdrs = columns(n, headers)
    return bytes(
        fast.encode_columnar(keys, values, stamps, hdrs, compression=codec, batch_bytes=batch - 61)
    )


def cpu(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def cpu_interleaved(fns: dict, repeat: int) -> dict:
    """CPU-time medians of several functions run in turn, so that a noisy machine (other jobs,
    frequency changes) weighs on all of them alike."""
    times: dict = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def touch_all(records) -> int:
    n = 0
    while records.has_next():
        for r in records.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018
            n += 1
    return n


def sections(data: bytes) -> list[tuple[int, int, bytes]]:
    """(codec, magic, compressed bytes) of every compressed batch or wrapper."""
    out = []
    for b in MemoryRecords(data):
        if b.is_compressed:
            if b.magic == 2:
                out.append((b.compression_id, 2, bytes(b._buf[61:])))
            else:
                out.append((b.compression_id, b.magic, b._key_value()[1]))
    return out


def decode_row(
    n: int, magic: int, batch: int, codec: str, headers: int, repeat: int, slow_repeat: int
) -> dict:
    data = make(n, magic, batch, codec, headers)
    dec = fast.ColumnarDecoder()
    assert dec.decode(data).num_rows == n
    assert touch_all(AioMemoryRecords(data)) == n
    row = {
        "magic": magic,
        "batch_bytes": batch,
        "codec": codec,
        "headers": headers,
        "bytes": len(data),
    }
    streamer = fast.ColumnarDecoder()
    fns = {
        "kafkalog_s": lambda d=data, x=dec: x.decode(d),
        "kafkalog_crc_s": lambda d=data, x=dec: x.decode(d, validate_crc=True),
        "kafkalog_stream_s": lambda d=data, x=streamer: stream(x, d),
        "aiokafka_s": lambda d=data: touch_all(AioMemoryRecords(d)),
    }
    parts = sections(data)
    if parts:
        fns["decompress_only_s"] = lambda ps=parts: decompress_each(ps)
        inflater = Inflater()
        fns["inflate_only_s"] = lambda ps=parts, i=inflater: inflate_each(i, ps)
    row.update(cpu_interleaved(fns, repeat))
    row.setdefault("decompress_only_s", None)
    row.setdefault("inflate_only_s", None)
    row["kafka_python_s"] = cpu(lambda d=data: touch_all(KpMemoryRecords(d)), slow_repeat)
    return row


def stream(decoder: fast.ColumnarDecoder, data: bytes) -> None:
    """Chunks of 65,536 rows as a reader loops over them (Spark's, or the CLI's): each chunk is
    held while the next one decodes."""
    for chunk in decoder.iter_batches(data, max_rows=STREAM_ROWS):
        assert chunk.num_rows


def decompress_each(parts: list[tuple[int, int, bytes]]) -> None:
    """Each section decompressed and dropped, as a reader does: a list of every output would
    hold the whole decompressed dataset at once and time its page faults."""
    for codec, magic, part in parts:
        decompress(codec, part, magic=magic)


def inflate_each(inflater: Inflater, parts: list[tuple[int, int, bytes]]) -> None:
    """The same through the decoder's Inflater."""
    for codec, magic, part in parts:
        inflater.inflate(codec, memoryview(part), magic, DEFAULT_MAX_DECOMPRESSED_SIZE)


def isolated(row: str, args: argparse.Namespace) -> dict:
    """One dataset's row measured by this script in a fresh process: a long process's history
    (its allocator's state after earlier datasets) moved single rows by up to 2x, for every
    contender, in ways that said nothing about the row's own code."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--row",
            row,
            "--records",
            str(args.records),
            "--repeat",
            str(args.repeat),
            "--slow-repeat",
            str(args.slow_repeat),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def bench_decode(args: argparse.Namespace) -> list[dict]:
    rows = []
    for magic, batch, codec, headers in DECODE:
        row = isolated(f"decode:{magic}:{batch}:{codec}:{headers}", args)
        rows.append(row)
        print(decode_line(row, args.records), flush=True)
    return rows


def decode_line(row: dict, n: int) -> str:
    label = f"v{row['magic']} {row['batch_bytes'] // 1024}KB {row['codec']} {row['headers']}h"
    rate = n / row["kafkalog_s"] / 1e6
    crc = row["kafkalog_crc_s"] / row["kafkalog_s"] - 1
    aio = n / row["aiokafka_s"] / 1e6
    floor = row["decompress_only_s"]
    vs_floor = f"{row['kafkalog_s'] / floor:5.2f}x" if floor else "    -"
    return (
        f"{label:22} {rate:7.2f} M/s  crc +{crc * 100:4.0f}%  vs decompress {vs_floor}  "
        f"aiokafka {aio:5.2f}  ratio {rate / aio:5.2f}  kafka-python "
        f"{n / row['kafka_python_s'] / 1e6:5.2f}"
    )


def aio_encode(keys, values, stamps, per_batch: int, codec: str) -> int:
    size = 0
    for start in range(0, len(keys), per_batch):
        b = AioBuilder(2, CODECS[codec], 0, -1, -1, -1, 1 << 30)
        for i in range(start, min(start + per_batch, len(keys))):
            b.append(i - start, stamps[i], keys[i], values[i], [])
        size += len(b.build())
    return size


def kp_encode(keys, values, stamps, per_batch: int, codec: str) -> int:
    size = 0
    for start in range(0, len(keys), per_batch):
        b = KpBuilder(
            magic=2,
            compression_type=CODECS[codec],
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        for i in range(start, min(start + per_batch, len(keys))):
            b.append(i - start, timestamp=stamps[i], key=keys[i], value=values[i], headers=[])
        size += len(b.build())
    return size


def encode_row(n: int, batch: int, codec: str, repeat: int, slow_repeat: int) -> dict:
    keys, values, stamps, _ = columns(n, 0)
    sample = fast.encode_columnar(keys[:20000], values[:20000], batch_bytes=batch - 61)
    per_batch = next(iter(MemoryRecords(sample))).count  # aiokafka's batches hold as many

    def ours():
        fast.encode_columnar(keys, values, stamps, compression=codec, batch_bytes=batch - 61)

    def aio():
        aio_encode(keys, values, stamps, per_batch, codec)

    def kp():
        kp_encode(keys, values, stamps, per_batch, codec)

    row = {"batch_bytes": batch, "codec": codec, "records_per_batch": per_batch}
    row.update(cpu_interleaved({"kafkalog_s": ours, "aiokafka_s": aio}, repeat))
    row["kafka_python_s"] = cpu(kp, slow_repeat)
    return row


def bench_encode(args: argparse.Namespace) -> list[dict]:
    n = args.records
    rows = []
    for batch, codec in ENCODE:
        row = isolated(f"encode:{batch}:{codec}", args)
        rows.append(row)
        rate, aio_rate = n / row["kafkalog_s"] / 1e6, n / row["aiokafka_s"] / 1e6
        print(
            f"encode {batch // 1024}KB {codec:7} {rate:7.2f} M/s  aiokafka {aio_rate:5.2f}  "
            f"ratio {rate / aio_rate:5.2f}  kafka-python {n / row['kafka_python_s'] / 1e6:5.2f}",
            flush=True,
        )
    return rows


def one_row(args: argparse.Namespace) -> None:
    """--row: measure one dataset in this process and print its row as JSON."""
    kind, *spec = args.row.split(":")
    if kind == "decode":
        magic, batch, codec, headers = int(spec[0]), int(spec[1]), spec[2], int(spec[3])
        row = decode_row(args.records, magic, batch, codec, headers, args.repeat, args.slow_repeat)
    else:
        row = encode_row(args.records, int(spec[0]), spec[1], args.repeat, args.slow_repeat)
    print(json.dumps(row))


SEGMENT_WALK = """
import mmap, sys, time
from kafkalog.format import columnar as fast
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
path, max_rows = sys.argv[1], int(sys.argv[2])
base_hwm = status("VmHWM")
rows = peak_anon = chunks = 0
t0 = time.process_time()
with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
    # The file repeats one piece: its offsets repeat, so the offset order check is off.
    for chunk in fast.iter_record_batches(mm, max_rows=max_rows, check_offset_order=False):
        rows += chunk.num_rows
        chunks += 1
        peak_anon = max(peak_anon, status("RssAnon"))
        del chunk
cpu = time.process_time() - t0
print(rows, chunks, peak_anon, status("VmHWM"), base_hwm, cpu)
"""


def bench_segment(size: int, max_rows: int) -> dict:
    """Walk a ~size-byte segment file through an mmap, in a fresh process; peak memory."""
    keys, values, stamps, _ = columns(1_000_000, 0)
    piece = bytes(fast.encode_columnar(keys, values, stamps, batch_bytes=KB16 - 61))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.log"
        with open(path, "wb") as f:
            written = 0
            while written < size:
                f.write(piece)  # offsets repeat: the walk is told not to check their order
                written += len(piece)
        out = subprocess.run(
            [sys.executable, "-c", SEGMENT_WALK, str(path), str(max_rows)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    rows, chunks, peak_anon, hwm, base_hwm = (int(x) for x in out[:5])
    cpu_s = float(out[5])
    result = {
        "file_bytes": written,
        "rows": rows,
        "chunks": chunks,
        "max_rows": max_rows,
        "peak_rss_anon_bytes": peak_anon,
        "vm_hwm_bytes": hwm,
        "vm_hwm_before_bytes": base_hwm,
        "cpu_s": cpu_s,
    }
    print(
        f"segment {written / 2**30:.2f} GiB: {rows} rows in {chunks} chunks, {cpu_s:.2f} s CPU, "
        f"peak anonymous RSS {peak_anon / 2**20:.0f} MiB (VmHWM {hwm / 2**20:.0f} MiB, "
        f"file pages included)"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--slow-repeat", type=int, default=1, help="runs of kafka-python")
    parser.add_argument("--segment-bytes", type=int, default=1 << 30)
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # one dataset, in a process of its own
    args = parser.parse_args()
    if args.row:
        one_row(args)
        return
    packages = (
        "kafkalog",
        "kafka-python",
        "aiokafka",
        "pyarrow",
        "numpy",
        "cramjam",
        "lz4",
        "zstandard",
        "crc32c",
    )
    results = {
        "command": "benchmarks/fast.py " + " ".join(sys.argv[1:]),
        "versions": {p: version(p) for p in packages},
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "implementation": fast.IMPLEMENTATION,
        "crc": getattr(fast.kernels, "crc_implementation", lambda: "crc32c package")(),
        "load_average_before": os.getloadavg(),
        "records": args.records,
        "repeat": args.repeat,
        "slow_repeat": args.slow_repeat,
        "isolation": "each dataset's row in a fresh process, its contenders interleaved",
    }
    print(
        f"{args.records} records, CPU-time medians of {args.repeat} runs "
        f"({fast.IMPLEMENTATION} kernels)"
    )
    results["decode"] = bench_decode(args)
    results["encode"] = bench_encode(args)
    results["segment"] = bench_segment(args.segment_bytes, 65536)
    results["load_average_after"] = os.getloadavg()
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
