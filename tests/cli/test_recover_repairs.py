"""What stops a broker from opening a data directory, and how recover and rebuild-index repair
it without surprises: a malformed leader-epoch-checkpoint (rebuilt from the batches), malformed
offset checkpoints (reset as Kafka's LogManager does), and a damaged segment whose index is
rebuilt (cut only with --truncate, and announced with its records first). Expected epochs,
offsets and record counts come from the bytes and from kafka-python, never from kafkalog."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.checkpoints import read_leader_epoch_checkpoint, read_offset_checkpoint
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

from .operate_support import (
    SMALL_SEGMENTS,
    T0,
    batch_positions,
    build,
    client_batch,
    copy,
    digest,
    json_lines,
    kp_records,
    run_main,
)

EPOCHS = [0, 0, 2, 2, 2, 5, 5, 7, 7, 7] * 3  # the leader epoch of each batch, in order


@pytest.fixture(scope="module")
def epochs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("epochs") / "data"
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        (log,) = manager.create_topic("t", 1, SMALL_SEGMENTS)
        for j, epoch in enumerate(EPOCHS):
            log.append_as_leader(client_batch([b"k%d" % j], T0 + j), leader_epoch=epoch)
    return root


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("repairs") / "data", {"events": (2, {})})


def epochs_in_bytes(part: Path) -> list[tuple[int, int]]:
    """(epoch, start offset): the partitionLeaderEpoch field (bytes 12-15 of a v2 batch) of the
    first batch of each newer epoch, across the segments in offset order."""
    found: list[tuple[int, int]] = []
    for log in sorted(part.glob("*.log")):
        data = log.read_bytes()
        for position, base, _size in batch_positions(log):
            (epoch,) = struct.unpack_from(">i", data, position + 12)
            if not found or epoch > found[-1][0]:
                found.append((epoch, base))
    return found


def log_end(part: Path) -> int:
    return max(r[0] for log in part.glob("*.log") for r in kp_records(log)) + 1


def actions(stdout: str) -> list[tuple]:
    return [(o["action"], Path(o["path"]).name, o["partition"])
            for o in json_lines(stdout) if o["type"] == "action"]  # fmt: skip


def test_a_malformed_leader_epoch_checkpoint_is_planned_then_rebuilt(
    epochs_dir: Path, tmp_path: Path
) -> None:
    root = copy(epochs_dir, tmp_path)
    checkpoint = root / "t-0" / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n1\n0 zz\n")
    before = digest(root)
    out, _ = run_main("recover", "--json", root, status=0)
    assert actions(out) == [("rebuild-leader-epochs", "leader-epoch-checkpoint", "t-0")]
    assert digest(root) == before  # a dry run
    full, _ = run_main("recover", "--full", "--json", root, status=0)
    assert ("rebuild-leader-epochs", "leader-epoch-checkpoint", "t-0") in actions(full)
    _, err = run_main("stats", root, status=1)  # read-only commands cannot open it either
    assert "leader-epoch-checkpoint" in err and "kafkalog recover --apply rebuilds it" in err
    run_main("recover", "--apply", root, status=0)
    entries = read_leader_epoch_checkpoint(checkpoint)
    assert [(e.epoch, e.start_offset) for e in entries] == epochs_in_bytes(root / "t-0")
    quarantined = list((root / "t-0" / "kafkalog-quarantine").glob("*/leader-epoch-checkpoint"))
    assert [p.read_text() for p in quarantined] == ["0\n1\n0 zz\n"]
    run_main("recover", root, status=0)
    run_main("stats", root, status=0)


@pytest.mark.parametrize("full", [False, True])
def test_malformed_offset_checkpoints_are_reset_as_a_broker_does(
    valid_dir: Path, tmp_path: Path, full: bool
) -> None:
    root = copy(valid_dir, tmp_path)
    (root / "recovery-point-offset-checkpoint").write_text("garbage\n")
    (root / "log-start-offset-checkpoint").write_text("0\n1\nevents 0\n")
    out, _ = run_main("recover", "--json", *(["--full"] if full else []), root, status=0)
    assert sorted(a for a in actions(out) if a[2] is None) == [
        ("rewrite-checkpoint", "log-start-offset-checkpoint", None),
        ("rewrite-checkpoint", "recovery-point-offset-checkpoint", None),
    ]
    run_main("recover", "--apply", *(["--full"] if full else []), root, status=0)
    parts = [TopicPartition("events", p) for p in (0, 1)]
    ends = {tp: log_end(root / f"events-{tp.partition}") for tp in parts}
    assert read_offset_checkpoint(root / "recovery-point-offset-checkpoint") == ends
    assert read_offset_checkpoint(root / "log-start-offset-checkpoint") == dict.fromkeys(parts, 0)
    out, _ = run_main("recover", "--json", root, status=0)
    assert actions(out) == []


def flip_second_segment(root: Path) -> tuple[Path, int, list[Path]]:
    """A bit flipped in the second batch of events-0's second segment: (that segment, the
    position of the damaged batch, the segments after it)."""
    logs = sorted((root / "events-0").glob("*.log"))
    position, _base, _size = batch_positions(logs[1])[1]
    data = bytearray(logs[1].read_bytes())
    data[position + 80] ^= 0x01
    logs[1].write_bytes(data)
    return logs[1], position, logs[2:]


def records_from(log: Path, position: int) -> int:
    """Records of the batches from ``position`` on, by kafka-python."""
    tail = log.read_bytes()[position:]
    return sum(len(list(batch)) for batch in kp_batches_of(tail))


def kp_batches_of(data: bytes) -> list:
    from kafka.record import MemoryRecords

    records, found = MemoryRecords(data), []
    while records.has_next():
        found.append(records.next_batch())
    return found


def test_rebuild_index_cuts_log_data_only_with_truncate(valid_dir: Path, tmp_path: Path) -> None:
    root = copy(valid_dir, tmp_path)
    damaged, position, later = flip_second_segment(root)
    lost = records_from(damaged, position) + sum(len(kp_records(p)) for p in later)
    logs_before = {p.name: p.read_bytes() for p in (root / "events-0").glob("*.log")}

    # Its indexes are intact: without --truncate the damaged segment is left alone.
    out, _ = run_main("rebuild-index", "--json", root / "events-0", status=1)
    plan = {Path(o["path"]).name: o for o in json_lines(out)}
    assert plan[damaged.name]["action"] == "skip"
    assert plan[damaged.name]["validBytes"] == position
    run_main("rebuild-index", "--apply", root / "events-0", status=1)
    assert {p.name: p.read_bytes() for p in (root / "events-0").glob("*.log")} == logs_before

    # Its index is gone: rebuilding it would cut, so --apply alone refuses and changes nothing.
    damaged.with_suffix(".index").unlink()
    before = digest(root)
    text, _ = run_main("rebuild-index", root / "events-0", status=1)
    assert f"truncate segment at position {position}" in text
    assert f"({lost} records lost)" in text
    for p in later:
        assert f"{p.name}: drop segment ({p.stat().st_size} bytes" in text
    _, err = run_main("rebuild-index", "--apply", root / "events-0", status=1)
    assert "--truncate" in err and digest(root) == before

    out, _ = run_main("rebuild-index", "--apply", "--truncate", "--json", root / "events-0",
                      status=1)  # fmt: skip
    plan = {Path(o["path"]).name: o for o in json_lines(out)}
    assert plan[damaged.name]["action"] == "truncate" and plan[damaged.name]["applied"]
    assert [plan[p.name]["action"] for p in later] == ["drop"] * len(later)
    assert sum(o["recordsCut"] for o in plan.values()) == lost
    assert damaged.stat().st_size == position and not any(p.exists() for p in later)
    run_main("verify", root / "events-0", status=0)


def test_recover_counts_the_records_a_cut_loses(valid_dir: Path, tmp_path: Path) -> None:
    root = copy(valid_dir, tmp_path)
    damaged, position, later = flip_second_segment(root)
    out, _ = run_main("recover", "--full", "--json", "--topic", "events", root, status=1)
    cut = [o for o in json_lines(out) if o["type"] == "action" and o["records"] is not None]
    assert [(Path(o["path"]).name, o["action"], o["records"]) for o in cut] == [
        (damaged.name, "truncate", records_from(damaged, position)),
        *[(p.name, "drop-segment", len(kp_records(p))) for p in later],
    ]
    text, _ = run_main("recover", "--full", root / "events-0", status=1)
    assert f"{records_from(damaged, position)} records): an invalid batch" in text


@settings(max_examples=12, deadline=None)
@given(epochs=st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_rebuilt_leader_epochs_follow_the_batches(epochs: list[int]) -> None:
    from kafkalog.log.partition.leader_epoch_repair import rebuild_leader_epoch_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
            (log,) = manager.create_topic("t", 1, SMALL_SEGMENTS)
            for j, epoch in enumerate(epochs):
                log.append_as_leader(client_batch([b"k"], T0 + j), leader_epoch=epoch)
        checkpoint = root / "t-0" / "leader-epoch-checkpoint"
        checkpoint.write_bytes(b"\xff\n")  # not even UTF-8
        entries, moved = rebuild_leader_epoch_checkpoint(root / "t-0")
        assert moved is not None and moved.read_bytes() == b"\xff\n"
        expected = epochs_in_bytes(root / "t-0")
        assert [(e.epoch, e.start_offset) for e in entries] == expected
        assert [(e.epoch, e.start_offset) for e in read_leader_epoch_checkpoint(checkpoint)] == (
            expected
        )


@pytest.mark.parametrize("damage", ["control type", "marker version"])
def test_a_marker_producer_state_cannot_take(tmp_path: Path, damage: str) -> None:
    """A COMMIT marker of an unknown control type (Kafka's EndTransactionMarker: an
    IllegalArgumentException, which recovery does not catch) or whose value does not decode (an
    InvalidRecordException from the producer-state rebuild after recovery) stops Kafka from
    loading the log. The dry run and --apply agree: an error naming the batch, nothing
    changed."""
    from crc32c import crc32c

    from kafkalog.format import ControlRecordType
    from kafkalog.format.builder import build_end_txn_marker_batch
    from kafkalog.format.validate.types import AppendOrigin

    root = tmp_path / "data"
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        (log,) = manager.create_topic("tx", 1)
        log.append_as_leader(client_batch([b"a"], T0, transactional=True, producer_id=100,
                                          producer_epoch=0, base_sequence=0))  # fmt: skip
        marker = build_end_txn_marker_batch(
            ControlRecordType.COMMIT, producer_id=100, producer_epoch=0, coordinator_epoch=0,
            timestamp=T0,
        )  # fmt: skip
        log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
        log.append_as_leader(client_batch([b"after"], T0 + 1))
    segment = root / "tx-0" / "00000000000000000000.log"
    (_, _, size0), (second, _, size1), (third, _, _) = batch_positions(segment)
    assert (second, third) == (size0, size0 + size1)
    data = bytearray(segment.read_bytes())
    # The record's key (length 4: version 0, type 1 = COMMIT), then its value (length 6:
    # version 0, coordinator epoch 0).
    key = data.index(b"\x08\x00\x00\x00\x01\x0c\x00\x00", second + 61)
    if damage == "control type":
        data[key + 4] = 7
    else:
        data[key + 6 : key + 8] = b"\xff\xff"  # version -1
    struct.pack_into(">I", data, second + 17, crc32c(bytes(data[second + 21 : third])))
    segment.write_bytes(bytes(data))
    want = "marker 7" if damage == "control type" else "marker version -1"
    before = digest(root)
    for args in (("--json",), ("--apply",)):
        out, err = run_main("recover", "--full", *args, root, status=1)
        said = out + err  # --json reports on stdout
        assert want in said and "Kafka cannot load this log" in said
        assert f"{segment}, position {second}, offset 1" in said
    assert digest(root) == before
