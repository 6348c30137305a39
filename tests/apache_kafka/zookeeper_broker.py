"""Apache Kafka 3.9 in ZooKeeper mode, for the legacy message formats (magic 0 and 1).

Kafka 4.x has no ZooKeeper mode and writes magic 2 only; 3.9 is the last release whose
ZooKeeper-mode broker honours a topic's ``message.format.version`` (when
``inter.broker.protocol.version`` is below 3.0) and converts the producer's v2 batches down to
magic 0 (``0.9.0``) or magic 1 (``0.10.x``) on append. This module resolves that release with
``scripts/kafka.sh`` (``KAFKALOG_LEGACY_KAFKA_VERSION``, default :data:`LEGACY_VERSION`), starts
ZooKeeper (``ZooKeeperServerMain``, from the same classpath) and a ZooKeeper-mode broker on free
loopback ports, and kills them at exit. docs/kafka-tests.md has the details.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

LEGACY_VERSION = "3.9.2"
HERE = Path(__file__).resolve().parent
CONFTEST = HERE / "conftest.py"

ZOOKEEPER_LOG4J1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def conftest():
    """The conftest module pytest loaded for tests/apache_kafka (its classes, not a copy)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(CONFTEST):
            return module
    raise AssertionError(f"{CONFTEST} is not loaded")


def legacy_version() -> str:
    return os.environ.get("KAFKALOG_LEGACY_KAFKA_VERSION", LEGACY_VERSION)


def resolve_dist(version: str):
    """``scripts/kafka.sh`` for ``version`` (never installing packages), as conftest's
    ``kafka_dist`` does it: a ``KafkaDist``, or a skip (a failure under CI=true) saying why."""
    cf = conftest()
    try:
        proc = subprocess.run(
            ["bash", str(cf.KAFKA_SH)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            env={**os.environ, "KAFKALOG_KAFKA_INSTALL": "0", "KAFKALOG_KAFKA_VERSION": version},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        cf._unavailable(f"scripts/kafka.sh could not run for Kafka {version}: {exc}")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.strip().splitlines()
        why = [line.split("not available: ", 1)[1] for line in err if "not available: " in line]
        maven = [line[line.index("[ERROR]") :] for line in err if "[ERROR] " in line][:1]
        cf._unavailable(
            "; ".join(why + maven)[:600] or f"scripts/kafka.sh exited {proc.returncode}"
        )
    home = Path(lines[-1])
    java = shutil.which("java")
    if java is None:
        cf._unavailable(f"Kafka {version} is in {home} but there is no java on PATH")
    if not any(home.glob("lib/zookeeper-*.jar")):
        cf._unavailable(f"Kafka {version} in {home} has no ZooKeeper jar (a 3.x release needed)")
    return cf.KafkaDist(home=home, version=home.name.removeprefix("kafka-"), java=java)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ZooKeeper:
    """A standalone ZooKeeper server (``ZooKeeperServerMain``) on a free loopback port."""

    dist: object
    workdir: Path
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "zookeeper.log"

    def start(self, timeout: float = 60) -> ZooKeeper:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        config = self.workdir / "zookeeper.properties"
        config.write_text(
            f"dataDir={self.workdir / 'zk-data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "tickTime=500\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
        )
        log4j = self.workdir / "zookeeper-log4j.properties"
        log4j.write_text(ZOOKEEPER_LOG4J1.format(log=self.log_file))
        cmd = [self.dist.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        cmd += [f"-Dlog4j.configuration={log4j.as_uri()}", "-Dzookeeper.jmx.log4j.disable=true"]
        cmd += ["-cp", str(self.dist.lib / "*"), "org.apache.zookeeper.server.ZooKeeperServerMain"]
        cmd += [str(config)]
        out = open(self.workdir / "zookeeper.stdout", "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        out.close()
        _LIVE_ZK.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"ZooKeeper exited {self.proc.returncode} while starting:\n"
                    + (self.workdir / "zookeeper.stdout").read_text(errors="replace")[-3000:]
                )
            if self._four_letters("ruok") == "imok":
                return self
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"ZooKeeper did not answer on {self.connect} in {timeout} s")

    def _four_letters(self, word: str) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(word.encode())
                return s.recv(64).decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> int | None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            _LIVE_ZK.discard(self)
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        _LIVE_ZK.discard(self)
        return proc.returncode

    def __hash__(self) -> int:
        return id(self)


_LIVE_ZK: set[ZooKeeper] = set()


@atexit.register
def _kill_leftover_zookeepers() -> None:
    for zk in list(_LIVE_ZK):
        with contextlib.suppress(Exception):
            zk.proc.kill()
            zk.proc.wait(timeout=10)


def zookeeper_broker(dist, workdir: Path, zookeeper: ZooKeeper, **configs: str):
    """A ZooKeeper-mode broker (``broker.id=1``) of conftest's ``KafkaBroker`` kind (same
    ``bootstrap``, ``data_dir``, ``create_topic``, ``stop``; killed at exit), with
    ``inter.broker.protocol.version=2.8`` unless ``configs`` say otherwise, so that topics'
    ``message.format.version`` is honoured. ``start()`` starts it (there is nothing to format)."""
    base = conftest().KafkaBroker

    class ZooKeeperBroker(base):
        def write_config(self, **_) -> Path:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.port = conftest()._free_port()
            props = {
                "broker.id": "1",
                "zookeeper.connect": f"{zookeeper.connect}/kafka",
                "zookeeper.session.timeout.ms": "18000",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "log.dirs": str(self.data_dir),
                "inter.broker.protocol.version": "2.8",
                "num.partitions": "1",
                "log.retention.ms": "-1",
                "auto.create.topics.enable": "false",
                "offsets.topic.replication.factor": "1",
                "offsets.topic.num.partitions": "2",
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1",
                "transaction.state.log.num.partitions": "2",
                "group.initial.rebalance.delay.ms": "0",
                "num.network.threads": "2",
                "num.io.threads": "2",
                "num.recovery.threads.per.data.dir": "1",
                "background.threads": "2",
                **self.configs,
            }
            config = self.workdir / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            cf = conftest()
            (self.workdir / "log4j2.properties").write_text(
                cf.BROKER_LOG4J2.format(log=self.log_file)
            )
            (self.workdir / "log4j.properties").write_text(
                cf.BROKER_LOG4J1.format(log=self.log_file)
            )
            return config

        def start(self, timeout: float = 120):
            self.write_config()
            return self._launch(timeout)

    return ZooKeeperBroker(dist, workdir, configs=dict(configs))
