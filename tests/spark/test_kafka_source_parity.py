"""The data source in a real SparkSession against what Spark's Kafka source and sink do
(spark-sql-kafka-0-10: KafkaOffsetRangeCalculator, KafkaWriter.validateQuery, KafkaSourceProvider,
KafkaOffsetReaderAdmin; Kafka's consumer for internal topics). Expected values come from Spark's
documented behaviour and source, not from kafkalog's output. docs/spark.md's parity table names
these tests."""

from __future__ import annotations

import threading
import time

import pytest

from kafkalog.log.datadir.dir_lock import DataDirLock

from .helpers import write_dir

pytestmark = pytest.mark.slow


def _read(spark, path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


# -- planning ----------------------------------------------------------------------------------
def test_tasks_are_sparks_one_per_topic_partition_offset_range(spark, tmp_path):
    write_dir(tmp_path, {"a": 4}, 300, segment_bytes=2048)  # about 8 segments per partition
    assert len(list((tmp_path / "a-0").glob("*.log"))) >= 5
    # Spark: 1-1 topic-partitions to tasks unless minPartitions > ranges or a range is above
    # maxRecordsPerPartition; equal ranges of 300 split into round(300/1200 * 8) = 2 each, and
    # into ceil(300 / 100) = 3 each.
    for options, tasks in (
        ({}, 4),
        ({"minPartitions": "2"}, 4),
        ({"minPartitions": "4"}, 4),
        ({"minPartitions": "8"}, 8),
        ({"maxRecordsPerPartition": "300"}, 4),
        ({"maxRecordsPerPartition": "100"}, 12),
        ({"maxRecordsPerPartition": "150", "minPartitions": "16"}, 16),
    ):
        df = _read(spark, tmp_path, **options)
        assert df.rdd.getNumPartitions() == tasks, options
        got = df.groupBy("partition").agg({"offset": "count"}).collect()
        assert sorted((r[0], r[1]) for r in got) == [(p, 300) for p in range(4)], options
    offsets = _read(spark, tmp_path, minPartitions="8").where("partition = 2").select("offset")
    assert sorted(r.offset for r in offsets.collect()) == list(range(300))


# -- topic selection ---------------------------------------------------------------------------
def test_internal_topics_only_when_named(spark, tmp_path):
    write_dir(tmp_path, {"orders": 1, "__consumer_offsets": 2, "__transaction_state": 1}, 4)

    def topics(**options):
        return {r.topic for r in _read(spark, tmp_path, **options).select("topic").collect()}

    assert topics(subscribePattern=".*") == {"orders"}  # exclude.internal.topics
    assert topics(subscribe="orders,__consumer_offsets") == {"orders", "__consumer_offsets"}
    assert topics(assign='{"__transaction_state":[0]}') == {"__transaction_state"}


def test_subscribing_to_a_missing_topic_gives_no_rows_for_it(spark, tmp_path):
    write_dir(tmp_path, {"orders": 2}, 4)
    assert _read(spark, tmp_path, subscribe="orders,nosuch").count() == 8
    assert _read(spark, tmp_path, subscribe="nosuch").count() == 0


def test_paths_checked_at_load(spark, tmp_path):
    write_dir(tmp_path / "broker-1", {"orders": 1}, 4)
    write_dir(tmp_path / "broker-2", {"users": 1}, 4)
    with pytest.raises(Exception, match="its subfolders broker-1, broker-2 look like data "):
        _read(spark, tmp_path)  # load() alone: no action
    assert _read(spark, tmp_path / "broker-1" / "orders-0").count() == 4  # a partition dir
    assert _read(spark, f"file://{tmp_path}/broker-1").count() == 4
    assert _read(spark, f"{tmp_path}/broker-*").count() == 8


# -- option errors at load() -------------------------------------------------------------------
def test_option_errors_at_load_name_the_option(spark, tmp_path):
    write_dir(tmp_path, {"a": 1}, 4)
    # Spark hands a Python data source its option names lower-cased: the closest known name is
    # suggested in Spark's spelling.
    with pytest.raises(Exception, match=r"unknown option 'startingoffset' \(did you mean "
                                        r"'startingOffsets'\?\)"):  # fmt: skip
        _read(spark, tmp_path, startingOffset="earliest")
    with pytest.raises(Exception, match="option minPartitions must be at least 1, not 0"):
        _read(spark, tmp_path, minPartitions="0")
    with pytest.raises(Exception, match="only one of assign, subscribe or subscribePattern"):
        _read(spark, tmp_path, subscribe="a", subscribePattern="a")


# -- writing -----------------------------------------------------------------------------------
def test_default_save_mode_is_refused_by_spark_itself(spark, tmp_path):
    """Spark's Kafka sink takes ErrorIfExists (the default); Spark 4.3's DataFrameWriter
    refuses it for every Python data source before the source is asked (docs/spark.md)."""
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("kafkalog").option("topic", "t").option("numPartitions", 1).save(
            str(tmp_path)
        )


def test_columns_the_sink_does_not_use_are_ignored(spark, tmp_path):
    df = spark.createDataFrame([("k", "v", 7, 1.5)], "key string, value string, n int, x double")
    df.write.format("kafkalog").option("topic", "t").option("numPartitions", 1).mode("append").save(
        str(tmp_path)
    )
    rows = _read(spark, tmp_path).collect()
    assert [(r.key, r.value) for r in rows] == [(b"k", b"v")]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("value int", "value attribute unsupported type int. value must be a(n) string or binary"),
        ("key int, value string",
         "key attribute unsupported type int. key must be a(n) string or binary"),
        ("topic int, value string",
         "topic attribute unsupported type int. topic must be a(n) string"),
        ("partition bigint, value string",
         "partition attribute unsupported type bigint. partition must be a(n) int"),
        ("headers array<string>, value string",
         "headers attribute unsupported type array<string>. headers must be a(n) "
         "array<struct<key:string,value:binary>>"),
    ],
)  # fmt: skip
def test_sink_column_types_are_checked_before_tasks_with_sparks_wording(spark, tmp_path, ddl,
                                                                         message):  # fmt: skip
    from pyspark.sql import functions as F

    base = spark.createDataFrame([(1,)], "n int")
    cols = {
        "value int": [F.lit(1).alias("value")],
        "key int, value string": [F.lit(1).alias("key"), F.lit("v").alias("value")],
        "topic int, value string": [F.lit(1).alias("topic"), F.lit("v").alias("value")],
        "partition bigint, value string": [F.lit(0).cast("bigint").alias("partition"),
                                           F.lit("v").alias("value")],
        "headers array<string>, value string": [F.array(F.lit("h")).alias("headers"),
                                                F.lit("v").alias("value")],
    }[ddl]  # fmt: skip
    df = base.select(*cols)
    writer = df.write.format("kafkalog").option("numPartitions", 1).mode("append")
    if "topic" not in ddl:
        writer = writer.option("topic", "t")
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        writer.save(str(tmp_path))
    assert not list(tmp_path.glob("*-0"))  # refused when Spark asked for the writer: no task ran


def test_append_keeps_the_partition_count_and_says_so(spark, tmp_path):
    write_dir(tmp_path, {"t": 3}, 2)
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(
        Exception, match=r"topic 't' already has 3 partitions .* numPartitions is 5"
    ):
        df.write.format("kafkalog").option("topic", "t").option("numPartitions", 5).mode(
            "append"
        ).save(str(tmp_path))
    df.write.format("kafkalog").option("topic", "t").option("numPartitions", 3).mode("append").save(
        str(tmp_path)
    )
    assert _read(spark, tmp_path).count() == 3 * 2 + 1


def test_writers_wait_for_the_data_directory_lock(spark, tmp_path):
    write_dir(tmp_path, {"t": 1}, 1)
    df = spark.createDataFrame([("v",)], "value string")
    lock = DataDirLock(tmp_path)
    lock.__enter__()
    threading.Timer(2.0, lambda: lock.__exit__(None, None, None)).start()
    started = time.monotonic()
    df.write.format("kafkalog").option("topic", "t").option("lockTimeoutMs", 60_000).mode(
        "append"
    ).save(str(tmp_path))
    assert time.monotonic() - started >= 1.5
    assert _read(spark, tmp_path).count() == 2
    with DataDirLock(tmp_path):
        with pytest.raises(Exception, match=r"waited 300 ms for it \(option lockTimeoutMs\)"):
            df.write.format("kafkalog").option("topic", "t").option("lockTimeoutMs", 300).mode(
                "append"
            ).save(str(tmp_path))
    assert _read(spark, tmp_path).count() == 2


# -- streaming ---------------------------------------------------------------------------------
def test_streaming_starting_offsets_must_name_every_partition(spark, tmp_path):
    write_dir(tmp_path, {"a": 2}, 5)
    df = (spark.readStream.format("kafkalog").option("startingOffsets", '{"a":{"0":1}}')
          .load(str(tmp_path)))  # fmt: skip
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path.parent / (tmp_path.name + "-ck")))
        .start()
    )
    try:
        with pytest.raises(Exception, match=r"If startingOffsets contains specific offsets, you "
                                            r"must specify all TopicPartitions"):  # fmt: skip
            query.processAllAvailable()
    finally:
        query.stop()
    df = (spark.readStream.format("kafkalog")
          .option("startingOffsets", '{"a":{"0":1,"1":-2}}').load(str(tmp_path)))  # fmt: skip
    query = (df.writeStream.format("memory").queryName("parity_all_given")
             .option("checkpointLocation", str(tmp_path.parent / (tmp_path.name + "-ck2")))
             .start())  # fmt: skip
    try:
        query.processAllAvailable()
        assert spark.table("parity_all_given").count() == 4 + 5
    finally:
        query.stop()
