"""Real clients against ``kafkalog serve``: librdkafka (confluent-kafka) and kafka-python produce
with every codec and read back byte for byte; offsets, topics and configs through their admin
APIs. The records each client sends are the expected values; the on-disk codec is read back with
kafka-python's own record decoder."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from .server_process import ServerProcess

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.record import MemoryRecords as KpRecords  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KP_CODEC = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = int(time.time() * 1000) - 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("served"), "--num-partitions", "2") as s:
        yield s
        print(s.log())  # shown with the failures, if any


def make_records(seed: int, n: int = 60) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else rng.randbytes(rng.randint(0, 20))
        # Compressible values: librdkafka sends a batch uncompressed when its codec would not
        # make it smaller.
        body = b"value-%d;" % i * rng.randint(0, 30) + rng.randbytes(rng.randint(0, 4))
        value = None if i % 11 == 5 and key is not None else body
        headers = [(f"h{j}", rng.randbytes(rng.randint(0, 8))) for j in range(i % 3)]
        out.append((key, value, headers, T0 + i))
    return out


def produce_librdkafka(bootstrap: str, topic: str, records: list[tuple], codec: str, **conf):
    producer = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                            "linger.ms": 5, "acks": "all", **conf})  # fmt: skip
    errors = []
    for key, value, headers, ts in records:
        producer.produce(topic, value=value, key=key, headers=headers or None, partition=0,
                         timestamp=ts, on_delivery=lambda e, m: e and errors.append(e))  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == []


def produce_kafka_python(bootstrap: str, topic: str, records: list[tuple], codec: str):
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5,
        compression_type=KP_CODEC[codec], enable_idempotence=False,
    )  # fmt: skip
    futures = [producer.send(topic, value=v, key=k, headers=h, partition=0, timestamp_ms=ts)
               for k, v, h, ts in records]  # fmt: skip
    producer.flush(30)
    for f in futures:
        f.get(10)
    producer.close()


def consume_librdkafka(bootstrap: str, topic: str, n: int, **conf) -> list[tuple]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                            "enable.auto.commit": False, **conf})  # fmt: skip
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    out, deadline = [], time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        out.append((m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
    consumer.close()
    return out


def consume_kafka_python(bootstrap: str, topic: str, n: int, **conf) -> list[tuple]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=5000, **conf)  # fmt: skip
    consumer.assign([kafka.TopicPartition(topic, 0)])
    consumer.seek(kafka.TopicPartition(topic, 0), 0)
    out = []
    for m in consumer:
        out.append((m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp))
        if len(out) == n:
            break
    consumer.close()
    return out


def codecs_on_disk(data_dir, topic: str) -> set[int]:
    found = set()
    for path in sorted((data_dir / f"{topic}-0").glob("*.log")):
        records = KpRecords(path.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            assert batch.validate_crc()
            found.add(batch.compression_type)
    return found


@pytest.mark.parametrize("producer", ["librdkafka", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_byte_exact_through_both_clients(server, producer, codec):
    topic = f"{producer}-{codec}"
    records = make_records(hash(topic) & 0xFFFF)
    send = produce_librdkafka if producer == "librdkafka" else produce_kafka_python
    send(server.bootstrap, topic, records, codec)
    assert consume_librdkafka(server.bootstrap, topic, len(records)) == records
    assert consume_kafka_python(server.bootstrap, topic, len(records)) == records
    stored = codecs_on_disk(server.data_dir, topic)
    if producer == "librdkafka":
        # librdkafka sends a batch uncompressed when compressing it fails to shrink it (a short
        # last batch of random bytes): the topic keeps each batch as the producer sent it.
        assert CODEC_ID[codec] in stored and stored <= {CODEC_ID[codec], 0}
    else:
        assert stored == {CODEC_ID[codec]}


def test_offsets_by_time_earliest_and_latest(server):
    topic = "offsets"
    records = make_records(7, 30)
    produce_librdkafka(server.bootstrap, topic, records, "lz4")
    consumer = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "offsets"})
    assert consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10) == (0, 30)
    found = consumer.offsets_for_times([ck.TopicPartition(topic, 0, T0 + 12)], timeout=10)
    assert found[0].offset == 12
    after = consumer.offsets_for_times([ck.TopicPartition(topic, 0, T0 + 999_999)], timeout=10)
    assert after[0].offset == -1  # no record that late: Kafka answers -1
    consumer.close()
    kp = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap)
    tp = kafka.TopicPartition(topic, 0)
    assert kp.beginning_offsets([tp]) == {tp: 0}
    assert kp.end_offsets([tp]) == {tp: 30}
    assert kp.offsets_for_times({tp: T0 + 29})[tp].offset == 29
    kp.close()


def test_topics_and_configs_through_the_admin_api(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = "administered"
    futures = admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "123456"})])
    futures[topic].result(10)
    bad = admin.create_topics([NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"})])
    with pytest.raises(ck.KafkaException, match=r"retention\.ms"):
        bad["bad-config"].result(10)
    again = admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(ck.KafkaException, match="already exists"):
        again[topic].result(10)
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ck.admin.ConfigSource.DEFAULT_CONFIG.value

    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])  # fmt: skip
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == str(7 * 24 * 3600 * 1000)

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics
    assert not list(server.data_dir.glob(f"{topic}-*"))


def test_aiokafka_produces_idempotently_and_consumes_in_a_group(server):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    records = make_records(99, 30)

    async def run() -> list[tuple]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=server.bootstrap, compression_type="zstd", enable_idempotence=True
        )
        await producer.start()
        for key, value, headers, ts in records:
            await producer.send_and_wait("aio", value, key=key, headers=headers, partition=0,
                                         timestamp_ms=ts)  # fmt: skip
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("aio", bootstrap_servers=server.bootstrap,
                                             group_id="aio", auto_offset_reset="earliest",
                                             enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        got = []
        async for m in consumer:
            got.append((m.key, m.value, list(m.headers), m.timestamp))
            if len(got) == len(records):
                break
        await consumer.commit()
        committed = await consumer.committed(aiokafka.TopicPartition("aio", 0))
        await consumer.stop()
        assert committed == len(records)
        return got

    assert asyncio.run(run()) == records
    assert consume_librdkafka(server.bootstrap, "aio", len(records)) == records


def test_serve_refuses_a_directory_in_use_and_a_bad_listen_address(server):
    import subprocess
    import sys

    base = [sys.executable, "-m", "kafkalog.cli.main", "serve", str(server.data_dir)]
    locked = subprocess.run([*base, "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert locked.returncode == 3  # docs/server.md: a locked data directory is exit status 3
    assert "Failed to acquire lock" in locked.stderr
    assert str(server.data_dir / ".lock") in locked.stderr
    bad = subprocess.run([*base, "--listen", "nowhere"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "expected HOST:PORT" in bad.stderr


@pytest.mark.parametrize("api_version", [(0, 11), (2, 1)], ids=["kafka-0.11", "kafka-2.1"])
def test_kafka_python_pinned_to_older_brokers_uses_older_versions(server, api_version):
    # kafka-python told the broker is old skips ApiVersions and sends the versions that broker
    # spoke: the low ends of our ranges.
    topic = "pinned-{}-{}".format(*api_version)
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, api_version=api_version,
                                   compression_type="gzip")  # fmt: skip
    for i in range(5):
        producer.send(topic, b"p%d" % i, partition=0).get(10)
    producer.close()
    group = topic
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id=group,
                                   api_version=api_version, auto_offset_reset="earliest",
                                   consumer_timeout_ms=4000)  # fmt: skip
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 5:
            break
    consumer.commit()
    consumer.close()
    assert values == [b"p%d" % i for i in range(5)]
