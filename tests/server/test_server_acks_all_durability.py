"""``--acks-all-durability``: when an acks=all produce is answered.

1. ``fsync`` (the default): the answer comes after the segment's fsync, the records durable.
2. ``page-cache``: the answer comes once the records are appended; no fsync of the segment
   is made for it (Kafka's default flush policy: the OS flushes), so the log's durable offset
   stays where it was.
3. ``page-cache`` with a topic's ``flush.messages=1``: that topic is still flushed before the
   answer, as Kafka's append flushes under that setting.
4. A ``kafkalog serve --acks-all-durability page-cache`` process killed with SIGKILL after its
   acks=all answers keeps every acknowledged record at its offset (the page cache outlives the
   process; only a power loss could take them, as with Kafka's default flush policy).

``os.fsync`` is recorded and then called for real.
"""

from __future__ import annotations

import os
import threading

from kafkalog.protocol import ApiKey
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .kp_records import kp_batch, partition_records
from .server_process import SMALL, ServerProcess
from .wire import WireClient, create_topic


def produce_all(client: WireClient, topic: str, values: list[bytes]) -> dict:
    body = {"acks": -1, "timeout_ms": 30000, "topic_data": [{"name": topic, "partition_data": [
        {"index": 0, "records": kp_batch(values)}]}]}  # fmt: skip
    answer = client.call(ApiKey.PRODUCE, 9, body)
    return answer["responses"][0]["partition_responses"][0]


class RecordedFsync:
    """``os.fsync`` that records the path of every descriptor it syncs."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self._real = os.fsync
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        with self._lock:
            self.paths.append(path)
        return self._real(fd)


def run(tmp_path, monkeypatch, acks_all_fsync: bool, configs: dict[str, str]):
    """Three acks=all produces to a new topic: the answers, the segment's fsyncs, the log."""
    live = tmp_path / "live"
    segment = str(live / "t-0" / f"{0:020d}.log")
    fsyncs = RecordedFsync()
    monkeypatch.setattr(os, "fsync", fsyncs)
    config = ServerConfig([live], port=0, acks_all_fsync=acks_all_fsync, **SMALL)
    server = BackgroundServer(config).start()
    try:
        client = WireClient("127.0.0.1", server.broker.port, timeout=20)
        create_topic(client, "t", configs=configs)
        answers = [produce_all(client, "t", [b"v%d" % i, b"w%d" % i]) for i in range(3)]
        synced = [p for p in fsyncs.paths if p == segment]
        durable = server.broker.get_log("t", 0).durable_offset
        client.close()
    finally:
        server.stop()
    return answers, synced, durable


def test_fsync_default_answers_after_the_segment_fsync(tmp_path, monkeypatch):
    assert ServerConfig([tmp_path]).acks_all_fsync
    answers, synced, durable = run(tmp_path, monkeypatch, True, {})
    assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, 0), (0, 2), (0, 4)]
    assert synced and durable == 6


def test_page_cache_answers_without_an_fsync(tmp_path, monkeypatch):
    answers, synced, durable = run(tmp_path, monkeypatch, False, {})
    assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, 0), (0, 2), (0, 4)]
    assert synced == [] and durable == 0


def test_page_cache_still_flushes_what_flush_messages_asks(tmp_path, monkeypatch):
    answers, synced, durable = run(tmp_path, monkeypatch, False, {"flush.messages": "1"})
    assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, 0), (0, 2), (0, 4)]
    assert synced and durable == 6


def test_page_cache_server_killed_keeps_every_acknowledged_record(tmp_path):
    data = tmp_path / "data"
    acknowledged: list[tuple[int, bytes]] = []
    server = ServerProcess(data, "--acks-all-durability", "page-cache").start()
    try:
        client = WireClient("127.0.0.1", server.port, timeout=20)
        create_topic(client, "t")
        for i in range(20):
            values = [b"value %d.%d" % (i, j) for j in range(5)]
            answer = produce_all(client, "t", values)
            assert answer["error_code"] == 0
            acknowledged += [(answer["base_offset"] + j, v) for j, v in enumerate(values)]
        client.close()
    finally:
        server.kill()
    assert partition_records(data / "t-0") == acknowledged  # read by kafka-python
