"""Compaction while serving (log.cleaner.*): a compacted topic written by a real producer is
cleaned in the background with the log layer's cleaner (one record per key, tombstones until
delete.retention.ms, offsets kept, cleaner-offset-checkpoint moved), consumers reading meanwhile
get correct data, __consumer_offsets is cleaned while a group commits and its offsets survive a
restart, log.cleaner.enable=false cleans nothing, and a kill -9 mid-clean is recovered."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kafkalog.errors import KafkalogError
from kafkalog.log.datadir.checkpoints import read_offset_checkpoint
from kafkalog.log.datadir.naming import TopicPartition as LogTopicPartition
from kafkalog.server import coordinators
from kafkalog.server import log_cleaner as log_cleaner_module
from kafkalog.server.app import BackgroundServer, unused_settings
from kafkalog.server.config import ServerConfig
from kafkalog.server.groups.coordinator import GroupConfig
from kafkalog.server.log_cleaner import CleanerSettings

from .server_process import SMALL, ServerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

CLEANER = {"log.cleaner.backoff.ms": "50", "log.cleaner.min.cleanable.ratio": "0.01",
           "log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "200"}  # fmt: skip


def config(data_dir: Path, **extra: str) -> ServerConfig:
    return ServerConfig([data_dir], port=0, extra={**CLEANER, **extra}, **SMALL)


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> list[int]:
    """One request per record (a batch each); the offsets acknowledged."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                            "max.in.flight": 1})  # fmt: skip
    offsets: list[int] = []

    def acked(err, msg) -> None:
        assert err is None, err
        offsets.append(msg.offset())

    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=acked)
        producer.flush(10)
    assert producer.flush(30) == 0
    return offsets


def read_all(consumer, topic: str, timeout: float = 15) -> list[tuple[int, bytes, bytes | None]]:
    """Everything from the log start to the high watermark: (offset, key, value)."""
    tp = TopicPartition(topic, 0, ck.OFFSET_BEGINNING)
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([tp])
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + timeout
    while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                break
            raise AssertionError(m.error())
        out.append((m.offset(), m.key(), m.value()))
    consumer.unassign()
    return out


def new_consumer(bootstrap: str):
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                        "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip


def cleaner_offset(data_dir: Path, topic: str) -> int | None:
    path = data_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    return read_offset_checkpoint(path).get(LogTopicPartition(topic, 0))


def wait_for(condition, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def latest_by_key(records) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest


def test_compacted_topic_is_cleaned_while_serving_and_read_meanwhile(tmp_path):
    data = tmp_path / "data"
    with BackgroundServer(config(data)) as s:
        create(s.bootstrap, "table", **{"cleanup.policy": "compact",
                                        "internal.segment.bytes": "400",
                                        "delete.retention.ms": "4000",
                                        "file.delete.delay.ms": "300"})  # fmt: skip
        # Five keys written six times, then key 4 deleted.
        written = [(b"k%d" % (i % 5), b"v%03d" % i) for i in range(30)] + [(b"k4", None)]
        offsets = produce(s.bootstrap, "table", written)
        assert offsets == list(range(31))
        produced = {o: kv for o, kv in zip(offsets, written, strict=True)}

        # A consumer reading the whole log again and again while the cleaner works.
        errors: list[BaseException] = []
        reads: list[list[tuple[int, bytes, bytes | None]]] = []
        stop = threading.Event()

        def reader() -> None:
            consumer = new_consumer(s.bootstrap)
            try:
                while not stop.is_set():
                    reads.append(read_all(consumer, "table"))
            except BaseException as e:
                errors.append(e)
            finally:
                consumer.close()

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            # More writes roll segments, so what came before becomes cleanable, several times.
            for round_ in range(3):
                more = [(b"k%d" % (i % 4), b"w%d-%03d" % (round_, i)) for i in range(8)]
                for o, kv in zip(produce(s.bootstrap, "table", more), more, strict=True):
                    produced[o] = kv
                time.sleep(0.2)
            wait_for(lambda: s.broker.log_cleaner.cleans >= 1)
            wait_for(lambda: len(reads) >= 3 or errors)
        finally:
            stop.set()
            thread.join(30)
        assert not errors, errors[0]
        for got in reads:  # offsets kept, in order: each record is what was written there
            assert [o for o, *_ in got] == sorted({o for o, *_ in got})
            for offset, key, value in got:
                assert produced[offset] == (key, value), offset

        # Below the cleaner offset, one record per key: its latest (the tombstone of k4 too).
        checkpoint = cleaner_offset(data, "table")
        assert checkpoint is not None and checkpoint > 0
        consumer = new_consumer(s.bootstrap)
        got = read_all(consumer, "table")
        expected = latest_by_key((o, *produced[o]) for o in sorted(produced))
        assert latest_by_key(got) == expected  # every key's latest value, at its offset
        clean_part = [(o, k) for o, k, _ in got if o < checkpoint]
        assert len(clean_part) == len({k for _, k in clean_part})
        assert (expected[b"k4"][0], b"k4", None) in got  # within delete.retention.ms
        assert len(got) < len(produced)
        assert s.broker.log_cleaner.records_removed > 0

        # Past delete.retention.ms, a later clean drops the tombstone (new writes dirty the log).
        time.sleep(4.2)
        deadline = time.monotonic() + 20
        while any(k == b"k4" for _, k, _ in read_all(consumer, "table")):
            assert time.monotonic() < deadline, "the tombstone was never removed"
            more = [(b"k0", b"late%d" % i) for i in range(6)]
            for o, kv in zip(produce(s.bootstrap, "table", more), more, strict=True):
                produced[o] = kv
            time.sleep(0.3)
        got = read_all(consumer, "table")
        consumer.close()
        expected.pop(b"k4")
        for key, (offset, value) in expected.items():
            if key != b"k0":
                assert (offset, key, value) in got
        assert cleaner_offset(data, "table") > checkpoint  # the checkpoint moved on
        wait_for(lambda: not list((data / "table-0").glob("*.deleted")))  # after the delay
        assert not list((data / "table-0").glob("*.cleaned"))
        assert not list((data / "table-0").glob("*.swap"))
        final = latest_by_key(got)
    with BackgroundServer(config(data)) as s:  # the compacted log is loaded as it was left
        consumer = new_consumer(s.bootstrap)
        assert latest_by_key(read_all(consumer, "table")) == final
        consumer.close()


def _set_configs(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]  # fmt: skip
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def test_consumer_offsets_are_cleaned_while_a_group_commits(tmp_path):
    data = tmp_path / "data"
    with BackgroundServer(config(data)) as s:
        create(s.bootstrap, "events")
        produce(s.bootstrap, "events", [(b"k", b"v%d" % i) for i in range(5)])
        # Small segments for the offsets topic, so that commits roll them.
        _set_configs(s.bootstrap, "__consumer_offsets", **{"segment.ms": "100"})
        consumer = ck.Consumer({"bootstrap.servers": s.bootstrap, "group.id": "committer",
                                "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition("events", 0, 0)])
        last = 0
        for i in range(40):
            last = i % 5 + 1
            consumer.commit(offsets=[TopicPartition("events", 0, last)], asynchronous=False)
            time.sleep(0.03)
            if i >= 12 and s.broker.log_cleaner.cleans >= 2:
                break
        wait_for(lambda: (cleaner_offset(data, "__consumer_offsets") or 0) > 0)
        # The group's coordinator keeps working while its log is cleaned.
        committed = consumer.committed([TopicPartition("events", 0)], timeout=10)
        assert committed[0].offset == last
        consumer.close()
        assert s.broker.log_cleaner.records_removed > 0
    with BackgroundServer(config(data)) as s:  # loaded back from the compacted log
        consumer = ck.Consumer({"bootstrap.servers": s.bootstrap, "group.id": "committer",
                                "enable.auto.commit": False})  # fmt: skip
        committed = consumer.committed([TopicPartition("events", 0)], timeout=10)
        assert committed[0].offset == last
        consumer.close()


def test_cleaner_disabled_leaves_compacted_logs_alone(tmp_path):
    data = tmp_path / "data"
    with BackgroundServer(config(data, **{"log.cleaner.enable": "false"})) as s:
        create(s.bootstrap, "table", **{"cleanup.policy": "compact",
                                        "internal.segment.bytes": "300"})  # fmt: skip
        written = [(b"k%d" % (i % 2), b"v%03d" % i) for i in range(20)]
        produce(s.bootstrap, "table", written)
        time.sleep(0.5)  # ten backoffs
        assert s.broker.log_cleaner.task is None and s.broker.log_cleaner.passes == 0
        consumer = new_consumer(s.bootstrap)
        assert [o for o, *_ in read_all(consumer, "table")] == list(range(20))
        consumer.close()
    assert cleaner_offset(data, "table") is None


def test_settings_by_kafka_names():
    defaults = CleanerSettings.from_config(ServerConfig([Path(".")]))
    assert defaults.enable and defaults.backoff_ms == 15_000
    assert defaults.min_cleanable_ratio == 0.5
    assert defaults.dedupe_buffer_size == 128 << 20
    for name, value in (("log.cleaner.min.cleanable.ratio", "1.5"),
                        ("log.cleaner.backoff.ms", "-1"),
                        ("log.cleaner.dedupe.buffer.size", "10"),
                        ("log.cleaner.enable", "yes")):  # fmt: skip
        with pytest.raises(KafkalogError, match=name.replace(".", r"\.")):
            CleanerSettings.from_config(ServerConfig([Path(".")], extra={name: value}))


def test_small_dedupe_buffer_cleans_in_several_steps(tmp_path):
    """A full offset map ends a clean early; the next one goes on from its checkpoint."""
    data = tmp_path / "data"
    # 10 entries of 24 bytes, 9 usable: fewer than the 20 keys.
    with BackgroundServer(config(data, **{"log.cleaner.dedupe.buffer.size": "240"})) as s:
        create(s.bootstrap, "table", **{"cleanup.policy": "compact",
                                        "internal.segment.bytes": "500"})  # fmt: skip
        written = [(b"k%02d" % (i % 20), b"v%03d" % i) for i in range(60)]
        produce(s.bootstrap, "table", written)
        wait_for(lambda: s.broker.log_cleaner.cleans >= 3)
        consumer = new_consumer(s.bootstrap)
        got = read_all(consumer, "table")
        consumer.close()
        expected = latest_by_key((o, k, v) for o, (k, v) in enumerate(written))
        assert latest_by_key(got) == expected


def test_topic_deleted_during_its_clean(tmp_path, monkeypatch):
    """The clean ends at its next step, its files go with the partition, and a topic created
    again under the name is cleaned as a new one. The clean's worker is held at its start until
    the topic is deleted (a clean of this log takes milliseconds on a quiet machine)."""
    started, release = threading.Event(), threading.Event()
    real_clean = log_cleaner_module.clean

    def held_clean(partition_log, *args, **kwargs):
        if Path(partition_log.dir).name == "doomed-0":
            started.set()
            release.wait(30)
        return real_clean(partition_log, *args, **kwargs)

    monkeypatch.setattr(log_cleaner_module, "clean", held_clean)
    data = tmp_path / "data"
    with BackgroundServer(config(data)) as s:
        topic_configs = {"cleanup.policy": "compact", "internal.segment.bytes": str(16 << 10),
                         "min.cleanable.dirty.ratio": "0.99"}  # fmt: skip
        create(s.bootstrap, "doomed", **topic_configs)
        # Batches of 100 records (8 KB): two to a 16 KB segment, so the log rolls and has a
        # cleanable part (librdkafka alone may send all 4,000 in one batch, one active segment).
        producer = ck.Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 5,
                                "batch.num.messages": 100})  # fmt: skip
        for i in range(4000):
            producer.produce("doomed", b"v%05d" % i + b"x" * 60, b"k%03d" % (i % 300), partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        cleaner = s.broker.log_cleaner
        tp = LogTopicPartition("doomed", 0)
        _set_configs(s.bootstrap, "doomed", **{"min.cleanable.dirty.ratio": "0.01"})
        assert started.wait(20), "no clean began"
        assert cleaner.cleaning == tp
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(10)
        release.set()
        wait_for(lambda: cleaner.cleaning is None)
        assert tp not in cleaner.uncleanable
        assert not [p for p in data.iterdir() if p.name.startswith("doomed")]
        create(s.bootstrap, "doomed", **{**topic_configs, "min.cleanable.dirty.ratio": "0.01"})
        cleans = cleaner.cleans
        produce(s.bootstrap, "doomed", [(b"k", b"a"), (b"k", b"b")])
        _set_configs(s.bootstrap, "doomed", **{"segment.ms": "1"})  # roll on the next write
        time.sleep(0.01)
        produce(s.bootstrap, "doomed", [(b"k", b"c")])
        wait_for(lambda: cleaner.cleans > cleans)
        consumer = new_consumer(s.bootstrap)
        assert [(o, v) for o, _, v in read_all(consumer, "doomed")] == [(1, b"b"), (2, b"c")]
        consumer.close()
        # Deleted once cleaned: its cleaner-offset-checkpoint entry goes too.
        assert cleaner_offset(data, "doomed") == 2
        admin.delete_topics(["doomed"])["doomed"].result(10)
        wait_for(lambda: cleaner_offset(data, "doomed") is None)


def _cleaning_now(server: ServerProcess, name: str) -> bool:
    """Whether the server's last cleaner line about ``name`` began a clean not yet ended."""
    for line in reversed(server.lines):
        if f"Beginning cleaning of log {name}" in line:
            return True
        if name in line and ("Cleaned log" in line or "leaning of log" in line):
            return False
    return False


@pytest.mark.slow
def test_kill_during_background_cleaning_is_recovered(tmp_path):
    data = tmp_path / "data"
    args = ["--config", "log.cleaner.backoff.ms=20", "--config",
            "log.cleaner.min.cleanable.ratio=0.01"]  # fmt: skip
    latest: dict[bytes, bytes] = {}
    kills_mid_clean = 0
    i = 0
    for round_ in range(8):
        server = ServerProcess(data, *args).start()
        try:
            if round_ == 0:
                create(server.bootstrap, "big", **{"cleanup.policy": "compact",
                                                   "internal.segment.bytes": str(64 << 10),
                                                   "file.delete.delay.ms": "60000"})  # fmt: skip
            producer = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                                    "linger.ms": 5})  # fmt: skip
            acked: dict[bytes, bytes] = {}

            def on_delivery(err, msg, acked=acked) -> None:
                assert err is None, err
                acked[msg.key()] = msg.value()

            # Chunks of writes, every one acknowledged; the kill comes as soon as a clean is
            # under way after one (the cleaner works while the producer writes).
            for _ in range(30):
                for _ in range(300):
                    key, value = b"key%04d" % (i % 500), b"%06d-" % i + b"x" * 100
                    producer.produce("big", value, key, partition=0, on_delivery=on_delivery)
                    i += 1
                assert producer.flush(30) == 0
                if _cleaning_now(server, "big-0"):
                    kills_mid_clean += 1
                    break
            latest.update(acked)  # in production order: the last acknowledged value per key
        finally:
            server.kill()
        if kills_mid_clean >= 3:
            break
    with ServerProcess(data) as server:
        consumer = new_consumer(server.bootstrap)
        got = read_all(consumer, "big", timeout=30)
        consumer.close()
        assert {k: v for k, (_, v) in latest_by_key(got).items()} == latest
        offsets = [o for o, *_ in got]
        assert offsets == sorted(set(offsets))
        # The cleaner goes on over the recovered log.
        wait_for(lambda: any("Cleaned log big-0" in line for line in server.lines))
    for suffix in ("*.cleaned", "*.swap"):
        assert not list((data / "big-0").glob(suffix))
    assert kills_mid_clean >= 1


def test_unknown_broker_settings_are_named():
    """A --config name nothing reads is warned about at start (Kafka's logUnused), and a bad
    value of a coordinator setting is an error naming it."""
    given = {"log.cleaner.enable": "true", "group.max.size": "5", "log.retension.ms": "1"}
    config = ServerConfig([Path(".")], extra=given)
    assert unused_settings(config) == ["log.retension.ms"]
    with pytest.raises(KafkalogError, match=r"group\.max\.size"):
        bad = ServerConfig([Path(".")], extra={"group.max.size": "many"})
        coordinators._settings(bad, coordinators._GROUP_SETTINGS, GroupConfig)
