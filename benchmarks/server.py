"""``kafkalog serve`` throughput with librdkafka's own client (confluent-kafka) on loopback.

    .venv/bin/python benchmarks/server.py [--records 500000] [--repeat 3] [--json OUT]

Records have a 100-byte value (JSON-like text, no key); the producer compresses with lz4.

- produce: one librdkafka producer (linger.ms 5, batch.size 1 MB, lz4) sends every record to one
  partition and waits for every delivery report, with acks=1 and with acks=all (acks=all waits
  for an fsync of the partition before each answer);
- fetch: one librdkafka consumer reads the partition from offset 0 to its end (``consume`` in
  batches of 10,000), against a server that sends record data with sendfile and against one
  started with ``--no-sendfile`` (record data read into the server and written to the socket).
  "values MB/s" counts the uncompressed values delivered, "segment MB/s" the bytes of the segment
  files sent (compressed, as stored);
- raw fetch: the server's own serving rate, without a client's decoding: Fetch v12 requests of
  up to 8 MB over one socket, reading the whole partition ``--passes`` times, the answers read
  and dropped (only each answer's last batch header is looked at, for the next offset); with and
  without sendfile. Besides wall-clock MB/s, the server process's own CPU time (user + system,
  from /proc) gives MB served per CPU second, which the load of a shared machine disturbs less.

The fetch modes are interleaved: each repetition starts one server of each kind on the same
directory, in an order that alternates between repetitions.

Wall-clock times; each figure is the median of ``--repeat`` runs (a fresh data directory per
produce run, the same directory for the fetch runs). The server and the client share the
machine's cores. Results go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition, libversion

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kafkalog.format.records import iter_batches
from kafkalog.protocol import ApiKey
from server.server_process import ServerProcess
from server.wire import WireClient

TOPIC = "bench"
VALUE_SIZE = 100


def value(i: int) -> bytes:
    text = b'{"id":%08d,"user":"u%05d","event":"click","page":"/p/%04d","ok":true}' % (
        i, i % 50_000, i % 1000)  # fmt: skip
    return text.ljust(VALUE_SIZE, b" ")[:VALUE_SIZE]


def produce(bootstrap: str, n: int, acks: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1 << 20, "compression.type": "lz4",
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    payloads = [value(i) for i in range(n)]
    failed = []
    start = time.perf_counter()
    for payload in payloads:
        while True:
            try:
                producer.produce(TOPIC, payload, partition=0,
                                 on_delivery=lambda e, m: e and failed.append(e))  # fmt: skip
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    assert not failed, failed[:3]
    return elapsed


def fetch(bootstrap: str, n: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    start = time.perf_counter()
    while got < n:
        for m in consumer.consume(10_000, 5):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def raw_fetch(port: int, passes: int) -> tuple[float, int]:
    """Seconds and bytes for ``passes`` reads of the whole partition with bare Fetch requests."""
    client = WireClient("127.0.0.1", port)
    total = 0
    start = time.perf_counter()
    for _ in range(passes):
        offset = 0
        while True:
            body = {"max_wait_ms": 0, "max_bytes": 8 << 20, "topics": [{"topic": TOPIC,
                    "partitions": [{"partition": 0, "fetch_offset": offset,
                                    "partition_max_bytes": 8 << 20}]}]}  # fmt: skip
            answer = client.call(ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]
            records = answer["records"]
            if not records:
                break
            total += len(records)
            for batch in iter_batches(records):
                offset = batch.last_offset + 1
    elapsed = time.perf_counter() - start
    client.close()
    return elapsed, total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def segment_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{TOPIC}-0").glob("*.log"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--passes", type=int, default=10, help="raw fetch: reads of the log")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    n = args.records
    mb = n * VALUE_SIZE / 1e6
    results: dict = {"records": n, "value_bytes": VALUE_SIZE, "librdkafka": libversion()[0],
                     "python": platform.python_version()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="kafkalog-bench-") as tmp:
        for acks in ("1", "all"):
            times = []
            for r in range(args.repeat):
                data_dir = Path(tmp) / f"produce-{acks}-{r}"
                with ServerProcess(data_dir) as server:
                    times.append(produce(server.bootstrap, n, acks))
            t = statistics.median(times)
            results[f"produce_acks_{acks}"] = {"seconds": t, "records_per_s": n / t,
                                               "mb_per_s": mb / t}  # fmt: skip
            print(f"produce acks={acks}: {n / t:,.0f} records/s, {mb / t:.1f} MB/s of values")
        data_dir = Path(tmp) / f"produce-1-{args.repeat - 1}"
        stored = segment_bytes(data_dir)
        results["stored_bytes"] = stored
        modes = {"sendfile": (), "copy": ("--no-sendfile",)}
        fetched: dict[str, list] = {m: [] for m in modes}
        raw: dict[str, list] = {m: [] for m in modes}
        for r in range(args.repeat):
            for mode in sorted(modes, reverse=r % 2 == 1):
                with ServerProcess(data_dir, *modes[mode]) as server:
                    fetched[mode].append(fetch(server.bootstrap, n))
                    cpu = cpu_seconds(server.proc.pid)
                    seconds, sent = raw_fetch(server.port, args.passes)
                    raw[mode].append((seconds, sent, cpu_seconds(server.proc.pid) - cpu))
        for mode in modes:
            t = statistics.median(fetched[mode])
            results[f"fetch_{mode}"] = {"seconds": t, "records_per_s": n / t, "mb_per_s": mb / t,
                                        "stored_mb_per_s": stored / 1e6 / t}  # fmt: skip
            print(f"fetch ({mode}): {n / t:,.0f} records/s, {mb / t:.1f} MB/s of values, "
                  f"{stored / 1e6 / t:.1f} MB/s of segment bytes")  # fmt: skip
            wall = statistics.median(sent / 1e6 / sec for sec, sent, _ in raw[mode])
            # /proc counts CPU time in clock ticks (10 ms): too short a run has no measure.
            enough = all(c >= 0.1 for _, _, c in raw[mode])
            per_cpu = statistics.median(sent / 1e6 / c for _, sent, c in raw[mode]) if enough else 0
            results[f"raw_fetch_{mode}"] = {"bytes": raw[mode][0][1], "mb_per_s": wall,
                                            "mb_per_server_cpu_s": per_cpu}  # fmt: skip
            print(f"raw fetch ({mode}): {wall:.0f} MB/s of segment bytes, "
                  f"{per_cpu:.0f} MB per server CPU second")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
