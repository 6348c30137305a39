"""Decode and encode throughput of kafkalog's record layer against kafka-python and aiokafka.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/decode.py [--records N] [--repeat R] [--json OUT]

Every library decodes the same bytes (built once by kafka-python) and touches each record's offset,
timestamp, key, value and headers. Times are CPU-time medians (time.process_time) over R runs;
ratios are against aiokafka's compiled reader, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from importlib.metadata import version

from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from kafkalog.format import MemoryRecords, MemoryRecordsBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_data(n: int, batch_bytes: int, codec: str, headers: int, magic: int) -> bytes:
    """``n`` records of a 16-byte key and a 100-byte JSON-like value, in batches of ~batch_bytes."""
    per_batch = max(1, batch_bytes // (16 + 100 + 8 + headers * 20))
    out = bytearray()
    hdrs = [(f"h{i}", b"header-value-%d" % i) for i in range(headers)]
    offset = 0
    while offset < n:
        count = min(per_batch, n - offset)
        if magic == 2:
            b = KpBuilder(
                magic=2,
                compression_type=CODECS[codec],
                is_transactional=False,
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
                batch_size=1 << 30,
            )
        else:
            b = KpLegacyBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 30)
        for i in range(count):
            key = b"key-%012d" % (offset + i)
            value = b'{"user":%08d,"event":"page_view","page":"/item/%06d","ms":%013d}' % (
                offset + i,
                (offset + i) * 7 % 999_999,
                1_700_000_000_000 + offset + i,
            )
            value = value.ljust(100, b" ")
            ts = 1_700_000_000_000 + (offset + i) // 50
            if magic == 2:
                b.append(i, timestamp=ts, key=key, value=value, headers=hdrs)
            else:
                rel = i if codec != "none" else offset + i
                b.append(rel, timestamp=ts, key=key, value=value)
        data = bytearray(b.build())
        import struct

        struct.pack_into(">q", data, 0, offset if magic == 2 else offset + count - 1)
        out += data
        offset += count
    return bytes(out)


def decode_kafkalog(data: bytes) -> int:
    n = 0
    for batch in MemoryRecords(data):
        for r in batch.records():
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018
            n += 1
    return n


def decode_kafka_python(data: bytes) -> int:
    n = 0
    records = KpMemoryRecords(data)
    while records.has_next():
        for r in records.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018
            n += 1
    return n


def decode_aiokafka(data: bytes) -> int:
    n = 0
    records = AioMemoryRecords(data)
    while records.has_next():
        for r in records.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018
            n += 1
    return n


def encode_kafkalog(rows, per_batch: int, codec: str) -> int:
    size = 0
    for start in range(0, len(rows), per_batch):
        b = MemoryRecordsBuilder(compression=codec, base_offset=start)
        for ts, key, value in rows[start : start + per_batch]:
            b.append(timestamp=ts, key=key, value=value)
        size += len(b.build())
    return size


def encode_aiokafka(rows, per_batch: int, codec: str) -> int:
    size = 0
    for start in range(0, len(rows), per_batch):
        b = AioBuilder(2, CODECS[codec], 0, -1, -1, -1, 1 << 30)
        for i, (ts, key, value) in enumerate(rows[start : start + per_batch]):
            b.append(i, ts, key, value, [])
        size += len(b.build())
    return size


def encode_kafka_python(rows, per_batch: int, codec: str) -> int:
    size = 0
    for start in range(0, len(rows), per_batch):
        b = KpBuilder(
            magic=2,
            compression_type=CODECS[codec],
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        for i, (ts, key, value) in enumerate(rows[start : start + per_batch]):
            b.append(i, timestamp=ts, key=key, value=value, headers=[])
        size += len(b.build())
    return size


def cpu_median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


DATASETS = [
    # (magic, batch bytes, codec, headers)
    (2, 16_384, "none", 0),
    (2, 1_048_576, "none", 0),
    (2, 16_384, "gzip", 0),
    (2, 16_384, "snappy", 0),
    (2, 16_384, "lz4", 0),
    (2, 16_384, "zstd", 0),
    (2, 1_048_576, "none", 2),
    (1, 16_384, "none", 0),
    (1, 16_384, "gzip", 0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write raw results here")
    args = parser.parse_args()
    results = {
        "versions": {p: version(p) for p in ("kafka-python", "aiokafka", "kafkalog")},
        "python": platform.python_version(),
        "records": args.records,
        "repeat": args.repeat,
        "decode": [],
        "encode": [],
    }
    print(f"{args.records} records, CPU-time medians of {args.repeat} runs, M records/s")
    print(f"{'decode dataset':34} {'kafkalog':>9} {'kafka-py':>9} {'aiokafka':>9} {'ratio':>6}")
    for magic, batch_bytes, codec, headers in DATASETS:
        data = make_data(args.records, batch_bytes, codec, headers, magic)
        row = {"magic": magic, "batch_bytes": batch_bytes, "codec": codec, "headers": headers}
        for name, fn in (
            ("kafkalog", decode_kafkalog),
            ("kafka-python", decode_kafka_python),
            ("aiokafka", decode_aiokafka),
        ):
            assert fn(data) == args.records
            row[name] = args.records / cpu_median(lambda fn=fn, d=data: fn(d), args.repeat) / 1e6
        results["decode"].append(row)
        label = f"v{magic} {batch_bytes // 1024}KB {codec} {headers}h"
        print(
            f"{label:34} {row['kafkalog']:9.2f} {row['kafka-python']:9.2f} "
            f"{row['aiokafka']:9.2f} {row['kafkalog'] / row['aiokafka']:6.2f}"
        )
    rows = [
        (1_700_000_000_000 + i // 50, b"key-%012d" % i, (b"v%d" % i).ljust(100, b" "))
        for i in range(args.records)
    ]
    per_batch = 16_384 // 124
    print(
        f"{'encode (16KB batches)':34} {'kafkalog':>9} {'kafka-py':>9} {'aiokafka':>9} {'ratio':>6}"
    )
    for codec in CODECS:
        row = {"codec": codec}
        for name, fn in (
            ("kafkalog", encode_kafkalog),
            ("kafka-python", encode_kafka_python),
            ("aiokafka", encode_aiokafka),
        ):
            row[name] = (
                args.records
                / cpu_median(lambda fn=fn, c=codec: fn(rows, per_batch, c), args.repeat)
                / 1e6
            )
        results["encode"].append(row)
        print(
            f"{'v2 16KB ' + codec:34} {row['kafkalog']:9.2f} {row['kafka-python']:9.2f} "
            f"{row['aiokafka']:9.2f} {row['kafkalog'] / row['aiokafka']:6.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
