"""CreateTopics completes or leaves nothing; DeleteTopics waits for a creation under way; fetch
answers beyond their descriptor allowance are sent from copies."""

from __future__ import annotations

import errno
import json
import time

import pytest

from kafkalog.protocol import ApiKey, decode_response, encode_request
from kafkalog.server.apis import topics as topics_module
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .server_process import SMALL
from .wire import WireClient

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecords as KpRecords  # noqa: E402
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402


@pytest.fixture
def server(tmp_path):
    with BackgroundServer(ServerConfig([tmp_path / "data"], port=0, **SMALL)) as s:
        yield s


@pytest.fixture
def client(server):
    c = WireClient("127.0.0.1", server.broker.port, timeout=60)
    yield c
    c.close()


def create_body(name: str, partitions: int) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
            "timeout_ms": 60_000}  # fmt: skip


def partition_dirs(server, topic: str) -> list[str]:
    data = server.config.data_dirs[0]
    return sorted(p.name for p in data.iterdir() if p.name.startswith(f"{topic}-"))


def test_a_creation_that_fails_midway_leaves_nothing(server, client, monkeypatch):
    real = topics_module._open_partition

    def failing(directory, *args):
        if directory.name == "half-300":
            directory.mkdir()
            (directory / "00000000000000000000.log").write_bytes(b"")  # a partial partition
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(directory, *args)

    monkeypatch.setattr(topics_module, "_open_partition", failing)
    answer = client.call(ApiKey.CREATE_TOPICS, 7, create_body("half", 400))["topics"][0]
    assert answer["error_code"] == 56  # KAFKA_STORAGE_ERROR
    assert "No space left" in answer["error_message"]
    assert partition_dirs(server, "half") == []
    topics_file = json.loads((server.config.data_dirs[0] / "kafkalog-topics.json").read_text())
    assert "half" not in topics_file["topics"]
    metadata = client.call(ApiKey.METADATA, 12, {"topics": None})
    assert "half" not in [t["name"] for t in metadata["topics"]]
    monkeypatch.setattr(topics_module, "_open_partition", real)
    again = client.call(ApiKey.CREATE_TOPICS, 7, create_body("half", 400))["topics"][0]
    assert again["error_code"] == 0
    assert len(partition_dirs(server, "half")) == 400


def test_delete_topics_waits_for_a_creation_under_way(server, client, monkeypatch):
    real = topics_module._open_partition

    def slow(directory, *args):
        time.sleep(0.002)
        return real(directory, *args)

    monkeypatch.setattr(topics_module, "_open_partition", slow)
    creator = WireClient("127.0.0.1", server.broker.port, timeout=60)
    creator.send_raw(encode_request(ApiKey.CREATE_TOPICS, 7, 1, "c", create_body("busy", 600)))
    deadline = time.monotonic() + 30
    while "busy" not in server.broker.creating_topics:  # under way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    deleted = client.call(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "busy"}],
                                                    "timeout_ms": 60_000})  # fmt: skip
    frame = creator.read_frame()
    creator.close()
    assert decode_response(ApiKey.CREATE_TOPICS, 7, frame)[1]["topics"][0]["error_code"] == 0
    assert deleted["responses"][0]["error_code"] == 0
    assert partition_dirs(server, "busy") == []
    assert "busy" not in server.broker.log_manager.topics()


def test_windows_beyond_the_descriptor_allowance_are_sent_from_copies(server, client):
    assert (
        client.call(ApiKey.CREATE_TOPICS, 7, create_body("copied", 3))["topics"][0]["error_code"]
        == 0
    )
    parts = []
    for p in range(3):
        builder = KpBuilder(magic=2, compression_type=0, batch_size=1 << 20)
        builder.append(timestamp=1_700_000_000_000, key=None, value=f"v{p}".encode(), headers=[])
        builder.close()
        parts.append({"index": p, "records": bytes(builder.buffer())})
    client.call(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "copied", "partition_data": parts}]})  # fmt: skip
    server.broker.window_descriptors = 1
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                 {"topic": "copied", "partitions": [
                     {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                     for p in range(3)]}],
             "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    copied = server.broker.stats.copied_windows
    answer = client.call(ApiKey.FETCH, 11, fetch)["responses"][0]["partitions"]
    assert server.broker.stats.copied_windows - copied == 2
    deadline = time.monotonic() + 10
    while server.broker.windows_held:  # the one detached window is closed once sent
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for entry in answer:
        records = KpRecords(bytes(entry["records"]))
        values = [r.value for r in records.next_batch()]
        assert values == [f"v{entry['partition_index']}".encode()]
