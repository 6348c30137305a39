"""``kafkalog serve`` against Apache Kafka (single-node KRaft) on the same machine and clients.

    scripts/kafka.sh          # Kafka's jars (Maven Central), once per machine
    .venv/bin/python benchmarks/serve_vs_kafka.py [--quick] [--repeat 3] [--full]
        [--json benchmarks/results/serve_vs_kafka.json]

Two brokers, both started by this script on free loopback ports:

- ``kafkalog serve DIR`` (the console script, as a user runs it), with __consumer_offsets and
  __transaction_state of 2 partitions each, as the Kafka broker below;
- Apache Kafka (``kafka.Kafka server.properties``, ``tests/apache_kafka/conftest.py``'s
  single-node KRaft configuration with Kafka's default thread counts) in the JVM that
  ``kafka-server-start.sh`` starts: ``-Xmx1G -Xms1G`` and ``kafka-run-class.sh``'s G1 options.

Measured, the two contenders interleaved (A B, then B A, ...) and each figure the median of
``--repeat`` runs:

1. **Startup**: from the command (``Popen``) to the first Metadata answer that names the broker
   (and, with data, every partition of the topic with its leader), polled with a raw socket every
   5 ms. On an empty data directory (formatted once for Kafka: ``kafka-storage format`` is a
   one-time step, not counted) and on one holding ``--startup-partitions`` partitions of
   ``--startup-records`` records each (100-byte values, uncompressed), produced once through
   Kafka by librdkafka; serve gets a copy of Kafka's partition directories (the same segment
   files). Both are stopped cleanly once before the timed starts, and between them. serve runs
   as an installed one does, its bytecode compiled (``PYTHONDONTWRITEBYTECODE`` unset, a
   bytecode cache in the work directory filled by that first start).
2. **Throughput**: for each case (value size, codec, partitions, acks) a fresh topic on each
   broker, ``--mb`` MB of values (JSON-like text, compressible) written by
   - librdkafka (confluent-kafka's ``Producer``, its defaults but acks and compression): wall
     clock from the first ``produce`` to the end of ``flush``; latency = each delivery report's
     ``latency()``;
   - Kafka's own ``ProducerPerformance`` (kafka-producer-perf-test, ``--throughput -1``, the
     same payloads through ``--payload-file``, Java client defaults but acks and compression,
     JVM as ``kafka-producer-perf-test.sh``: ``-Xmx512M`` and G1): its final line;
   and the librdkafka topic read back by
   - librdkafka (``Consumer``, assigned every partition from offset 0, ``consume`` batches of
     10,000) until every record is in;
   - Kafka's ``ConsumerPerformance`` (kafka-consumer-perf-test, a group): its fetch.MB.sec and
     fetch.nMsg.sec (the rebalance excluded).
   Latency under a flood is mostly queueing in the client; ``--rate`` adds runs of
   ProducerPerformance at a fixed rate both brokers sustain, for the latency of a request.
   The brokers' own CPU seconds (/proc) are recorded per run.

Durability, ``--durability``:

- ``default``: each broker as it comes. Kafka's default flush policy leaves flushing to the OS
  (acks=all on one node is acknowledged from the page cache); serve's acks=all fsyncs before
  answering, its acks=1 answers from the page cache. Its acks=1 runs against Kafka's acks=all
  are then the like-for-like durability (printed as extra rows).
- ``page-cache``: neither fsyncs before answering: serve with ``--acks-all-durability
  page-cache``, Kafka with its defaults.
- ``fsync``: both fsync every append before answering, at any acks:
  ``log.flush.interval.messages=1`` on both (serve's acks=all flush is that same flush).

The default grid is a subset, each value of each dimension at least once (``DEFAULT_CASES``: 100 B
uncompressed on 1 partition and 1 KB lz4 on 8, each with acks=1 and acks=all; the consumers read
the first of each pair); ``--full`` runs the whole grid (100 B and 1 KB, none and lz4, 1 and 8
partitions, acks=1 and acks=all), and ``--sizes/--codecs/--partitions/--acks`` a grid of one's
own (the dimensions not given take every value).
Results are printed as JSON lines and written with ``--json``, with the versions, the command and
the load average before and after. ``KAFKALOG_BENCH_KEEP=1`` keeps the work directory.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition, libversion
from confluent_kafka import __version__ as ck_version
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from apache_kafka.conftest import UTF8, KafkaBroker, KafkaDist  # noqa: E402
from kafkalog.protocol import ApiKey, decode_response, encode_request  # noqa: E402

# kafka-server-start.sh (KAFKA_HEAP_OPTS) and kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS).
JVM_PERF = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
BROKER_JVM = ["-Xmx1G", "-Xms1G", *JVM_PERF]
TOOL_JVM = ["-Xmx512M", *JVM_PERF]  # kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh
# Kafka's defaults where the test configuration lowers them for CI.
KAFKA_DEFAULTS = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "num.recovery.threads.per.data.dir": "2",
    "background.threads": "10",
}
# The settings conftest's Kafka broker has: internal topics of 2 partitions, no rebalance delay.
SERVE_SETTINGS = [
    "--offsets-topic-num-partitions",
    "2",
    "--transaction-state-log-num-partitions",
    "2",
    "--config",
    "group.initial.rebalance.delay.ms=0",
]
# --durability: each broker's settings beyond the above.
DURABILITY = {
    "default": ([], {}),
    "page-cache": (["--acks-all-durability", "page-cache"], {}),
    "fsync": (
        ["--config", "log.flush.interval.messages=1"],
        {"log.flush.interval.messages": "1"},
    ),
}
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
STARTUP_TOPIC = "bench"
# The default subset of the grid: each size, codec, partition count and acks at least once.
DEFAULT_CASES = [(100, "none", 1, "1"), (100, "none", 1, "all"), (1024, "lz4", 8, "1"),
                 (1024, "lz4", 8, "all")]  # fmt: skip
LIVE: list = []  # every broker started, stopped at exit whatever happened


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kafka_dist() -> KafkaDist:
    out = (
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "kafka.sh")], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .splitlines()
    )
    if not out:
        raise SystemExit("scripts/kafka.sh found no Kafka (Java 17+ and Maven needed)")
    home = Path(out[-1])
    return KafkaDist(home, home.name.removeprefix("kafka-"), shutil.which("java") or "java")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads; Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- The first Metadata answer -------------------------------------------------------------------


def metadata_ready(port: int, deadline: float, topic: str | None, partitions: int) -> None:
    """Return once a Metadata answer names a broker (and every partition of ``topic`` with a
    leader); connect attempts every 5 ms until the port accepts."""
    corr = 0
    topics = None if topic is None else [{"topic_id": uuid.UUID(int=0), "name": topic}]
    body = {
        "topics": topics,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    while time.monotonic() < deadline:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            time.sleep(0.005)
            continue
        try:
            sock.settimeout(max(1.0, deadline - time.monotonic()))
            while time.monotonic() < deadline:
                corr += 1
                sock.sendall(encode_request(ApiKey.METADATA, 12, corr, "bench", body))
                head = _recv(sock, 4)
                frame = _recv(sock, int.from_bytes(head, "big"))
                _, answer = decode_response(ApiKey.METADATA, 12, frame)
                if answer["brokers"] and _has_leaders(answer, topic, partitions):
                    return
                time.sleep(0.005)
        except (OSError, EOFError):
            time.sleep(0.005)
        finally:
            sock.close()
    raise TimeoutError(f"no Metadata answer on port {port}")


def _has_leaders(answer: dict, topic: str | None, partitions: int) -> bool:
    if topic is None:
        return True
    for t in answer["topics"]:
        if t["name"] == topic and t["error_code"] == 0 and len(t["partitions"]) == partitions:
            return all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"])
    return False


def _recv(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


# --- The two brokers ----------------------------------------------------------------------------


class KafkaNode(KafkaBroker):
    """conftest's KRaft broker, launched with kafka-server-start.sh's JVM options; each launch
    records the seconds from Popen to the first Metadata answer (``ready_s``)."""

    wait_topic: str | None = None
    wait_partitions: int = 0
    ready_s: float = 0.0

    def _launch(self, timeout: float) -> KafkaNode:
        cmd = [
            self.dist.java,
            *BROKER_JVM,
            *UTF8,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            str(self.dist.lib / "*"),
            "kafka.Kafka",
            str(self.workdir / "server.properties"),
        ]
        with open(self.workdir / "stdout.log", "ab") as out:
            start = time.monotonic()
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        LIVE.append(self)
        try:
            metadata_ready(self.port, start + timeout, self.wait_topic, self.wait_partitions)
        except TimeoutError:
            self.stop(kill=True)
            raise SystemExit(f"Kafka did not start:\n{self.log_tail()}") from None
        self.ready_s = time.monotonic() - start
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid


class Serve:
    """``kafkalog serve DIR`` on a fixed free port."""

    def __init__(self, data_dir: Path, log: Path, settings: tuple[str, ...] = ()) -> None:
        self.data_dir, self.log = data_dir, log
        self.settings = settings
        # As installed (pip compiles the bytecode): PYTHONDONTWRITEBYTECODE unset and a bytecode
        # cache beside the data, filled by the untimed first start.
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["PYTHONPYCACHEPREFIX"] = str(data_dir.parent / "pycache")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.ready_s = 0.0
        self.wait_topic: str | None = None
        self.wait_partitions = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def command(self) -> list[str]:
        exe = str(Path(sys.executable).with_name("kafkalog"))
        return [
            exe,
            "serve",
            str(self.data_dir),
            "--listen",
            self.bootstrap,
            *SERVE_SETTINGS,
            *self.settings,
        ]

    def start(self, timeout: float = 120, prefix: tuple[str, ...] = ()) -> Serve:
        with open(self.log, "ab") as out:
            start = time.monotonic()
            self.proc = subprocess.Popen(
                [*prefix, *self.command()],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        LIVE.append(self)
        try:
            metadata_ready(self.port, start + timeout, self.wait_topic, self.wait_partitions)
        except TimeoutError:
            self.stop()
            raise SystemExit(f"serve did not start:\n{self.log.read_text()[-3000:]}") from None
        self.ready_s = time.monotonic() - start
        return self

    restart = start

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)


def start_kafka(dist: KafkaDist, workdir: Path, extra: dict[str, str] | None = None) -> KafkaNode:
    return KafkaNode(dist, workdir, configs={**KAFKA_DEFAULTS, **(extra or {})}).start()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        f.result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if md and md.error is None and len(md.partitions) == partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name}: no leaders after 60 s")


def drop_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")]
    if names:
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result(timeout=120)


# --- Payloads and clients ------------------------------------------------------------------------


def payloads(size: int, count: int = 1000, seed: int = 7) -> list[bytes]:
    """``count`` distinct JSON-like values of ``size`` bytes (no newline: --payload-file)."""
    rnd = random.Random(seed)
    events = ["click", "view", "purchase", "scroll", "login", "logout"]
    out = []
    for _ in range(count):
        text = b""
        while len(text) < size:
            text += b'{"id":%d,"user":"u%05d","event":"%s","page":"/p/%04d","ms":%d},' % (
                rnd.randrange(10**9),
                rnd.randrange(50_000),
                rnd.choice(events).encode(),
                rnd.randrange(10_000),
                rnd.randrange(100_000),
            )
        out.append(text[:size])
    return out


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def rdkafka_produce(
    bootstrap: str, topic: str, values: list[bytes], n: int, acks: str, codec: str
) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "compression.type": codec,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    lat: list[float] = []
    failed: list = []

    def report(err, msg) -> None:
        if err is not None:
            failed.append(err)
        else:
            lat.append(msg.latency())

    producer.list_topics(topic, timeout=10)  # connected and the metadata known before timing
    k = len(values)
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, values[i % k], on_delivery=report)
                break
            except BufferError:
                producer.poll(0.005)
    producer.flush(600)
    elapsed = time.perf_counter() - start
    if failed or len(lat) != n:
        raise RuntimeError(f"librdkafka produce: {len(failed)} failed, e.g. {failed[:3]}")
    size = len(values[0])
    return {
        "s": elapsed,
        "records_per_s": n / elapsed,
        "mb_per_s": n * size / 1e6 / elapsed,
        "p50_ms": percentile(lat, 0.50) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
    }


def rdkafka_consume(bootstrap: str, topic: str, partitions: int, n: int, size: int) -> dict:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-rd", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        # As many as are left: a bigger count waits out the timeout on the last call.
        for m in consumer.consume(min(10_000, n - got), 1):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < n:
        raise RuntimeError(f"librdkafka consume: {got} of {n} records")
    return {"s": elapsed, "records_per_s": n / elapsed, "mb_per_s": n * size / 1e6 / elapsed}


def java(dist: KafkaDist, main: str, *args: str, timeout: float = 600) -> str:
    cmd = [dist.java, *TOOL_JVM, *UTF8, "-cp", dist.classpath(), main, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{main} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


_PERF_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def perf_produce(
    dist: KafkaDist,
    bootstrap: str,
    topic: str,
    payload_file: Path,
    n: int,
    acks: str,
    codec: str,
    rate: int = -1,
) -> dict:
    out = java(
        dist,
        PRODUCER_PERF,
        "--topic",
        topic,
        "--num-records",
        str(n),
        "--payload-file",
        str(payload_file),
        "--throughput",
        str(rate),
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        f"acks={acks}",
        f"compression.type={codec}",
    )
    found = _PERF_LINE.findall(out)
    if not found:
        raise RuntimeError(f"ProducerPerformance printed no summary:\n{out[-2000:]}")
    _sent, rps, mbps, avg, mx, p50, p95, p99, p999 = found[-1]
    return {
        "records_per_s": float(rps),
        "mb_per_s": float(mbps),
        "avg_ms": float(avg),
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "p999_ms": float(p999),
        "max_ms": float(mx),
    }


def perf_consume(dist: KafkaDist, bootstrap: str, topic: str, n: int, group: str) -> dict:
    out = java(
        dist,
        CONSUMER_PERF,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(n),
        "--timeout",
        "60000",
        "--group",
        group,
    )
    lines = [ln for ln in out.splitlines() if ln.count(",") >= 9 and ln[:1].isdigit()]
    if not lines:
        raise RuntimeError(f"ConsumerPerformance printed no summary:\n{out[-2000:]}")
    f = [x.strip() for x in lines[-1].split(",")]
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    if int(f[4]) < n:
        raise RuntimeError(f"ConsumerPerformance read {f[4]} of {n} records")
    return {
        "mb_per_s": float(f[8]),
        "records_per_s": float(f[9]),
        "fetch_ms": float(f[7]),
        "rebalance_ms": float(f[6]),
        "with_rebalance_mb_per_s": float(f[3]),
    }


# --- Startup -------------------------------------------------------------------------------------


def fill_kafka(bootstrap: str, partitions: int, per_partition: int) -> None:
    create_topic(bootstrap, STARTUP_TOPIC, partitions)
    values = payloads(100)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for p in range(partitions):
        for i in range(per_partition):
            while True:
                try:
                    producer.produce(STARTUP_TOPIC, values[i % 1000], partition=p)
                    break
                except BufferError:
                    producer.poll(0.005)
    if producer.flush(600):
        raise RuntimeError("startup data: not every record was delivered")


def bench_startup(dist: KafkaDist, work: Path, args) -> list[dict]:
    rows = []
    kafka_empty = start_kafka(dist, work / "kafka-empty")
    kafka_empty.stop()
    serve_empty = Serve(work / "serve-empty", work / "serve-empty.log")
    serve_empty.start()
    serve_empty.stop()
    rows.append(interleave_starts("empty data dir", serve_empty, kafka_empty, args.repeat))
    if args.startup_partitions:
        kafka = start_kafka(dist, work / "kafka-data")
        t = time.monotonic()
        fill_kafka(kafka.bootstrap, args.startup_partitions, args.startup_records)
        filled = time.monotonic() - t
        kafka.stop()
        serve = Serve(work / "serve-data", work / "serve-data.log")
        serve.data_dir.mkdir()
        for part in kafka.data_dir.glob(f"{STARTUP_TOPIC}-*"):
            shutil.copytree(part, serve.data_dir / part.name)
        serve.start()  # its first start on the copy: meta.properties, checkpoints
        serve.stop()
        for b in (serve, kafka):
            b.wait_topic, b.wait_partitions = STARTUP_TOPIC, args.startup_partitions
        name = f"{args.startup_partitions} partitions x {args.startup_records:,} records"
        row = interleave_starts(name, serve, kafka, args.repeat)
        row["data_bytes"] = sum(
            f.stat().st_size for p in kafka.data_dir.glob(f"{STARTUP_TOPIC}-*") for f in p.iterdir()
        )
        row["fill_s"] = round(filled, 1)
        rows.append(row)
        shutil.rmtree(kafka.data_dir.parent, ignore_errors=True)
        shutil.rmtree(serve.data_dir, ignore_errors=True)
    return rows


def interleave_starts(name: str, serve: Serve, kafka: KafkaNode, repeat: int) -> dict:
    ours, theirs = [], []
    for r in range(repeat):
        for b in (serve, kafka) if r % 2 == 0 else (kafka, serve):
            b.restart()
            (ours if b is serve else theirs).append(b.ready_s)
            b.stop()
    a, b = statistics.median(ours), statistics.median(theirs)
    row = {
        "benchmark": f"startup, {name}",
        "serve_s": [round(x, 3) for x in ours],
        "kafka_s": [round(x, 3) for x in theirs],
        "serve_median_s": round(a, 3),
        "kafka_median_s": round(b, 3),
        "serve_over_kafka": round(a / b, 3),
        "goal": "serve <= 1/5 of Kafka",
        "met": a <= b / 5,
    }
    print(json.dumps(row), flush=True)
    return row


# --- Throughput ----------------------------------------------------------------------------------


def bench_throughput(dist: KafkaDist, work: Path, args) -> list[dict]:
    serve_settings, kafka_settings = DURABILITY[args.durability]
    serve = Serve(work / "serve-tp", work / "serve-tp.log", tuple(serve_settings)).start()
    kafka = start_kafka(dist, work / "kafka-tp", kafka_settings)
    brokers = {"serve": serve, "kafka": kafka}
    rows = []
    try:
        # Warm-up (not measured): each broker's first topic, group and JIT.
        for b in brokers.values():
            create_topic(b.bootstrap, "warm", 1)
            rdkafka_produce(b.bootstrap, "warm", payloads(100, 100), 20_000, "all", "none")
            rdkafka_consume(b.bootstrap, "warm", 1, 20_000, 100)
            perf_consume(dist, b.bootstrap, "warm", 20_000, "warm")
        pay_files = {}
        cases = args.cases
        for size in sorted({c[0] for c in cases}):
            pay_files[size] = work / f"payload-{size}.txt"
            pay_files[size].write_bytes(b"\n".join(payloads(size)))
        read: set[tuple] = set()  # the consumers run once a (size, codec, partitions)
        for size, codec, parts, acks in cases:
            n = max(1000, int(args.mb * 1e6 / size))
            values = payloads(size)
            runs: dict[str, dict[str, list]] = {k: {} for k in brokers}
            consume = (size, codec, parts) not in read
            read.add((size, codec, parts))
            for r in range(args.repeat):
                order = list(brokers) if r % 2 == 0 else list(reversed(brokers))
                for name in order:
                    b = brokers[name]
                    out = runs[name]
                    tag = f"s{size}-{codec}-p{parts}-a{acks}-r{r}"
                    create_topic(b.bootstrap, f"rd-{tag}", parts)
                    create_topic(b.bootstrap, f"pp-{tag}", parts)
                    measure(
                        out,
                        "librdkafka produce",
                        b,
                        rdkafka_produce,
                        b.bootstrap,
                        f"rd-{tag}",
                        values,
                        n,
                        acks,
                        codec,
                    )
                    measure(
                        out,
                        "ProducerPerformance",
                        b,
                        perf_produce,
                        dist,
                        b.bootstrap,
                        f"pp-{tag}",
                        pay_files[size],
                        n,
                        acks,
                        codec,
                    )
                    if consume:
                        measure(
                            out,
                            "librdkafka consume",
                            b,
                            rdkafka_consume,
                            b.bootstrap,
                            f"rd-{tag}",
                            parts,
                            n,
                            size,
                        )
                        measure(
                            out,
                            "ConsumerPerformance",
                            b,
                            perf_consume,
                            dist,
                            b.bootstrap,
                            f"rd-{tag}",
                            n,
                            f"g-{tag}",
                        )
            for b in brokers.values():  # keep the disk and the page cache small
                drop_topics(b.bootstrap)
            for tool in runs["serve"]:
                row = summarize(
                    tool, size, codec, parts, acks, n, runs["serve"][tool], runs["kafka"][tool]
                )
                print(json.dumps(row), flush=True)
                rows.append(row)
        if args.durability == "default":
            rows += like_for_like(rows)
        if args.rate:
            rows += bench_latency(dist, brokers, pay_files[min(pay_files)], args)
    finally:
        serve.stop()
        kafka.stop()
    return rows


def like_for_like(rows: list[dict]) -> list[dict]:
    """Durability alike: serve's acks=1 (page cache) against Kafka's acks=all (page cache, its
    default flush policy; one node, so the ISR is the leader alone)."""
    out = []
    for a in rows:
        if a["acks"] != "1" or "p99_ms" not in a["serve"]:
            continue
        for b in rows:
            same = all(a[k] == b[k] for k in ("benchmark", "value_bytes", "codec", "partitions"))
            if same and b["acks"] == "all":
                row = {
                    "benchmark": f"{a['benchmark']}, serve acks=1 / Kafka acks=all",
                    **{k: a[k] for k in ("value_bytes", "codec", "partitions")},
                    "acks": "1 (serve) vs all (Kafka)",
                    "serve": a["serve"],
                    "kafka": b["kafka"],
                    "throughput_ratio": round(a["serve"]["mb_per_s"] / b["kafka"]["mb_per_s"], 3),
                    "p99_ratio": round(a["serve"]["p99_ms"] / b["kafka"]["p99_ms"], 3),
                }
                print(json.dumps(row), flush=True)
                out.append(row)
    return out


def bench_latency(dist: KafkaDist, brokers: dict, pay_file: Path, args) -> list[dict]:
    rows = []
    n = args.rate * args.rate_seconds
    size = min(c[0] for c in args.cases)
    for acks in sorted({c[3] for c in args.cases}):
        runs: dict[str, dict[str, list]] = {k: {} for k in brokers}
        for r in range(args.repeat):
            for name in list(brokers) if r % 2 == 0 else list(reversed(brokers)):
                b = brokers[name]
                topic = f"lat-a{acks}-r{r}"
                create_topic(b.bootstrap, topic, 1)
                measure(
                    runs[name],
                    f"ProducerPerformance at {args.rate}/s",
                    b,
                    perf_produce,
                    dist,
                    b.bootstrap,
                    topic,
                    pay_file,
                    n,
                    acks,
                    "none",
                    args.rate,
                )
        for tool in runs["serve"]:
            row = summarize(
                tool, size, "none", 1, acks, n, runs["serve"][tool], runs["kafka"][tool]
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def measure(out: dict, tool: str, broker, fn, *a) -> None:
    cpu = cpu_seconds(broker.pid)
    result = fn(*a)
    result["broker_cpu_s"] = round(cpu_seconds(broker.pid) - cpu, 2)
    out.setdefault(tool, []).append(result)


def summarize(tool, size, codec, parts, acks, n, ours: list[dict], theirs: list[dict]) -> dict:
    def med(runs: list[dict], key: str) -> float | None:
        vals = [r[key] for r in runs if key in r]
        return round(statistics.median(vals), 3) if vals else None

    keys = [k for k in ours[0] if k != "s"]
    row = {
        "benchmark": tool,
        "value_bytes": size,
        "codec": codec,
        "partitions": parts,
        "acks": acks,
        "records": n,
        "serve": {k: med(ours, k) for k in keys},
        "kafka": {k: med(theirs, k) for k in keys},
        "serve_runs": ours,
        "kafka_runs": theirs,
    }
    s, k = row["serve"], row["kafka"]
    row["throughput_ratio"] = round(s["mb_per_s"] / k["mb_per_s"], 3)
    if s.get("p99_ms") is not None and k.get("p99_ms"):
        row["p99_ratio"] = round(s["p99_ms"] / k["p99_ms"], 3)
    return row


# --- Main ----------------------------------------------------------------------------------------


def versions(dist: KafkaDist) -> dict:
    from importlib.metadata import version

    java_v = subprocess.run([dist.java, "-version"], capture_output=True, text=True).stderr
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "kafka": dist.version,
        "kafkalog": version("kafkalog"),
        "kafkalog_commit": commit,
        "confluent_kafka": ck_version,
        "librdkafka": libversion()[0],
        "python": platform.python_version(),
        "java": java_v.splitlines()[0],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="--repeat 1, --mb 5, 10k records a partition, no fixed-rate runs",
    )
    ap.add_argument(
        "--full",
        action="store_true",
        help="the whole grid: 100 and 1024 B, none and lz4, 1 and 8 partitions, acks 1 and all",
    )
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--codecs", type=lambda s: s.split(","))
    ap.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--acks", type=lambda s: s.split(","))
    ap.add_argument("--mb", type=float, default=50, help="MB of values a produce run")
    ap.add_argument("--startup-partitions", type=int, default=50)
    ap.add_argument("--startup-records", type=int, default=100_000, help="a partition")
    ap.add_argument("--rate", type=int, default=1000, help="fixed-rate latency runs (0: none)")
    ap.add_argument("--rate-seconds", type=int, default=5)
    ap.add_argument(
        "--durability",
        choices=sorted(DURABILITY),
        default="default",
        help="default: each broker's own; page-cache: neither fsyncs before answering; "
        "fsync: both fsync every append (log.flush.interval.messages=1)",
    )
    ap.add_argument("--skip-startup", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.mb, args.startup_records, args.rate = 1, 5, 10_000, 0
    grid = (args.sizes, args.codecs, args.partitions, args.acks)
    if args.full or any(grid):
        full = ([100, 1024], ["none", "lz4"], [1, 8], ["1", "all"])
        args.cases = list(itertools.product(*(g or f for g, f in zip(grid, full, strict=True))))
    else:
        args.cases = DEFAULT_CASES
    dist = kafka_dist()
    doc = {
        "command": " ".join(["benchmarks/serve_vs_kafka.py", *sys.argv[1:]]),
        **versions(dist),
        "load_before": os.getloadavg(),
        "started": time.strftime("%FT%T"),
    }
    doc["settings"] = {k: v for k, v in vars(args).items() if k != "json"}
    doc["settings"]["json"] = str(args.json) if args.json else None
    print(json.dumps({k: v for k, v in doc.items() if k != "settings"}), flush=True)
    work = Path(tempfile.mkdtemp(prefix="kafkalog-serve-vs-kafka-"))
    t0 = time.monotonic()
    try:
        if not args.skip_startup:
            doc["startup"] = bench_startup(dist, work, args)
        if not args.skip_throughput:
            doc["throughput"] = bench_throughput(dist, work, args)
    finally:
        for b in LIVE:
            with contextlib.suppress(Exception):
                b.stop()
        if not os.environ.get("KAFKALOG_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    doc["load_after"] = os.getloadavg()
    doc["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps({"load_after": doc["load_after"], "wall_s": doc["wall_s"]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
