"""``fast.decode_columnar`` on one whole buffer against ``fast.iter_record_batches`` over it.

    .venv/bin/python benchmarks/decode_whole.py [--records 1000000] [--repeat 7]
        [--json benchmarks/results/decode_whole.json]

A user who decodes a whole segment in one call gets one Arrow batch; a reader that streams gets
chunks of 65,536 rows from arrays it reuses. For every codec and two batch sizes (160 records, as
a producer's default linger gives, and 10,000), 1,000,000 records of a 12-byte key and a 96-byte
value are encoded once (kafkalog's builder) and decoded both ways in the same process,
interleaved, each with a fresh decoder (as ``decode_columnar`` and ``iter_record_batches`` make
one per call); each figure is the median wall time of ``--repeat`` runs. The goal: the whole
buffer within 1.2x of the streamed path.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from importlib.metadata import version

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BATCH_SIZES = (160, 10_000)


def encode(codec: str, per_batch: int, records: int) -> bytes:
    from kafkalog.format import MemoryRecordsBuilder

    parts, offset = [], 0
    while offset < records:
        builder = MemoryRecordsBuilder(compression=codec, base_offset=offset)
        for i in range(offset, min(records, offset + per_batch)):
            builder.append(timestamp=1_700_000_000_000 + i, key=b"key-%08d" % i, value=b"v" * 96)
        parts.append(builder.build())
        offset += per_batch
    return b"".join(parts)


def measure(buf: bytes, repeat: int) -> tuple[float, float]:
    from kafkalog.format import columnar as fast

    def whole() -> int:
        return fast.decode_columnar(buf).num_rows

    def streamed() -> int:
        return sum(rb.num_rows for rb in fast.iter_record_batches(buf))

    assert whole() == streamed()
    times: dict[str, list[float]] = {"whole": [], "streamed": []}
    for _ in range(repeat):
        for name, fn in (("whole", whole), ("streamed", streamed)):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return statistics.median(times["whole"]), statistics.median(times["streamed"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rows = []
    for codec in CODECS:
        for per_batch in BATCH_SIZES:
            buf = encode(codec, per_batch, args.records)
            whole, streamed = measure(buf, args.repeat)
            row = {
                "codec": codec,
                "batch_records": per_batch,
                "bytes": len(buf),
                "whole_ms": round(whole * 1000, 1),
                "streamed_ms": round(streamed * 1000, 1),
                "ratio": round(whole / streamed, 2),
            }
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        doc = {
            "records": args.records,
            "repeat": args.repeat,
            "python": platform.python_version(),
            "pyarrow": version("pyarrow"),
            "numpy": version("numpy"),
            "rows": rows,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
