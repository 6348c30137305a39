"""File and directory names: segment files, KRaft snapshots, partition dirs, topic validation.

Expected names are Kafka's (LogFileUtils, LocalLog, Snapshots, Topic); the real-broker test walks
every name in ../shared/fixtures/kafka-data and checks each parses and, rebuilt, is the same name.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.log.datadir.naming import (
    MAX_TOPIC_NAME_LENGTH,
    PartitionDirKind,
    SegmentFileName,
    SnapshotFileName,
    TopicPartition,
    filename_prefix_from_offset,
    is_index_file,
    is_log_file,
    is_valid_topic,
    log_delete_dir_name,
    log_dir_name,
    log_file,
    log_future_dir_name,
    log_stray_dir_name,
    offset_from_file,
    offset_from_file_name,
    offset_index_file,
    parse_partition_dir_name,
    parse_segment_file_name,
    parse_snapshot_file_name,
    producer_snapshot_file,
    snapshot_file_name,
    time_index_file,
    transaction_index_file,
    validate_partition,
    validate_topic,
)
from kafkalog.log.errors import InvalidFileNameError, InvalidTopicError
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
UID = uuid.UUID("0123456789abcdef0123456789abcdef")

topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=MAX_TOPIC_NAME_LENGTH,
).filter(lambda t: t not in (".", ".."))


# -- segment files ----------------------------------------------------------------------------


def test_segment_file_names_are_base_offset_padded_to_20_digits(tmp_path):
    assert filename_prefix_from_offset(0) == "00000000000000000000"
    assert filename_prefix_from_offset(LONG_MAX) == "09223372036854775807"
    assert log_file(tmp_path, 512) == tmp_path / "00000000000000000512.log"
    assert offset_index_file(tmp_path, 512) == tmp_path / "00000000000000000512.index"
    assert time_index_file(tmp_path, 512) == tmp_path / "00000000000000000512.timeindex"
    assert transaction_index_file(tmp_path, 512) == tmp_path / "00000000000000000512.txnindex"
    assert producer_snapshot_file(tmp_path, 512) == tmp_path / "00000000000000000512.snapshot"


@pytest.mark.parametrize("suffix", [".deleted", ".cleaned", ".swap"])
def test_segment_files_take_the_temporary_suffixes(tmp_path, suffix):
    assert log_file(tmp_path, 7, suffix).name == f"00000000000000000007.log{suffix}"
    assert offset_index_file(tmp_path, 7, suffix).name == f"00000000000000000007.index{suffix}"


def test_unknown_segment_suffix_is_refused(tmp_path):
    with pytest.raises(ValueError, match="suffix"):
        log_file(tmp_path, 0, ".bak")


@pytest.mark.parametrize("offset", [-1, LONG_MAX + 1, 1.5, True])
def test_offsets_outside_long_range_are_refused(offset):
    with pytest.raises(ValueError, match="offset"):
        filename_prefix_from_offset(offset)


@pytest.mark.parametrize(
    ("name", "offset"),
    [
        ("00000000000000000000.log", 0),
        ("00000000000000392983.index", 392983),
        ("00000000000000000035.timeindex.cleaned", 35),
        ("5.log", 5),  # Kafka parses any digits before the first '.'
        ("09223372036854775807.snapshot", LONG_MAX),
    ],
)
def test_offset_from_file_name(name, offset):
    assert offset_from_file_name(name) == offset
    assert offset_from_file(Path("/some/dir") / name) == offset


@pytest.mark.parametrize(
    "name", ["", "log", ".log", "abc.log", "-5.log", "12a.log", "00000000000000000000", "+1.log"]
)
def test_offset_from_a_bad_file_name_says_which_file(name):
    with pytest.raises(InvalidFileNameError) as info:
        offset_from_file_name(name)
    assert info.value.path == name
    assert "segment file name" in str(info.value)


def test_offset_beyond_long_is_a_bad_file_name():
    with pytest.raises(InvalidFileNameError, match="long"):
        offset_from_file_name("99999999999999999999.log")


def test_parse_segment_file_name_splits_offset_suffix_and_status():
    parsed = parse_segment_file_name("00000000000000000512.index.swap")
    assert parsed == SegmentFileName(base_offset=512, suffix=".index", status=".swap")
    assert parsed.name == "00000000000000000512.index.swap"
    assert parse_segment_file_name("00000000000000000001.log").status == ""


@pytest.mark.parametrize(
    "name",
    ["00000000000000000000.log.bak", "leader-epoch-checkpoint", "x.log", "0.index.swap.swap"],
)
def test_parse_segment_file_name_refuses_other_files(name):
    with pytest.raises(InvalidFileNameError):
        parse_segment_file_name(name)


def test_is_log_file_and_is_index_file():
    assert is_log_file("a/00000000000000000000.log")
    assert not is_log_file("00000000000000000000.log.swap")
    for suffix in (".index", ".timeindex", ".txnindex"):
        assert is_index_file(f"00000000000000000000{suffix}")
    assert not is_index_file("00000000000000000000.snapshot")


@given(offset=st.integers(0, LONG_MAX), suffix=st.sampled_from([".log", ".index", ".timeindex"]))
def test_segment_names_round_trip(offset, suffix):
    name = f"{filename_prefix_from_offset(offset)}{suffix}"
    assert len(name) == 20 + len(suffix)
    assert offset_from_file_name(name) == offset
    assert parse_segment_file_name(name).name == name


# -- KRaft snapshots --------------------------------------------------------------------------


def test_snapshot_names_pad_offset_to_20_and_epoch_to_10_digits():
    assert snapshot_file_name(1734780, 1) == "00000000000001734780-0000000001.checkpoint"
    assert parse_snapshot_file_name("00000000000001734780-0000000001.checkpoint") == (
        SnapshotFileName(end_offset=1734780, epoch=1)
    )


def test_snapshot_partial_and_deleted_states():
    partial = parse_snapshot_file_name("00000000000000000010-0000000002-123456.checkpoint.part")
    assert partial == SnapshotFileName(end_offset=10, epoch=2, partial=True)
    deleted = parse_snapshot_file_name("00000000000000000010-0000000002.checkpoint.deleted")
    assert deleted == SnapshotFileName(end_offset=10, epoch=2, deleted=True)


def test_non_snapshot_names_are_not_snapshots():
    assert parse_snapshot_file_name("00000000000000000000.log") is None
    assert parse_snapshot_file_name("leader-epoch-checkpoint") is None


@pytest.mark.parametrize(
    "name", ["bootstrap.checkpoint", "1-1.checkpoint", "00000000000000000001.checkpoint"]
)
def test_malformed_snapshot_names_raise(name):
    with pytest.raises(InvalidFileNameError) as info:
        parse_snapshot_file_name(name)
    assert info.value.path == name


@given(offset=st.integers(0, LONG_MAX), epoch=st.integers(0, INT_MAX))
def test_snapshot_names_round_trip(offset, epoch):
    parsed = parse_snapshot_file_name(snapshot_file_name(offset, epoch))
    assert parsed == SnapshotFileName(end_offset=offset, epoch=epoch)


# -- topics -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topic",
    ["a", "__consumer_offsets", "my.topic-name_1", "a..b", "-", "x" * MAX_TOPIC_NAME_LENGTH],
)
def test_legal_topics(topic):
    validate_topic(topic)
    assert is_valid_topic(topic)


@pytest.mark.parametrize(
    "topic",
    [
        "",
        ".",
        "..",
        "x" * (MAX_TOPIC_NAME_LENGTH + 1),
        "a/b",
        "../etc",
        "a\\b",
        "a\x00b",
        "with space",
        "tab\t",
        "ünïcode",
        "a:b",
    ],
)
def test_illegal_topics_raise_invalid_topic(topic):
    assert not is_valid_topic(topic)
    with pytest.raises(InvalidTopicError, match="Topic name is invalid") as info:
        validate_topic(topic)
    assert info.value.code == 17


@pytest.mark.parametrize("partition", [-1, INT_MAX + 1, "0", True])
def test_bad_partitions_raise(partition):
    with pytest.raises(InvalidTopicError):
        validate_partition(partition)


# -- partition directories --------------------------------------------------------------------


def test_live_partition_dir_name():
    tp = TopicPartition("my.topic-x", 3)
    assert str(tp) == "my.topic-x-3"
    assert log_dir_name(tp) == "my.topic-x-3"
    parsed = parse_partition_dir_name("my.topic-x-3")
    assert parsed.topic_partition == tp
    assert parsed.kind is PartitionDirKind.LIVE
    assert parsed.unique_id is None


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (log_delete_dir_name, PartitionDirKind.DELETE),
        (log_future_dir_name, PartitionDirKind.FUTURE),
        (log_stray_dir_name, PartitionDirKind.STRAY),
    ],
)
def test_renamed_partition_dirs(make, kind):
    tp = TopicPartition("orders.v1", 12)
    name = make(tp, UID)
    assert name == f"orders.v1-12.{UID.hex}{kind.value}"
    parsed = parse_partition_dir_name(name)
    assert (parsed.topic_partition, parsed.kind, parsed.unique_id) == (tp, kind, UID.hex)
    assert parse_partition_dir_name(make(tp)).kind is kind  # a fresh random id also parses


def test_delete_dir_name_cuts_long_topics_to_255_characters():
    tp = TopicPartition("t" * MAX_TOPIC_NAME_LENGTH, INT_MAX)
    name = log_delete_dir_name(tp, UID)
    assert len(name) == 255
    assert name.endswith(f"-{INT_MAX}.{UID.hex}-delete")
    parsed = parse_partition_dir_name(name)
    assert parsed.topic_partition.partition == INT_MAX
    assert tp.topic.startswith(parsed.topic_partition.topic)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "topic",
        "-0",
        "topic-",
        "topic-x",
        "topic--1",  # topic "topic-", partition "1" is fine; "-1" is not: see next
        "topic-0.abc-delete",
        "topic-0-delete",
        f"topic-0.{UID.hex}-future-x",
        f"a/b-0.{UID.hex}-delete",
        "..-0",
        "topic-99999999999",
        "meta.properties",
        "cleaner-offset-checkpoint",
    ],
)
def test_bad_partition_dir_names_raise_naming_the_dir(name):
    if name == "topic--1":
        assert parse_partition_dir_name(name).topic_partition == TopicPartition("topic-", 1)
        return
    with pytest.raises(InvalidFileNameError) as info:
        parse_partition_dir_name(name)
    assert info.value.path == name
    assert "partition directory" in str(info.value)


@pytest.mark.parametrize("topic", ["a/b", "..", ".", "", "sp ace"])
def test_dir_names_are_never_built_from_illegal_topics(topic):
    with pytest.raises(InvalidTopicError):
        log_dir_name(TopicPartition(topic, 0))
    with pytest.raises(InvalidTopicError):
        log_delete_dir_name(TopicPartition(topic, 0))


@given(
    topic=topics, partition=st.integers(0, INT_MAX), kind=st.sampled_from(list(PartitionDirKind))
)
def test_partition_dir_names_round_trip(topic, partition, kind):
    tp = TopicPartition(topic, partition)
    name = {
        PartitionDirKind.LIVE: lambda: log_dir_name(tp),
        PartitionDirKind.DELETE: lambda: log_delete_dir_name(tp, UID),
        PartitionDirKind.FUTURE: lambda: log_future_dir_name(tp, UID),
        PartitionDirKind.STRAY: lambda: log_stray_dir_name(tp, UID),
    }[kind]()
    parsed = parse_partition_dir_name(name)
    assert parsed.kind is kind
    assert parsed.topic_partition.partition == partition
    assert topic.startswith(parsed.topic_partition.topic)  # delete/stray may cut the topic
    if kind in (PartitionDirKind.LIVE, PartitionDirKind.FUTURE):
        assert parsed.topic_partition.topic == topic


# -- real broker data -------------------------------------------------------------------------


@requires_shared_fixtures
def test_every_name_in_the_real_broker_dirs_parses_and_rebuilds():
    dirs = files = 0
    for log_dir in sorted(KAFKA_DATA.iterdir()):
        for partition_dir in sorted(p for p in log_dir.iterdir() if p.is_dir()):
            parsed = parse_partition_dir_name(partition_dir.name)
            assert parsed.kind is PartitionDirKind.LIVE
            assert log_dir_name(parsed.topic_partition) == partition_dir.name
            dirs += 1
            for file in partition_dir.iterdir():
                if file.name in ("leader-epoch-checkpoint", "partition.metadata", "quorum-state"):
                    continue
                snapshot = parse_snapshot_file_name(file.name)
                if snapshot is not None:
                    assert snapshot_file_name(snapshot.end_offset, snapshot.epoch) == file.name
                else:
                    assert parse_segment_file_name(file.name).name == file.name
                files += 1
    assert dirs > 500 and files > 2000
