"""The server in-process: zero-copy fetches (counted), hostile and malformed requests, limits.

A malformed request costs its own connection and nothing else: the fuzzing test keeps a healthy
connection open throughout and checks that it is still answered after every bad one.
"""

from __future__ import annotations

import logging
import random
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalog.protocol import ApiKey, decode_request, decode_response, encode_request
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .server_process import SMALL
from .wire import WireClient

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402


def kp_batch(values: list[bytes], codec: int = 0, producer: tuple | None = None) -> bytes:
    builder = KpBuilder(magic=2, compression_type=codec, batch_size=1 << 20)
    if producer is not None:
        builder.set_producer_state(*producer, False)  # (producer id, epoch, base sequence)
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


class _Failures(logging.Handler):
    """Handler failures the server logs: a malformed request must never reach one."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def failures():
    handler = _Failures()
    logging.getLogger("kafkalog.server").addHandler(handler)
    yield handler.records
    logging.getLogger("kafkalog.server").removeHandler(handler)


@pytest.fixture(scope="module")
def server(tmp_path_factory, failures):
    config = ServerConfig([tmp_path_factory.mktemp("robust")], port=0,
                          socket_request_max_bytes=1 << 20, max_connections=20,
                          **SMALL)  # fmt: skip
    with BackgroundServer(config) as s:
        yield s


@pytest.fixture(scope="module")
def healthy(server):
    client = WireClient("127.0.0.1", server.broker.port)
    yield client
    client.close()


def produce(client: WireClient, topic: str, records: bytes, version: int = 9) -> dict:
    body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    return client.call(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"][0]


def consume_values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == n:
            break
    consumer.close()
    return values


def ensure_topic(client: WireClient, topic: str) -> None:
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}]}
    client.call(ApiKey.CREATE_TOPICS, 7, body)


def test_fetch_sends_records_with_sendfile_and_counts_them(server, healthy, tmp_path):
    ensure_topic(healthy, "zero-copy")
    values = [b"v%d" % i * 50 for i in range(100)]
    assert produce(healthy, "zero-copy", kp_batch(values, codec=3))["error_code"] == 0
    before = server.broker.stats.sendfile_bytes
    assert consume_values(server.bootstrap, "zero-copy", len(values)) == values
    assert server.broker.stats.sendfile_bytes > before
    assert server.broker.stats.copied_record_bytes == 0


def test_without_sendfile_records_are_copied_and_identical(tmp_path):
    config = ServerConfig([tmp_path], port=0, sendfile=False, **SMALL)
    with BackgroundServer(config) as s:
        client = WireClient("127.0.0.1", s.broker.port)
        ensure_topic(client, "copied")
        values = [b"c%d" % i for i in range(50)]
        assert produce(client, "copied", kp_batch(values))["error_code"] == 0
        assert consume_values(s.bootstrap, "copied", len(values)) == values
        client.close()
        assert s.broker.stats.sendfile_bytes == 0
        assert s.broker.stats.copied_record_bytes > 0


def test_api_versions_of_an_unknown_version_answers_v0_with_our_versions(server):
    client = WireClient("127.0.0.1", server.broker.port)
    frame = encode_request(ApiKey.API_VERSIONS, 3, 5, "x", {})
    frame = frame[:6] + struct.pack(">h", 99) + frame[8:]  # ApiVersions v99
    client.send_raw(frame)
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, client.read_frame())
    assert correlation_id == 5
    assert body["error_code"] == 35  # UNSUPPORTED_VERSION
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert advertised[ApiKey.PRODUCE] == (0, 10)  # v0-v2 advertised, as Kafka 4.0 (KAFKA-18659)
    assert advertised[ApiKey.FETCH] == (4, 16)
    # ... and the connection stays usable, at a version it now knows.
    assert client.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0
    client.close()


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", (1 << 20) + 1),  # larger than socket.request.max.bytes
        struct.pack(">i", -1),
        struct.pack(">ihhih", 10, 999, 0, 1, -1),  # unknown api key
        struct.pack(">ihhih", 10, ApiKey.PRODUCE, 99, 1, -1),  # unsupported version
        struct.pack(">ihhi", 8, ApiKey.METADATA, 12, 1),  # header cut short
    ],
    ids=["oversized", "negative-size", "unknown-api", "unsupported-version", "short-header"],
)
def test_bad_frames_close_only_their_connection(server, healthy, frame):
    bad = WireClient("127.0.0.1", server.broker.port)
    bad.send_raw(frame)
    assert bad.read_frame() is None
    bad.close()
    assert healthy.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]


def test_connections_over_the_limit_are_refused_and_others_served(server, healthy):
    clients = []
    rejected_before = server.broker.stats.connections_rejected
    try:
        for _ in range(25):
            c = WireClient("127.0.0.1", server.broker.port)
            clients.append(c)
        answered = 0
        for c in clients:
            try:
                c.call(ApiKey.API_VERSIONS, 3, {})
                answered += 1
            except (AssertionError, OSError):
                pass
        assert answered < 25
        assert server.broker.stats.connections_rejected > rejected_before
    finally:
        for c in clients:
            c.close()
    assert healthy.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0


def _valid_frames() -> list[bytes]:
    records = kp_batch([b"fuzz"] * 3, codec=1)
    produce_body = {"acks": 1, "timeout_ms": 100, "topic_data": [
        {"name": "fuzz", "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    partitions = [{"partition": 0, "partition_max_bytes": 1 << 20}]
    fetch_body = {"max_wait_ms": 0, "max_bytes": 1 << 20,
                  "topics": [{"topic": "fuzz", "partitions": partitions}]}  # fmt: skip
    list_body = {"topics": [{"name": "fuzz", "partitions": [{"timestamp": -1}]}]}
    return [
        encode_request(ApiKey.PRODUCE, 9, 1, "f", produce_body),
        encode_request(ApiKey.PRODUCE, 3, 1, "f", produce_body),
        encode_request(ApiKey.FETCH, 12, 1, "f", fetch_body),
        encode_request(ApiKey.METADATA, 12, 1, "f", {"topics": [{"name": "fuzz"}]}),
        encode_request(ApiKey.LIST_OFFSETS, 7, 1, "f", list_body),
    ]


VALID = _valid_frames()


@st.composite
def malformed(draw) -> bytes:
    frame = bytearray(draw(st.sampled_from(VALID)))
    kind = draw(st.sampled_from(["flip", "truncate", "garbage"]))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            pos = draw(st.integers(4, len(frame) - 1))
            frame[pos] = draw(st.integers(0, 255))
    elif kind == "truncate":
        cut = draw(st.integers(4, len(frame) - 1))
        frame = frame[:cut]
        frame[:4] = struct.pack(">i", cut - 4)  # a consistent size: the body itself is short
    else:
        body = draw(st.binary(min_size=0, max_size=200))
        frame = bytearray(struct.pack(">i", len(body)) + body)
    return bytes(frame)


def _long_poll(frame: bytes) -> bool:
    """A well-formed Fetch that asks to wait long: Kafka holds it, so does the server."""
    try:
        request = decode_request(frame[4:])
    except Exception:
        return False
    return request.header.api_key == ApiKey.FETCH and request.body["max_wait_ms"] > 1000


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=malformed())
def test_fuzzed_requests_are_answered_or_close_their_connection(server, healthy, failures, frame):
    assume(not _long_poll(frame))
    ensure_topic(healthy, "fuzz")
    bad = socket.create_connection(("127.0.0.1", server.broker.port), timeout=10)
    try:
        bad.sendall(frame)
        bad.shutdown(socket.SHUT_WR)  # nothing more is coming: answer or close, never wait
        while bad.recv(65536):
            pass
    except ConnectionResetError:
        pass
    finally:
        bad.close()
    assert healthy.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0
    assert [r.getMessage() for r in failures] == []


def test_corrupt_records_get_an_error_code_not_a_crash(server, healthy):
    ensure_topic(healthy, "corrupt")
    batch = bytearray(kp_batch([b"x" * 100] * 5))
    rng = random.Random(3)
    for _ in range(20):
        broken = bytearray(batch)
        broken[rng.randrange(21, len(broken))] ^= 0xFF  # past the CRC field: the CRC catches it
        assert produce(healthy, "corrupt", bytes(broken))["error_code"] in (2, 87)
    assert produce(healthy, "corrupt", bytes(batch))["error_code"] == 0


def test_idempotent_sequences_are_checked_and_retries_answered_with_the_first_offsets(healthy):
    ensure_topic(healthy, "sequenced")
    init = healthy.call(ApiKey.INIT_PRODUCER_ID, 4, {"transaction_timeout_ms": 60000})
    assert init["error_code"] == 0 and init["producer_id"] >= 0
    pid, epoch = init["producer_id"], init["producer_epoch"]
    first = produce(healthy, "sequenced", kp_batch([b"a", b"b"], producer=(pid, epoch, 0)))
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    retry = produce(healthy, "sequenced", kp_batch([b"a", b"b"], producer=(pid, epoch, 0)))
    assert (retry["error_code"], retry["base_offset"]) == (0, 0)  # a duplicate, not appended
    gap = produce(healthy, "sequenced", kp_batch([b"c"], producer=(pid, epoch, 5)))
    assert gap["error_code"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = produce(healthy, "sequenced", kp_batch([b"c"], producer=(pid, epoch, 2)))
    assert (nxt["error_code"], nxt["base_offset"]) == (0, 2)


def test_acks_0_gets_no_answer_and_the_connection_goes_on(server):
    client = WireClient("127.0.0.1", server.broker.port)
    ensure_topic(client, "fire-and-forget")
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "fire-and-forget",
            "partition_data": [{"index": 0, "records": kp_batch([b"x", b"y"])}]}]}  # fmt: skip
    client.send_raw(encode_request(ApiKey.PRODUCE, 9, 77, "w", body))
    # The next answer on this connection is the next request's, not the produce's.
    answer = client.call(ApiKey.LIST_OFFSETS, 7, {"topics": [
        {"name": "fire-and-forget", "partitions": [{"timestamp": -1}]}]})  # fmt: skip
    assert answer["topics"][0]["partitions"][0]["offset"] == 2
    client.close()


def test_offsets_for_leader_epoch_and_max_timestamp(healthy):
    ensure_topic(healthy, "epochs")
    produce(healthy, "epochs", kp_batch([b"a", b"b", b"c"]))  # timestamps T, T+1, T+2
    answer = healthy.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"topics": [
        {"topic": "epochs", "partitions": [{"partition": 0, "leader_epoch": 0}]},
        {"topic": "missing", "partitions": [{"partition": 0, "leader_epoch": 0}]}]})  # fmt: skip
    found = answer["topics"][0]["partitions"][0]
    assert (found["error_code"], found["leader_epoch"], found["end_offset"]) == (0, 0, 3)
    assert answer["topics"][1]["partitions"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    listed = healthy.call(ApiKey.LIST_OFFSETS, 7, {"topics": [{"name": "epochs", "partitions": [
        {"timestamp": -3}]}]})["topics"][0]["partitions"][0]  # fmt: skip
    assert (listed["offset"], listed["timestamp"]) == (2, 1_700_000_000_002)
    fenced = healthy.call(ApiKey.LIST_OFFSETS, 7, {"topics": [{"name": "epochs", "partitions": [
        {"timestamp": -1, "current_leader_epoch": 5}]}]})["topics"][0]["partitions"][0]  # fmt: skip
    assert fenced["error_code"] == 75  # UNKNOWN_LEADER_EPOCH: the client is ahead of us


def test_clients_use_the_newest_versions_we_advertise(server):
    ck = pytest.importorskip("confluent_kafka")
    server.broker.stats.requests.clear()
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True})
    producer.produce("versions", b"v", partition=0)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "versions",
                            "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["versions"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    used = set(server.broker.stats.requests)
    # librdkafka 2.16's newest: it negotiates down to our maximum where it knows more.
    for expected in [("ApiVersions", 3), ("Metadata", 12), ("Produce", 10), ("Fetch", 16),
                     ("InitProducerId", 4), ("FindCoordinator", 2), ("JoinGroup", 5),
                     ("SyncGroup", 3), ("OffsetCommit", 9), ("OffsetFetch", 9)]:  # fmt: skip
        assert expected in used, sorted(used)
    server.broker.stats.requests.clear()
    kp = kafka.KafkaProducer(bootstrap_servers=server.bootstrap)
    kp.send("versions", b"kp", partition=0).get(10)
    kp.close()
    used = set(server.broker.stats.requests)
    for expected in [("Produce", 9), ("InitProducerId", 4), ("Metadata", 12)]:
        assert expected in used, sorted(used)


def test_errors_come_back_as_kafka_codes_per_topic_and_partition(healthy):
    ensure_topic(healthy, "errors")
    internal = produce(healthy, "__consumer_offsets", kp_batch([b"x"]))
    assert internal["error_code"] == 17  # INVALID_TOPIC_EXCEPTION: internal topics are closed
    unknown = produce(healthy, "no-such-topic", kp_batch([b"x"]))
    assert unknown["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION (produce never auto-creates)
    created = healthy.call(ApiKey.CREATE_TOPICS, 7, {"topics": [
        {"name": "replicated", "num_partitions": 1, "replication_factor": 3},
        {"name": "bad/name", "num_partitions": 1, "replication_factor": 1},
        {"name": "errors", "num_partitions": 1, "replication_factor": 1},
        {"name": "zero", "num_partitions": 0, "replication_factor": 1},
        {"name": "huge", "num_partitions": 10**6, "replication_factor": 1}]})["topics"]  # fmt: skip
    assert [t["error_code"] for t in created] == [38, 17, 36, 37, 37]
    assert all(t["error_message"] for t in created)
    deleted = healthy.call(ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": "__transaction_state"}, {"name": "never-was"}]})["responses"]  # fmt: skip
    assert [r["error_code"] for r in deleted] == [17, 3]
    partitions = [{"partition": 0, "fetch_offset": 99, "partition_max_bytes": 1 << 20},
                  {"partition": 7, "partition_max_bytes": 1 << 20}]  # fmt: skip
    topics = [{"topic": "errors", "partitions": partitions}]
    body = {"max_wait_ms": 0, "max_bytes": 1 << 20, "topics": topics}
    fetch = healthy.call(ApiKey.FETCH, 12, body)
    codes = [p["error_code"] for p in fetch["responses"][0]["partitions"]]
    assert codes == [1, 3]  # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION
    configs = healthy.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": "errors", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "soon"}]},
        {"resource_type": 2, "resource_name": "errors", "configs": [
            {"name": "no.such.config", "config_operation": 0, "value": "1"}]}]})  # fmt: skip
    assert [r["error_code"] for r in configs["responses"]] == [40, 40]  # INVALID_CONFIG


def test_a_fetch_answer_in_flight_survives_deleting_its_topic(server, healthy):
    """The answer owns its windows' descriptors: deleting the topic mid-send does not tear it."""
    ensure_topic(healthy, "doomed")
    value = b"B" * 100_000
    for _ in range(10):  # ~8 MB: more than the socket buffers take while the client waits
        assert produce(healthy, "doomed", kp_batch([value] * 8))["error_code"] == 0
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(10)
    slow.connect(("127.0.0.1", server.broker.port))
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 100_000_000,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                 {"topic": "doomed", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                  "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 100_000_000}]}],
             "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    slow.sendall(encode_request(ApiKey.FETCH, 11, 5, "slow", fetch))
    time.sleep(0.3)  # the answer is now partly sent, the rest waits for the reader
    deleted = healthy.call(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["doomed"], "timeout_ms": 1000})
    assert deleted["responses"][0]["error_code"] == 0
    ensure_topic(healthy, "reuses-descriptors")  # new files may take the closed numbers
    assert produce(healthy, "reuses-descriptors", kp_batch([b"Z" * 1000] * 5))["error_code"] == 0
    reader = WireClient.__new__(WireClient)
    reader.sock = slow
    frame = reader.read_frame()
    slow.close()
    assert frame is not None, "the answer was cut off"
    correlation_id, response = decode_response(ApiKey.FETCH, 11, frame)
    assert correlation_id == 5
    records = kafka.record.MemoryRecords(
        bytes(response["responses"][0]["partitions"][0]["records"])
    )
    values = []
    while records.has_next():
        values.extend(r.value for r in records.next_batch())
    assert values == [value] * 80


def test_acks_0_produce_that_fails_closes_the_connection(server):
    """Kafka closes the connection so the producer, which reads no answer, refreshes metadata."""
    client = WireClient("127.0.0.1", server.broker.port)
    ensure_topic(client, "fire-and-forget")
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "fire-and-forget",
            "partition_data": [{"index": 7, "records": kp_batch([b"x"])}]}]}  # fmt: skip
    client.send_raw(encode_request(ApiKey.PRODUCE, 9, 78, "w", body))
    assert client.read_frame() is None
    client.close()


def test_produce_with_invalid_acks_answers_as_kafka(healthy):
    ensure_topic(healthy, "acks")
    data = [{"index": 0, "records": kp_batch([b"x"])}]
    body = {"acks": 2, "timeout_ms": 1000, "topic_data": [{"name": "acks", "partition_data": data}]}
    part = healthy.call(ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 21  # INVALID_REQUIRED_ACKS
    assert (part["base_offset"], part["log_append_time_ms"], part["log_start_offset"]) == (
        -1,
        -1,
        -1,
    )


def test_list_offsets_by_time_answers_only_fetchable_offsets(healthy):
    """Kafka's ReplicaManager: a match at or past the last stable offset (read_committed) or
    the high watermark is answered as none (-1)."""
    ensure_topic(healthy, "open-txn")
    assert produce(healthy, "open-txn", kp_batch([b"a", b"b"]))["error_code"] == 0  # T, T+1
    builder = KpBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.set_producer_state(4242, 0, 0, True)  # transactional, never committed
    for i in range(3):
        builder.append(timestamp=1_700_000_000_010 + i, key=None, value=b"t", headers=[])
    builder.close()
    assert produce(healthy, "open-txn", bytes(builder.buffer()))["error_code"] == 0

    def listed(timestamp: int, isolation: int) -> tuple[int, int]:
        body = {"isolation_level": isolation, "topics": [{"name": "open-txn", "partitions": [
            {"timestamp": timestamp}]}]}  # fmt: skip
        part = healthy.call(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]
        assert part["error_code"] == 0
        return part["offset"], part["timestamp"]

    assert listed(1_700_000_000_005, 0) == (2, 1_700_000_000_010)
    assert listed(1_700_000_000_005, 1) == (-1, -1)  # offset 2 is past the last stable offset
    assert listed(1_700_000_000_001, 1) == (1, 1_700_000_000_001)
    assert listed(-3, 1) == (-1, -1)  # the max timestamp is in the open transaction
    assert listed(-3, 0) == (4, 1_700_000_000_012)


def test_offsets_for_an_epoch_above_the_latest_are_undefined(healthy):
    """Kafka's LeaderEpochFileCache.endOffsetFor: no epoch above the latest is known."""
    ensure_topic(healthy, "epochs-above")
    produce(healthy, "epochs-above", kp_batch([b"a"]))
    parts = [{"partition": 0, "leader_epoch": 3}]
    body = {"topics": [{"topic": "epochs-above", "partitions": parts}]}
    answer = healthy.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
    found = answer["topics"][0]["partitions"][0]
    assert (found["error_code"], found["leader_epoch"], found["end_offset"]) == (0, -1, -1)


def test_create_topics_refuses_duplicate_names_and_gaps_in_assignments(healthy):
    """Kafka's controller: a name given twice is INVALID_REQUEST and neither is created; manual
    assignments must be partitions 0..n-1 (INVALID_REPLICA_ASSIGNMENT)."""
    node = healthy.call(ApiKey.METADATA, 9, {"topics": []})["brokers"][0]["node_id"]
    twice = {"name": "twice", "num_partitions": 1, "replication_factor": 1}
    gap = {"name": "gap", "num_partitions": -1, "replication_factor": -1, "assignments": [
        {"partition_index": 0, "broker_ids": [node]},
        {"partition_index": 2, "broker_ids": [node]}]}  # fmt: skip
    body = {"topics": [twice, dict(twice), gap], "timeout_ms": 1000}
    answer = {t["name"]: t for t in healthy.call(ApiKey.CREATE_TOPICS, 7, body)["topics"]}
    assert answer["twice"]["error_code"] == 42  # INVALID_REQUEST
    assert answer["gap"]["error_code"] == 39  # INVALID_REPLICA_ASSIGNMENT
    metadata = healthy.call(ApiKey.METADATA, 9, {"topics": [{"name": "twice"}, {"name": "gap"}],
                                                 "allow_auto_topic_creation": False})  # fmt: skip
    assert [t["error_code"] for t in metadata["topics"]] == [3, 3]  # neither was created


def test_fetch_with_an_unknown_isolation_level_is_refused(healthy):
    """Kafka's IsolationLevel.forId throws: the error response is UNKNOWN_SERVER_ERROR."""
    ensure_topic(healthy, "isolation")
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}
    topics = [{"topic": "isolation", "partitions": [part]}]
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1000,
            "isolation_level": 2, "topics": topics}  # fmt: skip
    answer = healthy.call(ApiKey.FETCH, 11, body)
    assert answer["error_code"] == -1
    assert answer["responses"][0]["partitions"][0]["error_code"] == -1


def test_describe_and_list_transactions_are_served_on_the_wire(healthy):
    versions = healthy.call(ApiKey.API_VERSIONS, 3, {})["api_keys"]
    served = {v["api_key"]: (v["min_version"], v["max_version"]) for v in versions}
    assert served[65] == (0, 0) and served[66] == (0, 2)
    described = healthy.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["nobody"]})
    assert described["transaction_states"][0]["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    listed = healthy.call(ApiKey.LIST_TRANSACTIONS, 2, {"state_filters": ["Bogus"]})
    assert (listed["error_code"], listed["unknown_state_filters"]) == (0, ["Bogus"])
