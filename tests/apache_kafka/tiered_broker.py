"""A real broker with tiered storage (KIP-405) on Kafka's own LocalTieredStorage.

LocalTieredStorage, the RemoteStorageManager Kafka's tiered storage tests run against, ships in
kafka-storage's test jar; ``scripts/kafka.sh`` fetches that jar into
``~/.cache/kafkalog/kafka-VERSION/tiered-storage/`` when Maven Central has it for the version
(4.3.1 and 3.9.2 do, 4.4.0 and 4.2.2 do not; ``tiered-storage.missing`` says so). The broker runs
the session's Kafka when its test jar exists, else :data:`FALLBACK_VERSION`. Remote log metadata
stays Kafka's default, TopicBasedRemoteLogMetadataManager (the ``__remote_log_metadata`` topic).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
FALLBACK_VERSION = "4.3.1"
CONFTEST = Path(__file__).with_name("conftest.py")

LEVELS = ("read_uncommitted", "read_committed")
PLAIN, ZSTD, TXN = "tiered-plain", "tiered-zstd", "tiered-txn"
PARTITIONS = [(PLAIN, 0), (PLAIN, 1), (ZSTD, 0), (TXN, 0)]
DELETED = (PLAIN, 1, 37)  # DeleteRecords moves this log start into a remote segment


@dataclass
class TieredRun:
    data_dir: Path
    remote_dir: Path
    expected: dict[str, list[dict]]
    compacted_refused: str
    version: str


def conftest():
    """The conftest module pytest loaded for this directory (its classes, not a second copy)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(CONFTEST):
            return module
    raise AssertionError(f"{CONFTEST} is not loaded")


def tiered_jar(home: Path) -> Path | None:
    jars = sorted((home / "tiered-storage").glob("kafka-storage-*-test.jar"))
    return jars[0] if jars else None


def resolve(version: str) -> Path:
    """``scripts/kafka.sh`` for ``version``: its cache directory (the test skips without)."""
    ct = conftest()
    env = {**os.environ, "KAFKALOG_KAFKA_INSTALL": "0", "KAFKALOG_KAFKA_VERSION": version}
    proc = subprocess.run(
        ["bash", str(ct.KAFKA_SH)], capture_output=True, text=True, timeout=1800, env=env
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        ct._unavailable(f"scripts/kafka.sh for Kafka {version}: {proc.stderr.strip()[-600:]}")
    return Path(lines[-1])


def tiered_dist(kafka_dist):
    """A KafkaDist whose classpath also holds kafka-storage's test jar (LocalTieredStorage):
    the session's version when it publishes that jar, else :data:`FALLBACK_VERSION`."""
    ct = conftest()
    home = kafka_dist.home
    if tiered_jar(home) is None:
        home = resolve(FALLBACK_VERSION)
    jar = tiered_jar(home)
    if jar is None:
        missing = home / "tiered-storage.missing"
        why = missing.read_text().strip() if missing.is_file() else "scripts/kafka.sh found none"
        ct._unavailable(f"no LocalTieredStorage for Kafka {home.name}: {why}")

    class TieredDist(ct.KafkaDist):
        @cached_property
        def lib(self) -> Path:
            # lib/ with the test jar beside it: kafka.Kafka and the tools take `lib/*`.
            merged = self.home / "tiered-storage" / "lib"
            merged.mkdir(exist_ok=True)
            for src in [*(self.home / "lib").glob("*.jar"), jar]:
                link = merged / src.name
                if not link.exists():
                    with contextlib.suppress(FileExistsError):  # another session made it
                        link.symlink_to(src)
            return merged

    return TieredDist(home=home, version=home.name.removeprefix("kafka-"), java=kafka_dist.java)


def broker_configs(remote_dir: Path) -> dict[str, str]:
    """Tiered storage on, LocalTieredStorage in ``remote_dir``, the remote log manager and the
    retention task every half second (their defaults: 30 s and 5 min)."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(remote_dir),
        "rsm.config.delete.on.close": "false",
        "rsm.config.delete.enable": "true",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "500",
        "log.initial.task.delay.ms": "500",
        "log.segment.delete.delay.ms": "0",
    }


@dataclass
class PartitionState:
    """What the files show of one partition: local segment bases, remote segment start offsets."""

    local: list[int]
    remote: list[int]

    def tiered(self) -> bool:
        """Every rolled local segment copied, some deleted locally, and one still in both."""
        if len(self.local) < 2 or not self.remote or self.remote[0] != 0:
            return False
        rolled = self.local[:-1]
        return self.local[0] > 0 and all(base in self.remote for base in rolled)


def partition_state(data_dir: Path, remote_dir: Path, topic: str, partition: int) -> PartitionState:
    local_dir = data_dir / f"{topic}-{partition}"
    local = sorted(int(f.name[:20]) for f in local_dir.glob("*.log") if f.name[:20].isdigit())
    remote: set[int] = set()
    for d in (remote_dir / "kafka-tiered-storage").glob(f"{topic}-{partition}-*"):
        if d.name[:-23] == f"{topic}-{partition}":  # then "-" and a 22-character topic id
            remote |= {int(f.name[:20]) for f in d.glob("*.log") if f.name[:20].isdigit()}
    return PartitionState(local, sorted(remote))


def wait_tiered(broker, remote_dir: Path, partitions: list[tuple[str, int]], timeout=90) -> None:
    """Wait until every partition has segments only remote, segments in both, and its active one."""
    deadline = time.monotonic() + timeout
    while True:
        states = {tp: partition_state(broker.data_dir, remote_dir, *tp) for tp in partitions}
        if all(s.tiered() for s in states.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not tiered after {timeout} s: {states}\n{broker.log_tail()}")
        time.sleep(0.3)


def delete_records(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """Kafka's DeleteRecords (librdkafka's admin client): the partition's new log start."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], operation_timeout=30)
    return next(iter(futures.values())).result(timeout=60).low_watermark


def wait_remote_deleted_below(broker, remote_dir: Path, topic: str, partition: int, offset: int,
                              timeout: float = 60) -> None:  # fmt: skip
    """Wait until the remote log manager has deleted the remote segments wholly below
    ``offset`` (a log start moved there), keeping the one that holds it."""
    deadline = time.monotonic() + timeout
    while True:
        remote = partition_state(broker.data_dir, remote_dir, topic, partition).remote
        if remote and remote[0] <= offset and (len(remote) == 1 or remote[1] > offset):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"remote segments of {topic}-{partition}: {remote}")
        time.sleep(0.3)


def run(kafka_dist, tmp_path_factory) -> TieredRun:
    """The broker run both tiered modules read (the session's ``tiered`` fixture): three topics
    whose old segments went to LocalTieredStorage, a DeleteRecords into a remote segment, and
    what Kafka's consumer read at both isolation levels."""
    import pytest

    ct = conftest()
    dist = tiered_dist(kafka_dist)
    workdir = tmp_path_factory.mktemp("kafka-tiered")
    remote_dir = workdir / "remote"
    broker = ct.start_broker(dist, workdir / "broker", **broker_configs(remote_dir))
    try:
        major = int(dist.version.split(".")[0])
        segment = {"internal.segment.bytes" if major >= 4 else "segment.bytes": "4096"}
        topic = {**segment, "remote.storage.enable": "true", "local.retention.bytes": "8192"}
        broker.create_topic(PLAIN, 2, **topic)
        broker.create_topic(ZSTD, 1, **topic)
        broker.create_topic(TXN, 1, **topic)
        # Kafka refuses tiered storage for compacted topics.
        with pytest.raises(Exception) as refused:
            broker.create_topic("tiered-compacted", 1, **topic, **{"cleanup.policy": "compact"})

        plain = {"enable.idempotence": "false", "acks": "1", "linger.ms": "20"}
        lines = [{"op": "producer", "configs": {**plain, "batch.size": "2048"}}]
        lines += ct._records(PLAIN, 300, 2, 20, flush_every=10)
        idempotent = {"enable.idempotence": "true", "acks": "all", "compression.type": "zstd"}
        lines += [{"op": "producer", "configs": idempotent}]
        lines += ct._records(ZSTD, 400, 1, 21, flush_every=10)
        txn = {"compression.type": "gzip", "linger.ms": "5"}
        lines += [{"op": "producer", "configs": txn, "transactionalId": "kafkalog-it-tiered"}]
        lines += [{"op": "begin"}, *ct._records(TXN, 40, 1, 22, 10), {"op": "commit"}]
        lines += [{"op": "begin"}, *ct._records(TXN, 30, 1, 23, 10), {"op": "abort"}]
        lines += [{"op": "begin"}, *ct._records(TXN, 40, 1, 24, 10), {"op": "commit"}]
        lines += [{"op": "producer", "configs": {**plain, "compression.type": "snappy"}}]
        lines += ct._records(TXN, 200, 1, 25, 10)
        dist.produce(broker.bootstrap, lines)

        wait_tiered(broker, remote_dir, PARTITIONS)
        topic, p, offset = DELETED
        assert delete_records(broker.bootstrap, topic, p, offset) == offset
        wait_remote_deleted_below(broker, remote_dir, topic, p, offset)
        topics = [PLAIN, ZSTD, TXN]
        expected = {level: dist.consume(broker.bootstrap, topics, level) for level in LEVELS}
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    return TieredRun(broker.data_dir, remote_dir, expected, str(refused.value), dist.version)
