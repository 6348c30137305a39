"""What acks=all promises, checked two ways.

1. A real server process is killed with SIGKILL in the middle of a librdkafka produce load with
   acks=all; after a restart (which recovers the logs) every acknowledged record is at the offset
   it was acknowledged with. A graceful stop then writes ``.kafka_cleanshutdown`` and
   ``kafkalog verify`` finds nothing wrong with the data directory.
2. Power loss, with the log layer's simulated disk (tests/log/test_crash.py): the server runs
   in-process with every write and fsync recorded; after acknowledged acks=all produces the power
   goes, the disk is rebuilt as a power cut may leave it (only fsynced bytes are sure), recovered,
   and every acknowledged record must be there, read back with kafka-python's decoder.
"""

from __future__ import annotations

import importlib
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkalog.log.datadir.manager import LogManager
from kafkalog.protocol import ApiKey
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .kp_records import kp_batch, read_partition
from .server_process import SMALL, ServerProcess
from .wire import WireClient

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

pytestmark = pytest.mark.slow


def test_sigkill_under_acks_all_load_loses_no_acknowledged_record(tmp_path: Path):
    acked: dict[int, bytes] = {}
    server = ServerProcess(tmp_path, "--num-partitions", "1").start()
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                            "linger.ms": 2, "compression.type": "lz4",
                            "message.timeout.ms": 5000, "retries": 0})  # fmt: skip

    def delivered(err, msg) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()

    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    "load", value=b"record-%08d" % i, partition=0, on_delivery=delivered
                )
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)

    thread = threading.Thread(target=load)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 800 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()
    stop.set()
    thread.join()
    producer.flush(10)  # what was in flight fails now: not acknowledged
    assert len(acked) >= 800

    with ServerProcess(tmp_path, port=server.port) as restarted:
        consumer = kafka.KafkaConsumer(bootstrap_servers=restarted.bootstrap,
                                       consumer_timeout_ms=5000)  # fmt: skip
        tp = kafka.TopicPartition("load", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        end = max(acked) + 1
        read = {}
        for m in consumer:
            read[m.offset] = m.value
            if m.offset + 1 >= end:
                break
        consumer.close()
    assert {o: read.get(o) for o in acked} == acked
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    verify = subprocess.run([sys.executable, "-m", "kafkalog.cli.main", "verify", "--quiet",
                             str(tmp_path)], capture_output=True, text=True)  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _recording_disk():
    """The log layer's simulated disk (tests/log/test_crash.py; tests/log is a package)."""
    module = importlib.import_module("log.test_crash")
    return module.RecordingDisk, module.Crash


@pytest.mark.parametrize("seed", range(4))
def test_acks_all_answers_only_after_the_records_are_durable(tmp_path, monkeypatch, seed):
    RecordingDisk, Crash = _recording_disk()
    rng = random.Random(seed)
    live = tmp_path / "live"
    disk = RecordingDisk(live, budget=10**9)  # the power goes when the test says so
    acked: dict[int, bytes] = {}
    patched = monkeypatch.context().__enter__()
    disk.install(patched)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port)
        # Small preallocated indexes keep the rebuilt disks small (the model rewrites them).
        small = [{"name": "segment.index.bytes", "value": "65536"}]
        topic = {"name": "durable", "num_partitions": 1, "replication_factor": 1, "configs": small}
        client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [topic]})
        for i in range(rng.randint(20, 60)):
            values = [b"r%d-%d" % (i, j) for j in range(rng.randint(1, 5))]
            acks = rng.choice([-1, -1, 1])  # acks=1 answers before any fsync
            body = {"acks": acks, "timeout_ms": 1000, "topic_data": [{"name": "durable",
                    "partition_data": [{"index": 0, "records": kp_batch(values)}]}]}  # fmt: skip
            answer = client.call(ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]
            assert answer["error_code"] == 0
            if acks == -1:
                for j, value in enumerate(values):
                    acked[answer["base_offset"] + j] = value
        with pytest.raises(Crash):
            disk.power_off()
        client.close()
    finally:
        patched.undo()  # the disk as recorded stays as the power left it
        server.stop()
    for cut in range(3):
        after = tmp_path / f"after-{cut}"
        disk.after_power_cut(after, random.Random(seed * 10 + cut))
        LogManager(after, writable=True).close()  # recovery, as the next start does
        found = read_partition(after / "durable-0")
        assert {o: found.get(o) for o in acked} == acked
