"""Checkpoint and metadata files: offset checkpoints, leader-epoch-checkpoint, partition.metadata,
meta.properties (with Java properties rules), .kafka_cleanshutdown, atomic writes.

Formats are Kafka's (CheckpointFile, PartitionMetadataFile, MetaProperties + java.util.Properties,
CleanShutdownFileHandler). The real-broker tests read every such file under
../shared/fixtures/kafka-data and write back what was read, expecting Kafka's bytes; fixture
files are only read (writes go to tmp_path).
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkalogError
from kafkalog.log.datadir import checkpoints as checkpoints_module
from kafkalog.log.datadir.checkpoints import (
    OFFSET_CHECKPOINT_FILES,
    EpochEntry,
    encode_leader_epoch_checkpoint,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_file_atomically,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from kafkalog.log.datadir.clean_shutdown import read_clean_shutdown, write_clean_shutdown
from kafkalog.log.datadir.java_properties import java_date_string, load_properties, store_properties
from kafkalog.log.datadir.kafka_uuid import (
    METADATA_TOPIC_ID,
    uuid_from_kafka_string,
    uuid_to_kafka_string,
)
from kafkalog.log.datadir.meta_properties import (
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from kafkalog.log.datadir.naming import TopicPartition, parse_partition_dir_name
from kafkalog.log.datadir.partition_metadata import (
    PartitionMetadata,
    read_partition_metadata,
    write_partition_metadata,
)
from kafkalog.log.errors import CorruptCheckpointError, InvalidTopicError
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

LONG = (-(2**63), 2**63 - 1)
INT = (-(2**31), 2**31 - 1)
TOPIC_ID = uuid.UUID("5c7864af-8b64-4ac0-bdd3-4a4e43ca4f7e")

topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=60,
).filter(lambda t: t not in (".", ".."))


def write(tmp_path: Path, data: bytes | str, name: str = "checkpoint") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def assert_corrupt(path: Path, read, line: int | None, match: str) -> CorruptCheckpointError:
    with pytest.raises(CorruptCheckpointError, match=match) as info:
        read(path)
    error = info.value
    assert isinstance(error, KafkalogError) and isinstance(error, ValueError)
    assert error.path == str(path) and error.line == line
    assert str(path) in str(error)
    if line is not None:
        assert f"line {line}" in str(error)
    assert error.code == 56  # KAFKA_STORAGE_ERROR
    return error


# -- offset checkpoints -----------------------------------------------------------------------


def test_offset_checkpoint_is_version_count_then_topic_partition_offset_lines(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {TopicPartition("orders", 0): 5, TopicPartition("__consumer_offsets", 22): 0}
    write_offset_checkpoint(path, offsets)
    assert path.read_bytes() == b"0\n2\norders 0 5\n__consumer_offsets 22 0\n"
    assert read_offset_checkpoint(path) == offsets
    assert list(read_offset_checkpoint(path)) == list(offsets)  # file order kept


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),  # created but never written: Kafka reads no entries
        ("0\n", {}),  # version only: no entries either
        ("0\n0\n", {}),
        ("0\r\n1\r\nt 0 5\r\n", {TopicPartition("t", 0): 5}),  # any Java line end
        ("0\r1\rt 0 5", {TopicPartition("t", 0): 5}),
        ("0\n1\nt \t 0  +5  \n", {TopicPartition("t", 0): 5}),  # runs of blanks, '+' sign
        ("0\n2\nt 0 5\nt 0 6\n", {TopicPartition("t", 0): 6}),  # a repeat keeps the last
        ("0\n1\nt 0 -1\n", {TopicPartition("t", 0): -1}),
    ],
)
def test_offset_checkpoint_reading_follows_kafka(tmp_path, text, expected):
    assert read_offset_checkpoint(write(tmp_path, text)) == expected


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("1\n0\n", 1, "unrecognised version 1, expected version 0"),
        ("x\n", 1, "malformed version"),
        (" 0\n", 1, "malformed version"),
        ("0\nabc\n", 2, "malformed entry count"),
        ("0\n-1\n", 2, "negative entry count"),
        ("0\n2\nt 0 5\n", 2, "expected 2 entries .* but found 1"),
        ("0\n0\nt 0 5\n", 2, "expected 0 entries .* but found 1"),
        ("0\n1\nt 0\n", 3, "malformed line 't 0'"),
        ("0\n2\nt 0 1\nt 0 1 1\n", 4, "malformed line"),
        ("0\n1\n t 0 5\n", 3, "malformed line"),  # a leading blank is an empty first field
        ("0\n2\nt 0 1\n\n", 4, "malformed line"),
        ("0\n1\nt x 5\n", 3, "malformed partition"),
        ("0\n1\nt 2147483648 5\n", 3, "partition 2147483648 does not fit in an int"),
        ("0\n1\nt 0 9223372036854775808\n", 3, "does not fit in a long"),
        ("0\n1\nt 0 5.0\n", 3, "malformed offset"),
        ("0\n1\nt 0 \u0665\n", 3, "malformed offset"),  # only ASCII digits
        (b"0\n1\n\xff 0 5\n", 3, "not valid utf-8"),
    ],
)
def test_corrupt_offset_checkpoints_name_file_line_and_problem(tmp_path, text, line, match):
    assert_corrupt(write(tmp_path, text), read_offset_checkpoint, line, match)


def test_offset_checkpoint_writes_refuse_what_would_not_read_back(tmp_path):
    path = tmp_path / "cp"
    with pytest.raises(InvalidTopicError):
        write_offset_checkpoint(path, {TopicPartition("has space", 0): 1})
    with pytest.raises(InvalidTopicError):
        write_offset_checkpoint(path, {TopicPartition("t", -1): 1})
    with pytest.raises(ValueError, match="offset"):
        write_offset_checkpoint(path, {TopicPartition("t", 0): 2**63})
    assert not path.exists()


@given(
    offsets=st.dictionaries(
        st.builds(TopicPartition, topics, st.integers(0, INT[1])), st.integers(*LONG), max_size=30
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
def test_offset_checkpoint_round_trips(tmp_path, offsets):
    path = tmp_path / "cleaner-offset-checkpoint"
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets


@given(data=st.binary(max_size=200))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_bytes_read_as_a_checkpoint_or_raise_the_clear_error(tmp_path, data):
    path = write(tmp_path, data)
    for read in (read_offset_checkpoint, read_leader_epoch_checkpoint):
        try:
            read(path)
        except CorruptCheckpointError as e:
            assert e.path == str(path) and e.line is not None and e.line >= 1


@given(
    lines=st.lists(st.text(alphabet="0123456789 -+tx\t", max_size=12), min_size=1, max_size=6),
    drop=st.integers(0, 8),
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_checkpoints_parse_or_raise_the_clear_error(tmp_path, lines, drop):
    good = ["0", "3", "t 0 1", "t 1 2", "t 2 3"]
    mutated = good[:drop] + lines + good[drop + 1 :]
    path = write(tmp_path, "\n".join(mutated) + "\n")
    try:
        read_offset_checkpoint(path)
    except CorruptCheckpointError as e:
        assert e.path == str(path) and 1 <= e.line <= len(mutated)


# -- leader-epoch-checkpoint ------------------------------------------------------------------


def test_leader_epoch_checkpoint_is_version_count_then_epoch_start_offset_lines(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    entries = [EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=3, start_offset=1234)]
    write_leader_epoch_checkpoint(path, entries)
    assert path.read_bytes() == b"0\n2\n0 0\n3 1234\n"
    assert read_leader_epoch_checkpoint(path) == entries


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("0\n1\n0 0 0\n", 3, "expected 'epoch startOffset'"),
        ("0\n1\n2147483648 0\n", 3, "epoch 2147483648 does not fit"),
        ("0\n1\n0 x\n", 3, "malformed start offset"),
        ("0\n2\n0 0\n", 2, "expected 2 entries"),
    ],
)
def test_corrupt_leader_epoch_checkpoints_raise(tmp_path, text, line, match):
    assert_corrupt(write(tmp_path, text), read_leader_epoch_checkpoint, line, match)


@given(
    entries=st.lists(
        st.builds(EpochEntry, epoch=st.integers(*INT), start_offset=st.integers(*LONG)), max_size=20
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
def test_leader_epoch_checkpoint_round_trips(tmp_path, entries):
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, entries)
    assert read_leader_epoch_checkpoint(path) == entries


# -- atomic writes ----------------------------------------------------------------------------


def test_writes_replace_the_file_and_leave_no_temporary(tmp_path):
    path = write(tmp_path, "old", "meta")
    write_file_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    path = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(path, {TopicPartition("t", 0): 1})

    def failing_fsync(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(checkpoints_module.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_offset_checkpoint(path, {TopicPartition("t", 0): 2})
    monkeypatch.undo()
    assert read_offset_checkpoint(path) == {TopicPartition("t", 0): 1}
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()


def test_the_directory_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}") if os.path.isdir("/proc") else None)
        real_fsync(fd)

    monkeypatch.setattr(checkpoints_module.os, "fsync", recording_fsync)
    write_file_atomically(tmp_path / "x", b"data")
    assert len(synced) == 2  # the temporary, then its directory
    if synced[0] is not None:
        assert synced == [False, True]


# -- Kafka Uuid text ---------------------------------------------------------------------------


def test_kafka_uuid_text_is_url_safe_base64_without_padding():
    assert uuid_to_kafka_string(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.ONE_UUID
    assert uuid_from_kafka_string("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)
    assert uuid_from_kafka_string("AAAAAAAAAAAAAAAAAAAAAQ==") == uuid.UUID(int=1)


@pytest.mark.parametrize(
    "text", ["", "AAAA", "A" * 23, "A" * 25, "AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAA="]
)
def test_bad_kafka_uuid_text_raises(text):
    with pytest.raises(ValueError):
        uuid_from_kafka_string(text)


@given(value=st.uuids(allow_nil=True))
def test_kafka_uuid_text_round_trips(value):
    text = uuid_to_kafka_string(value)
    assert len(text) == 22
    assert uuid_from_kafka_string(text) == value


# -- partition.metadata -----------------------------------------------------------------------


def test_partition_metadata_is_exactly_two_lines_without_a_final_line_end(tmp_path):
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, TOPIC_ID)
    assert path.read_bytes() == b"version: 0\ntopic_id: XHhkr4tkSsC900pOQ8pPfg"
    assert read_partition_metadata(path) == PartitionMetadata(topic_id=TOPIC_ID, version=0)


def test_partition_metadata_reading_follows_kafka(tmp_path):
    text = "version: 1\r\ntopic_id:\t XHhkr4tkSsC900pOQ8pPfg\nignored\n"  # newer versions read
    assert read_partition_metadata(write(tmp_path, text)) == PartitionMetadata(
        topic_id=TOPIC_ID, version=1
    )


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("", 1, "missing line 'version: ...'"),
        ("version: 0", 2, "missing line 'topic_id: ...'"),
        ("version: -1\ntopic_id: XHhkr4tkSsC900pOQ8pPfg", 1, "unrecognised version -1"),
        ("version:0\ntopic_id: XHhkr4tkSsC900pOQ8pPfg", 1, "malformed line"),
        ("version: x\ntopic_id: XHhkr4tkSsC900pOQ8pPfg", 1, "malformed version"),
        ("version: 0\ntopicid: XHhkr4tkSsC900pOQ8pPfg", 2, "expected 'topic_id: <value>'"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2, "zero Uuid"),
        ("version: 0\ntopic_id: not-a-uuid", 2, "invalid topic_id"),
    ],
)
def test_corrupt_partition_metadata_raises(tmp_path, text, line, match):
    assert_corrupt(write(tmp_path, text), read_partition_metadata, line, match)


def test_the_zero_uuid_is_never_written_as_a_topic_id(tmp_path):
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path / "partition.metadata", uuid.UUID(int=0))


# -- Java properties --------------------------------------------------------------------------

PROPERTIES_CASES = [
    ("a=1\nb = 2\nc:3\nd 4\n", {"a": "1", "b": "2", "c": "3", "d": "4"}),
    ("  # comment\n! also\n\n   \nk=v", {"k": "v"}),
    ("k=v # not a comment\n", {"k": "v # not a comment"}),
    ("k = v  \n", {"k": "v  "}),  # trailing blanks stay in the value
    ("k\n", {"k": ""}),
    ("k=\n", {"k": ""}),
    ("k  =  = v\n", {"k": "= v"}),  # one separator only
    ("a\\ b\\=c=d\n", {"a b=c": "d"}),  # escaped blank and '=' in a key
    ("k=a\\\n    b\\\n c\n", {"k": "abc"}),  # continuation skips leading blanks
    ("k=a\\\\\nj=b\n", {"k": "a\\", "j": "b"}),  # an even backslash run does not continue
    ("# c \\\nk=v\n", {"k": "v"}),  # comments never continue
    ("k=\\t\\n\\r\\f\\q\\u0041\\u00e9\n", {"k": "\t\n\r\fqAé"}),
    ("k=\\uD83D\\uDE00\n", {"k": "\U0001f600"}),  # a UTF-16 pair is one character
    ("k=1\nk=2\n", {"k": "2"}),
    ("k=v\\", {"k": "v"}),  # a final backslash is dropped
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
]


@pytest.mark.parametrize(("text", "expected"), PROPERTIES_CASES)
def test_properties_load_follows_java(text, expected):
    assert load_properties(text) == expected


def test_a_malformed_unicode_escape_raises_with_its_line():
    with pytest.raises(CorruptCheckpointError, match="malformed \\\\uxxxx") as info:
        load_properties("a=1\nb=\\u12G4\n", path="p")
    assert info.value.line == 2


def test_properties_store_escapes_as_java():
    props = {"key with space": " lead and = : # ! \\ \t\n", "é": "\U0001f600"}
    text = store_properties(props, date="Wed Jul 10 11:13:46 CST 2024")
    assert text == (
        "#\n"
        "#Wed Jul 10 11:13:46 CST 2024\n"
        "key\\ with\\ space=\\ lead and \\= \\: \\# \\! \\\\ \\t\\n\n"
        "\\u00E9=\\uD83D\\uDE00\n"
    )
    assert text.isascii()
    assert load_properties(text) == props


def test_java_date_string_looks_like_java_util_date():
    text = java_date_string(0)
    day, month, mday, clock, _zone, year = text.split(" ")
    assert day in ("Wed", "Thu") and month in ("Dec", "Jan") and year in ("1969", "1970")
    assert len(mday) == 2 and len(clock) == 8


@given(props=st.dictionaries(st.text(max_size=15), st.text(max_size=15), max_size=8))
def test_properties_store_then_load_round_trips(props):
    assert load_properties(store_properties(props, date="d")) == props


# -- meta.properties --------------------------------------------------------------------------


def test_meta_properties_v0_is_written_like_kafka(tmp_path):
    path = tmp_path / "meta.properties"
    meta = MetaProperties(version=0, node_id=0, cluster_id="1PEpoQSRThK-PWVK_M7NCg")
    write_meta_properties(path, meta, date="Wed Jul 10 11:13:46 CST 2024")
    assert path.read_text() == (
        "#\n#Wed Jul 10 11:13:46 CST 2024\n"
        "broker.id=0\ncluster.id=1PEpoQSRThK-PWVK_M7NCg\nversion=0\n"
    )
    assert read_meta_properties(path) == meta


def test_meta_properties_v1_has_node_id_and_directory_id(tmp_path):
    path = write(
        tmp_path,
        "#\n#Fri Jan 30 16:43:51 UTC 2026\nnode.id=1\ndirectory.id=XHhkr4tkSsC900pOQ8pPfg\n"
        "version=1\ncluster.id=q1w2e3r4t5y6u7i8o9p0\nsome.future.key=kept\n",
        "meta.properties",
    )
    meta = read_meta_properties(path)
    assert meta == MetaProperties(
        version=1,
        node_id=1,
        cluster_id="q1w2e3r4t5y6u7i8o9p0",
        directory_id=TOPIC_ID,
        extra=(("some.future.key", "kept"),),
    )
    out = tmp_path / "out.properties"
    write_meta_properties(out, meta, date="d")
    assert "some.future.key=kept\n" in out.read_text()
    assert read_meta_properties(out) == meta


def test_meta_properties_without_version_is_version_0(tmp_path):
    meta = read_meta_properties(write(tmp_path, "broker.id=3\n"))
    assert (meta.version, meta.node_id, meta.cluster_id) == (0, 3, None)


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("version=2\n", 1, "unknown meta.properties version number 2"),
        ("version=x\n", 1, "unable to read version"),
        ("a=b\nbroker.id=zero\n", 2, "unable to read broker.id"),
        ("version=1\ncluster.id=c\n", None, "node.id was not found"),
        ("version=1\nnode.id=1\n", None, "cluster.id was not found"),
        ("directory.id=nope\n", 1, "unable to read directory.id as a Uuid"),
    ],
)
def test_corrupt_meta_properties_raise(tmp_path, text, line, match):
    assert_corrupt(write(tmp_path, text), read_meta_properties, line, match)


# -- .kafka_cleanshutdown ---------------------------------------------------------------------


def test_clean_shutdown_is_compact_json_with_the_broker_epoch(tmp_path):
    path = tmp_path / ".kafka_cleanshutdown"
    write_clean_shutdown(path, 428)
    assert path.read_bytes() == b'{"version":0,"brokerEpoch":428}'
    assert read_clean_shutdown(path) == 428


def test_an_empty_clean_shutdown_marker_has_no_epoch(tmp_path):
    path = tmp_path / ".kafka_cleanshutdown"
    write_clean_shutdown(path, None)
    assert path.read_bytes() == b""
    assert read_clean_shutdown(path) is None
    assert read_clean_shutdown(write(tmp_path, '{"version":0,"x":1}')) is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{", "not JSON"),
        ("[1]", "expected a JSON object"),
        ('{"version":0,"brokerEpoch":"1"}', "brokerEpoch '1' is not a long"),
        ('{"version":"0","brokerEpoch":1}', "version '0' is not an int"),
    ],
)
def test_corrupt_clean_shutdown_raises(tmp_path, text, match):
    assert_corrupt(write(tmp_path, text), read_clean_shutdown, 1, match)


# -- real broker data -------------------------------------------------------------------------


def _files(name: str) -> list[Path]:
    return sorted(KAFKA_DATA.glob(f"*/{name}")) + sorted(KAFKA_DATA.glob(f"*/*/{name}"))


@requires_shared_fixtures
@pytest.mark.parametrize("name", [*OFFSET_CHECKPOINT_FILES, "cleaner-offset-checkpoint.tmp"])
def test_every_real_offset_checkpoint_parses_and_writes_back_the_same_bytes(tmp_path, name):
    files = _files(name)
    assert files
    for file in files:
        offsets = read_offset_checkpoint(file)
        out = tmp_path / "cp"
        write_offset_checkpoint(out, offsets)
        # an empty file is a checkpoint Kafka created but never wrote; writing no entries
        # gives what Kafka writes for none
        original = file.read_bytes() or b"0\n0\n"
        assert out.read_bytes() == original, file


@requires_shared_fixtures
def test_every_real_leader_epoch_checkpoint_parses_and_writes_back_the_same_bytes(tmp_path):
    files = _files("leader-epoch-checkpoint")
    assert len(files) > 900
    for file in files:
        entries = read_leader_epoch_checkpoint(file)
        # LeaderEpochFileCache's invariant: epochs increase, start offsets never decrease
        for before, after in itertools.pairwise(entries):
            assert before.epoch < after.epoch and before.start_offset <= after.start_offset
        assert encode_leader_epoch_checkpoint(entries) == (file.read_bytes() or b"0\n0\n"), file
    out = tmp_path / "leader-epoch-checkpoint"  # and through the file writer, for a few
    for file in files[:: len(files) // 10]:
        write_leader_epoch_checkpoint(out, read_leader_epoch_checkpoint(file))
        assert out.read_bytes() == (file.read_bytes() or b"0\n0\n"), file


@requires_shared_fixtures
def test_every_real_partition_metadata_parses_and_writes_back_the_same_bytes(tmp_path):
    files = _files("partition.metadata")
    assert len(files) > 500
    topic_ids: dict[tuple[str, str], set[uuid.UUID]] = {}
    for n, file in enumerate(files):
        meta = read_partition_metadata(file)
        assert meta.encode().encode() == file.read_bytes(), file
        if n % 50 == 0:  # and through the file writer, for a few
            out = tmp_path / "partition.metadata"
            write_partition_metadata(out, meta.topic_id, version=meta.version)
            assert out.read_bytes() == file.read_bytes(), file
        topic = parse_partition_dir_name(file.parent.name).topic_partition.topic
        topic_ids.setdefault((file.parent.parent.name, topic), set()).add(meta.topic_id)
        if topic == "__cluster_metadata":
            assert meta.topic_id == METADATA_TOPIC_ID  # Kafka's Uuid.METADATA_TOPIC_ID
    # one topic, one id: all partitions of a topic in a log dir carry the same topic id
    assert all(len(ids) == 1 for ids in topic_ids.values())


@requires_shared_fixtures
def test_every_real_meta_properties_parses_and_writes_back_kafkas_lines(tmp_path):
    files = _files("meta.properties")
    assert len(files) == 20
    versions = set()
    for file in files:
        meta = read_meta_properties(file)
        versions.add(meta.version)
        assert meta.node_id is not None and meta.extra == ()
        lines = file.read_text().splitlines()
        assert lines[0] == "#" and lines[1].startswith("#")
        out = tmp_path / "meta.properties"
        write_meta_properties(out, meta, date=lines[1][1:])
        written = out.read_text().splitlines()
        assert written[:2] == lines[:2]
        # Kafka writes the same lines; their order is the JDK's: hash order before JDK 18,
        # sorted by key since (what we write)
        assert sorted(written[2:]) == sorted(lines[2:]), file
        if lines[2:] == sorted(lines[2:]):
            assert out.read_bytes() == file.read_bytes(), file
    assert versions == {0, 1}


@requires_shared_fixtures
def test_every_real_clean_shutdown_marker_parses_and_writes_back_the_same_bytes(tmp_path):
    files = _files(".kafka_cleanshutdown")
    assert len(files) == 7
    epochs = set()
    for file in files:
        epoch = read_clean_shutdown(file)
        epochs.add(epoch)
        out = tmp_path / ".kafka_cleanshutdown"
        write_clean_shutdown(out, epoch)
        assert out.read_bytes() == file.read_bytes(), file
    assert {None, -1, 11, 428} <= epochs


@requires_shared_fixtures
def test_reading_real_files_changes_nothing(tmp_path):
    log_dir = sorted(KAFKA_DATA.glob("*/meta.properties"))[0].parent
    copy = tmp_path / "copy"
    shutil.copytree(log_dir, copy)
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    for name in OFFSET_CHECKPOINT_FILES:
        if (copy / name).exists():
            read_offset_checkpoint(copy / name)
    read_meta_properties(copy / "meta.properties")
    after = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert after == before


def test_a_broker_startup_reads_a_malformed_offset_checkpoint_as_empty(tmp_path: Path) -> None:
    from kafkalog.log.datadir.checkpoints import read_offset_checkpoint_or_reset

    path = tmp_path / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint_or_reset(path) == ({}, None)  # absent: nothing, no problem
    path.write_text("0\n1\nt 0 7\n")
    assert read_offset_checkpoint_or_reset(path) == ({TopicPartition("t", 0): 7}, None)
    path.write_bytes(b"garbage\n")
    offsets, problem = read_offset_checkpoint_or_reset(path)
    assert offsets == {} and isinstance(problem, CorruptCheckpointError) and problem.line == 1


# -- bounds on what a hostile data directory can make kafkalog read -------------------------------
def test_a_checkpoint_with_too_many_lines_is_refused(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n3\na 0 1\nb 0 2\nc 0 3\n")
    assert len(read_offset_checkpoint(path)) == 3
    monkeypatch.setattr(checkpoints_module, "MAX_CHECKPOINT_LINES", 4)
    with pytest.raises(CorruptCheckpointError, match="5 lines, more than the 4") as info:
        read_offset_checkpoint(path)
    assert info.value.path == str(path)


def test_a_checkpoint_over_the_size_bound_is_refused(tmp_path: Path) -> None:
    from kafkalog.log.datadir.checkpoints import read_text_file

    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n0 0\n")
    assert read_text_file(path, max_bytes=8) == "0\n1\n0 0\n"
    with pytest.raises(CorruptCheckpointError, match="larger than the 7 bytes") as info:
        read_text_file(path, max_bytes=7)
    assert info.value.path == str(path)


def test_a_fifo_checkpoint_is_refused_without_opening_it(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    os.mkfifo(path)
    with pytest.raises(OSError, match=r"not a regular file \(a FIFO\)") as info:
        read_offset_checkpoint(path)
    assert info.value.filename == str(path)
