"""No fsync on the event loop for a log cleaner's swap or a segment roll.

1. The cleaner's swap: while the directory fsync that orders its renames (``.cleaned`` ->
   ``.swap`` before the old segments -> ``.deleted``) is held, the server answers Metadata and
   takes a produce to the very partition being swapped; the fsync runs on the cleaner's thread,
   and once released the clean completes (no ``.swap``/``.cleaned`` left, checkpoint moved).
2. A roll: the producer snapshot it takes is fsynced by the flush the roll starts, on the fsync
   pool. While that fsync is held, the produce that rolled has been answered and Metadata is
   answered; the recovery point stays below the new segment until the snapshot is durable, and
   moves to it once released (Kafka's flush-log task order).
3. ``flush.messages``: a topic that asks for a flush after every record gets it on the fsync
   pool, not in the append on the loop. While the segment's fsync is held, Metadata is
   answered and the acks=1 produce that called for the flush is not (Kafka flushes in the
   append, before the answer); it is once the fsync ends, its record durable.
4. A new partition's first produce: the leader-epoch checkpoint was written when the topic
   was created (epoch 0 from offset 0, as Kafka's new leader assigns it), on the creating
   workers, so no produce to it fsyncs on the loop.

``os.fsync`` is held by an Event and then called for real: the data is made durable as before.
The assertions are on order (answered while held), never on durations.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kafkalog.protocol import ApiKey
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .server_process import SMALL
from .wire import WireClient, create_topic

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402

CLEANER = {"log.cleaner.backoff.ms": "50", "log.cleaner.min.cleanable.ratio": "0.01",
           "log.initial.task.delay.ms": "0"}  # fmt: skip
LOOP_THREAD = "kafkalog-server"


def keyed_batch(records: list[tuple[bytes, bytes]]) -> bytes:
    builder = KpBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(timestamp=1_700_000_000_000 + i, key=key, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce(client: WireClient, topic: str, records: list[tuple[bytes, bytes]]) -> dict:
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": [
        {"index": 0, "records": keyed_batch(records)}]}]}  # fmt: skip
    answer = client.call(ApiKey.PRODUCE, 9, body)
    return answer["responses"][0]["partition_responses"][0]


def wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class HeldFsync:
    """``os.fsync`` that, the first time ``matches(path)`` holds, waits for :attr:`gate` before
    fsyncing for real; records the thread it was called on."""

    def __init__(self, matches) -> None:
        self.matches = matches
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.thread: str | None = None
        self._real = os.fsync
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        with self._lock:
            hold = not self.entered.is_set() and self.matches(path)
            if hold:
                self.thread = threading.current_thread().name
                self.entered.set()
        if hold:
            assert self.gate.wait(60)
        return self._real(fd)


def test_server_answers_while_a_cleaner_swap_fsyncs(tmp_path, monkeypatch):
    live = tmp_path / "live"
    partition = live / "table-0"
    # The swap's first directory fsync: the one after .cleaned -> .swap.
    held = HeldFsync(lambda path: path == str(partition) and any(partition.glob("*.swap")))
    monkeypatch.setattr(os, "fsync", held)
    server = BackgroundServer(ServerConfig([live], port=0, extra=CLEANER, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port, timeout=20)
        create_topic(client, "table", configs={"cleanup.policy": "compact",
                                       "internal.segment.bytes": "400"})  # fmt: skip
        for i in range(40):
            assert produce(client, "table", [(b"k%d" % (i % 4), b"v%03d" % i)])["error_code"] == 0
        assert held.entered.wait(30), "no swap started"
        # Held: the old segments are still in place, the new ones named .swap.
        assert any(partition.glob("*.swap"))
        metadata = client.call(ApiKey.METADATA, 12, {"topics": None})
        assert {t["name"] for t in metadata["topics"]} >= {"table"}
        got = produce(client, "table", [(b"k0", b"during the swap")])
        assert got["error_code"] == 0 and got["base_offset"] == 40
        assert not held.gate.is_set()  # both answered while the fsync was held
        assert held.thread != LOOP_THREAD
        held.gate.set()
        wait_for(lambda: server.broker.log_cleaner.cleans >= 1)
        # The record produced during the swap makes the log dirty again: the cleaner may be in
        # a next clean's swap at this instant, so wait for one without leftovers.
        wait_for(
            lambda: not list(partition.glob("*.swap")) and not list(partition.glob("*.cleaned"))
        )
        assert (live / "cleaner-offset-checkpoint").exists()
        client.close()
    finally:
        held.gate.set()
        server.stop()


def test_server_answers_while_a_roll_snapshot_fsyncs(tmp_path, monkeypatch):
    live = tmp_path / "live"
    partition = live / "rolling-0"
    prefix = str(partition) + os.sep
    held = HeldFsync(lambda path: path.startswith(prefix) and ".snapshot" in path)
    monkeypatch.setattr(os, "fsync", held)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port, timeout=20)
        create_topic(client, "rolling", configs={"internal.segment.bytes": "400"})
        rolled_log = server.broker.get_log("rolling", 0)
        # A roll takes a snapshot even of an empty producer map.
        i = 0
        while len(rolled_log.segments) < 2:
            # Answered though the batch rolls the log: no fsync on the loop.
            assert produce(client, "rolling", [(b"k", b"value %03d" % i)])["error_code"] == 0
            i += 1
            assert i < 100, "no roll"
        new_base = rolled_log.segments[-1].base_offset
        assert held.entered.wait(30), "the roll's snapshot was never fsynced"
        assert held.thread is not None and held.thread.startswith("kafkalog-fsync")
        metadata = client.call(ApiKey.METADATA, 12, {"topics": None})
        assert {t["name"] for t in metadata["topics"]} >= {"rolling"}
        assert not held.gate.is_set()  # answered while the snapshot's fsync was held
        assert (Path(partition) / f"{new_base:020d}.snapshot").exists()
        assert rolled_log.recovery_point < new_base  # not past a snapshot not yet durable
        held.gate.set()
        wait_for(lambda: rolled_log.recovery_point >= new_base)
        assert not rolled_log.unsynced_snapshots
        client.close()
    finally:
        held.gate.set()
        server.stop()


def test_flush_messages_flushes_on_the_fsync_pool_before_the_answer(tmp_path, monkeypatch):
    live = tmp_path / "live"
    segment = str(live / "flushed-0" / f"{0:020d}.log")
    held = HeldFsync(lambda path: path == segment)
    monkeypatch.setattr(os, "fsync", held)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port, timeout=20)
        create_topic(client, "flushed", configs={"flush.messages": "1"})
        answers: list[dict] = []
        producer = WireClient("127.0.0.1", server.broker.port, timeout=30)
        sending = threading.Thread(
            target=lambda: answers.append(produce(producer, "flushed", [(b"k", b"v")]))
        )
        sending.start()
        assert held.entered.wait(30), "flush.messages=1 made no flush"
        assert held.thread is not None and held.thread.startswith("kafkalog-fsync")
        metadata = client.call(ApiKey.METADATA, 12, {"topics": None})
        assert {t["name"] for t in metadata["topics"]} >= {"flushed"}
        assert not answers  # the produce waits for its flush, as in Kafka's append
        held.gate.set()
        sending.join(30)
        assert answers and answers[0]["error_code"] == 0
        assert server.broker.get_log("flushed", 0).durable_offset >= 1
        producer.close()
        client.close()
    finally:
        held.gate.set()
        server.stop()


def test_first_produce_to_a_new_partition_fsyncs_nothing_on_the_loop(tmp_path, monkeypatch):
    live = tmp_path / "live"
    calls: list[tuple[str, str]] = []
    real = os.fsync

    def recording(fd: int) -> None:
        calls.append((threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    server = BackgroundServer(ServerConfig([live], port=0, **SMALL)).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port, timeout=20)
        create_topic(client, "fresh")
        checkpoint = live / "fresh-0" / "leader-epoch-checkpoint"
        assert checkpoint.read_text().split("\n")[:3] == ["0", "1", "0 0"]
        calls.clear()
        for i in range(3):
            assert produce(client, "fresh", [(b"k", b"v%d" % i)])["error_code"] == 0
        assert not [c for c in calls if c[0] == LOOP_THREAD], calls
        client.close()
    finally:
        server.stop()
