"""Consumer groups, idempotent and transactional producers of real clients against a served
directory, then the directory itself: ``kafkalog verify`` clean and Spark reading the records.

The server is stopped gracefully at the end of the module, so the last tests see exactly the
data directory a shut-down broker leaves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from .server_process import ServerProcess

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecords as KpRecords  # noqa: E402

N_PARTITIONS = 4


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("e2e")
    server = ServerProcess(data_dir, "--num-partitions", str(N_PARTITIONS),
                           "--config", "group.initial.rebalance.delay.ms=0").start()  # fmt: skip
    yield server
    if server.proc.poll() is None:
        server.stop()


def produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % N_PARTITIONS)
    assert producer.flush(30) == 0


def batches_on_disk(data_dir, topic: str) -> list:
    found = []
    for p in range(N_PARTITIONS):
        for path in sorted((data_dir / f"{topic}-{p}").glob("*.log")):
            records = KpRecords(path.read_bytes())
            while records.has_next():
                batch = records.next_batch()
                if batch is None:
                    break
                found.append((p, batch, list(batch)))  # a batch iterates once
    return found


@pytest.fixture(scope="module")
def grouped(served):
    """400 values produced to ``grouped``, once, for the group test and the Spark test."""
    values = [b"g%04d" % i for i in range(400)]
    produce(served.bootstrap, "grouped", values)
    return values


def test_two_members_rebalance_commit_and_cover_every_record(served, grouped):
    topic, group = "grouped", f"g-{uuid.uuid4()}"
    values = grouped
    conf = {"bootstrap.servers": served.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}  # fmt: skip
    assigned: dict[str, list] = {"a": [], "b": []}
    first = ck.Consumer(conf)
    first.subscribe([topic], on_assign=lambda c, ps: assigned["a"].append(len(ps)))
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 100 and time.monotonic() < deadline:
        m = first.poll(0.2)
        if m is not None and m.error() is None:
            seen.append(m.value())
    first.commit(asynchronous=False)
    assert assigned["a"] == [N_PARTITIONS]  # alone: every partition

    second = ck.Consumer(conf)
    second.subscribe([topic], on_assign=lambda c, ps: assigned["b"].append(len(ps)))
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and len(set(seen)) < len(values):
        for consumer in (first, second):
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                seen.append(m.value())
    assert set(seen) == set(values)
    assert assigned["b"] and assigned["b"][-1] == N_PARTITIONS // 2  # the rebalance split them
    assert assigned["a"][-1] == N_PARTITIONS // 2
    for consumer in (first, second):
        consumer.commit(asynchronous=False)
        consumer.close()

    checker = ck.Consumer({"bootstrap.servers": served.bootstrap, "group.id": group})
    committed = checker.committed([ck.TopicPartition(topic, p) for p in range(N_PARTITIONS)], 10)
    assert {tp.partition: tp.offset for tp in committed} == {p: 100 for p in range(N_PARTITIONS)}
    checker.close()
    # kafka-python reads the same commits, in Kafka's own __consumer_offsets schema.
    kp = kafka.KafkaConsumer(bootstrap_servers=served.bootstrap, group_id=group)
    kp_tp = kafka.TopicPartition(topic, 2)
    assert kp.committed(kp_tp) == 100
    kp.close()


def test_kafka_python_group_consumer_commits_and_resumes(served):
    topic, group = "kp-grouped", f"kg-{uuid.uuid4()}"
    produce(served.bootstrap, topic, [b"k%03d" % i for i in range(40)])
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=served.bootstrap, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=4000)  # fmt: skip
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == 40:
            break
    consumer.commit()
    consumer.close()
    assert sorted(got) == [b"k%03d" % i for i in range(40)]
    produce(served.bootstrap, topic, [b"late"])
    again = kafka.KafkaConsumer(topic, bootstrap_servers=served.bootstrap, group_id=group,
                                auto_offset_reset="earliest", consumer_timeout_ms=4000)  # fmt: skip
    assert [m.value for m in again] == [b"late"]  # resumed from the commits
    again.close()


def test_idempotent_producers_write_sequenced_batches_without_duplicates(served):
    topic = "idempotent"
    values = [b"i%04d" % i for i in range(300)]
    produce(served.bootstrap, topic, values[:150], **{"enable.idempotence": True})
    producer = kafka.KafkaProducer(bootstrap_servers=served.bootstrap, enable_idempotence=True)
    for i, value in enumerate(values[150:]):
        producer.send(topic, value=value, partition=i % N_PARTITIONS)
    producer.flush(30)
    producer.close()
    batches = batches_on_disk(served.data_dir, topic)
    producer_ids = {b.producer_id for _, b, _ in batches}
    assert len(producer_ids) == 2 and all(pid >= 0 for pid in producer_ids)
    for pid in producer_ids:
        for p in range(N_PARTITIONS):
            mine = [(b, rs) for q, b, rs in batches if q == p and b.producer_id == pid]
            expected = 0
            for b, records in mine:  # sequences run without gaps from 0 in every partition
                assert b.base_sequence == expected
                expected += len(records)
    stored = [r.value for _, _, records in batches for r in records]
    assert sorted(stored) == values


def read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                            "isolation.level": isolation, "enable.auto.commit": False})  # fmt: skip
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
    out, idle = [], 0
    while idle < 4:
        m = consumer.poll(0.5)
        if m is None:
            idle += 1
        elif m.error() is None:
            out.append(m.value())
            idle = 0
    consumer.close()
    return out


@pytest.fixture(scope="module")
def transactions(served):
    """Three transactions of one transactional producer over every partition of ``transactional``
    (commit 10, abort 7, commit 5): (the committed values, every value). Made once, for the test
    that reads them back through clients and the one that reads them through Spark."""
    topic = "transactional"
    producer = ck.Producer({"bootstrap.servers": served.bootstrap,
                            "transactional.id": f"tx-{uuid.uuid4()}", "linger.ms": 5})  # fmt: skip
    producer.init_transactions(30)
    plan = [("commit", 10), ("abort", 7), ("commit", 5)]
    committed, everything = [], []
    for n, (outcome, count) in enumerate(plan):
        producer.begin_transaction()
        values = [b"t%d-%d" % (n, i) for i in range(count)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % N_PARTITIONS)
        everything += values
        if outcome == "commit":
            producer.commit_transaction(30)
            committed += values
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    return committed, everything


def test_transactions_commit_and_abort_with_both_isolation_levels(served, transactions):
    topic = "transactional"
    committed, everything = transactions
    assert sorted(read_all(served.bootstrap, topic, "read_committed")) == sorted(committed)
    assert sorted(read_all(served.bootstrap, topic, "read_uncommitted")) == sorted(everything)
    kp = kafka.KafkaConsumer(bootstrap_servers=served.bootstrap, isolation_level="read_committed",
                             consumer_timeout_ms=3000)  # fmt: skip
    kp.assign([kafka.TopicPartition(topic, p) for p in range(N_PARTITIONS)])
    kp.seek_to_beginning()
    assert sorted(m.value for m in kp) == sorted(committed)
    kp.close()
    markers = [b for _, b, _ in batches_on_disk(served.data_dir, topic) if b.is_control_batch]
    assert len(markers) == 3 * N_PARTITIONS  # every transaction touched every partition
    txnindex = [p for p in served.data_dir.glob(f"{topic}-*/*.txnindex") if p.stat().st_size]
    assert txnindex  # the aborted transaction is indexed for read_committed fetches


def test_consume_transform_produce_commits_offsets_in_the_transaction(served):
    source, sink, group = "ctp-in", "ctp-out", f"ctp-{uuid.uuid4()}"
    produce(served.bootstrap, source, [b"in%03d" % i for i in range(40)])
    consumer = ck.Consumer({"bootstrap.servers": served.bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([source])
    producer = ck.Producer({"bootstrap.servers": served.bootstrap,
                            "transactional.id": f"ctp-{uuid.uuid4()}"})  # fmt: skip
    producer.init_transactions(30)
    copied = []
    deadline = time.monotonic() + 30
    while len(copied) < 40 and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(40, 1) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, value=m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        copied += [m.value() for m in batch]
    consumer.close()
    assert sorted(copied) == [b"in%03d" % i for i in range(40)]
    assert sorted(read_all(served.bootstrap, sink, "read_committed")) == sorted(
        v.upper() for v in copied
    )
    checker = ck.Consumer({"bootstrap.servers": served.bootstrap, "group.id": group})
    committed = checker.committed([ck.TopicPartition(source, p) for p in range(N_PARTITIONS)], 10)
    assert sum(tp.offset for tp in committed) == 40  # the offsets committed with the records
    checker.close()


def test_kafka_python_transactions_commit_and_abort(served):
    topic = "kp-transactional"
    producer = kafka.KafkaProducer(bootstrap_servers=served.bootstrap,
                                   transactional_id=f"kp-tx-{uuid.uuid4()}")  # fmt: skip
    producer.init_transactions()
    committed, everything = [], []
    for n, outcome in enumerate(["abort", "commit", "abort", "commit"]):
        producer.begin_transaction()
        values = [b"kp%d-%d" % (n, i) for i in range(6)]
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % N_PARTITIONS)
        everything += values
        if outcome == "commit":
            producer.commit_transaction()
            committed += values
        else:
            producer.flush()
            producer.abort_transaction()
    producer.close()
    assert sorted(read_all(served.bootstrap, topic, "read_committed")) == sorted(committed)
    assert sorted(read_all(served.bootstrap, topic, "read_uncommitted")) == sorted(everything)


def test_the_directory_after_shutdown_verifies_clean(served):
    assert served.stop() == 0
    assert (served.data_dir / ".kafka_cleanshutdown").exists()
    verify = subprocess.run([sys.executable, "-m", "kafkalog.cli.main", "verify", "--quiet",
                             str(served.data_dir)], capture_output=True, text=True)  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.slow
def test_spark_reads_the_served_records(served, grouped, transactions):
    pyspark = pytest.importorskip("pyspark")
    if served.proc.poll() is None:
        served.stop()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafkalog.spark

    del pyspark
    # The same session the Spark tests build (tests/spark/conftest.py), so whichever runs first
    # starts it once for both.
    spark = (SparkSession.builder.master("local[2]").appName("kafkalog-tests")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(spark)
    reader = spark.read.format("kafkalog").option("subscribe", "transactional")
    df = reader.option("kafka.isolation.level", "read_committed").load(str(served.data_dir))
    values = sorted(bytes(r.value) for r in df.select("value").collect())
    assert values == sorted(transactions[0])  # the committed ones: read_committed, as Kafka's
    assert len(values) == 15
    rows = spark.read.format("kafkalog").option("subscribe", "grouped")
    assert rows.load(str(served.data_dir)).count() == len(grouped)
