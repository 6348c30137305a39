"""DescribeCluster, DescribeTopicPartitions (KIP-966) and DescribeLogDirs through real clients
(kafka-python's admin client, librdkafka via confluent-kafka) and on the wire.

The expected answers are Kafka 4.4's: its version ranges (its message definitions), the
operations it lists with no authorizer and its paging of DescribeTopicPartitions were read from a
Kafka 4.4 broker asked the same requests (tests/apache_kafka/test_serve_vs_kafka_cli.py asks both
side by side); partition sizes are the ``.log`` files' sizes on disk and the volume's size is the
file system's (``os.statvfs``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kafkalog.protocol import ApiKey
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .server_process import SMALL
from .wire import WireClient

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")
from confluent_kafka import TopicCollection  # noqa: E402
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

# What Kafka 4.4 advertises for them (DescribeLogDirs v5 added IsCordoned).
KAFKA_44_VERSIONS = {
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
}
# What Kafka lists with no authorizer: every operation it supports on the resource.
TOPIC_OPERATIONS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
                    "ALTER_CONFIGS"}  # fmt: skip
CLUSTER_OPERATIONS = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                      "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}  # fmt: skip
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 3, 17, 42
NODE = 4


class Served:
    """A server over two data directories (new partitions go to the one holding fewer)."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs
        self.background = BackgroundServer(ServerConfig(dirs, port=0, node_id=NODE, **SMALL))

    @property
    def port(self) -> int:
        return self.background.broker.port

    @property
    def bootstrap(self) -> str:
        return self.background.bootstrap


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("describe")
    served = Served([root / "disk1", root / "disk2"])
    with served.background:
        yield served


@pytest.fixture(scope="module")
def topics(server) -> dict[str, int]:
    """Two topics (2 and 7 partitions) named so that the 2-partition one sorts first, with
    records in some partitions."""
    run = uuid.uuid4().hex[:6]
    made = {f"a-{run}": 2, f"b-{run}": 7}
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in made.items()])
    for f in futures.values():
        f.result(10)
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(40):
        topic = list(made)[i % 2]
        producer.produce(topic, b"v" * (i + 1), key=b"k%d" % i, partition=i % 3 % made[topic])
        if i % 10 == 9:
            producer.flush(10)
    assert producer.flush(30) == 0
    return made


def kp_admin(server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap)


def test_advertised_as_kafka_44_does(server):
    client = WireClient("127.0.0.1", server.port)
    keys = client.call(ApiKey.API_VERSIONS, 3, {})["api_keys"]
    client.close()
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in keys}
    assert {k: advertised.get(k) for k in KAFKA_44_VERSIONS} == KAFKA_44_VERSIONS


# -- DescribeCluster ---------------------------------------------------------------------------
def test_describe_cluster_kafka_python(server):
    admin = kp_admin(server)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    metadata = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(timeout=10)
    assert cluster["cluster_id"] == metadata.cluster_id
    assert cluster["controller_id"] == NODE
    assert cluster["brokers"] == [{"broker_id": NODE, "host": "127.0.0.1", "port": server.port,
                                   "rack": None, "is_fenced": False}]  # fmt: skip
    assert set(cluster["authorized_operations"]) == CLUSTER_OPERATIONS


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_on_the_wire(server, version):
    client = WireClient("127.0.0.1", server.port)
    plain = client.call(ApiKey.DESCRIBE_CLUSTER, version, {})
    assert plain["error_code"] == 0 and plain["cluster_authorized_operations"] == -(2**31)
    assert [b["broker_id"] for b in plain["brokers"]] == [NODE]
    if version >= 1:  # KIP-919's endpoint types: a broker is not a controller endpoint
        controller = client.call(ApiKey.DESCRIBE_CLUSTER, version, {"endpoint_type": 2})
        assert (controller["error_code"], controller["brokers"]) == (114, [])  # MISMATCHED_...
        unknown = client.call(ApiKey.DESCRIBE_CLUSTER, version, {"endpoint_type": 0})
        assert (unknown["error_code"], unknown["error_message"]) == (
            115, "Unsupported endpoint type 0",  # UNSUPPORTED_ENDPOINT_TYPE
        )  # fmt: skip
    client.close()


def test_librdkafka_sees_authorized_operations(server, topics):
    """librdkafka describes the cluster and topics with Metadata v8+ asking for the authorized
    operations: Kafka without an authorizer lists every supported one."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert cluster.controller.id == NODE and [n.id for n in cluster.nodes] == [NODE]
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPERATIONS
    name = next(iter(topics))
    futures = admin.describe_topics(TopicCollection([name]), include_authorized_operations=True)
    described = futures[name].result(10)
    assert {op.name for op in described.authorized_operations} == TOPIC_OPERATIONS
    assert AclOperation.ALTER_CONFIGS in described.authorized_operations
    assert [p.id for p in described.partitions] == [0, 1]


# -- DescribeTopicPartitions -------------------------------------------------------------------
def _pages(admin: KafkaAdminClient, names: list[str], limit: int) -> list[tuple]:
    """Every page until the cursor runs out: (topic, partitions, next cursor) per page."""
    pages, cursor = [], None
    while True:
        page = admin.describe_topic_partitions(names, response_partition_limit=limit, cursor=cursor)
        cursor = page["next_cursor"]
        parts = [
            (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]
        ]
        pages.append((parts, cursor and (cursor["topic_name"], cursor["partition_index"])))
        if cursor is None:
            return pages


def test_describe_topic_partitions_pages_as_kafka(server, topics):
    a, b = sorted(topics)
    admin = kp_admin(server)
    try:
        assert _pages(admin, [b, a], 3) == [
            ([(a, [0, 1]), (b, [0])], (b, 1)),
            ([(b, [1, 2, 3])], (b, 4)),
            ([(b, [4, 5, 6])], None),
        ]
        # A page filled by a whole topic: the cursor names the next topic at partition 0.
        assert _pages(admin, [a, b], 2) == [
            ([(a, [0, 1])], (b, 0)),
            ([(b, [0, 1])], (b, 2)),
            ([(b, [2, 3])], (b, 4)),
            ([(b, [4, 5])], (b, 6)),
            ([(b, [6])], None),
        ]
        # A limit below 1 is 1 (Kafka: max(min(max.request.partition.size.limit, limit), 1)).
        assert _pages(admin, [a], 0) == [([(a, [0])], (a, 1)), ([(a, [1])], None)]
        whole = admin.describe_topic_partitions([a, b])
    finally:
        admin.close()
    assert whole["next_cursor"] is None
    for topic in whole["topics"]:
        assert topic["error_code"] == 0 and not topic["is_internal"]
        assert topic["topic_authorized_operations"] == sum(
            1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11)
        )
        for p in topic["partitions"]:
            assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (NODE, [NODE], [NODE])
            assert (p["leader_epoch"], p["offline_replicas"]) == (0, [])


def test_describe_topic_partitions_errors_and_elr_on_the_wire(server, topics):
    a, b = sorted(topics)
    client = WireClient("127.0.0.1", server.port)

    def ask(names: list[str], **body) -> dict:
        return client.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0,
                           {"topics": [{"name": n} for n in names], **body})  # fmt: skip

    answer = ask([b, "no-such-topic", "bad/name", a, a])
    named = {t["name"]: t for t in answer["topics"]}
    assert [t["name"] for t in answer["topics"]] == sorted({a, b, "no-such-topic", "bad/name"})
    assert named["no-such-topic"]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert named["bad/name"]["error_code"] == INVALID_TOPIC_EXCEPTION
    assert named["no-such-topic"]["topic_id"] == uuid.UUID(int=0)
    # Kafka 4.4 answers UNKNOWN_SERVER_ERROR here (a NullPointerException: the empty name
    # matches its empty cursor name); an empty name is no legal topic (docs/server.md).
    assert [t["error_code"] for t in ask([""])["topics"]] == [INVALID_TOPIC_EXCEPTION]
    # One replica: the eligible leader replicas are empty lists, not null (no ELR known).
    for p in named[a]["partitions"]:
        assert (p["eligible_leader_replicas"], p["last_known_elr"]) == ([], [])
    # The cursor's topic must be among those asked for, and its partition not negative.
    for cursor in ({"topic_name": "elsewhere", "partition_index": 0},
                   {"topic_name": b, "partition_index": -1}):  # fmt: skip
        refused = ask([a, b], cursor=cursor)
        assert [(t["name"], t["error_code"], t["partitions"]) for t in refused["topics"]] == [
            (a, INVALID_REQUEST, []), (b, INVALID_REQUEST, []),
        ]  # fmt: skip
    # A cursor past the topic's partitions: the topic with none.
    past = ask([b], cursor={"topic_name": b, "partition_index": 9})
    assert [(t["name"], t["partitions"]) for t in past["topics"]] == [(b, [])]
    # No topics: every topic, internal ones included, from the cursor's name on.
    everything = ask([])
    internal = {t["name"] for t in everything["topics"] if t["is_internal"]}
    assert internal == {"__consumer_offsets", "__transaction_state"}
    later = ask([], cursor={"topic_name": b, "partition_index": 5})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in later["topics"]][:1] == [(b, [5, 6])]  # fmt: skip
    client.close()


# -- DescribeLogDirs ---------------------------------------------------------------------------
def _log_bytes(directory: Path) -> int:
    """Kafka's partition size: its segments' .log files, indexes not counted."""
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def _on_disk(server, topics: dict[str, int]) -> dict[str, dict[tuple[str, int], int]]:
    found: dict[str, dict[tuple[str, int], int]] = {}
    for d in server.dirs:
        for t, n in topics.items():
            for p in range(n):
                part = d / f"{t}-{p}"
                if part.is_dir():
                    found.setdefault(str(d), {})[(t, p)] = _log_bytes(part)
    return found


def test_describe_log_dirs_kafka_python(server, topics):
    admin = kp_admin(server)
    try:
        answer = admin.describe_log_dirs({t: list(range(n)) for t, n in topics.items()})
    finally:
        admin.close()
    assert [a["broker"] for a in answer] == [NODE]
    seen: dict[str, dict[tuple[str, int], int]] = {}
    for result in answer[0]["log_dirs"]:
        assert result["error_code"] == 0
        st = os.statvfs(result["log_dir"])
        assert result["total_bytes"] == st.f_blocks * st.f_frsize
        assert 0 < result["usable_bytes"] <= result["total_bytes"]
        assert not result["is_cordoned"]
        for topic in result["topics"]:
            for p in topic["partitions"]:
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
                where = seen.setdefault(result["log_dir"], {})
                where[(topic["name"], p["partition_index"])] = p["partition_size"]
    expected = _on_disk(server, topics)
    assert sorted(seen) == sorted(str(d) for d in server.dirs) == sorted(expected)
    assert seen == expected
    assert sum(sum(v.values()) for v in seen.values()) > 0


def test_describe_log_dirs_on_the_wire(server, topics):
    a, b = sorted(topics)
    client = WireClient("127.0.0.1", server.port)
    asked = {"topics": [{"topic": a, "partitions": [1, 5]}, {"topic": "nope", "partitions": [0]}]}
    old = client.call(ApiKey.DESCRIBE_LOG_DIRS, 1, asked)
    assert [r["log_dir"] for r in old["results"]] == [str(d) for d in server.dirs]
    listed = [(t["name"], p["partition_index"]) for r in old["results"] for t in r["topics"]
              for p in t["partitions"]]  # fmt: skip
    assert listed == [(a, 1)]  # partition 5 and the unknown topic are left out
    newest = client.call(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})
    assert newest["error_code"] == 0
    everything = {(t["name"], p["partition_index"]) for r in newest["results"]
                  for t in r["topics"] for p in t["partitions"]}  # fmt: skip
    assert {(a, 0), (a, 1), (b, 6), ("__consumer_offsets", 0)} <= everything
    assert all(r["total_bytes"] > 0 for r in newest["results"])
    client.close()
