"""The admin APIs a developer's test setup and teardown reach for, through real clients
(librdkafka via confluent-kafka, kafka-python, aiokafka) and on the wire: Produce v0-v2
advertised as Kafka 4.0 does, DeleteRecords, DeleteGroups, CreatePartitions, the legacy
AlterConfigs, offsets-only groups after a restart, and ListOffsets' max-timestamp rule."""

from __future__ import annotations

import logging
import struct
import time

import pytest

from kafkalog.protocol import ApiKey, encode_request

from .server_process import ServerProcess
from .wire import WireClient

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.admin import NewPartitions as KpNewPartitions  # noqa: E402

T0 = int(time.time() * 1000) - 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("admin")) as s:
        yield s
        print(s.log())  # shown with the failures, if any


@pytest.fixture
def admin(server):
    return AdminClient({"bootstrap.servers": server.bootstrap})


def wire(server) -> WireClient:
    return WireClient("127.0.0.1", server.port)


def create(admin: AdminClient, topic: str, partitions: int = 1, **config: str) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(10)


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int = 0,
            timestamps: list[int] | None = None, **conf) -> None:  # fmt: skip
    """One produce request per record (linger 0, one in flight): a batch each."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                            "max.in.flight": 1, **conf})  # fmt: skip
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps else T0 + i
        producer.produce(topic, value, partition=partition, timestamp=ts)
        producer.flush(10)
    assert producer.flush(30) == 0


def consume_all(bootstrap: str, topic: str, partition: int = 0, *, timeout: float = 15):
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < high - low and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            out.append((m.offset(), m.value()))
    consumer.close()
    return out


def list_offset(admin: AdminClient, topic: str, spec: OffsetSpec, partition: int = 0):
    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: spec})[tp].result(10)


def error_code(future) -> int:
    with pytest.raises(ck.KafkaException) as raised:
        future.result(10)
    return raised.value.args[0].code()


# -- Produce v0-v2: advertised as Kafka 4.0 does, refused as it does ---------------------------
def test_produce_v0_to_v2_advertised_but_refused(server):
    client = wire(server)
    versions = client.call(ApiKey.API_VERSIONS, 3, {})["api_keys"]
    advertised = {v["api_key"]: (v["min_version"], v["max_version"]) for v in versions}
    assert advertised[ApiKey.PRODUCE] == (0, 10)  # KAFKA-18659
    assert advertised[ApiKey.FETCH] == (4, 16)  # the others keep their real ranges
    for version in (0, 1, 2):
        # Kafka's SocketServer closes the connection on a version it does not enable.
        frame = encode_request(ApiKey.PRODUCE, 3, 7, "old", {"acks": 1, "timeout_ms": 100,
                                                            "topic_data": []})  # fmt: skip
        frame = frame[:6] + struct.pack(">h", version) + frame[8:]
        bad = wire(server)
        bad.send_raw(frame)
        assert bad.read_frame() is None
        bad.close()
    assert client.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0  # others are served
    client.close()


def test_librdkafka_enables_every_codec_and_clients_still_pick_new_versions(server, tmp_path):
    records = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("librdkafka-features")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "compression.type": "gzip",
                            "debug": "feature,protocol", "logger": logger})  # fmt: skip
    producer.produce("codecs", b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    enabled = {r.rsplit(" ", 1)[1] for r in records if "Enabling feature " in r}
    assert {"MsgVer2", "LZ4", "ZSTD", "IdempotentProducer"} <= enabled
    sent = [r for r in records if "Sent ProduceRequest" in r]
    assert sent and all("(v10" in r for r in sent), sent[:3]
    # kafka-python and aiokafka negotiate the highest version both speak, too.
    kp = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, compression_type="lz4")
    kp.send("codecs", b"y" * 1000, partition=0).get(10)
    kp.close()
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    async def aio() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, compression_type="gzip")
        await p.start()
        await p.send_and_wait("codecs", b"z" * 1000, partition=0)
        await p.stop()

    asyncio.run(aio())
    assert [v for _, v in consume_all(server.bootstrap, "codecs")] == [
        b"x" * 1000, b"y" * 1000, b"z" * 1000,
    ]  # fmt: skip


# -- DeleteRecords ------------------------------------------------------------------------------
def test_delete_records_moves_the_log_start_offset(server, admin):
    topic = "trimmed"
    create(admin, topic, 2, **{"internal.segment.bytes": "300"})  # a few records a segment
    produce(server.bootstrap, topic, [b"v%03d" % i for i in range(40)])
    segments_before = len(list((server.data_dir / f"{topic}-0").glob("*.log")))
    tp = TopicPartition(topic, 0, 25)
    deleted = admin.delete_records([tp])[tp].result(10)
    assert deleted.low_watermark == 25
    assert list_offset(admin, topic, OffsetSpec.earliest()).offset == 25
    assert [o for o, _ in consume_all(server.bootstrap, topic)] == list(range(25, 40))
    assert len(list((server.data_dir / f"{topic}-0").glob("*.log"))) < segments_before
    # Below the start: nothing changes, the low watermark is the start.
    tp = TopicPartition(topic, 0, 10)
    assert admin.delete_records([tp])[tp].result(10).low_watermark == 25
    # kafka-python: -1 means the high watermark.
    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    result = kp.delete_records({kafka.TopicPartition(topic, 0): -1})
    assert result[kafka.TopicPartition(topic, 0)]["low_watermark"] == 40
    kp.close()
    assert list_offset(admin, topic, OffsetSpec.earliest()).offset == 40
    assert list_offset(admin, topic, OffsetSpec.latest()).offset == 40
    produce(server.bootstrap, topic, [b"after"])
    assert consume_all(server.bootstrap, topic) == [(40, b"after")]


def test_delete_records_errors_as_kafka(server, admin):
    create(admin, "trim-errors", 1)
    create(admin, "trim-compacted", 1, **{"cleanup.policy": "compact"})
    produce(server.bootstrap, "trim-errors", [b"a", b"b", b"c"])
    client = wire(server)

    def delete(topic: str, partition: int, offset: int) -> tuple[int, int]:
        body = {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": offset}]}], "timeout_ms": 1000}  # fmt: skip
        part = client.call(ApiKey.DELETE_RECORDS, 2, body)["topics"][0]["partitions"][0]
        return part["error_code"], part["low_watermark"]

    assert delete("trim-errors", 0, 4) == (1, -1)  # OFFSET_OUT_OF_RANGE: beyond the watermark
    assert delete("trim-errors", 0, -5) == (1, -1)  # OFFSET_OUT_OF_RANGE: negative
    assert delete("trim-errors", 7, 1) == (3, -1)  # UNKNOWN_TOPIC_OR_PARTITION
    assert delete("nowhere", 0, 1) == (3, -1)
    assert delete("trim-compacted", 0, 0) == (44, -1)  # POLICY_VIOLATION
    assert delete("__consumer_offsets", 0, 0) == (17, -1)  # INVALID_TOPIC_EXCEPTION
    assert delete("trim-errors", 0, 3) == (0, 3)  # exactly the high watermark
    client.close()
    tp = TopicPartition("trim-errors", 0, 99)
    assert error_code(admin.delete_records([tp])[tp]) == KafkaError.OFFSET_OUT_OF_RANGE


def test_deleted_records_stay_deleted_after_kill_9(tmp_path):
    with ServerProcess(tmp_path / "data") as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        create(admin, "kept-trim", 1)
        produce(s.bootstrap, "kept-trim", [b"r%d" % i for i in range(10)])
        tp = TopicPartition("kept-trim", 0, 6)  # inside the active segment: only the
        assert admin.delete_records([tp])[tp].result(10).low_watermark == 6  # checkpoint has it
        s.kill()
    with ServerProcess(tmp_path / "data") as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        assert list_offset(admin, "kept-trim", OffsetSpec.earliest()).offset == 6
        assert [o for o, _ in consume_all(s.bootstrap, "kept-trim")] == [6, 7, 8, 9]


# -- CreatePartitions ---------------------------------------------------------------------------
def test_create_partitions_grows_a_topic(server, admin):
    topic = "grown"
    create(admin, topic, 2, **{"retention.ms": "777777"})
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    produce(server.bootstrap, topic, [b"new"], partition=4)
    assert consume_all(server.bootstrap, topic, 4) == [(0, b"new")]
    assert (server.data_dir / f"{topic}-4" / "partition.metadata").read_text() == (
        server.data_dir / f"{topic}-0" / "partition.metadata"
    ).read_text()  # the topic's id
    resource = ConfigResource("topic", topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "777777"
    # kafka-python, with a manual assignment to this node.
    [node] = admin.list_topics(timeout=10).brokers
    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    kp.create_partitions({topic: KpNewPartitions(6, [[node]])})
    kp.close()
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 6


def test_create_partitions_errors_as_kafka(server, admin):
    create(admin, "grow-errors", 3)
    client = wire(server)

    def grow(topic: str, count: int, assignments=None, validate_only=False) -> tuple:
        body = {"topics": [{"name": topic, "count": count, "assignments": assignments}],
                "timeout_ms": 1000, "validate_only": validate_only}  # fmt: skip
        result = client.call(ApiKey.CREATE_PARTITIONS, 3, body)["results"][0]
        return result["error_code"], result["error_message"]

    assert grow("grow-errors", 3) == (37, "Topic already has 3 partition(s).")
    assert grow("grow-errors", 2) == (
        37,
        "The topic grow-errors currently has 3 partition(s); 2 would not be an increase.",
    )
    assert grow("nowhere", 4) == (3, None)
    assert grow("grow-errors", 5, [{"broker_ids": [0]}]) == (
        39, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were "
        "specified.")  # fmt: skip
    assert grow("grow-errors", 4, [{"broker_ids": [7]}]) == (
        39, "The manual partition assignment includes broker 7, but no such broker is "
        "registered.")  # fmt: skip
    assert grow("grow-errors", 4, [{"broker_ids": []}])[0] == 39
    [node] = admin.list_topics(timeout=10).brokers
    assert grow("grow-errors", 4, [{"broker_ids": [node, node]}]) == (
        39,
        f"The manual partition assignment includes the broker {node} more than once.",
    )
    assert grow("grow-errors", 20_000)[0] == 37  # above this server's per-topic limit
    assert grow("grow-errors", 9, validate_only=True) == (0, None)
    assert len(admin.list_topics("grow-errors", timeout=10).topics["grow-errors"].partitions) == 3
    twice = {"topics": [{"name": "grow-errors", "count": 4, "assignments": None}] * 2,
             "timeout_ms": 1000, "validate_only": False}  # fmt: skip
    results = client.call(ApiKey.CREATE_PARTITIONS, 3, twice)["results"]
    assert [(r["error_code"], r["error_message"]) for r in results] == [
        (42, "Duplicate topic name.")
    ]
    client.close()
    futures = admin.create_partitions([NewPartitions("grow-errors", 2)])
    assert error_code(futures["grow-errors"]) == KafkaError.INVALID_PARTITIONS


def test_a_growth_that_fails_midway_removes_only_the_new_partitions(tmp_path, monkeypatch):
    import errno

    from kafkalog.server.apis import topics as topics_module
    from kafkalog.server.app import BackgroundServer
    from kafkalog.server.config import ServerConfig

    from .server_process import SMALL

    with BackgroundServer(ServerConfig([tmp_path / "data"], port=0, **SMALL)) as s:
        client = WireClient("127.0.0.1", s.broker.port)
        body = {"topics": [{"name": "half", "num_partitions": 2, "replication_factor": 1}],
                "timeout_ms": 1000}  # fmt: skip
        assert client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]["error_code"] == 0
        real = topics_module._open_partition

        def failing(directory, *args):
            if directory.name == "half-150":
                directory.mkdir()
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(directory, *args)

        monkeypatch.setattr(topics_module, "_open_partition", failing)
        grow = {"topics": [{"name": "half", "count": 300, "assignments": None}],
                "timeout_ms": 1000, "validate_only": False}  # fmt: skip
        result = client.call(ApiKey.CREATE_PARTITIONS, 3, grow)["results"][0]
        assert result["error_code"] == 56 and "No space left" in result["error_message"]
        data = tmp_path / "data"
        assert sorted(p.name for p in data.iterdir() if p.name.startswith("half-")) == [
            "half-0", "half-1"]  # fmt: skip
        assert s.broker.log_manager.topics()["half"] == [0, 1]
        monkeypatch.setattr(topics_module, "_open_partition", real)
        assert client.call(ApiKey.CREATE_PARTITIONS, 3, grow)["results"][0]["error_code"] == 0
        assert len(s.broker.log_manager.topics()["half"]) == 300
        client.close()


# -- AlterConfigs (legacy) ----------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_the_whole_set(server, admin):
    topic = "reconfigured"
    create(admin, topic, 1, **{"retention.ms": "1000", "cleanup.policy": "compact"})
    resource = ConfigResource("topic", topic, set_config={"segment.ms": "3600000"})
    admin.alter_configs([resource])[resource].result(10)
    described = admin.describe_configs([ConfigResource("topic", topic)])
    configs = next(iter(described.values())).result(10)
    assert configs["segment.ms"].value == "3600000" and not configs["segment.ms"].is_default
    assert configs["retention.ms"].is_default and configs["retention.ms"].value == "604800000"
    assert configs["cleanup.policy"].value == "delete"
    # kafka-python, forced to the legacy API; the topics file records the result.
    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType

    kp.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic,
                                       configs={"retention.bytes": "1048576"})],
                     incremental=False)  # fmt: skip
    kp.close()
    import json

    # (kafka-python re-sends the topic's other overrides, as its docs say the legacy API needs.)
    recorded = json.loads((server.data_dir / "kafkalog-topics.json").read_text())
    assert recorded["topics"][topic]["configs"] == {"retention.bytes": "1048576",
                                                    "segment.ms": "3600000"}  # fmt: skip


def test_legacy_alter_configs_errors_as_kafka(server, admin):
    create(admin, "reconfig-errors", 1, **{"retention.ms": "5000"})
    client = wire(server)

    def alter(resources: list, validate_only: bool = False) -> list[tuple]:
        body = {"resources": resources, "validate_only": validate_only}
        out = client.call(ApiKey.ALTER_CONFIGS, 2, body)["responses"]
        return [(r["resource_name"], r["error_code"], r["error_message"]) for r in out]

    def topic(name: str, **configs) -> dict:
        return {"resource_type": 2, "resource_name": name,
                "configs": [{"name": k.replace("_", "."), "value": v}
                            for k, v in configs.items()]}  # fmt: skip

    assert alter([topic("reconfig-errors", no_such="1")]) == [
        ("reconfig-errors", 40, "Unknown topic config name: no.such")
    ]
    assert alter([topic("reconfig-errors", retention_ms="soon")])[0][1] == 40
    assert alter([topic("nowhere", retention_ms="1")]) == [
        ("nowhere", 3, "The topic 'nowhere' does not exist.")
    ]
    assert alter([topic("reconfig-errors", segment_ms="1000")], validate_only=True) == [
        ("reconfig-errors", 0, None)
    ]
    assert alter([topic("reconfig-errors"), topic("reconfig-errors")]) == [
        ("reconfig-errors", 42, "Duplicate resource.")
    ]
    unknown_type = {"resource_type": 99, "resource_name": "x", "configs": []}
    assert alter([unknown_type]) == [("x", 35, "Unknown resource type 99.")]
    client.close()
    described = admin.describe_configs([ConfigResource("topic", "reconfig-errors")])
    configs = next(iter(described.values())).result(10)
    assert configs["retention.ms"].value == "5000" and configs["segment.ms"].is_default
    # A null value is a deletion, as Kafka's legacyAlterConfigs writes it.
    client = wire(server)
    assert alter([{"resource_type": 2, "resource_name": "reconfig-errors",
                   "configs": [{"name": "retention.ms", "value": None}]}]) == [
        ("reconfig-errors", 0, None)]  # fmt: skip
    client.close()
    configs = next(iter(admin.describe_configs(
        [ConfigResource("topic", "reconfig-errors")]).values())).result(10)  # fmt: skip
    assert configs["retention.ms"].is_default


# -- DeleteGroups and offsets-only groups -------------------------------------------------------
def commit_offsets_only(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """assign + commit: no JoinGroup, no group metadata record."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, offset)])
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def group_states(admin: AdminClient) -> dict[str, str]:
    listed = admin.list_consumer_groups().result(10)
    return {g.group_id: g.state.name for g in listed.valid}


def test_delete_groups(server, admin):
    create(admin, "grouped", 1)
    produce(server.bootstrap, "grouped", [b"a", b"b"])
    commit_offsets_only(server.bootstrap, "idle", "grouped", 2)
    member = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "busy",
                          "auto.offset.reset": "earliest", "session.timeout.ms": 6000})  # fmt: skip
    member.subscribe(["grouped"])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    try:
        futures = admin.delete_consumer_groups(["idle", "busy", "never"])
        futures["idle"].result(10)
        assert error_code(futures["busy"]) == KafkaError.NON_EMPTY_GROUP
        assert error_code(futures["never"]) == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        member.close()
    states = group_states(admin)
    assert "idle" not in states and states["busy"] == "EMPTY"
    tp = TopicPartition("grouped", 0)
    offsets = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("idle", [tp])])
    assert offsets["idle"].result(10).topic_partitions[0].offset == ck.OFFSET_INVALID
    # The group, now Empty, can go; kafka-python's admin deletes it.
    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    assert kp.delete_groups(["busy"]) == {"busy": "OK"}
    kp.close()
    assert "busy" not in group_states(admin)


def test_delete_offsets(server, admin):
    """OffsetDelete as Kafka's OffsetMetadataManager.deleteOffsets answers: a topic the group's
    members subscribe to is GROUP_SUBSCRIBED_TO_TOPIC, another topic's offsets go (NONE even
    where none was committed), an unknown group is GROUP_ID_NOT_FOUND."""
    create(admin, "od-used", 1)
    create(admin, "od-other", 2)
    produce(server.bootstrap, "od-used", [b"a", b"b"])
    commit_offsets_only(server.bootstrap, "od-group", "od-other", 1)
    member = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "od-group",
                          "auto.offset.reset": "earliest", "session.timeout.ms": 6000})  # fmt: skip
    member.subscribe(["od-used"])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    client = wire(server)
    try:
        topics = [{"name": "od-used", "partitions": [{"partition_index": 0}]},
                  {"name": "od-other", "partitions": [{"partition_index": 0},
                                                      {"partition_index": 1}]}]  # fmt: skip
        answer = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "od-group", "topics": topics})
        assert answer["error_code"] == 0
        codes = {(t["name"], p["partition_index"]): p["error_code"]
                 for t in answer["topics"] for p in t["partitions"]}  # fmt: skip
        assert codes == {("od-used", 0): 86, ("od-other", 0): 0, ("od-other", 1): 0}
        unknown = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "od-nobody", "topics": topics})
        assert (unknown["error_code"], unknown["topics"]) == (69, [])
    finally:
        client.close()
        member.close()
    tp = TopicPartition("od-other", 0)
    offsets = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("od-group", [tp])])
    assert offsets["od-group"].result(10).topic_partitions[0].offset == ck.OFFSET_INVALID


def test_offsets_only_groups_come_back_empty_and_deletions_stay(tmp_path):
    with ServerProcess(tmp_path / "data") as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        create(admin, "kept", 1)
        produce(s.bootstrap, "kept", [b"x"] * 3)
        commit_offsets_only(s.bootstrap, "simple", "kept", 2)
        commit_offsets_only(s.bootstrap, "doomed", "kept", 1)
        assert group_states(admin).get("simple") == "EMPTY"
        admin.delete_consumer_groups(["doomed"])["doomed"].result(10)
    with ServerProcess(tmp_path / "data") as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        states = group_states(admin)
        assert states.get("simple") == "EMPTY" and "doomed" not in states
        described = admin.describe_consumer_groups(["simple", "doomed"])
        simple = described["simple"].result(10)
        assert simple.state.name == "EMPTY" and simple.members == []
        assert described["doomed"].result(10).state.name == "DEAD"
        kp = KafkaAdminClient(bootstrap_servers=s.bootstrap)
        listed = {g["group_id"]: g for g in kp.list_groups()}
        assert listed["simple"]["protocol_type"] == "" and "doomed" not in listed
        group = kp.describe_groups(["simple"])["simple"]
        assert (group["group_state"], group["protocol_type"], group["members"]) == ("Empty", "", [])
        offsets = kp.list_group_offsets("simple")["simple"]
        assert offsets[kafka.TopicPartition("kept", 0)].offset == 2
        kp.close()


# -- ListOffsets max timestamp ------------------------------------------------------------------
def test_max_timestamp_is_the_first_record_sharing_the_largest(server, admin):
    topic = "max-ts"
    create(admin, topic, 1, **{"internal.segment.bytes": "200"})
    stamps = [T0, T0 + 5, T0 + 5, T0 + 3, T0 + 5, T0 + 1]
    produce(server.bootstrap, topic, [b"r%d" % i for i in range(6)], timestamps=stamps)
    assert len(list((server.data_dir / f"{topic}-0").glob("*.log"))) > 2  # several segments
    found = list_offset(admin, topic, OffsetSpec.max_timestamp())
    assert (found.offset, found.timestamp) == (1, T0 + 5)


def test_max_timestamp_within_one_batch(server, admin):
    topic = "max-ts-batch"
    create(admin, topic, 1)
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 200,
                            "compression.type": "lz4"})  # fmt: skip
    for i, ts in enumerate([T0, T0 + 9, T0 + 2, T0 + 9, T0 + 9]):
        producer.produce(topic, b"b%d" % i, partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    found = list_offset(admin, topic, OffsetSpec.max_timestamp())
    assert (found.offset, found.timestamp) == (1, T0 + 9)
    empty = "max-ts-empty"
    create(admin, empty, 1)
    assert list_offset(admin, empty, OffsetSpec.max_timestamp()).offset == -1


def test_max_timestamp_with_log_append_time(server, admin):
    topic = "max-ts-append"
    create(admin, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    produce(server.bootstrap, topic, [b"first"])
    time.sleep(0.01)  # a later append time for the next batch
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 200})
    for i in range(3):
        producer.produce(topic, b"a%d" % i, partition=0)
    assert producer.flush(30) == 0
    found = list_offset(admin, topic, OffsetSpec.max_timestamp())
    # Every record of a LogAppendTime batch has the batch's time: the last batch's first.
    assert found.offset == 1


def test_concurrent_growths_of_one_topic_are_serialized(server, admin):
    create(admin, "raced", 1)
    body = {"topics": [{"name": "raced", "count": 400, "assignments": None}],
            "timeout_ms": 10_000, "validate_only": False}  # fmt: skip
    clients = [wire(server), wire(server)]
    for i, client in enumerate(clients):
        client.send_raw(encode_request(ApiKey.CREATE_PARTITIONS, 3, 1, f"c{i}", body))
    from kafkalog.protocol import decode_response

    codes = sorted(
        decode_response(ApiKey.CREATE_PARTITIONS, 3, c.read_frame())[1]["results"][0]["error_code"]
        for c in clients
    )
    for client in clients:
        client.close()
    assert codes == [0, 37]  # one grew it, the other found it grown: INVALID_PARTITIONS
    assert len(admin.list_topics("raced", timeout=10).topics["raced"].partitions) == 400
    assert len(list(server.data_dir.glob("raced-*"))) == 400
