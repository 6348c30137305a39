"""Spark-free checks that the data source plans, selects and validates as Spark's Kafka source.

Expected values come from spark-sql-kafka-0-10's source (KafkaOffsetRangeCalculator.getRanges,
its test suite's cases, KafkaOffsetReaderAdmin's messages) and Kafka's rules, not from kafkalog.
"""

from __future__ import annotations

import os
import struct
import warnings

import pytest

from kafkalog.dataset.options import OptionError, parse_read_options
from kafkalog.dataset.reader import (
    OffsetRange,
    open_selected,
    plan_input_partitions,
    read_partition,
    resolve_ranges,
    spark_offset_ranges,
)
from kafkalog.format.entries import HEADER_PEEK, entry_header
from kafkalog.log.datadir.naming import TopicPartition

from .helpers import T0, write_dir

TP1, TP2, TP3 = TopicPartition("t1", 1), TopicPartition("t2", 1), TopicPartition("t3", 1)


def _r(tp, start, end):
    return OffsetRange(tp, start, end)


# -- Spark's KafkaOffsetRangeCalculator ------------------------------------------------------
@pytest.mark.parametrize(
    ("min_partitions", "max_records", "ranges", "expected"),
    [
        # no option: one range per topic-partition, as given
        (None, None, [_r(TP1, 1, 2), _r(TP2, 1, 3)], [_r(TP1, 1, 2), _r(TP2, 1, 3)]),
        # minPartitions not above the number of ranges: no split
        (3, None, [_r(TP1, 1, 2), _r(TP2, 1, 3), _r(TP3, 1, 4)],
         [_r(TP1, 1, 2), _r(TP2, 1, 3), _r(TP3, 1, 4)]),
        # one topic-partition to minPartitions ranges
        (4, None, [_r(TP1, 1, 17)],
         [_r(TP1, 1, 5), _r(TP1, 5, 9), _r(TP1, 9, 13), _r(TP1, 13, 17)]),
        # skewed: the small range stays whole and is left out of the shares
        (3, None, [_r(TP1, 1, 5), _r(TP2, 1, 21)],
         [_r(TP1, 1, 5), _r(TP2, 1, 11), _r(TP2, 11, 21)]),
        # SPARK-30656: very skewed
        (3, None, [_r(TP1, 1, 2), _r(TP2, 1, 1001)],
         [_r(TP1, 1, 2), _r(TP2, 1, 501), _r(TP2, 501, 1001)]),
        # a size that is not a multiple: the last part takes the remainder
        (3, None, [_r(TP1, 1, 11)], [_r(TP1, 1, 4), _r(TP1, 4, 7), _r(TP1, 7, 11)]),
        # empty ranges are dropped
        (3, None, [_r(TP1, 1, 5), _r(TP2, 1, 1), _r(TP3, 1, 9)],
         [_r(TP1, 1, 5), _r(TP3, 1, 5), _r(TP3, 5, 9)]),
        (None, None, [_r(TP1, 5, 5), _r(TP2, 0, 3)], [_r(TP2, 0, 3)]),
        # maxRecordsPerPartition: ceil(size / max) parts
        (None, 5, [_r(TP1, 0, 12), _r(TP2, 0, 5)],
         [_r(TP1, 0, 4), _r(TP1, 4, 8), _r(TP1, 8, 12), _r(TP2, 0, 5)]),
        (None, 100, [_r(TP1, 0, 12)], [_r(TP1, 0, 12)]),
        # both: maxRecordsPerPartition first, then minPartitions over what it gave
        (4, 10, [_r(TP1, 0, 20), _r(TP2, 0, 5)],
         [_r(TP1, 0, 5), _r(TP1, 5, 10), _r(TP1, 10, 15), _r(TP1, 15, 20), _r(TP2, 0, 5)]),
        (2, 10, [_r(TP1, 0, 20), _r(TP2, 0, 5)],
         [_r(TP1, 0, 10), _r(TP1, 10, 20), _r(TP2, 0, 5)]),
    ],
)  # fmt: skip
def test_offset_ranges_are_sparks(min_partitions, max_records, ranges, expected):
    assert spark_offset_ranges(ranges, min_partitions, max_records) == expected


# -- tasks: offset ranges read from verified batch starts ------------------------------------
def _plan(root, **options):
    o = parse_read_options({"path": str(root), **{k.lower(): v for k, v in options.items()}})
    logs = open_selected(o)
    try:
        return plan_input_partitions(o, logs, resolve_ranges(o, logs))
    finally:
        for log in logs.values():
            log.close()


def _offsets(parts) -> list[int]:
    return [o for p in parts for b in read_partition(p) for o in b.column(4).to_pylist()]


def _pieces(task):
    return getattr(task, "parts", [task])


def test_min_partitions_splits_by_offsets_from_index_hints(tmp_path):
    written = write_dir(tmp_path, {"a": 1}, 3000, segment_bytes=64 * 1024)
    tasks = _plan(tmp_path, minPartitions="4")
    assert [(t.start_offset, t.end_offset) for t in tasks] == [
        (0, 750), (750, 1500), (1500, 2250), (2250, 3000)
    ]  # fmt: skip
    for t in tasks:
        first = _pieces(t)[0]
        with open(first.path, "rb") as f:
            head = os.pread(f.fileno(), HEADER_PEEK, first.start_position)
        header = entry_header(head, 0, os.path.getsize(first.path) - first.start_position)
        assert header.base_offset <= t.start_offset  # a batch start at or before the range
        assert t.start_offset - header.base_offset <= 160  # within an index interval of it
        if t.start_offset > 0:
            assert first.start_position > 0  # found through the index, not read from the start
    assert _offsets(tasks) == list(range(3000))  # every record once, in order
    values = [v for t in tasks for b in read_partition(t) for v in b.column(1).to_pylist()]
    assert values == [r["value"] for r in written[("a", 0)]]


def test_a_lying_index_is_not_trusted_when_splitting(tmp_path):
    write_dir(tmp_path, {"a": 1}, 2000)
    index = tmp_path / "a-0" / "00000000000000000000.index"
    good = index.read_bytes()
    entries = [struct.unpack_from(">ii", good, i) for i in range(0, len(good), 8)]
    assert len(entries) > 3
    index.write_bytes(b"".join(struct.pack(">ii", rel, pos + 5) for rel, pos in entries))
    for options in ({"minPartitions": "5"}, {"maxRecordsPerPartition": "300"}):
        assert _offsets(_plan(tmp_path, **options)) == list(range(2000))


def test_max_records_per_partition_gives_tasks_of_at_most_that_many_offsets(tmp_path):
    write_dir(tmp_path, {"a": 2}, 1000, segment_bytes=4096)
    tasks = _plan(tmp_path, maxRecordsPerPartition="300")
    assert len(tasks) == 2 * 4  # ceil(1000 / 300) per partition
    assert all(t.end_offset - t.start_offset <= 300 for t in tasks)
    assert sorted(_offsets(tasks)) == sorted(list(range(1000)) * 2)


# -- topic selection ---------------------------------------------------------------------------
def _topics(root, **options) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = _plan(root, **options)
    return {t.topic for t in tasks}


def test_internal_topics_only_by_name(tmp_path):
    write_dir(tmp_path, {"orders": 1, "__consumer_offsets": 2, "__transaction_state": 1,
                         "__share_group_state": 1, "__my_events": 1}, 5)  # fmt: skip
    assert _topics(tmp_path, subscribePattern=".*") == {"orders", "__my_events"}
    assert _topics(tmp_path, subscribePattern="__.*") == {"__my_events"}
    assert _topics(tmp_path) == {"orders"}  # kafkalog's default: no topic starting with __
    assert _topics(tmp_path, subscribe="__consumer_offsets") == {"__consumer_offsets"}
    assert _topics(tmp_path, assign='{"__transaction_state":[0]}') == {"__transaction_state"}


def test_subscribing_to_a_missing_topic_warns_and_reads_nothing_of_it(tmp_path):
    write_dir(tmp_path, {"orders": 1}, 5)
    with pytest.warns(UserWarning, match=r"subscribed topic order not found in .*topics found: "
                                         r"orders"):  # fmt: skip
        assert _plan(tmp_path, subscribe="order") == []
    with pytest.warns(UserWarning, match="subscribePattern 'ord' matches no topic"):
        assert _plan(tmp_path, subscribePattern="ord") == []


def test_a_partition_directory_as_path_is_read_with_a_warning(tmp_path):
    write_dir(tmp_path, {"orders": 2}, 5)
    with pytest.warns(UserWarning, match=r"orders-1 is a topic-partition directory .* give its "
                                         r"parent"):  # fmt: skip
        tasks = _plan(tmp_path / "orders-1")
    assert [(t.topic, t.partition) for t in tasks] == [("orders", 1)]


def test_a_parent_of_data_directories_is_an_error_naming_them(tmp_path):
    write_dir(tmp_path / "broker-1", {"orders": 1}, 5)
    write_dir(tmp_path / "broker-2", {"users": 1}, 5)
    message = r"no topic-partition directories in .*; its subfolders broker-1, broker-2 look like"
    with pytest.raises(OptionError, match=message):
        _plan(tmp_path)


def test_an_empty_directory_warns(tmp_path):
    (tmp_path / "notes").mkdir()
    with pytest.warns(UserWarning, match="no topic-partition directories in"):
        assert _plan(tmp_path) == []


def test_file_uris_and_globs_are_paths(tmp_path):
    write_dir(tmp_path / "b1", {"a": 1}, 5)
    write_dir(tmp_path / "b2", {"b": 1}, 5)
    assert _topics(f"file://{tmp_path}/b1") == {"a"}
    assert _topics(f"file:{tmp_path}/b1") == {"a"}  # Hadoop's spelling
    assert _topics(f"{tmp_path}/b*") == {"a", "b"}  # a glob: both data directories
    with pytest.raises(OptionError, match="matches no directory"):
        parse_read_options({"path": f"{tmp_path}/nothing-*"})
    # hdfs:// goes to pyarrow's HDFS client; without Hadoop's libraries the error says so
    if not os.environ.get("HADOOP_HOME"):
        with pytest.raises(OptionError, match=r"path: hdfs://nn/kafka: cannot open hdfs://"):
            parse_read_options({"path": "hdfs://nn/kafka"})


# -- option errors -----------------------------------------------------------------------------
def test_option_names_as_the_user_wrote_them(tmp_path):
    with pytest.raises(OptionError, match=r"unknown option 'startingOffset' \(did you mean "
                                          r"'startingOffsets'\?\)"):  # fmt: skip
        parse_read_options({"path": str(tmp_path), "startingOffset": "earliest"})
    with pytest.raises(OptionError, match="option INCLUDEHEADERS must be true or false"):
        parse_read_options({"path": str(tmp_path), "INCLUDEHEADERS": "yes"})
    # Spark hands options over lower-cased: then the suggestion still names the option
    with pytest.raises(OptionError, match=r"'startingoffset' \(did you mean 'startingOffsets'"):
        parse_read_options({"path": str(tmp_path), "startingoffset": "earliest"})


def test_options_checked_before_the_mode_is_known(tmp_path):
    # load() checks what holds for batch and streaming alike ...
    for ok in ({"startingOffsets": "latest"}, {"maxOffsetsPerTrigger": "10"},
               {"endingOffsets": "latest"}):  # fmt: skip
        parse_read_options({"path": str(tmp_path), **ok}, streaming=None)
    for bad, message in (
        ({"minPartitions": "0"}, "minPartitions must be at least 1"),
        ({"maxOffsetsPerTrigger": "x"}, "maxOffsetsPerTrigger must be an"),
        ({"startingOffsets": "{"}, "startingOffsets is not valid JSON"),
    ):
        with pytest.raises(OptionError, match=message):
            parse_read_options({"path": str(tmp_path), **bad}, streaming=None)


def test_starting_offsets_by_timestamp_names_its_own_option(tmp_path):
    write_dir(tmp_path, {"a": 2}, 10)
    with pytest.raises(OptionError) as e:
        _plan(tmp_path, startingOffsetsByTimestamp=f'{{"a":{{"0":{T0}}}}}')
    text = str(e.value)
    assert (
        "If startingOffsetsByTimestamp contains specific timestamps, you must specify all" in text
    )
    assert "Specified: {a-0} Assigned: {a-0, a-1}" in text
    assert "Use -1" not in text and "startingOffsets " not in text
    with pytest.raises(OptionError, match="If startingOffsets contains specific offsets, you must "
                                          "specify all TopicPartitions"):  # fmt: skip
        _plan(tmp_path, startingOffsets='{"a":{"0":1}}')


def test_no_timestamp_match_in_an_empty_partition_says_so(tmp_path):
    write_dir(tmp_path, {"a": 1}, 10)
    write_dir(tmp_path, {"empty": 1}, 0)
    with pytest.raises(OptionError) as e:
        _plan(tmp_path, subscribe="empty", startingTimestamp=str(T0))
    assert "the partition holds no records" in str(e.value)
    assert "older" not in str(e.value)
    with pytest.raises(OptionError, match="every record is older"):
        _plan(tmp_path, subscribe="a", startingTimestamp=str(T0 + 10**9))
