"""kafkalog.arrow.write_data_dir: Arrow, Polars and pandas rows written as Kafka logs, read back
by kafkalog's reader and by kafka-python's decoder (an independent one); the column checks,
partitioning, appends, overwrites and the all-or-nothing commit. The same rows written by the
Spark sink give the same bytes: tests/spark/test_arrow_writer_parity.py."""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from arrow_data import T0

import kafkalog.arrow
from kafkalog.dataset import (
    OptionError,
    PartitionOutOfRangeError,
    WriteSchemaError,
)
from kafkalog.format import partition_for_key

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
CODECS = ["none", "gzip", "lz4", "zstd", "snappy"]


def rows_table(n: int = 600, *, partitions: bool = True, sticky: bool = True) -> pa.Table:
    """Keys (some null), values (some null: tombstones), headers (some null, a null header
    value), millisecond timestamps and, for some rows, an explicit partition (``sticky=False``:
    for every row without a key too, so that where rows go does not depend on chance)."""
    keys, values, headers, part = [], [], [], []
    for i in range(n):
        key = None if i % 7 == 0 else f"key-{i % 40}".encode()
        if i % 11 == 0 and key is not None:
            key = f"tombstone-{i}".encode()
            values.append(None)
        else:
            values.append(f"value-{i}".encode() * (1 + i % 5))
        keys.append(key)
        headers.append(None if i % 3 == 0 else [{"key": "i", "value": str(i).encode()},
                                                 {"key": "n", "value": None}])  # fmt: skip
        part.append(i % 3 if i % 5 == 0 or (key is None and not sticky) else None)
    cols = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array(headers, HEADERS),
        "timestamp": pa.array([T0 + 1000 * i for i in range(n)], pa.timestamp("ms", tz="UTC")),
    }
    if partitions:
        cols["partition"] = pa.array(part, pa.int32())
    return pa.table(cols)


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _ms(ts) -> int:
    if isinstance(ts, dt.datetime):
        return (ts - EPOCH) // dt.timedelta(milliseconds=1)
    return int(ts)


def check_read_back(root, topic: str, table: pa.Table, partitions: int) -> None:
    """Every input row comes back once, in its partition in input order, with its fields; keyed
    rows without a partition went where Kafka's partitioner sends them."""
    back = kafkalog.arrow.open_data_dir(root, topics=topic, include_headers=True).read_all()
    assert back.num_rows == table.num_rows
    inp = table.to_pylist()
    ident = {(r["value"] if r["value"] is not None else r["key"]): i for i, r in enumerate(inp)}
    last_index: dict[int, int] = {}
    for r in back.to_pylist():
        i = ident[r["value"] if r["value"] is not None else r["key"]]
        want = inp[i]
        assert (r["key"], r["value"]) == (want["key"], want["value"])
        assert (r["headers"] or None) == (want["headers"] or None)
        assert _ms(r["timestamp"]) == _ms(want["timestamp"])
        given = want.get("partition")
        if given is not None:
            assert r["partition"] == given
        elif want["key"] is not None:
            assert r["partition"] == partition_for_key(want["key"], partitions)
        assert 0 <= r["partition"] < partitions
        assert i > last_index.get(r["partition"], -1)  # input order within a partition
        last_index[r["partition"]] = i


def kafka_python_records(root, topic: str, partition: int) -> list:
    """The records of a partition's .log files as kafka-python decodes them (CRCs checked)."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    for seg in sorted((Path(root) / f"{topic}-{partition}").glob("*.log")):
        records = MemoryRecords(seg.read_bytes())
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc()
            out.extend(batch)
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_and_kafka_python_decodes(tmp_path, codec):
    table = rows_table()
    result = kafkalog.arrow.write_data_dir(
        table, tmp_path, topic="t", num_partitions=3, codec=codec, batch_size=2048
    )
    check_read_back(tmp_path, "t", table, 3)
    assert result.records == table.num_rows
    assert set(result.partitions) == {("t", 0), ("t", 1), ("t", 2)}
    back = kafkalog.arrow.open_data_dir(tmp_path, include_headers=True).read_all().to_pylist()
    for p in range(3):
        written = result.partitions[("t", p)]
        assert written.first_offset == 0 and written.batches > 1
        mine = [r for r in back if r["partition"] == p]
        theirs = kafka_python_records(tmp_path, "t", p)
        assert [r.offset for r in theirs] == list(range(written.next_offset))
        assert [(r.key, r.value, r.timestamp) for r in theirs] == [
            (r["key"], r["value"], _ms(r["timestamp"])) for r in mine
        ]
        assert [list(r.headers) for r in theirs] == [
            [(h["key"], h["value"]) for h in r["headers"] or []] for r in mine
        ]
    assert not (tmp_path / ".kafkalog-staging").exists()


def test_same_rows_give_the_same_bytes(tmp_path):
    table = rows_table(sticky=False)
    for name in ("a", "b"):
        kafkalog.arrow.write_data_dir(table, tmp_path / name, topic="t", num_partitions=3,
                                      codec="zstd")  # fmt: skip
    for seg in (tmp_path / "a").glob("t-*/*"):
        if seg.suffix in (".log", ".index", ".timeindex"):
            assert seg.read_bytes() == (tmp_path / "b" / seg.parent.name / seg.name).read_bytes()


def test_appends_continue_the_offsets_of_existing_partitions(tmp_path):
    first = rows_table(100)
    kafkalog.arrow.write_data_dir(first, tmp_path, topic="t", num_partitions=3)
    second = rows_table(300).slice(100)
    result = kafkalog.arrow.write_data_dir(second, tmp_path, topic="t")
    check_read_back(tmp_path, "t", rows_table(300), 3)
    counts = {}
    for r in kafkalog.arrow.open_data_dir(tmp_path).read_all().to_pylist():
        counts[r["partition"]] = counts.get(r["partition"], 0) + 1
    for (_, p), w in result.partitions.items():
        assert w.next_offset == counts[p] and w.first_offset == counts[p] - w.records


def test_topic_column_and_many_topics(tmp_path):
    n = 200
    table = pa.table({
        "topic": pa.array(["a" if i % 3 else "b" for i in range(n)]).dictionary_encode(),
        "key": [f"k{i}" for i in range(n)],  # strings are written as their UTF-8 bytes
        "value": [f"v{i}" for i in range(n)],
        "offset": list(range(n)),  # not a sink column: ignored
    })  # fmt: skip
    result = kafkalog.arrow.write_data_dir(table, tmp_path, num_partitions=2)
    assert result.topics == ["a", "b"] and result.records == n
    back = kafkalog.arrow.open_data_dir(tmp_path).read_all().to_pylist()
    assert sorted((r["topic"], r["value"]) for r in back) == sorted(
        ("a" if i % 3 else "b", f"v{i}".encode()) for i in range(n)
    )
    for r in back:
        assert r["partition"] == partition_for_key(r["key"], 2)


def test_rows_without_key_stick_to_a_partition_per_batch_size(tmp_path):
    table = pa.table({"value": [b"x" * 100] * 1000})
    result = kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", num_partitions=4,
                                           batch_size=10_000)  # fmt: skip
    assert result.records == 1000
    back = kafkalog.arrow.open_data_dir(tmp_path).read_all().column("partition").to_pylist()
    runs = sum(1 for a, b in itertools.pairwise(back) if a != b) + 1
    assert runs <= 4  # sorted by partition on read; sticky runs of ~99 rows each


def test_polars_input(tmp_path):
    pl = pytest.importorskip("polars")
    table = rows_table(300)
    df = pl.from_arrow(table)  # string_view/binary_view, large_list columns on export
    kafkalog.arrow.write_data_dir(df, tmp_path, topic="t", num_partitions=3, codec="lz4")
    check_read_back(tmp_path, "t", table, 3)


def test_pandas_input(tmp_path):
    pd = pytest.importorskip("pandas")
    table = rows_table(300, partitions=False)
    df = table.to_pandas()  # timestamps as datetime64, headers as lists of dicts
    assert isinstance(df, pd.DataFrame)
    df["partition"] = [i % 3 if i % 5 == 0 else None for i in range(300)]  # float64 with NaN
    df["partition"] = df["partition"].astype("Int64")
    kafkalog.arrow.write_data_dir(df, tmp_path, topic="t", num_partitions=3, codec="gzip")
    want = table.append_column(
        "partition", pa.array([i % 3 if i % 5 == 0 else None for i in range(300)], pa.int32())
    )
    check_read_back(tmp_path, "t", want, 3)


def test_duckdb_relation_and_batches_input(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    source = rows_table(50, partitions=False).select(["key", "value"])
    rel = duckdb.sql("SELECT key, value FROM source")
    kafkalog.arrow.write_data_dir(rel, tmp_path / "duck", topic="t", num_partitions=2)
    kafkalog.arrow.write_data_dir(source.to_batches(max_chunksize=7), tmp_path / "it",
                                  topic="t", num_partitions=2)  # fmt: skip
    for name in ("duck", "it"):
        back = kafkalog.arrow.open_data_dir(tmp_path / name).read_all()
        assert sorted(back.column("value").to_pylist(), key=str) == sorted(
            source.column("value").to_pylist(), key=str
        )


def test_timestamps_as_integers_and_defaults(tmp_path):
    table = pa.table({"value": [b"a", b"b", b"c"], "timestamp": pa.array([5, None, 7], pa.int64())})
    before = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", num_partitions=1)
    back = kafkalog.arrow.open_data_dir(tmp_path).read_all().to_pylist()
    stamps = [_ms(r["timestamp"]) for r in back]
    assert stamps[0] == 5 and stamps[2] == 7 and stamps[1] >= before  # null: the write time


def test_overwrite_replaces_only_the_topics_written(tmp_path):
    kafkalog.arrow.write_data_dir(pa.table({"value": [b"old"] * 5}), tmp_path, topic="t",
                                  num_partitions=2)  # fmt: skip
    kafkalog.arrow.write_data_dir(pa.table({"value": [b"keep"]}), tmp_path, topic="k",
                                  num_partitions=1)  # fmt: skip
    kafkalog.arrow.write_data_dir(pa.table({"value": [b"new"]}), tmp_path, topic="t",
                                  num_partitions=1, mode="overwrite")  # fmt: skip
    back = kafkalog.arrow.open_data_dir(tmp_path).read_all().to_pylist()
    assert sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in back) == [
        ("k", 0, 0, b"keep"), ("t", 0, 0, b"new"),
    ]  # fmt: skip
    assert not (tmp_path / "t-1").exists()


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("columns", "column"),
    [
        ({"value": pa.array([1, 2])}, "value"),
        ({"value": pa.array([b"v"] * 2), "key": pa.array([1, 2])}, "key"),
        ({"value": pa.array([b"v"] * 2), "partition": pa.array(["0", "1"])}, "partition"),
        ({"value": pa.array([b"v"] * 2), "timestamp": pa.array(["now", "then"])}, "timestamp"),
        ({"value": pa.array([b"v"] * 2), "headers": pa.array([[1], [2]])}, "headers"),
        (
            {
                "value": pa.array([b"v"] * 2),
                "headers": pa.array([[{"k": "a", "v": b"b"}]] * 2),
            },
            "headers",
        ),
    ],
)
def test_wrong_column_types_name_the_column_and_rule(tmp_path, columns, column):
    with pytest.raises(WriteSchemaError, match=f"column '{column}' has type") as e:
        kafkalog.arrow.write_data_dir(pa.table(columns), tmp_path, topic="t", num_partitions=1)
    assert e.value.column == column and e.value.rule in str(e.value)
    assert isinstance(e.value, TypeError) and isinstance(e.value, OptionError)
    assert not list(tmp_path.glob("t-*"))


def test_missing_value_or_topic_column(tmp_path):
    with pytest.raises(WriteSchemaError, match="column 'value' is missing") as e:
        kafkalog.arrow.write_data_dir(pa.table({"key": [b"k"]}), tmp_path, topic="t",
                                      num_partitions=1)  # fmt: skip
    assert e.value.column == "value"
    with pytest.raises(WriteSchemaError, match="no topic") as e:
        kafkalog.arrow.write_data_dir(pa.table({"value": [b"v"]}), tmp_path, num_partitions=1)
    assert e.value.column == "topic"
    with pytest.raises(WriteSchemaError, match="column 'topic' has type int64"):
        kafkalog.arrow.write_data_dir(pa.table({"value": [b"v"], "topic": [1]}), tmp_path,
                                      num_partitions=1)  # fmt: skip


def test_partition_out_of_range_for_an_existing_topic(tmp_path):
    kafkalog.arrow.write_data_dir(pa.table({"value": [b"v"]}), tmp_path, topic="t",
                                  num_partitions=2)  # fmt: skip
    before = {p: p.read_bytes() for p in tmp_path.glob("t-*/*.log")}
    bad = pa.table({"value": [b"a", b"b"], "partition": pa.array([1, 2], pa.int64())})
    with pytest.raises(PartitionOutOfRangeError, match=r"partition 2 of topic 't'.* 2 partitions"):
        kafkalog.arrow.write_data_dir(bad, tmp_path, topic="t")
    negative = pa.table({"value": [b"a"], "partition": pa.array([-1], pa.int8())})
    with pytest.raises(PartitionOutOfRangeError, match="partition -1 of topic 't'"):
        kafkalog.arrow.write_data_dir(negative, tmp_path, topic="t")
    assert {p: p.read_bytes() for p in tmp_path.glob("t-*/*.log")} == before
    assert not (tmp_path / ".kafkalog-staging").exists()


def test_partition_counts_and_options_are_checked(tmp_path):
    table = pa.table({"value": [b"v"]})
    with pytest.raises(OptionError, match="numPartitions"):
        kafkalog.arrow.write_data_dir(table, tmp_path, topic="new")
    kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", num_partitions=2)
    with pytest.raises(OptionError, match="already has 2 partitions"):
        kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", num_partitions=3)
    with pytest.raises(OptionError, match="codec must be one of"):
        kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", codec="brotli")
    with pytest.raises(OptionError, match="mode must be"):
        kafkalog.arrow.write_data_dir(table, tmp_path, topic="t", mode="ignore")
    with pytest.raises(OptionError, match="given twice"):
        kafkalog.arrow.write_data_dir(
            table,
            tmp_path,
            topic="t",
            codec="gzip",
            options={"kafka.compression.type": "gzip", "codec": "x"},
        )
    with pytest.raises(TypeError, match="write_data_dir takes"):
        kafkalog.arrow.write_data_dir(42, tmp_path, topic="t")


def test_a_failing_input_leaves_the_logs_as_they_were(tmp_path):
    kafkalog.arrow.write_data_dir(rows_table(50), tmp_path, topic="t", num_partitions=3)
    before = {p: p.read_bytes() for p in tmp_path.glob("t-*/*")}
    good = rows_table(100).to_batches(max_chunksize=30)

    def batches():
        yield from good
        raise RuntimeError("the source failed")

    reader = pa.RecordBatchReader.from_batches(good[0].schema, batches())
    with pytest.raises(Exception, match="the source failed"):
        kafkalog.arrow.write_data_dir(reader, tmp_path, topic="t")
    assert {p: p.read_bytes() for p in tmp_path.glob("t-*/*")} == before
    assert not (tmp_path / ".kafkalog-staging").exists()


# -- a property ----------------------------------------------------------------------------------
def test_round_trip_property():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    maybe_bytes = st.one_of(st.none(), st.binary(max_size=40))
    header = st.tuples(st.text(max_size=5), maybe_bytes)
    row = st.tuples(
        maybe_bytes, maybe_bytes, st.one_of(st.none(), st.lists(header, max_size=3)),
        st.integers(0, 2**42),
    )  # fmt: skip

    @hypothesis.settings(max_examples=30, deadline=None)
    @hypothesis.given(
        rows=st.lists(row, min_size=1, max_size=60), codec=st.sampled_from(CODECS),
        partitions=st.integers(1, 3), batch_size=st.integers(1, 600),
    )  # fmt: skip
    def check(rows, codec, partitions, batch_size):
        table = pa.table({
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "headers": pa.array([None if r[2] is None else [{"key": k, "value": v} for k, v in
                                 r[2]] for r in rows], HEADERS),
            "timestamp": pa.array([r[3] for r in rows], pa.int64()),
        })  # fmt: skip
        with tempfile.TemporaryDirectory() as root:
            kafkalog.arrow.write_data_dir(table, root, topic="t", num_partitions=partitions,
                                          codec=codec, batch_size=batch_size)  # fmt: skip
            back = kafkalog.arrow.open_data_dir(root, include_headers=True).read_all()
            got = sorted((r["key"] or b"", r["value"] or b"", str(r["headers"] or []),
                          _ms(r["timestamp"])) for r in back.to_pylist())  # fmt: skip
            want = sorted((r[0] or b"", r[1] or b"", str([{"key": k, "value": v} for k, v in
                           r[2] or []]), r[3]) for r in rows)  # fmt: skip
            assert got == want

    check()
