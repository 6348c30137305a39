"""Tiered storage (KIP-405): a real broker moves old segments to Kafka's own LocalTieredStorage,
and kafkalog reads each partition as one log from the remote segments and the local ones, with
the records Kafka's consumer reads (docs/tiered-storage.md).

One broker run (tiered_broker.py): a plain topic (2 partitions), a compressed idempotent one and
a transactional one (committed, aborted, committed, then plain records, so that the aborted
transaction's segment is only remote); 4 KiB segments, the remote log manager every 500 ms, local
retention of 8 KiB, so each partition has segments only remote, segments in both places and local
ones. Then DeleteRecords moves one partition's log start into a remote segment (the remote log
manager deletes the remote segments below it). Kafka's consumer reads everything at both
isolation levels, then the broker stops cleanly.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
from tiered_broker import DELETED, LEVELS, PARTITIONS, PLAIN, TXN, ZSTD, TieredRun

from kafkalog.log.tiered import (
    LocalTieredStorageLayout,
    RemoteFileType,
    RemoteLogSegmentState,
    RemoteSegmentMissingError,
    RemoteSegmentTruncatedError,
    TieredOffsetGapError,
    TieredStorageError,
    copied_remote_offsets,
    open_tiered_partition,
    read_remote_log_metadata,
)

pytestmark = pytest.mark.slow


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _read(
    run: TieredRun, level: str, topic: str, p: int, **open_args
) -> tuple[list, TieredStorageError | None]:
    """kafkalog's records of one partition as rows like :func:`_kafka_rows`, and the error
    that ended the read, if any (the rows read before it are kept)."""
    rows: list = []
    remote = open_args.pop("remote_storage", run.remote_dir)
    with open_tiered_partition(run.data_dir / f"{topic}-{p}", remote, **open_args) as tp:
        try:
            for batch, r in tp.records(level):
                headers = [[h.key, _b64(h.value)] for h in r.headers]
                row = (topic, p, r.offset, r.timestamp, str(r.timestamp_type), _b64(r.key))
                row += (_b64(r.value), headers, batch.partition_leader_epoch)
                rows.append(row)
        except TieredStorageError as e:
            return rows, e
    return rows, None


def _bytes(b64: str | None) -> bytes | None:
    return None if b64 is None else base64.b64decode(b64)


def _kafka_rows(records: list[dict], partitions=PARTITIONS) -> list:
    return [
        (r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"], r["key"],
         r["value"], r["headers"], r["leaderEpoch"])
        for r in records
        if (r["topic"], r["partition"]) in partitions
    ]  # fmt: skip


def test_compacted_topics_are_refused(tiered: TieredRun) -> None:
    assert "INVALID_CONFIG" in tiered.compacted_refused


def test_remote_layout_and_metadata(tiered: TieredRun) -> None:
    """LocalTieredStorage's tree holds, per copied segment, the files the metadata implies, and
    every partition has segments only remote, in both places, and only local."""
    metadata = read_remote_log_metadata(tiered.data_dir)
    layout = LocalTieredStorageLayout(tiered.remote_dir)
    by_name = {str(tip): part for tip, part in metadata.items()}
    seen: set[Path] = set()
    for topic, p in PARTITIONS:
        part = by_name[f"{topic}-{p}"]
        copied = part.copied_segments()
        assert all(m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in copied)
        assert [m.start_offset for m in copied[1:]] == [m.end_offset + 1 for m in copied[:-1]]
        log_start = DELETED[2] if (topic, p) == DELETED[:2] else 0
        assert copied[0].start_offset <= log_start <= copied[0].end_offset
        gone = [m for m in part.segments.values() if m not in copied]
        assert all(m.end_offset < log_start for m in gone) and bool(gone) == (log_start > 0)
        assert all(m.state >= RemoteLogSegmentState.DELETE_SEGMENT_STARTED for m in gone)
        for m in copied:
            for t in RemoteFileType:
                path = layout.segment_file(m, t)
                if t is RemoteFileType.TRANSACTION_INDEX:
                    # Optional: none when the segment aborted nothing (4.x says so, 3.9 not).
                    assert not (m.txn_index_empty and path.exists()), path
                    if path.exists():
                        seen.add(path)
                    continue
                assert path.is_file(), path
                seen.add(path)
            assert layout.segment_file(m, RemoteFileType.SEGMENT).stat().st_size == (
                m.segment_size_in_bytes
            )
        with open_tiered_partition(tiered.data_dir / f"{topic}-{p}", tiered.remote_dir) as tp:
            assert tp.problem is None
            assert log_start == tp.log_start_offset < tp.local_log_start_offset < tp.log_end_offset
            assert tp.remote_segments and tp.segments[-1].remote is None
            both = [m for m in copied if m.start_offset >= tp.local_log_start_offset]
            assert both, f"{topic}-{p}: no segment both remote and local"
        local_dir = tiered.data_dir / f"{topic}-{p}"
        assert copied_remote_offsets(local_dir) == (copied[0].start_offset, copied[-1].end_offset)
    on_disk = {f for f in (tiered.remote_dir / "kafka-tiered-storage").rglob("*") if f.is_file()}
    assert on_disk - seen == {f for f in on_disk if not f.parent.name.startswith("tiered-")}


@pytest.mark.parametrize("level", LEVELS)
def test_records_equal_kafka_consumer(tiered: TieredRun, level: str) -> None:
    for topic, p in PARTITIONS:
        got, error = _read(tiered, level, topic, p)
        want = _kafka_rows(tiered.expected[level], [(topic, p)])
        assert error is None
        assert len(got) == len(want), (topic, p)
        assert got == want, (topic, p)


def test_aborted_transaction_is_read_from_remote(tiered: TieredRun) -> None:
    """The aborted transaction's marker is in a segment read only from remote storage, and the
    transaction the markers give is the one its remote ``.txnindex`` holds."""
    with open_tiered_partition(tiered.data_dir / f"{TXN}-0", tiered.remote_dir) as tp:
        aborted = tp.aborted_transactions()
        assert len(aborted) == 1
        holder = [s for s in tp.segments if s.start <= aborted[0].last_offset < s.end]
        assert holder[0].remote is not None
        indexed = [
            (t.producer_id, t.first_offset, t.last_offset) for t in holder[0].segment.txn_index
        ]
        assert indexed == [(t.producer_id, t.first_offset, t.last_offset) for t in aborted]
    committed = _kafka_rows(tiered.expected["read_committed"], [(TXN, 0)])
    uncommitted = _kafka_rows(tiered.expected["read_uncommitted"], [(TXN, 0)])
    assert len(uncommitted) - len(committed) == 30


def test_remote_transaction_indexes_are_not_needed(tiered, tmp_path) -> None:
    """Without any remote ``.txnindex`` (a store that keeps none), read_committed is the same:
    the aborted transactions come from the markers."""
    run = _copy(tiered, tmp_path)
    for f in (run.remote_dir / "kafka-tiered-storage").rglob("*.txnindex"):
        f.unlink()
    rows, error = _read(run, "read_committed", TXN, 0)
    assert error is None
    assert rows == _kafka_rows(run.expected["read_committed"], [(TXN, 0)])


def _copy(tiered: TieredRun, tmp_path: Path) -> TieredRun:
    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote_dir, remote)
    return TieredRun(tiered.data_dir, remote, tiered.expected, "", tiered.version)


def _middle_remote(tiered: TieredRun, topic: str, p: int):
    with open_tiered_partition(tiered.data_dir / f"{topic}-{p}", tiered.remote_dir) as tp:
        remote = tp.remote_segments
        return remote[len(remote) // 2].remote


def _prefix(tiered: TieredRun, level: str, topic: str, p: int, below: int) -> list:
    want = _kafka_rows(tiered.expected[level], [(topic, p)])
    return [r for r in want if r[2] < below]


def test_missing_remote_segment_ends_the_prefix(tiered, tmp_path) -> None:
    run = _copy(tiered, tmp_path)
    meta = _middle_remote(run, ZSTD, 0)
    gone = LocalTieredStorageLayout(run.remote_dir).segment_file(meta, RemoteFileType.SEGMENT)
    gone.unlink()
    for level in LEVELS:
        rows, error = _read(run, level, ZSTD, 0)
        assert isinstance(error, RemoteSegmentMissingError), error
        assert (error.offset, error.path) == (meta.start_offset, str(gone))
        assert rows == _prefix(run, level, ZSTD, 0, meta.start_offset)


def test_truncated_remote_segment_ends_the_prefix(tiered, tmp_path) -> None:
    run = _copy(tiered, tmp_path)
    meta = _middle_remote(run, PLAIN, 1)
    log = LocalTieredStorageLayout(run.remote_dir).segment_file(meta, RemoteFileType.SEGMENT)
    with open(log, "r+b") as f:
        f.truncate(meta.segment_size_in_bytes // 2)
    rows, error = _read(run, "read_uncommitted", PLAIN, 1)
    assert isinstance(error, RemoteSegmentTruncatedError), error
    assert error.path == str(log) and meta.start_offset < error.offset <= meta.end_offset
    assert rows == _prefix(run, "read_uncommitted", PLAIN, 1, error.offset)


def test_segment_missing_from_metadata_is_a_gap(tiered) -> None:
    metadata = read_remote_log_metadata(tiered.data_dir)
    meta = _middle_remote(tiered, PLAIN, 0)
    part = metadata[meta.topic_id_partition]
    del part.segments[meta.segment_id]
    rows, error = _read(tiered, "read_committed", PLAIN, 0, metadata=metadata)
    assert isinstance(error, TieredOffsetGapError), error
    assert error.offset == meta.start_offset
    assert rows == _prefix(tiered, "read_committed", PLAIN, 0, meta.start_offset)


class FlatLayout:
    """Another store's layout: every file of every segment in one directory, by segment id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def segment_file(self, segment, file_type: RemoteFileType) -> Path:
        return self.root / f"{segment.segment_id}{file_type.value}"


def test_another_layout_plugs_in(tiered, tmp_path) -> None:
    """A RemoteStorageLayout of one's own reads the same records."""
    metadata = read_remote_log_metadata(tiered.data_dir)
    local = LocalTieredStorageLayout(tiered.remote_dir)
    flat = FlatLayout(tmp_path)
    for part in metadata.values():
        for m in part.copied_segments():
            for t in RemoteFileType:
                if local.segment_file(m, t).exists():
                    shutil.copy(local.segment_file(m, t), flat.segment_file(m, t))
    for level in LEVELS:
        got, error = _read(tiered, level, TXN, 0, remote_storage=flat)
        assert error is None
        assert got == _kafka_rows(tiered.expected[level], [(TXN, 0)])


def _value(api_key: int, data: dict) -> bytes:
    from kafkalog.log.tiered import _schemas as s

    msg = {0: s.REMOTE_LOG_SEGMENT_METADATA_RECORD, 1: s.REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD,
           2: s.REMOTE_PARTITION_DELETE_METADATA_RECORD}[api_key]  # fmt: skip
    return bytes([1, api_key, 0]) + msg.write(data, 0)


def test_metadata_fold_follows_kafkas_states() -> None:
    """Without a broker: a segment is readable from COPY_SEGMENT_FINISHED until a delete starts,
    nothing once the partition's deletion is marked; updates of unknown segments are dropped;
    a value that cannot be read stops the fold naming its offset."""
    import uuid

    from kafkalog.errors import CorruptRecordError
    from kafkalog.log.tiered import fold_remote_log_metadata

    tip = {"name": "t", "id": uuid.UUID(int=7), "partition": 3}
    ids = [uuid.UUID(int=100 + i) for i in range(3)]

    def started(i: int, **extra) -> bytes:
        return _value(0, {
            "remoteLogSegmentId": {"topicIdPartition": tip, "id": ids[i]},
            "startOffset": 10 * i, "endOffset": 10 * i + 9, "brokerId": 1,
            "segmentLeaderEpochs": [{"leaderEpoch": 0, "offset": 10 * i}],
            "segmentSizeInBytes": 100, "remoteLogSegmentState": 0, **extra,
        })  # fmt: skip

    def update(i: int, state: int) -> bytes:
        segment_id = {"topicIdPartition": tip, "id": ids[i]}
        return _value(1, {"remoteLogSegmentId": segment_id, "remoteLogSegmentState": state})

    values = [started(0), update(0, 1), started(1, txnIndexEmpty=True), update(1, 1), started(2)]
    unknown = {"topicIdPartition": tip, "id": uuid.UUID(int=1)}
    values += [update(0, 2), _value(1, {"remoteLogSegmentId": unknown, "remoteLogSegmentState": 1})]
    (part,) = fold_remote_log_metadata(enumerate(values)).values()
    assert (str(part.topic_id_partition), part.delete_state) == ("t-3", None)
    assert [(m.start_offset, m.end_offset) for m in part.copied_segments()] == [(10, 19)]
    assert [part.segments[i].txn_index_empty for i in ids] == [None, True, None]
    assert len(part.segments) == 3  # the unknown segment's update is dropped
    marked = _value(2, {"topicIdPartition": tip, "remotePartitionDeleteState": 0})
    (part,) = fold_remote_log_metadata(enumerate([*values, marked])).values()
    assert part.copied_segments() == []
    with pytest.raises(CorruptRecordError) as e:
        fold_remote_log_metadata([(0, values[0]), (1, values[1][:-3])], path="m")
    assert (e.value.offset, e.value.path) == (1, "m")


@pytest.mark.parametrize("level", LEVELS)
def test_open_data_dir_reads_tiered_partitions(tiered: TieredRun, level: str) -> None:
    """The dataset layer (open_data_dir, the Spark source, consume and export) reads each tiered
    partition whole with the remoteStorage option: Kafka's consumer's records."""
    from kafkalog.arrow import open_data_dir

    topics = ",".join(sorted({t for t, _ in PARTITIONS}))
    options = {"kafka.isolation.level": level, "remoteStorage": str(tiered.remote_dir),
               "subscribe": topics}  # fmt: skip
    table = open_data_dir(str(tiered.data_dir), options=options).read_all()
    got = sorted(
        (r["topic"], r["partition"], r["offset"], r["value"])
        for r in table.select(["topic", "partition", "offset", "value"]).to_pylist()
    )
    want = sorted(
        (r["topic"], r["partition"], r["offset"], _bytes(r["value"]))
        for r in tiered.expected[level]
        if (r["topic"], r["partition"]) in PARTITIONS
    )
    assert got == want


def test_tiered_offsets_without_remote_storage_are_data_loss(tiered: TieredRun) -> None:
    """Without the remote storage a tiered partition's offsets are not silently left out: the
    read fails naming them (failOnDataLoss, the default), or skips them with a warning."""
    from kafkalog.arrow import open_data_dir
    from kafkalog.errors import DataLossError

    with pytest.raises(DataLossError, match=r"tiered-plain-0: offsets 0 to \d+ are in tiered"):
        open_data_dir(str(tiered.data_dir), options={"subscribe": PLAIN}).read_all()
    with pytest.warns(UserWarning, match="in tiered storage"):
        table = open_data_dir(
            str(tiered.data_dir), options={"subscribe": PLAIN, "failOnDataLoss": "false"}
        ).read_all()
    assert table.num_rows < sum(1 for r in tiered.expected[LEVELS[0]] if r["topic"] == PLAIN)


def test_consume_and_export_take_the_remote_storage(tiered: TieredRun, tmp_path) -> None:
    """`kafkalog consume` and `export` with --remote-storage print every offset Kafka's consumer
    read; without it they exit 1 naming the tiered offsets and the flag."""
    import json
    import subprocess
    import sys

    def kafkalog(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "kafkalog.cli.main", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    want = sorted(r["offset"] for r in tiered.expected[LEVELS[1]] if r["topic"] == TXN)
    remote = ("--remote-storage", str(tiered.remote_dir))
    ran = kafkalog("consume", str(tiered.data_dir), "-t", TXN, "--json", *remote,
                   "--isolation-level", "read_committed")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert sorted(json.loads(line)["offset"] for line in ran.stdout.splitlines()) == want
    out = tmp_path / "txn.jsonl"
    ran = kafkalog("export", str(tiered.data_dir), "-t", TXN, "--to", "jsonl", str(out), *remote,
                   "--isolation-level", "read_committed")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert sorted(json.loads(line)["offset"] for line in out.read_text().splitlines()) == want
    ran = kafkalog("consume", str(tiered.data_dir), "-t", TXN)
    assert ran.returncode == 1
    assert "are in tiered storage" in ran.stderr and "--remote-storage" in ran.stderr


def test_dump_reads_remote_segment_files_by_their_remote_names(tiered, kafka_dist, tmp_path):
    """`kafkalog dump` on a remote segment's files, named as LocalTieredStorage names them
    (``OFFSET-SEGMENTID.log``, ``.index``, ``.timeindex``), prints what kafka-dump-log prints for
    copies of them under a local segment's names (it cannot take the remote names: it reads the
    base offset from the whole stem and stops with a NumberFormatException)."""
    import re
    import subprocess
    import sys

    metadata = {str(tip): part for tip, part in read_remote_log_metadata(tiered.data_dir).items()}
    layout = LocalTieredStorageLayout(tiered.remote_dir)
    copied = [m for topic, p in PARTITIONS for m in metadata[f"{topic}-{p}"].copied_segments()]
    # a segment past offset 0 (its base offset is what the names give), with the most time
    # index entries (relative offsets, made absolute with it); the offset indexes are empty
    # here (segments smaller than index.interval.bytes), and dumped too
    segment = max(
        (m for m in copied if m.start_offset > 0),
        key=lambda m: layout.segment_file(m, RemoteFileType.TIME_INDEX).stat().st_size,
    )
    kinds = (RemoteFileType.SEGMENT, RemoteFileType.OFFSET_INDEX, RemoteFileType.TIME_INDEX)
    local = tmp_path / "copy-0"
    local.mkdir()
    for kind in kinds:
        shutil.copyfile(layout.segment_file(segment, kind),
                        local / f"{segment.start_offset:020d}{kind.value}")  # fmt: skip
    for kind in kinds:
        remote = layout.segment_file(segment, kind)
        copy = local / f"{segment.start_offset:020d}{kind.value}"
        ours = subprocess.run(
            [sys.executable, "-m", "kafkalog.cli.main", "dump", "--deep-iteration", str(remote)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        theirs = kafka_dist.dump_log_segments("--deep-iteration", "--files", str(copy))
        assert ours.returncode == 0, ours.stderr
        assert ours.stdout.replace(str(remote), "FILE") == theirs.stdout.replace(str(copy), "FILE")
        if kind is not RemoteFileType.OFFSET_INDEX:  # entries, their offsets absolute
            assert re.search(r"(offset|baseOffset): [1-9]", ours.stdout), ours.stdout
