"""The Spark sink and kafkalog.arrow.write_data_dir are one writer: the same rows (partitions
fixed by keys or given, so chance plays no part; one task, so one staged file per partition)
give byte-identical segments and indexes."""

from __future__ import annotations

import pyarrow as pa
import pytest

import kafkalog.arrow

from .helpers import T0

pytestmark = pytest.mark.slow

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _table(n: int) -> pa.Table:
    keys = [None if i % 7 == 0 else f"key-{i % 40}".encode() for i in range(n)]
    return pa.table({
        "key": pa.array(keys, pa.binary()),
        "value": pa.array([None if i % 13 == 0 else f"value-{i}".encode() * (1 + i % 4)
                           for i in range(n)], pa.binary()),
        "headers": pa.array([None if i % 3 == 0 else [{"key": "i", "value": str(i).encode()}]
                             for i in range(n)], HEADERS),
        "timestamp": pa.array([T0 + 1000 * i for i in range(n)], pa.timestamp("ms", tz="UTC")),
        "partition": pa.array([i % 3 if keys[i] is None or i % 5 == 0 else None
                               for i in range(n)], pa.int32()),
    })  # fmt: skip


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_spark_sink_and_write_data_dir_write_the_same_bytes(spark, tmp_path, codec):
    table = _table(3000)
    df = spark.createDataFrame(table).coalesce(1)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,headers:array<struct<key:string,value:binary>>,"
        "timestamp:timestamp,partition:int>"
    )
    (df.write.format("kafkalog").option("topic", "t").option("numPartitions", "3")
     .option("codec", codec).option("batchSize", "4096")
     .mode("append").save(str(tmp_path / "spark")))  # fmt: skip
    kafkalog.arrow.write_data_dir(table, tmp_path / "arrow", topic="t", num_partitions=3,
                                  codec=codec, batch_size=4096)  # fmt: skip
    files = sorted(p.relative_to(tmp_path / "spark") for p in (tmp_path / "spark").glob("t-*/*")
                   if p.suffix in (".log", ".index", ".timeindex"))  # fmt: skip
    assert len([f for f in files if f.suffix == ".log"]) == 3
    assert files == sorted(p.relative_to(tmp_path / "arrow") for p in
                           (tmp_path / "arrow").glob("t-*/*") if p.suffix in
                           (".log", ".index", ".timeindex"))  # fmt: skip
    for f in files:
        assert (tmp_path / "spark" / f).read_bytes() == (tmp_path / "arrow" / f).read_bytes(), f
