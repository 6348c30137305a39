"""acks=all fsyncs off the event loop, grouped per partition (Broker.flush, LogFlusher).

1. Many producers on several partitions at once, each request writing two partitions, against a
   disk whose fsync is slow: every answer has the offsets its records got (each partition's
   answers tile its log from 0, and the records read back from the segments are at the offsets
   acknowledged), and the fsyncs were grouped (fewer flushes than requests).
2. While an fsync hangs, the server still answers: a Metadata request on another connection is
   answered while the acks=all produce waits for its fsync, which runs on a worker thread; the
   produce is answered only once the fsync returns.
3. (slow) A ``kafkalog serve`` process killed with SIGKILL under an acks=all load on 4 partitions
   keeps, after a restart, every acknowledged record at the offset it was acknowledged with.

Only ``os.fsync`` is slowed (in the in-process server), never replaced: the data is still made
durable as before.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from kafkalog.protocol import ApiKey
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .kp_records import kp_batch, read_partition
from .server_process import SMALL, ServerProcess
from .wire import WireClient, create_topic

kafka = pytest.importorskip("kafka")


def produce(client: WireClient, topic: str, batches: dict[int, list[bytes]], acks: int = -1):
    body = {"acks": acks, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": [
        {"index": p, "records": kp_batch(values)} for p, values in batches.items()]}]}  # fmt: skip
    answer = client.call(ApiKey.PRODUCE, 9, body)
    return {p["index"]: p for p in answer["responses"][0]["partition_responses"]}


class SlowFsync:
    """``os.fsync`` that waits ``delay`` seconds (or until ``gate`` opens) for segment ``.log``
    files under ``root``, then does the real fsync; records the threads segment files were
    fsynced on (a roll's producer snapshot is written on the loop and fsynced by the flush the
    roll starts, on the fsync pool: see test_server_loop_fsync)."""

    def __init__(self, root: Path, delay: float = 0.0) -> None:
        self.root = str(root) + os.sep
        self.delay = delay
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.threads: set[str] = set()
        self.log_fsyncs = 0
        self._real = os.fsync
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(self.root):
            with self._lock:
                if path.endswith((".log", ".index", ".timeindex", ".txnindex")):
                    self.threads.add(threading.current_thread().name)  # a segment's file
                if path.endswith(".log"):
                    self.log_fsyncs += 1
            if not path.endswith(".log"):
                return self._real(fd)
            self.entered.set()
            if self.gate is not None:
                assert self.gate.wait(30)
            elif self.delay:
                time.sleep(self.delay)
        return self._real(fd)


def test_concurrent_acks_all_producers_get_their_offsets_and_share_fsyncs(tmp_path, monkeypatch):
    live = tmp_path / "live"
    slow = SlowFsync(live, delay=0.02)
    monkeypatch.setattr(os, "fsync", slow)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    partitions, producers, requests = 4, 12, 12
    answers: list[tuple[int, int, list[bytes]]] = []  # (partition, base offset, values)
    errors: list[str] = []
    lock = threading.Lock()
    try:
        admin = WireClient("127.0.0.1", server.broker.port)
        # Small indexes: rolls (and the rolled segments' whole flushes) happen under the load.
        create_topic(admin, "grouped", partitions,
                     [("segment.index.bytes", "120"), ("index.interval.bytes", "1")])  # fmt: skip
        slow.threads.clear()  # (topic creation fsyncs on threads of its own)

        def producer(n: int) -> None:
            client = WireClient("127.0.0.1", server.broker.port, timeout=60)
            try:
                for i in range(requests):
                    batches = {
                        p: [b"p%d-r%d-%d-%d" % (p, n, i, j) for j in range(1 + (n + i) % 4)]
                        for p in (n % partitions, (n + 1) % partitions)
                    }
                    got = produce(client, "grouped", batches)
                    with lock:
                        for p, values in batches.items():
                            if got[p]["error_code"]:
                                errors.append(f"{p}: {got[p]}")
                            else:
                                answers.append((p, got[p]["base_offset"], values))
            finally:
                client.close()

        threads = [threading.Thread(target=producer, args=(n,)) for n in range(producers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors
        flushers = dict(server.broker._flushers)
        produce_threads = set(slow.threads)  # (the shutdown's flush runs on the loop)
        admin.close()
    finally:
        server.stop()
    assert len(answers) == producers * requests * 2
    # Each partition's answers tile its log from offset 0: no offset given twice, none skipped.
    acked: dict[int, dict[int, bytes]] = defaultdict(dict)
    by_partition = defaultdict(list)
    for p, base, values in answers:
        by_partition[p].append((base, values))
        for j, value in enumerate(values):
            acked[p][base + j] = value
    for got in by_partition.values():
        expected = 0
        for base, values in sorted(got):
            assert base == expected
            expected += len(values)
    for p in range(partitions):
        found = read_partition(live / f"grouped-{p}")
        assert {o: found.get(o) for o in acked[p]} == acked[p]
        assert len(list((live / f"grouped-{p}").glob("*.log"))) > 1  # it rolled
    # Grouped: fewer flushes than the requests that waited for one, on the worker threads only.
    rounds = sum(f.rounds for tp, f in flushers.items() if tp.topic == "grouped")
    assert 0 < rounds < producers * requests * 2
    assert slow.log_fsyncs < producers * requests * 2
    assert produce_threads
    assert all(t.startswith("kafkalog-fsync") for t in produce_threads), produce_threads


def test_the_server_answers_while_an_acks_all_fsync_hangs(tmp_path, monkeypatch):
    live = tmp_path / "live"
    slow = SlowFsync(live)
    monkeypatch.setattr(os, "fsync", slow)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        admin = WireClient("127.0.0.1", server.broker.port, timeout=5)
        create_topic(admin, "hang", 2)
        slow.threads.clear()
        slow.gate = threading.Event()
        slow.entered.clear()
        answer: dict = {}

        def acks_all() -> None:
            client = WireClient("127.0.0.1", server.broker.port, timeout=60)
            answer.update(produce(client, "hang", {0: [b"a", b"b"], 1: [b"c"]}))
            client.close()

        thread = threading.Thread(target=acks_all)
        thread.start()
        assert slow.entered.wait(10), "no fsync started"
        # The fsync hangs on a worker thread; the loop answers other connections meanwhile.
        started = time.monotonic()
        metadata = admin.call(ApiKey.METADATA, 12, {"topics": None})
        assert time.monotonic() - started < 3
        assert {t["name"] for t in metadata["topics"]} >= {"hang"}
        acks_one = produce(admin, "hang", {0: [b"x"]}, acks=1)  # answered from the page cache
        assert acks_one[0]["error_code"] == 0
        time.sleep(0.2)
        assert not answer, "acks=all answered before its fsync returned"
        slow.gate.set()
        thread.join(30)
        assert answer[0]["error_code"] == 0 and answer[1]["error_code"] == 0
        assert answer[1]["base_offset"] == 0
        assert any(t.startswith("kafkalog-fsync") for t in slow.threads)
        assert "kafkalog-server" not in slow.threads  # the loop's thread never fsyncs a log
        admin.close()
    finally:
        if slow.gate is not None:
            slow.gate.set()
        server.stop()


def test_failed_fsync_is_a_storage_error_for_its_waiters_only(tmp_path, monkeypatch):
    """An fsync that fails answers KAFKA_STORAGE_ERROR to the requests that waited for it; the
    next flush of the partition succeeds again (the durable mark did not move)."""
    live = tmp_path / "live"
    real = os.fsync
    failing = {"on": False}

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if failing["on"] and path.startswith(str(live) + os.sep) and path.endswith(".log"):
            raise OSError(5, "Input/output error (injected)")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port)
        create_topic(client, "eio", 1)
        assert produce(client, "eio", {0: [b"ok"]})[0]["error_code"] == 0
        failing["on"] = True
        got = produce(client, "eio", {0: [b"lost?"]})[0]
        assert got["error_code"] == 56  # KAFKA_STORAGE_ERROR
        failing["on"] = False
        again = produce(client, "eio", {0: [b"again"]})[0]
        assert again["error_code"] == 0 and again["base_offset"] == 2
        log = server.broker.get_log("eio", 0)
        assert log.durable_offset == 3
        client.close()
    finally:
        server.stop()


@pytest.mark.slow
def test_sigkill_under_acks_all_load_on_several_partitions(tmp_path: Path):
    ck = pytest.importorskip("confluent_kafka")
    partitions = 4
    acked: dict[tuple[int, int], bytes] = {}
    server = ServerProcess(tmp_path, "--num-partitions", str(partitions)).start()
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                            "linger.ms": 2, "compression.type": "lz4",
                            "message.timeout.ms": 5000, "retries": 0})  # fmt: skip

    def delivered(err, msg) -> None:
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce("load", value=b"record-%08d" % i, partition=i % partitions,
                                 on_delivery=delivered)  # fmt: skip
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)

    thread = threading.Thread(target=load)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()
    stop.set()
    thread.join()
    producer.flush(10)  # what was in flight fails now: not acknowledged
    assert len(acked) >= 2000
    assert {p for p, _ in acked} == set(range(partitions))

    with ServerProcess(tmp_path, port=server.port) as restarted:
        consumer = kafka.KafkaConsumer(bootstrap_servers=restarted.bootstrap,
                                       consumer_timeout_ms=5000)  # fmt: skip
        tps = [kafka.TopicPartition("load", p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        read = {(m.partition, m.offset): m.value for m in consumer}  # to 5 s without records
        consumer.close()
    assert {k: read.get(k) for k in acked} == acked
    assert (tmp_path / ".kafka_cleanshutdown").exists()
