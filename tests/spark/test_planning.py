"""Spark-free checks of the data source's options, planning and reading (fast)."""

from __future__ import annotations

import os
import random
import warnings

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.dataset.options import OptionError, parse_read_options, parse_write_options
from kafkalog.dataset.partitioning import StickyPartitioner, murmur2_array, partitions_for_keys
from kafkalog.dataset.planner import DataLossError
from kafkalog.dataset.reader import (
    open_selected,
    plan_input_partitions,
    read_partition,
    resolve_ranges,
)
from kafkalog.format.partitioner import murmur2, partition_for_key

from .helpers import write_dir, write_transactions


def _read(options: dict, *, split_bytes=None) -> tuple[list, list[pa.RecordBatch]]:
    o = parse_read_options(options)
    logs = open_selected(o)
    try:
        kwargs = {"split_bytes": split_bytes} if split_bytes else {}
        parts = plan_input_partitions(o, logs, resolve_ranges(o, logs), **kwargs)
    finally:
        for log in logs.values():
            log.close()
    return parts, [b for p in parts for b in read_partition(p)]


def _values(batches) -> list:
    return [v for b in batches for v in b.column(1).to_pylist()]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "only one of"),
        ({"startingOffsets": "latest"}, "cannot be 'latest'"),
        ({"endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, "cannot be -1"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "cannot be -2"),
        ({"startingOffsets": "{bad json"}, "not valid JSON"),
        ({"includeHeaders": "yes"}, "true or false"),
        ({"minPartitions": "0"}, "at least 1"),
        ({"maxRecordsPerPartition": "x"}, "integer"),
        ({"kafka.isolation.level": "serializable"}, "read_committed"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "error or latest"),
        ({"subscribePattern": "("}, "regex"),
        ({"assign": "[0, 1]"}, "assign must be JSON"),
        ({"noSuchOption": "1"}, "unknown option"),
        ({"topic": "t"}, "for writing"),
    ],
)
def test_bad_read_options_raise_clear_errors(tmp_path, options, message):
    with pytest.raises(OptionError, match=message):
        parse_read_options({"path": str(tmp_path), **{k.lower(): v for k, v in options.items()}})


def test_broker_only_options_are_ignored_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="kafka.bootstrap.servers"):
        parse_read_options({"path": str(tmp_path), "kafka.bootstrap.servers": "b:9092"})
    with pytest.warns(UserWarning, match="streaming"):
        parse_read_options({"path": str(tmp_path), "maxoffsetspertrigger": "10"})


def test_streaming_rejects_ending_offsets(tmp_path):
    with pytest.raises(OptionError, match="streaming"):
        parse_read_options({"path": str(tmp_path), "endingoffsets": "latest"}, streaming=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"codec": "brotli"}, "codec must be"),
        ({"codec": "lz4", "kafka.compression.type": "gzip"}, "disagree"),
        ({"subscribe": "t"}, "for reading"),
        ({"numPartitions": "-1"}, "at least 1"),
    ],
)
def test_bad_write_options(tmp_path, options, message):
    with pytest.raises(OptionError, match=message):
        parse_write_options({"path": str(tmp_path), **{k.lower(): v for k, v in options.items()}})


def test_write_options_accept_kafka_names(tmp_path):
    o = parse_write_options({"path": str(tmp_path), "kafka.compression.type": "ZSTD",
                             "kafka.batch.size": "32768"})  # fmt: skip
    assert (o.codec, o.batch_size) == ("zstd", 32768)


def test_murmur2_array_equals_kafkas_murmur2():
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(3000)]
    hashes = murmur2_array(pa.array(keys, pa.binary()))
    assert [int(h) for h in hashes] == [murmur2(k) for k in keys]
    parts = partitions_for_keys(pa.array([k.hex() for k in keys], pa.string()), 12)
    assert [int(p) for p in parts] == [partition_for_key(k.hex().encode(), 12) for k in keys]


def test_sticky_partitioner_switches_after_a_batch_worth_of_bytes():
    s = StickyPartitioner(8, 100, seed=3)
    first = s.assign(np.full(3, 30))
    assert len(set(first.tolist())) == 1
    later = s.assign(np.full(40, 30))
    assert len(set(later.tolist())) > 1


def test_all_topics_but_internal_ones_by_default(tmp_path):
    write_dir(tmp_path, {"a": 2, "b": 1, "__internal": 1}, 25)
    _parts, batches = _read({"path": str(tmp_path)})
    topics = {t for b in batches for t in b.column(2).to_pylist()}
    assert topics == {"a", "b"}
    assert sum(b.num_rows for b in batches) == 75


def test_ranges_are_split_at_index_entries_and_cover_every_record_once(tmp_path):
    written = write_dir(tmp_path, {"a": 1}, 3000, segment_bytes=64 * 1024)
    parts, batches = _read({"path": str(tmp_path), "minpartitions": "1"}, split_bytes=20_000)
    assert len(parts) == 1  # one task for the partition (Spark's rule) ...
    assert len(parts[0].parts) >= 4  # ... of byte ranges cut at verified index entries
    offsets = [o for b in batches for o in b.column(4).to_pylist()]
    assert sorted(offsets) == list(range(3000))
    assert _values(batches) == [r["value"] for r in written[("a", 0)]]


def test_offsets_json_and_max_records_per_partition(tmp_path):
    write_dir(tmp_path, {"a": 2}, 100)
    parts, batches = _read({
        "path": str(tmp_path), "assign": '{"a":[0,1]}',
        "startingoffsets": '{"a":{"0":10,"1":-2}}', "endingoffsets": '{"a":{"0":20,"1":-1}}',
        "maxrecordsperpartition": "30",
    })  # fmt: skip
    assert sum(b.num_rows for b in batches) == 10 + 100
    assert len(parts) == 1 + 4
    with pytest.raises(OptionError, match="must specify all TopicPartitions"):
        _read({"path": str(tmp_path), "startingoffsets": '{"a":{"0":10}}'})


def test_timestamps_pick_offsets(tmp_path):
    from .helpers import T0

    write_dir(tmp_path, {"a": 1}, 100)
    _, batches = _read({"path": str(tmp_path), "startingtimestamp": str(T0 + 90_000),
                        "endingtimestamp": str(T0 + 95_000)})  # fmt: skip
    assert [o for b in batches for o in b.column(4).to_pylist()] == list(range(90, 95))
    with pytest.raises(OptionError, match="No offset matched"):
        _read({"path": str(tmp_path), "startingtimestamp": str(T0 + 10**9)})
    _, batches = _read({"path": str(tmp_path), "startingtimestamp": str(T0 + 10**9),
                        "startingoffsetsbytimestampstrategy": "latest"})  # fmt: skip
    assert sum(b.num_rows for b in batches) == 0


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(tmp_path):
    expected = write_transactions(tmp_path)
    _, batches = _read({"path": str(tmp_path)})
    assert _values(batches) == expected["uncommitted"]
    _, batches = _read({"path": str(tmp_path), "kafka.isolation.level": "read_committed"})
    assert _values(batches) == expected["committed"]


def test_several_paths_are_one_brokers_log_dirs(tmp_path):
    write_dir(tmp_path / "d1", {"a": 1}, 10)
    write_dir(tmp_path / "d2", {"b": 1}, 10)
    (tmp_path / "d2" / "a-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    import json

    _, batches = _read({"paths": json.dumps([str(tmp_path / "d1"), str(tmp_path / "d2")])})
    assert sum(b.num_rows for b in batches) == 20
    write_dir(tmp_path / "d3", {"a": 1}, 10)
    with pytest.raises(Exception, match="Duplicate log directories"):
        _read({"paths": json.dumps([str(tmp_path / "d1"), str(tmp_path / "d3")])})


def test_torn_tail_is_left_out(tmp_path):
    write_dir(tmp_path, {"a": 1}, 50)
    seg = tmp_path / "a-0" / "00000000000000000000.log"
    data = seg.read_bytes()
    with open(seg, "ab") as f:
        f.write(data[:40])  # the start of a batch still being written
    _, batches = _read({"path": str(tmp_path)})
    assert sum(b.num_rows for b in batches) == 50


def test_start_below_log_start_offset_is_data_loss(tmp_path):
    write_dir(tmp_path, {"a": 1}, 50)
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\na 0 20\n")
    options = {"path": str(tmp_path), "startingoffsets": '{"a":{"0":5}}'}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _read(options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, batches = _read({**options, "failondataloss": "false"})
    assert [o for b in batches for o in b.column(4).to_pylist()] == list(range(20, 50))


@pytest.mark.slow
def test_memory_per_task_is_bounded(tmp_path):
    """Reading a 256 MB segment grows peak RSS by less than 64 MB."""
    import resource
    import subprocess
    import sys

    from kafkalog.format import columnar as fast

    part = tmp_path / "big-0"
    part.mkdir()
    value = os.urandom(1000)
    chunk = fast.encode_columnar(None, [value] * 16000, [0] * 16000, batch_bytes=1 << 20)
    with open(part / "00000000000000000000.log", "wb") as f:
        base = 0
        while f.tell() < 256 << 20:
            data = fast.encode_columnar(None, [value] * 16000, [0] * 16000, base_offset=base,
                                        batch_bytes=1 << 20)  # fmt: skip
            f.write(data)
            base += 16000
    del chunk
    code = f"""
import resource, sys
from kafkalog.dataset.options import parse_read_options
from kafkalog.dataset.reader import (open_selected, plan_input_partitions, read_partition,
                                   resolve_ranges)
o = parse_read_options({{"path": {str(tmp_path)!r}, "minpartitions": "1"}})
logs = open_selected(o)
parts = plan_input_partitions(o, logs, resolve_ranges(o, logs), split_bytes=1 << 40)
assert len(parts) == 1
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = sum(b.num_rows for b in read_partition(parts[0]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(rows, (after - before) // 1024)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rows, grown_mb = map(int, out.stdout.split())
    assert rows == base
    assert grown_mb < 64, f"peak RSS grew {grown_mb} MB"
    del resource


def test_one_task_per_topic_partition_whatever_the_segments(tmp_path):
    """Spark's Kafka source plans one task per topic-partition offset range: a partition of
    many small segments is one task reading them in turn, never a task per segment."""
    written = write_dir(tmp_path, {"a": 4}, 300, segment_bytes=2048)
    assert len(list((tmp_path / "a-0").glob("*.log"))) >= 5
    parts, batches = _read({"path": str(tmp_path)})
    assert [(p.topic, p.partition) for p in parts] == [("a", 0), ("a", 1), ("a", 2), ("a", 3)]
    for p in parts:
        assert (p.start_offset, p.end_offset) == (0, 300)
        assert len(p.parts) == len(list((tmp_path / f"a-{p.partition}").glob("*.log")))
    expected = sorted(r["value"] for rows in written.values() for r in rows)
    assert sorted(_values(batches)) == expected
    for opts in ({"minpartitions": "2"}, {"minpartitions": "4"}, {"maxrecordsperpartition": "300"}):
        parts, _ = _read({"path": str(tmp_path), **opts})
        assert len(parts) == 4, opts  # nothing to split: still one task per topic-partition
