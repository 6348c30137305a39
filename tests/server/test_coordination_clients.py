"""Consumer groups, idempotent and transactional producers of real clients against the server.

librdkafka (confluent-kafka) and kafka-python drive the group and transaction coordinators
through their own protocol code; what they read back, what the log holds (read with
kafka-python's record reader) and the log layer's verify are the checks. The server runs on its
own thread (BackgroundServer) with small internal topics and no initial rebalance delay, so the
tests spend their time on the protocol rather than on Kafka's production defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.record import MemoryRecords as KpRecords  # noqa: E402

from kafkalog.log.verify.data_dir import verify  # noqa: E402
from kafkalog.server.app import BackgroundServer  # noqa: E402
from kafkalog.server.config import ServerConfig  # noqa: E402

pytestmark = pytest.mark.slow

SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def server_config(data_dir: Path) -> ServerConfig:
    return ServerConfig(
        [data_dir], port=0, offsets_topic_num_partitions=3,
        transaction_state_log_num_partitions=3, extra=dict(SETTINGS),
    )  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("coordinated")


@pytest.fixture(scope="module")
def server(data_dir):
    with BackgroundServer(server_config(data_dir)) as s:
        yield s


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> set[bytes]:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for p in range(partitions):
        for i in range(per_partition):
            value = f"{topic}-{p}-{i}".encode()
            producer.produce(topic, value=value, partition=p)
            values.add(value)
    assert producer.flush(30) == 0
    return values


def ck_consumer(bootstrap: str, group: str, **conf):
    return ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
        **conf,
    })  # fmt: skip


def poll_all(consumers, seconds: float, until) -> list:
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until(got):
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m)
    return got


def log_batches(data_dir: Path, topic: str, partition: int):
    part = data_dir / f"{topic}-{partition}"
    data = b"".join(p.read_bytes() for p in sorted(part.glob("*.log")))
    batches, out = KpRecords(data), []
    while (batch := batches.next_batch()) is not None:
        out.append(batch)
    return out


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_librdkafka_group_of_two_rebalances_and_commits(server, assignor):
    topic, group = f"grp-ck-{assignor}", "g-ck" if assignor == "range" else f"g-ck-{assignor}"
    create_topic(server.bootstrap, topic, 4)
    produced = produce(server.bootstrap, topic, 4, 30)
    strategy = {"partition.assignment.strategy": assignor}
    first = ck_consumer(server.bootstrap, group, **strategy)
    first.subscribe([topic])
    seen = [m.value() for m in poll_all([first], 30, lambda got: len(got) >= 30)]
    assert len(first.assignment()) == 4
    first.commit(asynchronous=False)
    second = ck_consumer(server.bootstrap, group, **strategy)
    second.subscribe([topic])

    def balanced(got) -> bool:
        a, b = first.assignment(), second.assignment()
        return len(a) == 2 and len(b) == 2 and produced <= set(seen) | {m.value() for m in got}

    seen += [m.value() for m in poll_all([first, second], 60, balanced)]
    assert produced <= set(seen)
    assert {tp.partition for tp in first.assignment() + second.assignment()} == {0, 1, 2, 3}
    first.commit(asynchronous=False)
    second.commit(asynchronous=False)
    committed = first.committed([CkTopicPartition(topic, p) for p in range(4)], timeout=10)
    assert [tp.offset for tp in committed] == [30, 30, 30, 30]
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    listed = admin.list_consumer_groups().result(10)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert str(described.state).endswith("STABLE") and len(described.members) == 2
    first.close()
    second.close()
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert str(described.state).endswith("EMPTY") and not described.members


def test_kafka_python_group_shares_partitions_and_resumes_from_commits(server):
    topic, group = "grp-kp", "g-kp"
    create_topic(server.bootstrap, topic, 4)
    produced = produce(server.bootstrap, topic, 4, 20)

    def consumer():
        return kafka.KafkaConsumer(
            topic, bootstrap_servers=server.bootstrap, group_id=group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=300,
        )  # fmt: skip

    def knowing_the_topic(c):
        # The client learns the topic's partitions before its first join, so as the group's
        # leader its range assignor never assigns from empty metadata (a kafka-python race).
        deadline = time.monotonic() + 20
        while c.partitions_for_topic(topic) != {0, 1, 2, 3} and time.monotonic() < deadline:
            time.sleep(0.1)
        return c

    consumers = [knowing_the_topic(consumer()), knowing_the_topic(consumer())]
    seen: set[bytes] = set()
    lock, stop, committed = threading.Lock(), threading.Event(), []

    def run(c) -> None:  # each member polls on its own thread, as applications do
        while not stop.is_set():
            for records in c.poll(timeout_ms=200).values():
                with lock:
                    seen.update(r.value for r in records)
        for _ in range(50):
            try:
                c.commit()
                committed.append(c)
                break
            except kafka.errors.RebalanceInProgressError:
                c.poll(timeout_ms=200)
        c.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            done = produced <= seen
        if done and all(len(c.assignment()) == 2 for c in consumers):
            break
        time.sleep(0.1)
    shares = [len(c.assignment()) for c in consumers]
    stop.set()
    for t in threads:
        t.join(30)
    assert produced <= seen and shares == [2, 2] and len(committed) == 2
    three = knowing_the_topic(consumer())
    extra = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(three.assignment()) < 4:
        for records in three.poll(timeout_ms=200).values():
            extra.extend(records)
    assert len(three.assignment()) == 4 and extra == []  # resumed after the committed offsets
    assert {three.position(tp) for tp in three.assignment()} == {20}
    three.close()


def test_idempotent_producers_write_sequenced_batches(server, data_dir):
    topic = "idem"
    create_topic(server.bootstrap, topic, 1)
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True,
                            "linger.ms": 2, "batch.num.messages": 50})  # fmt: skip
    for i in range(300):
        producer.produce(topic, value=b"ck-%d" % i, partition=0)
    assert producer.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True,
                             acks="all", linger_ms=2)  # fmt: skip
    for f in [kp.send(topic, value=b"kp-%d" % i, partition=0) for i in range(200)]:
        f.get(10)
    kp.close()
    expected_seq: dict[int, int] = {}
    counts: dict[int, int] = {}
    for batch in log_batches(data_dir, topic, 0):
        pid = batch.producer_id
        assert pid >= 0 and batch.producer_epoch == 0
        assert batch.base_sequence == expected_seq.get(pid, 0)
        n = len(list(batch))
        expected_seq[pid] = batch.base_sequence + n
        counts[pid] = counts.get(pid, 0) + n
    assert sorted(counts.values()) == [200, 300]  # two producers, two distinct ids, no duplicate


def read_values(bootstrap: str, topic: str, isolation: str, n_hint: int) -> list[bytes]:
    consumer = ck_consumer(
        bootstrap,
        f"r-{uuid.uuid4()}",
        **{"isolation.level": isolation, "enable.partition.eof": True},
    )
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + 30
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == ck.KafkaError._PARTITION_EOF and len(values) >= n_hint:
                break
            continue
        values.append(m.value())
    consumer.close()
    return values


def test_librdkafka_transactions_commit_abort_and_send_offsets(server, data_dir):
    topic = "txn-ck"
    create_topic(server.bootstrap, topic, 1)
    producer = ck.Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx-ck",
                            "transaction.timeout.ms": 60_000})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"commit-%d" % i, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"abort-%d" % i, partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    group = ck_consumer(server.bootstrap, "txn-offsets")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=b"last-%d" % i, partition=0)
    producer.send_offsets_to_transaction(
        [CkTopicPartition("source", 0, 7)], group.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    committed = [b"commit-%d" % i for i in range(10)] + [b"last-%d" % i for i in range(5)]
    aborted = [b"abort-%d" % i for i in range(10)]
    assert read_values(server.bootstrap, topic, "read_committed", 15) == committed
    uncommitted = read_values(server.bootstrap, topic, "read_uncommitted", 25)
    assert uncommitted == committed[:10] + aborted + committed[10:]
    offsets = group.committed([CkTopicPartition("source", 0)], timeout=10)
    assert offsets[0].offset == 7
    group.close()
    markers = [b for b in log_batches(data_dir, topic, 0) if b.is_control_batch]
    assert [next(iter(b)).key[3] for b in markers] == [1, 0, 1]  # COMMIT, ABORT, COMMIT


def test_kafka_python_transactions_commit_and_abort(server):
    topic = "txn-kp"
    create_topic(server.bootstrap, topic, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-kp")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, value=b"yes-%d" % i, partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, value=b"no-%d" % i, partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap,
                                   isolation_level="read_committed",
                                   auto_offset_reset="earliest")  # fmt: skip
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    values, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline and len(values) < 5:
        for records in consumer.poll(timeout_ms=200).values():
            values.extend(r.value for r in records)
    assert values == [b"yes-%d" % i for i in range(5)]
    assert consumer.end_offsets([tp])[tp] == 12  # 10 records and 2 markers
    consumer.close()


def test_aiokafka_transaction_and_group_commit(server):
    aiokafka = pytest.importorskip("aiokafka")
    topic = "txn-aio"
    create_topic(server.bootstrap, topic, 1)

    async def run() -> tuple[list[bytes], int]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                             transactional_id="tx-aio")  # fmt: skip
        await producer.start()
        async with producer.transaction():
            for i in range(5):
                await producer.send_and_wait(topic, b"kept-%d" % i, partition=0)
        with contextlib.suppress(RuntimeError):
            async with producer.transaction():
                await producer.send_and_wait(topic, b"dropped", partition=0)
                raise RuntimeError("abort this one")
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=server.bootstrap, group_id="g-aio",
            isolation_level="read_committed", auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
        await consumer.start()
        try:
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < 5 and time.monotonic() < deadline:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(m.value for m in messages)
            await consumer.commit()
            return values, await consumer.committed(aiokafka.TopicPartition(topic, 0))
        finally:
            await consumer.stop()

    values, committed = asyncio.run(run())
    assert values == [b"kept-%d" % i for i in range(5)]
    assert committed == 8  # 5 records, a COMMIT, the aborted record and its ABORT


def test_state_survives_a_restart_and_the_directory_verifies(server, data_dir):
    """Last in this module: stops the shared server, checks the directory, serves it again."""
    server.stop()
    report = verify(data_dir)
    assert report.errors == [], [str(f) for f in report.errors]
    with BackgroundServer(server_config(data_dir)) as again:
        consumer = ck_consumer(again.bootstrap, "g-ck")
        committed = consumer.committed([CkTopicPartition("grp-ck-range", p) for p in range(4)], 10)
        assert [tp.offset for tp in committed] == [30, 30, 30, 30]
        consumer.close()
        producer = ck.Producer({"bootstrap.servers": again.bootstrap,
                                "transactional.id": "tx-ck"})  # fmt: skip
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("txn-ck", value=b"after-restart", partition=0)
        producer.commit_transaction(30)
        values = read_values(again.bootstrap, "txn-ck", "read_committed", 16)
        assert values[-1] == b"after-restart" and len(values) == 16
    # Offline, the log layer's readers agree: read_committed sees the committed records only,
    # and no transaction is left open.
    consumed = subprocess.run(
        [sys.executable, "-m", "kafkalog.cli.main", "consume", str(data_dir), "--topic",
         "txn-ck", "--isolation-level", "read_committed"],
        capture_output=True, check=True,
    )  # fmt: skip
    assert consumed.stdout.splitlines() == values
    transactions = subprocess.run(
        [sys.executable, "-m", "kafkalog.cli.main", "transactions", str(data_dir)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert transactions.returncode == 0 and " 0 open" in transactions.stdout, transactions
    assert verify(data_dir).errors == []
    # The Spark source's reader (planned and read without a SparkSession) agrees as well.
    assert spark_source_values(data_dir, "txn-ck", "read_committed") == values
    everything = spark_source_values(data_dir, "txn-ck", "read_uncommitted")
    assert len(everything) == len(values) + 10 and set(values) < set(everything)


def spark_source_values(data_dir: Path, topic: str, isolation: str) -> list[bytes]:
    from kafkalog.dataset.options import parse_read_options
    from kafkalog.dataset.reader import (
        open_selected,
        plan_input_partitions,
        read_partition,
        resolve_ranges,
    )

    options = parse_read_options({"path": str(data_dir), "subscribe": topic,
                                  "kafka.isolation.level": isolation})  # fmt: skip
    logs = open_selected(options)
    try:
        parts = plan_input_partitions(options, logs, resolve_ranges(options, logs))
    finally:
        for log in logs.values():
            log.close()
    return [v for p in parts for b in read_partition(p) for v in b.column("value").to_pylist()]
