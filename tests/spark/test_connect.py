"""The kafkalog source through Spark Connect: pyspark's own Connect server (``SparkConnectServer``
run by ``spark-submit``, local[2] master) and a client session that registers the data source
(its class travels pickled to the server, whose Python workers import the installed kafkalog),
reads, writes and streams. Expected records come from kafkalog's log layer (helpers.py) and
kafka-python's decoding of what was written.

What differs from a classic session, and is documented in docs/spark.md ("Spark Connect"): a
bad option or path is not reported by ``load()`` but when the DataFrame is first analysed (its
schema, or an action), as Connect's AnalysisException carrying kafkalog's message; and the
session has no ``sparkContext`` (nor ``df.rdd``).

The client is built with ``pyspark.sql.connect.session.SparkSession.builder`` (what
``SparkSession.builder.remote(...)`` returns) so that it can live beside the classic local
session the other Spark tests share in this process: the classic builder refuses a remote
session while a SparkContext exists, and marks the whole process as a Connect client.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import kafkalog.spark

from .cluster import connect_server, kafka_python_partitions, process_tree_pids, spark_home
from .helpers import write_dir

pytestmark = pytest.mark.slow

TOPICS = {"a": 2, "b": 1}
PER_PARTITION = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = spark_home()
    pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
    before = process_tree_pids()
    with connect_server(home, tmp_path_factory.mktemp("connect-server")) as running:
        yield running
    left = process_tree_pids() - before
    assert not left, f"processes left after the Connect server stopped: {sorted(left)}"


@pytest.fixture(scope="module")
def remote(server):
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(server.url).getOrCreate()
    kafkalog.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    base = tmp_path_factory.mktemp("connect-data")
    return base, write_dir(base / "data", TOPICS, PER_PARTITION, batch=10)


def test_a_registered_source_reads_through_connect(remote, data):
    from pyspark.sql.connect.session import SparkSession

    assert isinstance(remote, SparkSession)
    base, written = data
    df = remote.read.format("kafkalog").option("includeHeaders", "true").load(str(base / "data"))
    got = sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, [tuple(h) for h in r.headers or []])
        for r in df.collect()
    )  # fmt: skip
    expected = sorted(
        (t, p, i, r["key"], r["value"], list(r["headers"]))
        for (t, p), rows in written.items() for i, r in enumerate(rows)
    )  # fmt: skip
    assert got == expected
    assert df.where("topic = 'a'").count() == TOPICS["a"] * PER_PARTITION


def test_a_write_through_connect_is_what_kafka_python_decodes(remote, data):
    base, _ = data
    out = base / "written"
    rows = remote.range(0, 500, 1, 2).selectExpr(
        "concat('k', cast(id % 11 as string)) as key", "concat('v', cast(id as string)) as value"
    )
    (rows.write.format("kafkalog").option("topic", "copy").option("numPartitions", 2)
         .option("codec", "gzip").mode("append").save(str(out)))  # fmt: skip
    decoded = kafka_python_partitions(out)
    assert set(decoded) == {("copy", 0), ("copy", 1)}
    values = Counter(v for records in decoded.values() for _o, _k, v, _h in records)
    assert values == Counter(b"v%d" % i for i in range(500))
    back = remote.read.format("kafkalog").load(str(out)).select("partition", "offset", "value")
    assert sorted((r[0], r[1], r[2]) for r in back.collect()) == sorted(
        (p, o, v) for (_t, p), records in decoded.items() for o, _k, v, _h in records
    )


def test_available_now_stream_through_connect_and_its_lag(remote, data, tmp_path: Path):
    base, written = data
    query = (
        remote.readStream.format("kafkalog")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 100)
        .load(str(base / "data"))
        .select("key", "value")
        .writeStream.format("kafkalog")
        .option("topic", "streamed")
        .option("numPartitions", 1)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "out"))
    )
    assert query.awaitTermination(90), "the availableNow query did not finish"
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p.numInputRows]
    # 100 shared by three partitions of 60 records: floor(100 * 60 / 180) = 33 each, as Spark
    assert [p.numInputRows for p in progress] == [99, 81]
    # the progress a Connect client receives holds the lag's inputs as a classic session's does
    assert kafkalog.spark.lag_metrics(progress[0].sources[0]) == {
        "avgOffsetsBehindLatest": "27.0",
        "maxOffsetsBehindLatest": "27",
        "minOffsetsBehindLatest": "27",
    }
    assert kafkalog.spark.lag_metrics(progress[-1].sources[0])["maxOffsetsBehindLatest"] == "0"
    (records,) = kafka_python_partitions(tmp_path / "out").values()
    assert Counter((k, v) for _o, k, v, _h in records) == Counter(
        (r["key"], r["value"]) for rows in written.values() for r in rows
    )


def test_option_and_path_errors_come_at_analysis_not_at_load(remote, data):
    from pyspark.errors.exceptions.connect import AnalysisException

    base, _ = data
    df = remote.read.format("kafkalog").option("startingOffset", "earliest").load(str(base))
    with pytest.raises(AnalysisException, match=r"unknown option 'startingoffset' \(did you mean "
                       r"'startingOffsets'\?\)"):  # fmt: skip
        df.schema  # noqa: B018
    missing = remote.read.format("kafkalog").load(str(base / "nowhere"))
    with pytest.raises(AnalysisException, match="does not exist or is not a directory"):
        missing.collect()


def test_the_default_save_mode_is_refused_as_in_a_classic_session(remote, data):
    from pyspark.errors.exceptions.connect import AnalysisException

    base, _ = data
    df = remote.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("kafkalog").option("topic", "t").option("numPartitions", 1).save(
            str(base / "refused")
        )


def test_no_spark_context_on_connect(remote):
    from pyspark.errors import PySparkAttributeError

    with pytest.raises(PySparkAttributeError, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        remote.sparkContext  # noqa: B018
