"""Retention while serving (log.retention.check.interval.ms, file.delete.delay.ms): segments go by
retention.ms and retention.bytes, the log start offset moves for ListOffsets and consumers, the
checkpoint is written and survives a restart, and a Fetch being sent survives its segments'
deletion."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kafkalog.errors import KafkalogError
from kafkalog.log.datadir.checkpoints import read_offset_checkpoint
from kafkalog.log.datadir.naming import TopicPartition as LogTopicPartition
from kafkalog.log.segment.append_walk import walk_append
from kafkalog.protocol import ApiKey, decode_response, encode_request
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig
from kafkalog.server.log_retention import RetentionSettings

from .server_process import SMALL
from .wire import WireClient

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec  # noqa: E402

HOUR = 3_600_000


def config(data_dir: Path, **extra: str) -> ServerConfig:
    settings = {"log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "200"}
    settings.update(extra)
    return ServerConfig([data_dir], port=0, extra=settings, **SMALL)


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)


def produce(bootstrap: str, topic: str, values: list[bytes], timestamps: list[int]) -> None:
    """One request per record: a batch each."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                            "max.in.flight": 1})  # fmt: skip
    for value, ts in zip(values, timestamps, strict=True):
        producer.produce(topic, value, partition=0, timestamp=ts)
        producer.flush(10)
    assert producer.flush(30) == 0


def earliest(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset


def consume_from_beginning(bootstrap: str, topic: str, until: int) -> list[int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "r",
                            "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    offsets: list[int] = []
    deadline = time.monotonic() + 20
    while (not offsets or offsets[-1] < until - 1) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            offsets.append(m.offset())
    consumer.close()
    return offsets


def segment_bases(directory: Path, suffix: str = ".log") -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob(f"*{suffix}"))


def wait_for(condition, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def checkpointed_start(data_dir: Path, topic: str) -> int:
    offsets = read_offset_checkpoint(data_dir / "log-start-offset-checkpoint")
    return offsets[LogTopicPartition(topic, 0)]


def test_retention_ms_deletes_old_segments_while_serving(tmp_path):
    data = tmp_path / "data"
    now = int(time.time() * 1000)
    with BackgroundServer(config(data)) as s:
        create(s.bootstrap, "aged", **{"internal.segment.bytes": "300", "retention.ms": str(HOUR),
                                        "file.delete.delay.ms": "4000"})  # fmt: skip
        # 20 records from two hours ago, then 10 of now: the old segments go.
        produce(s.bootstrap, "aged", [b"old%03d" % i for i in range(20)], [now - 2 * HOUR] * 20)
        produce(s.bootstrap, "aged", [b"new%03d" % i for i in range(10)], [now] * 10)
        directory = data / "aged-0"
        # Renamed .deleted at once, removed after file.delete.delay.ms: the files are watched, not
        # the admin API, whose round trips on a loaded machine can outlast the delay.
        wait_for(lambda: segment_bases(directory, ".log.deleted"))
        wait_for(lambda: earliest(s.bootstrap, "aged") > 0)
        start = earliest(s.bootstrap, "aged")
        assert 0 < start <= 20
        assert segment_bases(directory)[0] == start
        # The segment's files (.log, .index, .timeindex) go one after the other: wait for all.
        wait_for(lambda: not list(directory.glob("*.deleted")))
        # Segments holding a new record stay; consumers start at the new log start offset.
        assert consume_from_beginning(s.bootstrap, "aged", 30) == list(range(start, 30))
        wait_for(lambda: checkpointed_start(data, "aged") == start)
        assert s.broker.log_retention.segments_deleted >= 1
    with BackgroundServer(config(data)) as s:  # the start survives a restart
        assert earliest(s.bootstrap, "aged") == start
        assert consume_from_beginning(s.bootstrap, "aged", 30)[0] == start


def test_retention_bytes_keeps_the_log_under_the_limit(tmp_path):
    data = tmp_path / "data"
    now = int(time.time() * 1000)
    with BackgroundServer(config(data)) as s:
        create(s.bootstrap, "sized", **{"internal.segment.bytes": "300",
                                        "retention.bytes": "1000",
                                        "file.delete.delay.ms": "0"})  # fmt: skip
        produce(s.bootstrap, "sized", [b"v%03d" % i for i in range(40)], [now] * 40)
        directory = data / "sized-0"

        def settled() -> bool:
            sizes = [p.stat().st_size for p in sorted(directory.glob("*.log"))]
            return sum(sizes) >= 1000 and sum(sizes) - sizes[0] < 1000

        wait_for(settled)
        start = segment_bases(directory)[0]
        assert start > 0
        wait_for(lambda: earliest(s.bootstrap, "sized") == start)
        assert consume_from_beginning(s.bootstrap, "sized", 40) == list(range(start, 40))
        wait_for(lambda: checkpointed_start(data, "sized") == start)
    with BackgroundServer(config(data)) as s:
        assert earliest(s.bootstrap, "sized") == start


def test_compacted_and_unlimited_topics_are_left_alone(tmp_path):
    data = tmp_path / "data"
    old = int(time.time() * 1000) - 2 * HOUR
    with BackgroundServer(config(data, **{"log.cleaner.enable": "false"})) as s:
        create(s.bootstrap, "kept", **{"internal.segment.bytes": "300", "retention.ms": "-1"})
        create(s.bootstrap, "table", **{"internal.segment.bytes": "300", "retention.ms": "1000",
                                        "cleanup.policy": "compact,delete"})  # fmt: skip
        for topic in ("kept", "table"):
            produce(s.bootstrap, topic, [b"v%03d" % i for i in range(12)], [old] * 12)
        passes = s.broker.log_retention.passes
        wait_for(lambda: s.broker.log_retention.passes >= passes + 3)
        assert earliest(s.bootstrap, "kept") == 0
        assert earliest(s.bootstrap, "table") == 0  # compacted: the cleaner's, and it is off


def describe_config(bootstrap: str, topic: str, name: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("TOPIC", topic)
    return admin.describe_configs([resource])[resource].result(10)[name]


def test_broker_settings_are_every_topics_defaults(tmp_path):
    """log.retention.hours and log.segment.delete.delay.ms on the broker are retention.ms and
    file.delete.delay.ms for a topic without its own (Kafka's ServerTopicConfigSynonyms), shown
    as STATIC_BROKER_CONFIG; a topic's override wins."""
    data = tmp_path / "data"
    now = int(time.time() * 1000)
    broker = config(data, **{"log.retention.hours": "1", "log.segment.delete.delay.ms": "0"})
    with BackgroundServer(broker) as s:
        create(s.bootstrap, "hourly", **{"internal.segment.bytes": "300"})
        create(s.bootstrap, "forever", **{"internal.segment.bytes": "300", "retention.ms": "-1"})
        for topic in ("hourly", "forever"):
            produce(s.bootstrap, topic, [b"old%03d" % i for i in range(12)], [now - 2 * HOUR] * 12)
            produce(s.bootstrap, topic, [b"new%03d" % i for i in range(3)], [now] * 3)
        wait_for(lambda: earliest(s.bootstrap, "hourly") >= 12)
        passes = s.broker.log_retention.passes
        wait_for(lambda: s.broker.log_retention.passes >= passes + 3)
        assert earliest(s.bootstrap, "forever") == 0
        retention = describe_config(s.bootstrap, "hourly", "retention.ms")
        assert (retention.value, retention.source) == (str(HOUR), 4)  # STATIC_BROKER_CONFIG
        assert not list((data / "hourly-0").glob("*.deleted"))  # the broker's delay: 0
        own = describe_config(s.bootstrap, "forever", "retention.ms")
        assert (own.value, own.source) == ("-1", 1)  # the topic's own, TOPIC_CONFIG
    with pytest.raises(KafkalogError, match=r"log\.retention\.hours"):
        with BackgroundServer(config(data, **{"log.retention.hours": "soon"})):
            pass
    with pytest.raises(KafkalogError, match=r"log\.cleanup\.policy"):
        with BackgroundServer(config(data, **{"log.cleanup.policy": "shred"})):
            pass


def alter_broker(port: int, name: str, **configs: str | None) -> dict:
    """IncrementalAlterConfigs on the broker resource ``name`` (SET, or DELETE for None)."""
    client = WireClient("127.0.0.1", port)
    ops = [{"name": k, "value": v, "config_operation": 1 if v is None else 0}
           for k, v in configs.items()]  # fmt: skip
    body = {"resources": [{"resource_type": 4, "resource_name": name, "configs": ops}],
            "validate_only": False}  # fmt: skip
    try:
        (result,) = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    finally:
        client.close()
    return result


def test_dynamic_broker_configs_apply_at_once_and_survive_a_restart(tmp_path):
    """A cluster-wide log.retention.ms set while serving is every topic's retention.ms at once
    (DYNAMIC_DEFAULT_BROKER_CONFIG), this node's own wins over it, both are kept across a
    restart; a static config and a bad value are refused."""
    data = tmp_path / "data"
    with BackgroundServer(config(data, **{"log.retention.ms": "-1"})) as s:
        create(s.bootstrap, "t")
        assert alter_broker(s.broker.port, "", **{"log.retention.ms": "7200000"})["error_code"] == 0
        assert s.broker.get_log("t", 0).config["retention.ms"] == 7_200_000
        entry = describe_config(s.bootstrap, "t", "retention.ms")
        assert (entry.value, entry.source) == ("7200000", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
        node = str(s.broker.node_id)
        assert alter_broker(s.broker.port, node, **{"log.retention.ms": "60000"})["error_code"] == 0
        assert s.broker.get_log("t", 0).config["retention.ms"] == 60_000
        refused = alter_broker(s.broker.port, "", **{"log.dirs": "/elsewhere"})
        assert refused["error_code"] == 42  # INVALID_REQUEST
        assert refused["error_message"] == "Cannot update these configs dynamically: [log.dirs]"
        bad = alter_broker(s.broker.port, "", **{"log.segment.bytes": "10"})
        assert bad["error_code"] == 40 and "segment.bytes" in bad["error_message"]  # INVALID_CONFIG
        assert s.broker.get_log("t", 0).config["segment.bytes"] == 1 << 30  # unchanged
    with BackgroundServer(config(data, **{"log.retention.ms": "-1"})) as s:
        assert s.broker.get_log("t", 0).config["retention.ms"] == 60_000
        assert (
            alter_broker(s.broker.port, str(s.broker.node_id), **{"log.retention.ms": None})[
                "error_code"
            ]
            == 0
        )
        assert s.broker.get_log("t", 0).config["retention.ms"] == 7_200_000


def test_settings_by_kafka_names():
    defaults = RetentionSettings.from_config(ServerConfig([Path(".")]))
    assert (defaults.check_interval_ms, defaults.initial_delay_ms) == (300_000, 30_000)
    assert defaults.cleaner_enable
    bad = ServerConfig([Path(".")], extra={"log.retention.check.interval.ms": "0"})
    with pytest.raises(KafkalogError, match=r"log\.retention\.check\.interval\.ms"):
        RetentionSettings.from_config(bad)


def test_fetch_being_sent_survives_the_deletion_of_its_segments(tmp_path):
    data = tmp_path / "data"
    old = int(time.time() * 1000) - 2 * HOUR
    # No scheduled pass: the test runs one while the answer is being sent.
    settings = {"log.retention.check.interval.ms": str(HOUR), "log.initial.task.delay.ms": "0"}
    with BackgroundServer(config(data, **settings)) as s:
        # One 12 MiB segment: more than the socket buffers hold, so it is still being sent.
        create(s.bootstrap, "big", **{"internal.segment.bytes": str(64 << 20),
                                      "retention.ms": str(HOUR),
                                      "file.delete.delay.ms": "0"})  # fmt: skip
        value = bytes(range(256)) * 400  # 100 KiB, incompressible enough
        produce(s.bootstrap, "big", [value] * 120, [old] * 120)
        client = WireClient("127.0.0.1", s.broker.port)
        body = {"max_wait_ms": 0, "max_bytes": 64 << 20, "isolation_level": 0, "topics": [
            {"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0,
                                             "partition_max_bytes": 64 << 20}]}]}  # fmt: skip
        client.send_raw(encode_request(ApiKey.FETCH, 12, 7, "wire", body))
        time.sleep(0.5)  # the answer is being sent, stuck on the client's full buffer
        sent_before = s.broker.stats.sendfile_bytes
        future = asyncio.run_coroutine_threadsafe(s.broker.log_retention.run_once(), s._loop)
        assert future.result(30) == 1  # the active segment, after a roll
        wait_for(lambda: not list((data / "big-0").glob("*.deleted")))  # no delay: removed
        frame = client.read_frame()
        correlation_id, response = decode_response(ApiKey.FETCH, 12, frame)
        assert correlation_id == 7
        part = response["responses"][0]["partitions"][0]
        assert part["error_code"] == 0
        records = part["records"]
        offsets, *_ = walk_append(memoryview(bytes(records)), check_crc=True)
        assert [o[0] for o in offsets] == list(range(120))  # whole and valid
        assert sent_before < len(records)  # the deletion came while it was being sent
        client.close()
        assert earliest(s.bootstrap, "big") == 120
