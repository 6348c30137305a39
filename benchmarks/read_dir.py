"""Time reading a data directory through ``kafkalog.arrow.open_data_dir`` (the planner and the
columnar reader that consume, export and the Spark source share).

    python benchmarks/read_dir.py --records 1000000 --repeat 7 [--codec lz4] [--dir /tmp/rd]

The directory is written once (``produce``-like appends through the log layer, batches of
``--batch`` records of ~100 bytes, 8 partitions) and reused when it exists. Each repeat plans and
reads every record; the median and the spread are printed, one JSON line. To compare two
builds, run this alternately with each on the same directory (PYTHONPATH pointing at each tree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def write(path: str, records: int, batch: int, codec: str, partitions: int = 8) -> None:
    from kafkalog.format import MemoryRecordsBuilder
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    with LogManager(path, writable=True, create=True) as manager:
        manager.create_topic("t", partitions, {})
        per = records // partitions
        for p in range(partitions):
            log = manager.get_log(TopicPartition("t", p))
            for start in range(0, per, batch):
                b = MemoryRecordsBuilder(compression=codec)
                for i in range(start, min(per, start + batch)):
                    b.append(timestamp=1_700_000_000_000 + i, key=b"key-%08d" % i,
                             value=b"v" * 80)  # fmt: skip
                log.append_as_leader(b.build())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=160)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    path = args.dir or f"/tmp/kafkalog-read-dir-{args.codec}-{args.records}-{args.batch}"
    if not os.path.isdir(path):
        write(path, args.records, args.batch, args.codec)
    from kafkalog.arrow import open_data_dir

    times, rows = [], 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        rows = sum(b.num_rows for b in open_data_dir(path))
        times.append(time.perf_counter() - t)
    print(json.dumps({
        "dir": path, "rows": rows, "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4), "max_s": round(max(times), 4),
        "rows_per_s": round(rows / statistics.median(times)),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
