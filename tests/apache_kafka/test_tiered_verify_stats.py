"""`kafkalog verify` and `kafkalog stats` take a tiered partition (KIP-405) as one log, its remote
segments in Kafka's LocalTieredStorage and its local ones (docs/tiered-storage.md), on the data
a real broker with tiered storage wrote (test_kafka_tiered_storage.py's run): verify finds
nothing wrong in it and stats counts what Kafka's consumer read; a remote segment removed, cut
short or without its time index is an error naming the file and the offset (exit 1).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tiered_broker as tb
from tiered_broker import DELETED, PARTITIONS, PLAIN, TXN, ZSTD, TieredRun

from kafkalog.log.tiered import (
    LocalTieredStorageLayout,
    RemoteFileType,
    open_tiered_partition,
)

pytestmark = pytest.mark.slow

# The transactional topic's producer ran three transactions: one COMMIT or ABORT marker each,
# a record stats and verify count (control records included) that consumers do not return.
MARKERS = {TXN: 3}


def kafkalog(*args: str) -> tuple[int, list[dict], str]:
    """Exit status, JSON lines and stderr of ``kafkalog ARGS``."""
    ran = subprocess.run([sys.executable, "-m", "kafkalog.cli.main", *args],
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    return ran.returncode, [json.loads(line) for line in ran.stdout.splitlines()], ran.stderr


def _consumed(run: TieredRun, topic: str, p: int) -> list[dict]:
    """What Kafka's consumer read of one partition (read_uncommitted)."""
    rows = run.expected["read_uncommitted"]
    return [r for r in rows if (r["topic"], r["partition"]) == (topic, p)]


def _local_start(run: TieredRun, topic: str, p: int) -> int:
    """The first local segment's base offset, from the files the broker left."""
    return tb.partition_state(run.data_dir, run.remote_dir, topic, p).local[0]


def _expected_records(run: TieredRun, topic: str, p: int, first_offset: int) -> int:
    """The records of the log from ``first_offset`` (the first batch read, which may start
    below a log start DeleteRecords moved): Kafka's consumer's, the control records, and the
    offsets of the first batch below the log start (offsets are dense: no compaction)."""
    consumed = _consumed(run, topic, p)
    return len(consumed) + MARKERS.get(topic, 0) + consumed[0]["offset"] - first_offset


def _by_path(objects: list[dict], kind: str) -> dict[str, dict]:
    return {Path(o["path"]).name: o for o in objects if o["type"] == kind}


def test_verify_finds_nothing_wrong_in_the_whole_log(tiered: TieredRun) -> None:
    code, out, err = kafkalog("verify", "--json", "--remote-storage", str(tiered.remote_dir),
                              str(tiered.data_dir))  # fmt: skip
    assert code == 0, err
    findings = [o for o in out if o["type"] == "finding"]
    assert [f for f in findings if f["severity"] != "info"] == []
    parts = _by_path(out, "partition")
    remote = {Path(f["path"]).name: f for f in findings if f["code"] == "remote-segments"}
    for topic, p in PARTITIONS:
        name = f"{topic}-{p}"
        consumed = _consumed(tiered, topic, p)
        log_start = DELETED[2] if (topic, p) == DELETED[:2] else 0
        assert parts[name]["logStartOffset"] == log_start
        assert parts[name]["logEndOffset"] == consumed[-1]["offset"] + 1
        with open_tiered_partition(tiered.data_dir / name, tiered.remote_dir) as tp:
            first = tp.segments[0].segment.base_offset  # verify reads whole files
            files = len(tp.segments)
        assert parts[name]["segments"] == files
        assert parts[name]["records"] == _expected_records(tiered, topic, p, first)
        local_start = _local_start(tiered, topic, p)
        assert remote[name]["offset"] == log_start
        assert f"offsets {log_start} to {local_start - 1} are read from" in remote[name]["message"]


def test_verify_without_the_remote_store_names_what_it_did_not_check(tiered: TieredRun) -> None:
    code, out, err = kafkalog("verify", "--json", str(tiered.data_dir))
    assert code == 0, err
    not_verified = "remote-segments-not-verified"
    warned = {Path(f["path"]).name: f for f in out
              if f["type"] == "finding" and f["code"] == not_verified}  # fmt: skip
    assert set(warned) == {f"{t}-{p}" for t, p in PARTITIONS}
    for topic, p in PARTITIONS:
        log_start = DELETED[2] if (topic, p) == DELETED[:2] else 0
        assert warned[f"{topic}-{p}"]["offset"] == log_start
        said = f"to {_local_start(tiered, topic, p) - 1} are in tiered storage"
        assert said in warned[f"{topic}-{p}"]["message"]


def test_stats_counts_the_whole_log(tiered: TieredRun) -> None:
    code, out, err = kafkalog("stats", "--json", "--remote-storage", str(tiered.remote_dir),
                              str(tiered.data_dir))  # fmt: skip
    assert code == 0, err
    parts = _by_path(out, "partition")
    for topic, p in PARTITIONS:
        name = f"{topic}-{p}"
        stats, consumed = parts[name], _consumed(tiered, topic, p)
        log_start = DELETED[2] if (topic, p) == DELETED[:2] else 0
        local_start = _local_start(tiered, topic, p)
        assert stats["error"] is None and stats["warnings"] == []
        assert (stats["logStartOffset"], stats["logEndOffset"]) == (
            log_start, consumed[-1]["offset"] + 1)  # fmt: skip
        assert stats["firstOffset"] <= consumed[0]["offset"] == log_start
        assert stats["lastOffset"] == consumed[-1]["offset"]
        assert stats["records"] == _expected_records(tiered, topic, p, stats["firstOffset"])
        remote = stats["remote"]
        assert remote["localLogStartOffset"] == local_start
        assert (remote["firstOffset"], remote["lastOffset"]) == (
            stats["firstOffset"], local_start - 1)  # fmt: skip
        below = [r for r in consumed if r["offset"] < local_start]
        # the transactional topic's markers are all below its local log start (remote only)
        markers = MARKERS.get(topic, 0)
        assert remote["records"] == len(below) + markers + below[0]["offset"] - stats[
            "firstOffset"]  # fmt: skip
        if topic != TXN:  # no marker (its timestamp is the broker's): Kafka's records' times
            assert stats["maxTimestamp"] == max(r["timestamp"] for r in consumed)
            assert remote["maxTimestamp"] == max(r["timestamp"] for r in below)
    summary = out[-1]
    assert summary["remote"]["records"] == sum(parts[f"{t}-{p}"]["remote"]["records"]
                                               for t, p in PARTITIONS)  # fmt: skip


def test_stats_of_other_partitions_is_unchanged(tiered: TieredRun) -> None:
    """Partitions without remote segments print the same bytes with the remote store as
    without it; without it a tiered partition's remote offsets are a warning, not counted."""
    remote = ("--remote-storage", str(tiered.remote_dir))
    _, with_remote, _ = kafkalog("stats", "--json", *remote, str(tiered.data_dir))
    code, without, err = kafkalog("stats", "--json", str(tiered.data_dir))
    assert code == 0
    tiered_names = {f"{t}-{p}" for t, p in PARTITIONS}
    plain = [o for o in without if o["type"] == "partition" and Path(o["path"]).name not in
             tiered_names]  # fmt: skip
    assert plain and plain == [
        o for o in with_remote if o["type"] == "partition" and Path(o["path"]).name not in
        tiered_names
    ]  # fmt: skip
    for topic, p in PARTITIONS:
        log_start = DELETED[2] if (topic, p) == DELETED[:2] else 0
        said = f"offsets {log_start} to {_local_start(tiered, topic, p) - 1} are in tiered storage"
        assert said in err
    text = [
        subprocess.run([sys.executable, "-m", "kafkalog.cli.main", "stats", *extra, "--topic",
                        "__transaction_state", str(tiered.data_dir)],
                       capture_output=True, timeout=300, check=True).stdout
        for extra in (remote, ())
    ]  # fmt: skip
    assert text[0] == text[1] and b"REMOTE" not in text[0]


def _copy_remote(tiered: TieredRun, tmp_path: Path) -> Path:
    remote = tmp_path / "remote"
    shutil.copytree(tiered.remote_dir, remote)
    return remote


def _remote_only(tiered: TieredRun, topic: str, p: int, remote: Path):
    """The metadata of a remote segment in the middle of the part read only remotely."""
    with open_tiered_partition(tiered.data_dir / f"{topic}-{p}", remote) as tp:
        served = tp.remote_segments
        return served[len(served) // 2].remote


def test_damaged_remote_segments_are_named(tiered: TieredRun, tmp_path: Path) -> None:
    """A remote ``.log`` removed, one cut in half and a remote ``.timeindex`` removed: each an
    error naming the file and the offset (exit 1); stats stops at the first, its records
    those Kafka's consumer read below it."""
    remote = _copy_remote(tiered, tmp_path)
    layout = LocalTieredStorageLayout(remote)
    missing = _remote_only(tiered, ZSTD, 0, remote)
    gone = layout.segment_file(missing, RemoteFileType.SEGMENT)
    gone.unlink()
    cut = _remote_only(tiered, PLAIN, 1, remote)
    short = layout.segment_file(cut, RemoteFileType.SEGMENT)
    with open(short, "r+b") as f:
        f.truncate(cut.segment_size_in_bytes // 2)
    no_index = _remote_only(tiered, PLAIN, 0, remote)
    no_time_index = layout.segment_file(no_index, RemoteFileType.TIME_INDEX)
    no_time_index.unlink()

    code, out, err = kafkalog("verify", "--json", "--remote-storage", str(remote),
                              str(tiered.data_dir))  # fmt: skip
    assert code == 1, err
    errors = [o for o in out if o["type"] == "finding" and o["severity"] == "error"]
    by_code = {}
    for e in errors:
        by_code.setdefault(e["code"], []).append(e)
    (m,) = by_code.pop("remote-segment-missing")
    assert (m["path"], m["offset"]) == (str(gone), missing.start_offset)
    (t,) = by_code.pop("remote-segment-truncated")
    assert t["path"] == str(short) and cut.start_offset < t["offset"] <= cut.end_offset
    assert t["position"] is not None and t["position"] < cut.segment_size_in_bytes // 2
    (i,) = by_code.pop("time-index-missing")
    assert i["path"] == str(no_time_index)
    # the half batch at the cut is a torn tail of a rolled segment, as in a local one
    assert [e["path"] for e in by_code.pop("torn-tail", [])] in ([], [str(short)])
    assert by_code == {}
    summary = out[-1]
    assert summary["ok"] is False and summary["errors"] == len(errors)

    code, out, err = kafkalog("stats", "--json", "--remote-storage", str(remote),
                              str(tiered.data_dir))  # fmt: skip
    assert code == 1
    parts = _by_path(out, "partition")
    zstd = parts[f"{ZSTD}-0"]
    assert str(gone) in zstd["error"] and f"offset {missing.start_offset}" in zstd["error"]
    below = [r for r in _consumed(tiered, ZSTD, 0) if r["offset"] < missing.start_offset]
    assert zstd["records"] == len(below) and zstd["lastOffset"] == missing.start_offset - 1
    plain1 = parts[f"{PLAIN}-1"]
    assert str(short) in plain1["error"] and "its metadata says" in plain1["error"]
    assert f"{PLAIN}-0" in parts and parts[f"{PLAIN}-0"]["error"] is None  # reads no index
    assert str(gone) in err and str(short) in err


def test_local_leftovers_below_the_remote_data_are_not_lost(tiered, tmp_path) -> None:
    """An index local retention left behind (its ``.log`` deleted after the copy) below the
    local log start: not lost offsets, since the remote store holds them."""
    data = tmp_path / "data"
    shutil.copytree(tiered.data_dir, data)
    local_start = _local_start(tiered, PLAIN, 0)
    with open_tiered_partition(tiered.data_dir / f"{PLAIN}-0", tiered.remote_dir) as tp:
        below = tp.remote_segments[-1].remote.start_offset
    partition = data / f"{PLAIN}-0"
    shutil.copyfile(partition / f"{local_start:020d}.index", partition / f"{below:020d}.index")
    for extra in ((), ("--remote-storage", str(tiered.remote_dir))):
        code, out, err = kafkalog("verify", "--json", *extra, str(partition))
        assert code == 0, out
        codes = {o["code"] for o in out if o["type"] == "finding"}
        assert "segment-missing" not in codes and "orphan-index" in codes
        code, out, err = kafkalog("stats", "--json", *extra, str(partition))
        assert code == 0, err


def test_the_plan_goes_on_past_a_gap(tiered: TieredRun) -> None:
    """A segment the metadata no longer lists is a gap naming the file of the next data; the
    plan still lists what lies past it (what verify checks), the readers stop at the gap."""
    from kafkalog.log.tiered import TieredOffsetGapError, read_remote_log_metadata

    metadata = read_remote_log_metadata(tiered.data_dir)
    with open_tiered_partition(tiered.data_dir / f"{PLAIN}-0", tiered.remote_dir) as whole:
        pieces = [(p.start, p.end) for p in whole.segments]
        dropped = whole.remote_segments[1].remote
    del metadata[dropped.topic_id_partition].segments[dropped.segment_id]
    layout = LocalTieredStorageLayout(tiered.remote_dir)
    with open_tiered_partition(tiered.data_dir / f"{PLAIN}-0", tiered.remote_dir,
                               metadata=metadata) as tp:  # fmt: skip
        (gap,) = tp.problems
        assert tp.problem is gap and isinstance(gap, TieredOffsetGapError)
        assert gap.offset == dropped.start_offset
        following = _copied_after(metadata, dropped)
        assert gap.path == str(layout.segment_file(following[0], RemoteFileType.SEGMENT))
        assert all(p.end <= gap.offset for p in tp.segments)
        assert [(p.start, p.end) for p in tp.segments + tp.beyond] == [
            piece for piece in pieces if piece[0] != dropped.start_offset
        ]


def _copied_after(metadata, dropped) -> list:
    """The copied segments after ``dropped``, by start offset."""
    part = metadata[dropped.topic_id_partition]
    return [m for m in part.copied_segments() if m.start_offset > dropped.start_offset]
