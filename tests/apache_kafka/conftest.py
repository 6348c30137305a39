"""Apache Kafka itself in the loop: a real KRaft broker, Kafka's Java clients and its tools.

``scripts/kafka.sh`` resolves Kafka (kafka-it/pom.xml: broker, tools, clients) from Maven Central
into a per-machine cache and builds the reference consumer/producer (kafka-it/src); the fixtures
here run it (a no-op in milliseconds once cached), format and start single-node KRaft brokers
(process.roles=broker,controller) on free loopback ports in temporary directories, and stop them
with SIGTERM (SIGKILL when asked or when a clean shutdown hangs).

Without Java 17+ or Maven, or when the jars cannot be resolved, these tests skip saying why; with
CI=true they fail instead. docs/kafka-tests.md says how to run them by hand.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "scripts" / "kafka.sh"
IN_CI = os.environ.get("CI", "").lower() == "true"
UTF8 = ["-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8"]

# The broker logs to server.log in its directory: Kafka 4.x through log4j 2, 3.x through reload4j.
BROKER_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""
BROKER_LOG4J1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true but Apache Kafka is not available for tests/apache_kafka: {reason}")
    pytest.skip(f"Apache Kafka not available ({reason}); see docs/kafka-tests.md")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


@dataclass
class KafkaDist:
    """One resolved Kafka version: ``lib/`` (its runtime classpath) and ``kafka-it.jar``."""

    home: Path
    version: str
    java: str = "java"

    @property
    def lib(self) -> Path:
        return self.home / "lib"

    def classpath(self) -> str:
        # kafka-it.jar first: its log4j2.properties keeps the tools' stdout free of logging.
        return f"{self.home / 'kafka-it.jar'}{os.pathsep}{self.lib / '*'}"

    def command(self, main: str, *args: str) -> list[str]:
        """The command line running a Java main class of Kafka or kafka-it: a short-lived JVM
        (C1 only, serial GC) whose stdin/stdout are UTF-8 whatever the locale (Java 17 would
        print "?" for every non-ASCII character under LANG=C)."""
        jvm = [self.java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *UTF8]
        return [*jvm, "-cp", self.classpath(), main, *args]

    def run(
        self,
        main: str,
        *args: str,
        input: str | None = None,
        timeout: float = 300,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Java main class of Kafka or kafka-it with this version's classpath."""
        proc = subprocess.run(
            self.command(main, *args),
            input=input,
            capture_output=True,
            encoding="utf-8",
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{main} {' '.join(args)[:300]} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
            )
        return proc

    def consume(
        self, bootstrap: str, topics: list[str], isolation_level: str = "read_uncommitted"
    ) -> list[dict]:
        """Kafka's Java consumer (kafka-it's RefConsumer): every record of ``topics`` from the
        beginning to the end offsets (last stable offsets at read_committed), in topic, partition
        and offset order, as dicts of topic, partition, offset, timestamp, timestampType, key and
        value (base64 or None), headers ([key, base64 or None]) and leaderEpoch."""
        args = ["--bootstrap-server", bootstrap, "--isolation-level", isolation_level]
        for t in topics:
            args += ["--topic", t]
        out = self.run("kafkalog.it.RefConsumer", *args).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def produce(
        self,
        bootstrap: str,
        lines: list[dict],
        *,
        configs: dict[str, str] | None = None,
        transactional_id: str | None = None,
    ) -> list[dict]:
        """Kafka's Java producer (kafka-it's RefProducer) sends ``lines``: records (topic,
        partition, timestamp, key and value in base64 or None, headers as [key, base64 or
        None]), ``{"op": "begin"|"commit"|"abort"|"flush"}``, and ``{"op": "producer",
        "configs": {...}, "transactionalId": ...}`` to go on with a new producer (in the same
        JVM). Returns the acknowledgements."""
        args = ["--bootstrap-server", bootstrap]
        for k, v in (configs or {}).items():
            args += ["--config", f"{k}={v}"]
        if transactional_id:
            args += ["--transactional-id", transactional_id]
        text = "".join(json.dumps(line) + "\n" for line in lines)
        out = self.run("kafkalog.it.RefProducer", *args, input=text).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def dump_log_segments(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Kafka's kafka-dump-log (DumpLogSegments; its class moved to Java in 4.x)."""
        return self.run(self.dump_class, *args, check=check)

    @functools.cached_property
    def dump_class(self) -> str:
        """kafka.tools.DumpLogSegments (Scala, in kafka_2.13 up to 4.2) or, since its port to
        Java (4.3), org.apache.kafka.tools.DumpLogSegments in kafka-tools."""
        for jar in sorted(self.lib.glob("kafka-tools-*.jar")):
            with zipfile.ZipFile(jar) as z:
                if "org/apache/kafka/tools/DumpLogSegments.class" in z.namelist():
                    return "org.apache.kafka.tools.DumpLogSegments"
        return "kafka.tools.DumpLogSegments"


@dataclass
class KafkaBroker:
    """A single-node KRaft broker (combined broker and controller, node.id=1)."""

    dist: KafkaDist
    workdir: Path
    configs: dict[str, str] = field(default_factory=dict)
    port: int = 0
    controller_port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server.log)"

    def write_config(self, *, node_id: int = 1, static_quorum: bool = False) -> Path:
        """``server.properties`` (and the log4j files) of a single-node KRaft broker on free
        loopback ports, ``log.dirs`` its ``data_dir``: a dynamic quorum bootstrapped by
        ``kafka-storage format --standalone``, or with ``static_quorum`` the voter list of this
        one node (a directory that is not formatted: no voter records needed in its files)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = _free_port(), _free_port()
        controller = f"127.0.0.1:{self.controller_port}"
        quorum = (
            {"controller.quorum.voters": f"{node_id}@{controller}"}
            if static_quorum
            else {"controller.quorum.bootstrap.servers": controller}
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            **quorum,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            # The records carry timestamps from early 2026: no retention may delete them while
            # the tests look (new batches with today's time still roll segments, as they should).
            "log.retention.ms": "-1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "2",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            **self.configs,
        }
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j2 = self.workdir / "log4j2.properties"
        log4j2.write_text(BROKER_LOG4J2.format(log=self.log_file))
        log4j1 = self.workdir / "log4j.properties"
        log4j1.write_text(BROKER_LOG4J1.format(log=self.log_file))
        return config

    def start(self, timeout: float = 120) -> KafkaBroker:
        """Format ``workdir/data`` for a new single-node cluster and start the broker."""
        config = self.write_config()
        # A Kafka Uuid in base64 (as Uuid.randomUuid, never starting with "-").
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.dist.run(
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(config),
            "--cluster-id",
            cluster_id,
            "--standalone",
        )
        return self._launch(timeout)

    def restart(self, timeout: float = 120) -> KafkaBroker:
        """Start a stopped broker again on its data directory, configs and ports (no format)."""
        if self.proc is not None and self.proc.poll() is None:
            raise AssertionError("the broker is still running: stop() it first")
        return self._launch(timeout)

    def _launch(self, timeout: float) -> KafkaBroker:
        config = self.workdir / "server.properties"
        log4j2 = self.workdir / "log4j2.properties"
        log4j1 = self.workdir / "log4j.properties"
        cmd = [self.dist.java, "-Xms256m", "-Xmx768m", "-XX:+UseSerialGC", *UTF8]
        cmd += ["-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j2}"]
        cmd += [f"-Dlog4j.configuration={log4j1.as_uri()}"]
        cmd += [f"-Dkafka.logs.dir={self.workdir}"]
        cmd += ["-cp", str(self.dist.lib / "*"), "kafka.Kafka", str(config)]
        out = open(self.workdir / "stdout.log", "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        out.close()
        _LIVE.add(self)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"Kafka {self.dist.version} exited {self.proc.returncode} while starting:\n"
                    + self.log_tail()
                    + "\n"
                    + (self.workdir / "stdout.log").read_text(errors="replace")[-3000:]
                )
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except Exception as exc:
                last = exc
            time.sleep(0.3)
        self.stop(kill=True)
        raise AssertionError(f"Kafka did not answer in {timeout} s ({last}):\n{self.log_tail()}")

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
            operation_timeout=30,
        )
        for f in futures.values():
            f.result(timeout=60)
        # Wait for every partition's leader, so that the first produce does not race election.
        self.wait_for_leaders(name, partitions)

    def wait_for_leaders(self, name: str, partitions: int) -> None:
        """Wait until every partition of topic ``name`` has this broker as its leader."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            md = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if md and md.error is None and len(md.partitions) == partitions:
                if all(p.leader == 1 for p in md.partitions.values()):
                    return
            time.sleep(0.2)
        raise AssertionError(f"topic {name} has no leaders after 60 s")

    def stop(self, *, kill: bool = False, timeout: float = 90) -> int | None:
        """SIGTERM (a clean shutdown: logs flushed, .snapshot files and the clean-shutdown marker
        written) or SIGKILL; SIGKILL anyway when a clean shutdown takes longer than ``timeout``.
        Returns the exit status."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            _LIVE.discard(self)
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        _LIVE.discard(self)
        return proc.returncode

    def __hash__(self) -> int:
        return id(self)


_LIVE: set[KafkaBroker] = set()


@atexit.register
def _kill_leftover_brokers() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.stop(kill=True, timeout=10)


@pytest.fixture(scope="session")
def kafka_dist() -> KafkaDist:
    """Kafka resolved by scripts/kafka.sh (KAFKALOG_KAFKA_VERSION picks another version)."""
    try:
        proc = subprocess.run(
            ["bash", str(KAFKA_SH)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            env={**os.environ, "KAFKALOG_KAFKA_INSTALL": "0"},  # no apt-get from pytest
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"scripts/kafka.sh could not run: {exc}")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        why = [line.split("not available: ", 1)[1] for line in err if "not available: " in line]
        maven = [line[line.index("[ERROR]") :] for line in err if "[ERROR] " in line][:1]
        _unavailable("; ".join(why + maven)[:600] or f"scripts/kafka.sh exited {proc.returncode}")
    home = Path(lines[-1])
    version = home.name.removeprefix("kafka-")
    java = shutil.which("java")
    if java is None:
        _unavailable(f"Kafka {version} is in {home} but there is no java on PATH")
    return KafkaDist(home=home, version=version, java=java)


def start_broker(dist: KafkaDist, workdir: Path, **configs: str) -> KafkaBroker:
    return KafkaBroker(dist, workdir, configs=dict(configs)).start()


@pytest.fixture(scope="session")
def broker_factory(kafka_dist: KafkaDist):
    """``start_broker`` bound to ``kafka_dist``: ``broker_factory(workdir, **configs)`` formats
    and starts a broker of one's own (to stop, change its data directory and ``restart()``)."""
    return functools.partial(start_broker, kafka_dist)


@pytest.fixture(scope="session")
def kafka_broker(kafka_dist: KafkaDist, tmp_path_factory) -> Iterator[KafkaBroker]:
    """A live broker shared by the session's tests (create your own topics, unique names)."""
    broker = start_broker(kafka_dist, tmp_path_factory.mktemp("kafka-broker"))
    try:
        yield broker
    finally:
        broker.stop()


# --- What Kafka wrote: one broker run shared by the proofs --------------------------------------

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _records(topic: str, n: int, partitions: int, seed: int, flush_every: int = 40) -> list[dict]:
    """Records with every shape a record can have: null/empty/binary keys and values, text,
    headers (none, repeated keys, null values), explicit and producer-chosen timestamps; a
    batch boundary every ``flush_every`` records."""
    import random

    rnd = random.Random(seed)
    base_ts = 1_767_225_600_000 + seed * 1000
    out = []
    for i in range(n):
        kind = i % 7
        key = None if kind == 0 else b"" if kind == 1 else f"key-{i % 13}".encode()
        if kind == 2:
            value = None
        elif kind == 3:
            value = b""
        elif kind == 4:
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
        else:
            value = (f"value {i} of {topic} é ✓ " * rnd.randrange(1, 20)).encode()
        headers = []
        if i % 3 == 1:
            headers = [["trace", b64(f"t-{i}".encode())], ["empty", b64(b"")]]
        elif i % 3 == 2:
            headers = [["dup", b64(b"a")], ["dup", None], ["bin", b64(bytes([0, 255, i % 256]))]]
        rec = {
            "topic": topic,
            "partition": i % partitions,
            "key": b64(key),
            "value": b64(value),
            "headers": headers,
        }
        if i % 5 != 4:
            rec["timestamp"] = base_ts + i * 7 - (300 if i % 11 == 0 else 0)
        out.append(rec)
        if i % flush_every == flush_every - 1:
            out.append({"op": "flush"})  # several batches per partition
    return out


@dataclass
class KafkaWritten:
    """A data directory written by a real broker and stopped cleanly, and what Kafka's Java
    consumer read from it before it stopped, per isolation level.

    ``offsets`` holds Kafka's earliest (log start) and latest (log end) offset of every
    partition of ``topics`` ("topic-partition": [start, end], from ListOffsets before the stop),
    ``cleaned`` the log cleaner's checkpoint of each partition of ``compacted`` after its last
    clean, and ``deleted`` the low watermarks DeleteRecords returned ("topic-partition": offset).
    """

    dist: KafkaDist
    data_dir: Path
    topics: list[str]
    expected: dict[str, list[dict]]
    stop_status: int | None
    acks: dict[str, list[dict]]
    offsets: dict[str, list[int]] = field(default_factory=dict)
    cleaned: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)


_SAVED = ("topics", "expected", "stop_status", "acks", "offsets", "cleaned", "deleted")


@pytest.fixture(scope="session")
def tiered(kafka_dist: KafkaDist, tmp_path_factory):
    """A broker with tiered storage ran, stopped: its data and remote directories and what
    Kafka's consumer read (tiered_broker.run), shared by the tiered modules."""
    import tiered_broker

    return tiered_broker.run(kafka_dist, tmp_path_factory)


@pytest.fixture(scope="session")
def kafka_written(kafka_dist: KafkaDist, tmp_path_factory) -> KafkaWritten:
    """The broker run behind the proofs. With KAFKALOG_KAFKA_WRITTEN=DIR it is kept in DIR and
    reused by later sessions while DIR/written.json exists (to work on kafkalog against the same
    bytes without waiting for a broker; delete DIR for a fresh run, and after changing the
    corpus: a saved run of another corpus is not reused)."""
    keep = os.environ.get("KAFKALOG_KAFKA_WRITTEN")
    if keep:
        saved = Path(keep) / "written.json"
        if saved.is_file():
            state = json.loads(saved.read_text())
            if state["version"] == kafka_dist.version and state.get("corpus") == CORPUS:
                return KafkaWritten(
                    kafka_dist, Path(keep) / "data", **{k: state[k] for k in _SAVED}
                )
        workdir = Path(keep)
        if workdir.exists():
            shutil.rmtree(workdir)
    else:
        workdir = tmp_path_factory.mktemp("kafka-written")
    written = _write_with_kafka(kafka_dist, workdir)
    if keep:
        state = {"version": kafka_dist.version, "corpus": CORPUS}
        state.update({k: getattr(written, k) for k in _SAVED})
        (workdir / "written.json").write_text(json.dumps(state))
    return written


# Bumped whenever _write_with_kafka writes something else (a kept run of another corpus is
# written again).
CORPUS = 2

# The broker's log cleaner wakes up every 100 ms (default 15 s) with a small dedupe buffer; the
# retention task never runs while the broker is up (its first run an hour away), so that
# segments below a log start offset moved by DeleteRecords stay on disk for the readers to skip.
# The segments the cleaner replaced stay as .deleted files (Kafka deletes them a minute later,
# or at its next start): readers must leave them out.
WRITTEN_BROKER = {
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.dedupe.buffer.size": str(4 << 20),
    "log.cleaner.io.buffer.size": str(64 << 10),
    "log.initial.task.delay.ms": "3600000",
    "log.segment.delete.delay.ms": "3600000",
}
# Compacted: small segments (rolled on size: a transaction marker, stamped with the broker's
# clock, would stop segment.ms from rolling on these 2026-01 record timestamps), any dirty byte
# makes the log cleanable, and a tombstone or marker goes at the first clean after the one that
# set its delete horizon (delete.retention.ms=0).
COMPACTED = "compacted"
COMPACTED_CONFIGS = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "index.interval.bytes": "256",
}
COMPACTED_T0 = 1_767_312_000_000  # 2026-01-02
DELETE_RECORDS = "delete-records"
DELETE_RECORDS_AT = {0: 37, 1: -1}  # partition 1: up to its high watermark (all of it)


def _segment_bytes(dist: KafkaDist, size: int) -> dict[str, str]:
    """Segments of ``size`` bytes: Kafka 4.x refuses a segment.bytes below 1 MiB and has
    internal.segment.bytes for that; 3.x takes segment.bytes."""
    major = int(dist.version.split(".")[0])
    return {"internal.segment.bytes" if major >= 4 else "segment.bytes": str(size)}


def _keyed(partition: int, start: int, n: int, keys: int = 7, flush_every: int = 4) -> list[dict]:
    """Records of ``compacted`` number ``start`` to ``start + n``: ``keys`` keys (k0 the empty
    key) in turn, every fifth a tombstone, headers on some, timestamps 150 s apart."""
    out: list[dict] = []
    for i in range(start, start + n):
        k = (i * 3 + partition) % keys
        value = None if i % 5 == 3 else f"v{i} of k{k} p{partition} é ✓ ".encode() * (1 + i % 4)
        rec = {
            "topic": COMPACTED,
            "partition": partition,
            "key": b64(b"" if k == 0 else f"k{k}".encode()),
            "value": b64(value),
            "headers": [["n", b64(str(i).encode())], ["n", None]] if i % 4 == 1 else [],
            "timestamp": COMPACTED_T0 + i * 150_000,
        }
        out.append(rec)
        if (i - start) % flush_every == flush_every - 1:
            out.append({"op": "flush"})
    return out


def _write_with_kafka(kafka_dist: KafkaDist, workdir: Path) -> KafkaWritten:
    broker = start_broker(kafka_dist, workdir, **WRITTEN_BROKER)
    try:
        topics = [f"codec-{codec}" for codec in CODECS]
        topics += ["idempotent", "log-append-time", "txn", "librdkafka", COMPACTED]
        topics += [DELETE_RECORDS]
        for topic in topics:
            configs = {
                "log-append-time": {"message.timestamp.type": "LogAppendTime"},
                COMPACTED: {**COMPACTED_CONFIGS, **_segment_bytes(kafka_dist, 1024)},
                DELETE_RECORDS: _segment_bytes(kafka_dist, 2048),
            }.get(topic, {})
            broker.create_topic(topic, partitions=1 if topic == "log-append-time" else 2, **configs)

        # Kafka's Java producer, one after the other in one JVM (each line {"op": "producer"}
        # starts a new one), then librdkafka's.
        plain = {"enable.idempotence": "false", "acks": "1", "linger.ms": "20"}
        lines: list[dict] = []
        for seed, codec in enumerate(CODECS):
            configs = {**plain, "compression.type": codec, "batch.size": "4096"}
            lines += [{"op": "producer", "configs": configs}]
            lines += _records(f"codec-{codec}", 160, 2, seed)
        idempotent = {"enable.idempotence": "true", "acks": "all", "compression.type": "lz4"}
        lines += [{"op": "producer", "configs": idempotent}, *_records("idempotent", 120, 2, 10)]
        lines += [{"op": "producer", "configs": {**plain, "compression.type": "gzip"}}]
        lines += _records("log-append-time", 60, 1, 11)
        # Transactions: committed, aborted, committed (so the aborted one sits between two
        # committed ones and read_committed has something to drop below the last stable offset),
        # then a plain producer's records on the same partitions.
        txn = {"compression.type": "zstd", "linger.ms": "5"}
        lines += [{"op": "producer", "configs": txn, "transactionalId": "kafkalog-it-txn"}]
        lines += [{"op": "begin"}, *_records("txn", 30, 2, 12), {"op": "commit"}]
        lines += [{"op": "begin"}, *_records("txn", 25, 2, 13), {"op": "abort"}]
        lines += [{"op": "begin"}, *_records("txn", 20, 2, 14), {"op": "commit"}]
        lines += [{"op": "producer", "configs": {"compression.type": "snappy"}}]
        lines += _records("txn", 10, 2, 15)
        # DeleteRecords' topic: small segments (2 KiB), small batches.
        lines += [{"op": "producer", "configs": {**plain, "compression.type": "lz4"}}]
        lines += _records(DELETE_RECORDS, 100, 2, 16, flush_every=6)
        # The compacted topic's first round, both partitions: an idempotent producer, a
        # transactional one (committed, aborted) and a plain one whose records roll the active
        # segment past the transactions (the cleaner stops at the active segment).
        lines += [{"op": "producer", "configs": idempotent}]
        lines += [r for p in (0, 1) for r in _keyed(p, 0, 24)]
        txn = {"compression.type": "gzip", "linger.ms": "5"}
        lines += [{"op": "producer", "configs": txn, "transactionalId": "kafkalog-it-compacted"}]
        lines += [{"op": "begin"}, *_keyed(0, 24, 8), *_keyed(1, 24, 8), {"op": "commit"}]
        lines += [{"op": "begin"}, *_keyed(0, 32, 6), *_keyed(1, 32, 6), {"op": "abort"}]
        lines += [{"op": "producer", "configs": {**plain, "compression.type": "snappy"}}]
        lines += [r for p in (0, 1) for r in _keyed(p, 38, 10)]
        acks = kafka_dist.produce(broker.bootstrap, lines)
        # librdkafka's producer too (its batches are built by another implementation).
        _librdkafka_produce(broker.bootstrap, "librdkafka", 80)

        # Kafka's cleaner cleans both partitions of `compacted` (duplicates, aborted records
        # go; tombstones and markers get their delete horizon), then librdkafka writes a second
        # round to partition 0 (idempotent, a committed and an aborted transaction, plain), and
        # the cleaner cleans it again: the first round's tombstones and the markers of
        # transactions with nothing left go too. Partition 1 stays as the first clean left it.
        cleaned = _wait_for_clean(broker, {0: 0, 1: 0})
        _librdkafka_compacted_round(broker.bootstrap)
        cleaned = _wait_for_clean(broker, {0: cleaned[f"{COMPACTED}-0"] + 1})
        cleans = _cleans(broker)

        # DeleteRecords: partition 0's log start moves into a segment, partition 1's to its end.
        deleted = _delete_records(broker.bootstrap)

        expected = {
            level: kafka_dist.consume(broker.bootstrap, topics, level)
            for level in ("read_uncommitted", "read_committed")
        }
        offsets = _list_offsets(broker.bootstrap, topics)
        _commit_group_offsets(broker.bootstrap, topics)
    except BaseException:
        broker.stop(kill=True)
        raise
    status = broker.stop()
    # No clean after the last one waited for: what Kafka's consumer read is what is on disk.
    assert (_cleans(broker), _cleaner_checkpoint(broker.data_dir)) == (cleans, cleaned), (
        broker.log_tail()
    )
    by_topic: dict[str, list[dict]] = {}
    for ack in acks:
        by_topic.setdefault(ack.get("topic", "(aborted)"), []).append(ack)
    return KafkaWritten(
        kafka_dist, broker.data_dir, topics, expected, status, by_topic, offsets, cleaned, deleted
    )


def _cleaner_checkpoint(data_dir: Path) -> dict[str, int]:
    """``cleaner-offset-checkpoint``'s entries of ``compacted`` ("compacted-P": offset)."""
    try:
        lines = (data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    except FileNotFoundError:
        return {}
    entries = (line.split() for line in lines[2:])
    return {f"{t}-{p}": int(o) for t, p, o in entries if t == COMPACTED}


def _cleans(broker: KafkaBroker) -> int:
    """How many cleans of ``compacted`` the broker's log shows (started or finished)."""
    log = broker.log_file.read_text(errors="replace")
    return len(re.findall(rf"Cleaner \d+: Beginning cleaning of log {COMPACTED}-", log))


def _active_base(partition_dir: Path) -> int:
    return max(int(f.name[:20]) for f in partition_dir.iterdir() if f.name.endswith(".log"))


def _wait_for_clean(broker: KafkaBroker, at_least: dict[int, int]) -> dict[str, int]:
    """Wait until Kafka's log cleaner has cleaned every partition of ``compacted`` named in
    ``at_least`` up to its active segment (its checkpoint at the active segment's base offset,
    and at least the offset given). Returns the checkpoint's entries."""
    deadline = time.monotonic() + 60
    while True:
        checkpoint = _cleaner_checkpoint(broker.data_dir)
        done = True
        for p, offset in at_least.items():
            tp = f"{COMPACTED}-{p}"
            active = _active_base(broker.data_dir / tp)
            done &= active >= offset and checkpoint.get(tp) == active
        if done:
            return checkpoint
        if time.monotonic() > deadline:
            raise AssertionError(
                f"Kafka's log cleaner did not clean {COMPACTED} {sorted(at_least)} in 60 s "
                f"(checkpoint {checkpoint}):\n{broker.log_tail()}"
            )
        time.sleep(0.1)


def _librdkafka_compacted_round(bootstrap: str) -> None:
    """The second round of ``compacted`` partition 0, by librdkafka (keys k0 to k3 only, so
    that the first round's k4 to k6 stay): an idempotent producer, then a transactional one
    (committed, aborted), then a plain one rolling the segment."""
    from confluent_kafka import Producer

    errors: list = []

    def acked(err, msg) -> None:
        if err is not None:
            errors.append((err, msg.partition(), msg.key()))

    def send(producer: Producer, records: list[dict]) -> None:
        for r in records:
            if "op" in r:
                producer.flush(30)
                continue
            producer.produce(
                COMPACTED,
                key=base64.b64decode(r["key"]),
                value=None if r["value"] is None else base64.b64decode(r["value"]),
                partition=r["partition"],
                headers=[(k, None if v is None else base64.b64decode(v)) for k, v in r["headers"]]
                or None,
                timestamp=r["timestamp"],
                on_delivery=acked,
            )
        assert producer.flush(30) == 0 and not errors, errors

    common = {"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0}
    send(Producer({**common, "enable.idempotence": True, "compression.codec": "zstd"}),
         _keyed(0, 48, 20, keys=4))  # fmt: skip
    txn = Producer({**common, "transactional.id": "kafkalog-it-compacted-2"})
    txn.init_transactions(30)
    txn.begin_transaction()
    send(txn, _keyed(0, 68, 6, keys=4))
    txn.commit_transaction(30)
    txn.begin_transaction()
    send(txn, _keyed(0, 74, 5, keys=4))
    txn.abort_transaction(30)
    send(Producer({**common, "acks": 1, "enable.idempotence": False}), _keyed(0, 79, 9, keys=4))


def _delete_records(bootstrap: str) -> dict[str, int]:
    """Kafka's DeleteRecords (librdkafka's admin client) on ``delete-records``. Returns the low
    watermarks ("topic-partition": offset)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    asked = [TopicPartition(DELETE_RECORDS, p, o) for p, o in DELETE_RECORDS_AT.items()]
    futures = admin.delete_records(asked, operation_timeout=30)
    return {
        f"{tp.topic}-{tp.partition}": f.result(timeout=60).low_watermark
        for tp, f in futures.items()
    }


def _list_offsets(bootstrap: str, topics: list[str]) -> dict[str, list[int]]:
    """Kafka's earliest and latest offsets (ListOffsets) of every partition of ``topics``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-it-offsets",
                  "log_level": 0})  # fmt: skip
    try:
        md = c.list_topics(timeout=30)
        out = {}
        for t in topics:
            for p in sorted(md.topics[t].partitions):
                low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=30)
                out[f"{t}-{p}"] = [low, high]
        return out
    finally:
        c.close()


def _librdkafka_produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({
        "bootstrap.servers": bootstrap,
        "compression.codec": "lz4",
        "enable.idempotence": True,
        "linger.ms": 10,
    })  # fmt: skip
    for i in range(n):
        p.produce(
            topic,
            key=None if i % 4 == 0 else f"k{i}".encode(),
            value=None if i % 9 == 0 else f"librdkafka {i}".encode() * (i % 5 + 1),
            partition=i % 2,
            headers=[("h", f"{i}".encode()), ("n", None)] if i % 2 else None,
            timestamp=1_767_225_600_000 + i if i % 3 else 0,
        )
        if i % 30 == 29:
            p.flush(30)
    assert p.flush(30) == 0


def _commit_group_offsets(bootstrap: str, topics: list[str]) -> None:
    """A consumer group's committed offsets, so that __consumer_offsets holds records."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkalog-it", "log_level": 0})
    try:
        c.commit(
            offsets=[TopicPartition(t, p, 5) for t in topics for p in (0,)], asynchronous=False
        )
    finally:
        c.close()
