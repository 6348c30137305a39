"""Spark processes for the multi-process tests: a standalone cluster (a master and workers started
from the installed pyspark distribution) and a Spark Connect server, each in its own process
group on loopback, stopped with its whole group; and kafka-python's decoding of a data directory,
the independent truth the tests compare against.

The commands are the ones docs/spark.md ("Running on a cluster") gives."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def spark_home() -> Path:
    """The installed pyspark distribution (its ``bin/``, ``sbin/`` and ``jars/``); skips the
    test, saying why, without pyspark or without Java."""
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install "
                                  "'kafkalog[spark]')")  # fmt: skip
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Java 17+ is not on PATH (nor JAVA_HOME set): Spark cannot start")
    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# small JVMs for a small shared machine: the serial collector and the quick (C1) compiler only
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def spark_env(home: Path, log_dir: Path) -> dict[str, str]:
    """The environment of every Spark process started here: loopback only, Python workers run by
    this interpreter (the one kafkalog is installed in), small daemons."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(log_dir),
        SPARK_PID_DIR=str(log_dir),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYARROW_IGNORE_TIMEZONE="1",
        # the master's REST submission server would take the fixed port 6066
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


@dataclass
class Process:
    """One Spark process, leader of its own process group (a JVM started by ``spark-class``,
    which execs Java, and whatever it starts: executors, Python workers)."""

    name: str
    popen: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, name: str, args: list[str], env: dict, log: Path, cwd=None) -> Process:
        with open(log, "wb") as out:
            popen = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                     stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        return cls(name, popen, log)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.popen.returncode}; its log ends:\n{self.tail()}"
            )

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the whole group, SIGKILL to what is left after ``grace`` seconds."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _group_alive(self.pid):
                time.sleep(0.1)
            if not _group_alive(self.pid):
                break
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` is left that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, _ppid, group = stat[stat.rindex(")") + 2 :].split()[:3]
            if int(group) == pgid and state != "Z":
                return True
    return False


def _wait(what: str, check, processes: list[Process], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for p in processes:
            p.check_alive()
        if check():
            return
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name} ({p.log}):\n{p.tail()}" for p in processes)
            raise TimeoutError(f"{what} not within {timeout:.0f} s\n{logs}")
        time.sleep(0.25)


@dataclass
class Cluster:
    """A running standalone cluster: ``url`` is the master's ``spark://`` URL."""

    url: str
    ui: str
    master: Process
    workers: list[Process]
    work_dirs: list[Path]
    env: dict[str, str] = field(repr=False)
    home: Path = field(repr=False)

    def state(self) -> dict:
        """The master's JSON status page (/json/): workers, cores, applications."""
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as response:
            return json.load(response)


@contextmanager
def standalone_cluster(home: Path, base: Path, *, workers: int = 2, cores: int = 1,
                       memory: str = "512m", timeout: float = 60.0):  # fmt: skip
    """A master and ``workers`` workers on 127.0.0.1, each worker offering ``cores`` cores and
    ``memory``; yields a :class:`Cluster` once every worker has registered with the master, and
    stops every process group on exit, whatever happened."""
    base.mkdir(parents=True, exist_ok=True)
    env = spark_env(home, base)
    port, ui_port = free_port(), free_port()
    spark_class = str(home / "bin" / "spark-class")
    url, ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    started: list[Process] = []
    try:
        master = Process.start("master", [
            spark_class, "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port),
        ], env, base / "master.log")  # fmt: skip
        started.append(master)

        def master_alive() -> bool:
            try:
                with urllib.request.urlopen(f"{ui}/json/", timeout=2) as response:
                    return json.load(response).get("status") == "ALIVE"
            except OSError:
                return False

        _wait("the master at " + url, master_alive, started, timeout)
        work_dirs = []
        for n in range(1, workers + 1):
            work = base / f"worker-{n}"
            work.mkdir(exist_ok=True)
            work_dirs.append(work)
            started.append(Process.start(f"worker-{n}", [
                spark_class, "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                "--webui-port", "0", "--work-dir", str(work), url,
            ], env, base / f"worker-{n}.log"))  # fmt: skip
        cluster = Cluster(url, ui, master, started[1:], work_dirs, env, home)

        def all_registered() -> bool:
            try:
                return cluster.state()["aliveworkers"] == workers
            except OSError:
                return False

        _wait(f"{workers} workers registered with {url}", all_registered, started, timeout)
        yield cluster
    finally:
        for process in reversed(started):
            process.stop()


@dataclass
class ConnectServer:
    """A running Spark Connect server: ``url`` is its ``sc://`` address."""

    url: str
    process: Process


@contextmanager
def connect_server(home: Path, base: Path, *, master: str = "local[2]", timeout: float = 60.0):
    """pyspark's own Spark Connect server (``SparkConnectServer``, from the spark-connect jar in
    pyspark/jars) run in the foreground by ``spark-submit``, listening on 127.0.0.1 only."""
    base.mkdir(parents=True, exist_ok=True)
    env = spark_env(home, base)
    # spark-submit sizes the Connect server's heap (the driver's) by SPARK_DAEMON_MEMORY, not
    # by --driver-memory; Spark's default (1g) is what a driver needs
    env.pop("SPARK_DAEMON_MEMORY", None)
    port = free_port()
    process = Process.start("Spark Connect server", [
        str(home / "bin" / "spark-submit"),
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", "kafkalog-connect", "--master", master,
        "--driver-java-options", JVM_OPTIONS,
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.shuffle.partitions=4",
    ], env, base / "connect-server.log")  # fmt: skip
    try:
        started = lambda: "Spark Connect server started" in process.tail(400)  # noqa: E731
        _wait(f"the Spark Connect server on port {port}", started, [process], timeout)
        yield ConnectServer(f"sc://127.0.0.1:{port}", process)
    finally:
        process.stop()


def kafka_python_partitions(root: Path) -> dict[tuple[str, int], list[tuple]]:
    """Every record of every partition of the data directory ``root``, decoded with kafka-python
    (an independent decoder): {(topic, partition): [(offset, key, value, headers)]}, control
    batches left out, every batch's CRC checked."""
    from kafka.record.memory_records import MemoryRecords

    out = {}
    for part in sorted(p for p in root.iterdir() if p.is_dir() and "-" in p.name):
        topic, _, partition = part.name.rpartition("-")
        if not partition.isdigit():
            continue
        rows = []
        for log in sorted(part.glob("*.log")):
            records = MemoryRecords(log.read_bytes())
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc(), f"{log}: a batch fails its CRC"
                if getattr(batch, "is_control_batch", False):
                    continue
                rows.extend((r.offset, r.key, r.value, tuple(r.headers)) for r in batch)
        out[(topic, int(partition))] = rows
    return out


def process_tree_pids() -> set[int]:
    """This process's descendants (to check a fixture left none behind)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found
