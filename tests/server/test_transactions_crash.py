"""SIGKILL of ``kafkalog serve`` in the middle of transactions: after a restart every transaction
the client saw committed is readable whole, none is readable in part, and a new instance of the
producer fences and aborts what the killed server left open."""

from __future__ import annotations

import threading
import time

import pytest

from kafkalog.log.verify.data_dir import verify

from .server_process import ServerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.slow
TXN_SIZE = 10


def run_transactions(bootstrap: str, acknowledged: list[int], stop: threading.Event) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "crash-tx",
                            "transaction.timeout.ms": 30_000, "message.timeout.ms": 5_000,
                            "socket.timeout.ms": 3_000})  # fmt: skip
    try:
        producer.init_transactions(10)
        n = 0
        while not stop.is_set():
            producer.begin_transaction()
            for i in range(TXN_SIZE):
                producer.produce("crash", value=b"%d-%d" % (n, i), partition=0)
            producer.commit_transaction(10)
            acknowledged.append(n)
            n += 1
    except ck.KafkaException:
        pass  # the server is gone


def read_committed(bootstrap: str) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader",
                            "isolation.level": "read_committed", "enable.partition.eof": True,
                            "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([CkTopicPartition("crash", 0, 0)])
    values, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                break
            continue
        values.append(m.value())
    consumer.close()
    return values


def test_committed_transactions_survive_sigkill_and_open_ones_are_aborted(tmp_path):
    acknowledged: list[int] = []
    stop = threading.Event()
    with ServerProcess(tmp_path) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("crash", 1, 1)])["crash"].result(30)
        worker = threading.Thread(target=run_transactions,
                                  args=(server.bootstrap, acknowledged, stop))  # fmt: skip
        worker.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()
        stop.set()
        worker.join(60)
    assert len(acknowledged) >= 20
    with ServerProcess(tmp_path) as server:
        fencer = ck.Producer({"bootstrap.servers": server.bootstrap,
                              "transactional.id": "crash-tx"})  # fmt: skip
        fencer.init_transactions(30)  # aborts the transaction the kill left open
        values = read_committed(server.bootstrap)
    by_txn: dict[int, set[int]] = {}
    for value in values:
        txn, i = map(int, value.split(b"-"))
        by_txn.setdefault(txn, set()).add(i)
    assert set(acknowledged) <= set(by_txn)
    assert all(found == set(range(TXN_SIZE)) for found in by_txn.values())
    assert set(by_txn) <= set(range(max(acknowledged) + 2))  # at most the one in flight
    report = verify(tmp_path)
    assert report.errors == [], [str(f) for f in report.errors]
