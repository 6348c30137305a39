"""10,000 partitions (CreateTopics' maximum) within an open-files limit of 1024.

Every segment and index file is opened on demand within a budget (kafkalog.log.segment.file_cache),
so the number of partitions no longer decides the descriptors held: the server creates them without
running out, serves a producer of another topic meanwhile (creation yields to the event loop),
restarts (its startup check counts the budget, not the segments) and answers ListOffsets and Fetch
for every partition, the fetch answer's windows beyond its descriptor allowance sent from copies.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest

from kafkalog.protocol import ApiKey

from .server_process import ServerProcess
from .wire import WireClient

kafka = pytest.importorskip("kafka")
admin = pytest.importorskip("confluent_kafka.admin")
from kafka.record import MemoryRecords as KpRecords  # noqa: E402
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402

PARTITIONS = 10_000
OPEN_FILES = 1024
SAMPLE = range(0, PARTITIONS, 50)  # 200 partitions get a record: more than the window allowance
MAX_ADDED_LATENCY_S = 1.0


def batch(value: bytes) -> bytes:
    builder = KpBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce(client: WireClient, topic: str, partitions, acks: int = 1) -> list[dict]:
    body = {"acks": acks, "timeout_ms": 30_000, "topic_data": [{"name": topic, "partition_data": [
        {"index": p, "records": batch(f"{topic}-{p}".encode())} for p in partitions]}]}  # fmt: skip
    return client.call(ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"]


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class LatencyProbe(threading.Thread):
    """Produce round trips to another topic, one after the other, timed."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = WireClient("127.0.0.1", port, timeout=60)
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                start = time.monotonic()
                answer = produce(self.client, "probe", [0])[0]
                assert answer["error_code"] == 0, answer
                self.samples.append((start, time.monotonic() - start))
                time.sleep(0.005)
        except BaseException as e:  # reported by the test
            self.errors.append(e)
        finally:
            self.client.close()

    def between(self, start: float, end: float) -> list[float]:
        return [s for t, s in self.samples if start <= t <= end or start <= t + s <= end]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_ten_thousand_partitions_within_1024_open_files(tmp_path):
    data = tmp_path / "data"
    server = ServerProcess(data, open_files=OPEN_FILES).start(timeout=60)
    try:
        pid = server.proc.pid
        client = WireClient("127.0.0.1", server.port, timeout=120)
        probe_topic = {"name": "probe", "num_partitions": 1, "replication_factor": 1}
        answer = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [probe_topic]})
        assert answer["topics"][0]["error_code"] == 0
        probe = LatencyProbe(server.port)
        probe.start()
        time.sleep(1.0)  # the latency before
        admin_client = admin.AdminClient(
            {"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 110_000}
        )
        created_at = time.monotonic()
        futures = admin_client.create_topics(
            [admin.NewTopic("wide", PARTITIONS, 1)], request_timeout=110, operation_timeout=110
        )
        peak = 0
        while not futures["wide"].done():
            peak = max(peak, open_descriptors(pid))
            time.sleep(0.2)
        futures["wide"].result()  # raises on an error code
        del futures, admin_client  # destroyed: no reconnecting once the server stops
        created_in = time.monotonic() - created_at
        time.sleep(0.3)
        probe.stop.set()
        probe.join(30)
        assert probe.errors == []
        before = probe.between(0, created_at)
        during = probe.between(created_at, created_at + created_in)
        assert len(before) >= 5 and len(during) >= 5, (len(before), len(during))
        added = max(during) - statistics.median(before)
        assert added < MAX_ADDED_LATENCY_S, (
            f"produce latency grew by {added:.3f} s while creating {PARTITIONS} partitions "
            f"(took {created_in:.1f} s; median before {statistics.median(before) * 1000:.1f} ms)"
        )
        print(
            f"created {PARTITIONS} partitions in {created_in:.1f} s; produce round trips: "
            f"median {statistics.median(before) * 1000:.1f} ms before, max "
            f"{max(during) * 1000:.1f} ms during ({len(during)}, p99 "
            f"{sorted(during)[int(len(during) * 0.99)] * 1000:.1f} ms); peak descriptors {peak}"
        )
        assert peak < OPEN_FILES

        metadata = client.call(ApiKey.METADATA, 12, {"topics": [{"name": "wide"}]})
        assert len(metadata["topics"][0]["partitions"]) == PARTITIONS
        answers = produce(client, "wide", SAMPLE, acks=-1)
        assert [a["error_code"] for a in answers] == [0] * len(SAMPLE)
        client.close()
        assert server.stop(timeout=120) == 0
        assert "Too many open files" not in server.log()

        # The restart: 10,000 partitions (30,000 segment files) within 1024 descriptors.
        restarted_at = time.monotonic()
        server = ServerProcess(data, open_files=OPEN_FILES).start(timeout=120)
        print(f"restarted in {time.monotonic() - restarted_at:.1f} s")
        client = WireClient("127.0.0.1", server.port, timeout=120)
        check_offsets(client)
        check_fetch_of_every_partition(client)
        assert open_descriptors(server.proc.pid) < OPEN_FILES
        client.close()
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.stop(timeout=120)
    assert "Too many open files" not in server.log()


def check_offsets(client: WireClient) -> None:
    for timestamp, sampled, others in ((-2, 0, 0), (-1, 1, 0)):  # earliest, latest
        wanted = [{"partition_index": p, "timestamp": timestamp} for p in range(PARTITIONS)]
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": "wide", "partitions": wanted}]}  # fmt: skip
        answer = client.call(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"]
        assert len(answer) == PARTITIONS
        assert all(a["error_code"] == 0 for a in answer)
        expected = {p: sampled if p in SAMPLE else others for p in range(PARTITIONS)}
        assert {a["partition_index"]: a["offset"] for a in answer} == expected


def check_fetch_of_every_partition(client: WireClient) -> None:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "wide", "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                    for p in range(PARTITIONS)]}],
            "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    answer = client.call(ApiKey.FETCH, 11, body)
    partitions = answer["responses"][0]["partitions"]
    assert len(partitions) == PARTITIONS
    values = {}
    for entry in partitions:
        assert entry["error_code"] == 0
        records = KpRecords(bytes(entry["records"] or b""))
        while records.has_next():
            for record in records.next_batch():
                values[entry["partition_index"]] = record.value
    assert values == {p: f"wide-{p}".encode() for p in SAMPLE}
