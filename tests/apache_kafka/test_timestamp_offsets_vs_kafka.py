"""Timestamps to offsets (startingTimestamp, endingTimestamp, startingOffsetsByTimestamp): the
offset kafkalog's planner finds in a live broker's segments is the one Apache Kafka answers to
ListOffsets (librdkafka's ``offsets_for_times``), for compressed batches of many records (the
planner decodes the batch holding the answer with the columnar kernels) and uncompressed ones."""

from __future__ import annotations

import random
import time

import pytest

from kafkalog.dataset import open_selected, parse_read_options

pytestmark = pytest.mark.slow

RECORDS = 6_000
PARTITIONS = 2
SPAN_MS = 60_000


@pytest.mark.parametrize("codec", ["lz4", "zstd", "none"])
def test_offset_for_timestamp_is_kafkas(kafka_broker, codec):
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"ts-lookup-{codec}"
    kafka_broker.create_topic(topic, PARTITIONS)
    producer = Producer({
        "bootstrap.servers": kafka_broker.bootstrap, "compression.codec": codec,
        "linger.ms": 50, "batch.num.messages": 2000, "log_level": 3,
    })  # fmt: skip
    t0 = (int(time.time()) - 3600) * 1000  # within the broker's retention
    stamps = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        p = i % PARTITIONS
        ts = t0 + (i * SPAN_MS // RECORDS) // 3 * 3  # runs of equal timestamps
        stamps[p].append(ts)
        producer.produce(topic, b"v-%06d" % i, partition=p, timestamp=ts)
    assert producer.flush(60) == 0

    rnd = random.Random(7)
    targets = sorted(
        {t0 - 1, t0, t0 + SPAN_MS, t0 + 10 * SPAN_MS}
        | {rnd.choice(s) for s in stamps.values() for _ in range(20)}
        | {rnd.randrange(t0, t0 + SPAN_MS) for _ in range(30)}
    )
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": f"g-{topic}"})
    try:
        kafka: dict[int, list[int]] = {}
        for ts in targets:  # one timestamp a request: ListOffsets names a partition once
            asked = [TopicPartition(topic, p, ts) for p in range(PARTITIONS)]
            for tp in consumer.offsets_for_times(asked, timeout=30):
                assert tp.error is None, tp.error
                kafka.setdefault(tp.partition, []).append(tp.offset)
    finally:
        consumer.close()
    # -1: no record at or after the timestamp
    logs = open_selected(parse_read_options({"path": str(kafka_broker.data_dir),
                                             "subscribe": topic}))  # fmt: skip
    try:
        ours = {
            tp.partition: [
                -1 if (o := log.offset_for_timestamp(ts)) is None else o for ts in targets
            ]
            for tp, log in logs.items()
        }
    finally:
        for log in logs.values():
            log.close()
    assert ours == kafka
    assert any(o > 0 for o in kafka[0]) and -1 in kafka[0]
