"""kafkalog.arrow.open_data_dir: selection, ranges, isolation, headers and failures, checked
against kafka-python's decoding of the files the log layer wrote (never kafkalog's own)."""

from __future__ import annotations

import shutil
import warnings

import pyarrow as pa
import pytest
from arrow_data import T0, kp_records, write_topics, write_transactions

import kafkalog.arrow
from kafkalog.dataset.options import OptionError
from kafkalog.dataset.planner import DataLossError
from kafkalog.errors import KafkalogError

PER_PARTITION = 25


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("arrow") / "data"
    write_topics(root, {"orders": 3, "users": 1, "__internal": 1}, PER_PARTITION)
    write_transactions(root)
    return root


def rows(table: pa.Table) -> list[tuple]:
    d = table.to_pydict()
    out = []
    for i in range(table.num_rows):
        ts = d["timestamp"][i]
        ms = int(ts.timestamp() * 1000)
        out.append((d["topic"][i], d["partition"][i], d["offset"][i], ms, d["key"][i],
                    d["value"][i]))  # fmt: skip
    return out


def expected(root, topic, partition, *, read_committed=False, lo=0, hi=None) -> list[tuple]:
    return [
        (topic, partition, r.offset, r.timestamp, r.key, r.value)
        for r in kp_records(root / f"{topic}-{partition}", read_committed=read_committed)
        if r.offset >= lo and (hi is None or r.offset < hi)
    ]


def test_default_reads_every_topic_but_internal_ones(data_dir):
    reader = kafkalog.arrow.open_data_dir(data_dir)
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema == kafkalog.arrow.schema(False)
    got = rows(reader.read_all())
    want = []
    for topic, count in (("orders", 3), ("tx", 1), ("users", 1)):
        for p in range(count):
            want += expected(data_dir, topic, p)
    assert got == want
    assert len(got) == 4 * PER_PARTITION + 10


def test_topics_and_partitions(data_dir):
    got = rows(kafkalog.arrow.open_data_dir(data_dir, topics="orders", partitions=[1]).read_all())
    assert got == expected(data_dir, "orders", 1)
    got = rows(kafkalog.arrow.open_data_dir(data_dir, partitions={"orders": [0, 2]}).read_all())
    assert got == expected(data_dir, "orders", 0) + expected(data_dir, "orders", 2)
    got = rows(kafkalog.arrow.open_data_dir(data_dir, topic_pattern="__.*").read_all())
    assert got == expected(data_dir, "__internal", 0)
    got = kafkalog.arrow.open_data_dir(data_dir, topics=["orders"], partitions=[7]).read_all()
    assert got.num_rows == 0


def test_offset_ranges(data_dir):
    table = kafkalog.arrow.open_data_dir(
        data_dir, topics=["orders"], starting_offsets=5, ending_offsets={"orders": {0: 10}}
    ).read_all()
    want = expected(data_dir, "orders", 0, lo=5, hi=10)
    want += expected(data_dir, "orders", 1, lo=5) + expected(data_dir, "orders", 2, lo=5)
    assert rows(table) == want
    table = kafkalog.arrow.open_data_dir(
        data_dir, topics=["orders"], partitions=[2], starting_offsets={("orders", 2): 23}
    ).read_all()
    assert rows(table) == expected(data_dir, "orders", 2, lo=23)
    latest = kafkalog.arrow.open_data_dir(data_dir, starting_offsets="latest").read_all()
    assert latest.num_rows == 0


def test_time_ranges(data_dir):
    lo, hi = T0 + 3_500, T0 + 9_000
    table = kafkalog.arrow.open_data_dir(
        data_dir, topics="users", starting_timestamp=lo, ending_timestamp=hi
    ).read_all()
    want = [r for r in expected(data_dir, "users", 0) if lo <= r[3] < hi]
    assert rows(table) == want and len(want) == 5


def test_plan_reports_ranges(data_dir):
    scan = kafkalog.arrow.plan_scan(data_dir, topics="users", starting_offsets=3)
    ((tp, rng),) = scan.ranges.items()
    assert (tp.topic, tp.partition, rng) == ("users", 0, (3, PER_PARTITION))
    assert scan.total_bytes > 0


def test_read_committed_drops_aborted_and_stops_at_open(data_dir):
    committed = kafkalog.arrow.open_data_dir(
        data_dir, topics="tx", isolation_level="read_committed"
    ).read_all()
    want = expected(data_dir, "tx", 0, read_committed=True)
    assert rows(committed) == want
    assert [r[5] for r in want] == [b"plain-0", b"plain-1", b"a-0", b"a-1", b"a-2", b"plain-2"]
    uncommitted = kafkalog.arrow.open_data_dir(data_dir, topics="tx").read_all()
    assert rows(uncommitted) == expected(data_dir, "tx", 0)
    assert uncommitted.num_rows == 10


def test_headers(data_dir):
    table = kafkalog.arrow.open_data_dir(data_dir, topics="users", include_headers=True).read_all()
    assert table.schema == kafkalog.arrow.schema(True)
    got = table.column("headers").to_pylist()
    want = [r.headers for r in kp_records(data_dir / "users-0")]
    assert [None if not w else [{"key": k, "value": v} for k, v in w] for w in want] == got


def test_bad_options_fail_before_reading(data_dir):
    with pytest.raises(OptionError, match="isolation"):
        kafkalog.arrow.open_data_dir(data_dir, isolation_level="serializable")
    with pytest.raises(OptionError, match="not read: users-0"):
        kafkalog.arrow.open_data_dir(data_dir, topics="orders", starting_offsets={"users": {0: 1}})
    with pytest.raises(OptionError, match="only one"):
        kafkalog.arrow.open_data_dir(data_dir, topics="orders", topic_pattern="o.*")
    with pytest.raises(OptionError, match="not both"):
        kafkalog.arrow.open_data_dir(data_dir, starting_offsets=1, starting_timestamp=T0)
    with pytest.raises(OptionError, match="unknown option"):
        kafkalog.arrow.open_data_dir(data_dir, options={"frobnicate": "1"})
    with pytest.raises(FileNotFoundError):
        kafkalog.arrow.open_data_dir(data_dir / "nope")


def test_data_loss(data_dir):
    with pytest.raises(DataLossError, match="past the log end offset"):
        kafkalog.arrow.open_data_dir(data_dir, topics="users", starting_offsets=PER_PARTITION + 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = kafkalog.arrow.open_data_dir(
            data_dir, topics="users", starting_offsets=PER_PARTITION + 5, fail_on_data_loss=False
        ).read_all()
    assert table.num_rows == 0
    assert any("past the log end offset" in str(w.message) for w in caught)


def test_corrupt_record_names_the_file(data_dir, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    segment = copy / "users-0" / "00000000000000000000.log"
    raw = bytearray(segment.read_bytes())
    raw[57:61] = (1000).to_bytes(4, "big")  # the first batch claims 1000 records: it has 4
    segment.write_bytes(bytes(raw))
    with pytest.raises(KafkalogError) as info:  # planning's header walk sees the count now
        kafkalog.arrow.open_data_dir(copy, topics="users").read_all()
    assert str(segment) in str(info.value) and "position 0" in str(info.value)


def test_several_log_dirs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_topics(a, {"left": 1}, 3)
    write_topics(b, {"right": 1}, 2)
    table = kafkalog.arrow.open_data_dir([a, b]).read_all()
    assert sorted(set(table.column("topic").to_pylist())) == ["left", "right"]
    assert table.num_rows == 5
    one = kafkalog.arrow.open_data_dir(a / "left-0").read_all()  # a partition directory
    assert rows(one) == expected(a, "left", 0)


def test_top_level_name_is_lazy():
    import subprocess
    import sys

    import kafkalog

    assert kafkalog.open_data_dir is kafkalog.arrow.open_data_dir
    code = "import sys, kafkalog; assert 'pyarrow' not in sys.modules; kafkalog.open_data_dir"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_reading_imports_no_pandas(tmp_path) -> None:
    """pyarrow imports pandas (0.2 s) when numpy arrays and Arrow arrays are converted the easy
    way; a fresh Spark worker would pay it for every first read. Headers included."""
    import subprocess
    import sys

    from kafkalog.format import MemoryRecordsBuilder
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    with LogManager(tmp_path, writable=True, create=True) as manager:
        manager.create_topic("t", 1, {})
        b = MemoryRecordsBuilder()
        b.append(timestamp=1, key=b"k", value=b"v", headers=[("h", b"x")])
        b.append(timestamp=2, key=b"k", value=b"w")
        manager.get_log(TopicPartition("t", 0)).append_as_leader(b.build())
    code = (
        "import sys\n"
        "from kafkalog.arrow import open_data_dir\n"
        f"t = open_data_dir({str(tmp_path)!r}, options={{'includeHeaders': 'true'}}).read_all()\n"
        "assert t.num_rows == 2, t.num_rows\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
