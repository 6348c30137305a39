"""``kafkalog recover`` and ``kafkalog rebuild-index``: dry runs change no byte, --apply repairs
what the dry run announced, and verify finds the result clean. Damage is made with ``struct``;
expected positions and offsets come from the bytes, never from kafkalog's output."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.format import ControlRecordType, build_end_txn_marker_batch
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager

from .operate_support import (
    T0,
    batch_positions,
    build,
    copy,
    digest,
    json_lines,
    kp_batches,
    run_main,
    run_script,
)


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("recover") / "data", {"events": (2, {})})


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return copy(valid_dir, tmp_path)


def segments(part: Path) -> list[Path]:
    return sorted(part.glob("*.log"))


def actions(stdout: str) -> list[tuple]:
    return [(o["action"], Path(o["path"]).name, o["position"], o["offset"])
            for o in json_lines(stdout) if o["type"] == "action"]  # fmt: skip


def test_a_clean_data_dir_needs_nothing(data_dir: Path) -> None:
    out, _ = run_main("recover", data_dir, status=0)
    assert out.strip() == "dry run: 0 of 2 partitions would change, 0 actions, 0 bytes cut"


def test_full_recovery_dry_run_then_apply(data_dir: Path) -> None:
    # events-0: a bit flip in the second batch of its second segment; events-1: a zero tail.
    middle = segments(data_dir / "events-0")[1]
    position, base, _ = batch_positions(middle)[1]
    data = bytearray(middle.read_bytes())
    data[position + 80] ^= 0x01
    middle.write_bytes(data)
    active = segments(data_dir / "events-1")[-1]
    active_size = active.stat().st_size
    with active.open("ab") as f:
        f.write(bytes(100))
    later = segments(data_dir / "events-0")[2:]
    before = digest(data_dir)

    # Kafka's own startup trusts the clean shutdown: it cannot read events-1's end, changes nothing
    _, err = run_main("recover", "--apply", data_dir, status=1)
    assert "not applied: events-1 cannot be opened" in err and "--full" in err
    assert ("unreadable-end", active.name) in {a[:2] for a in actions(
        run_main("recover", "--json", data_dir, status=1)[0])}  # fmt: skip
    assert digest(data_dir) == before

    out, _ = run_main("recover", "--full", "--json", data_dir, status=1)
    ends = {o["partition"]: o["logEndOffset"] for o in json_lines(out) if o["type"] == "partition"}
    assert ends["events-0"] == base  # the log ends before the damaged batch
    found = actions(out)
    assert ("truncate", middle.name, position, base) in found
    assert next(a for a in found if a[0] == "truncate" and a[1] == active.name)[2] == active_size
    assert later and {a[1] for a in found if a[0] == "drop-segment"} == {
        p.with_suffix(suffix).name for p in later for suffix in (".log", ".index", ".timeindex")
    }
    assert digest(data_dir) == before

    cut = bytes(data[position:])
    proc = run_script("recover", "--full", "--apply", data_dir, status=1)
    assert f"events-0: {middle.name}: recovery cut {len(data) - position} bytes" in proc.stdout
    assert middle.stat().st_size == position and active.stat().st_size == active_size
    assert not any(p.exists() for p in later)
    kept = list((data_dir / "events-0" / "kafkalog-quarantine").rglob(f"{middle.name}.cut-at-*"))
    assert [p.read_bytes() for p in kept] == [cut]
    assert f"events-0: what was taken out is kept in {kept[0].parent}" in proc.stdout
    run_script("verify", data_dir, status=0)
    assert "0 bytes cut" in run_main("recover", data_dir, status=0)[0]
    last = kp_batches(middle)[-1]
    assert last.base_offset + last.last_offset_delta + 1 == base  # the log now ends before it


def test_partition_dir_after_an_unclean_shutdown(data_dir: Path) -> None:
    (data_dir / ".kafka_cleanshutdown").unlink()
    part = data_dir / "events-0"
    active = segments(part)[-1]
    size = active.stat().st_size
    with active.open("ab") as f:
        f.write(active.read_bytes()[:40])  # the start of a batch: a torn tail
    before = digest(data_dir)
    found = actions(run_main("recover", "--json", part, status=1)[0])
    assert ("truncate", active.name, size) in {a[:3] for a in found}
    assert digest(data_dir) == before
    run_main("recover", "--apply", part, status=1)
    assert active.stat().st_size == size
    end = sum(b.records_count for s in segments(part) for b in kp_batches(s))
    checkpoint = (data_dir / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert f"events 0 {end}" in checkpoint and "events 1 60" in checkpoint
    out, _ = run_main("verify", "--json", part, status=0)
    assert json_lines(out)[-1]["errors"] == 0


def test_a_running_broker_holds_the_lock(data_dir: Path) -> None:
    with LogManager(data_dir, writable=True):
        _, err = run_main("recover", "--apply", data_dir, status=3)
        assert "Failed to acquire lock on file .lock" in err
        run_main("recover", "--apply", "--full", data_dir / "events-1", status=3)
        run_main("rebuild-index", "--apply", data_dir / "events-1", status=3)
        run_main("recover", data_dir, status=0)  # a dry run only reads


def test_usage_and_io_errors(data_dir: Path) -> None:
    assert "No such file" in run_main("recover", data_dir / "nope", status=3)[1]
    run_main("recover", data_dir / "meta.properties", status=2)
    run_main("rebuild-index", data_dir, status=2)  # a data dir: name a partition or segment
    run_main("rebuild-index", data_dir / "events-0" / "partition.metadata", status=2)
    run_main("rebuild-index", data_dir / "events-0" / f"{999:020d}.index", status=2)  # no .log
    run_main("rebuild-index", data_dir / "nope" / f"{0:020d}.index", status=3)


def test_rebuild_index_of_one_segment(data_dir: Path) -> None:
    part = data_dir / "events-0"
    index = segments(part)[1].with_suffix(".index")
    good = index.read_bytes()
    index.write_bytes(good + b"\x00\x01\x02")  # not a multiple of 8: fails Kafka's sanity check
    before = digest(data_dir)
    out, _ = run_main("rebuild-index", "--json", index, status=0)
    (seg,) = json_lines(out)
    assert seg["indexes"]["index"]["state"] == "corrupt" and seg["entriesAfter"] is None
    assert digest(data_dir) == before
    out, _ = run_main("rebuild-index", "--apply", "--json", index, status=0)
    # Kafka's rule (LogSegment.recover): an entry (batch last offset, batch position) whenever
    # more than index.interval.bytes (200 here) were read since the last entry.
    base, expected, last_entry = int(index.name[:20]), [], 0
    for position, first, _size in batch_positions(index.with_suffix(".log")):
        if position - last_entry > 200:
            last = struct.unpack_from(">i", index.with_suffix(".log").read_bytes(), position + 23)
            expected.append((first + last[0] - base, position))
            last_entry = position
    data = index.read_bytes()
    assert [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)] == expected
    assert data == good  # and the entries the appends wrote
    assert json_lines(out)[0]["entriesAfter"]["index"] == len(expected)
    run_main("verify", part, status=0)
    time_index = index.with_suffix(".timeindex")
    entries = time_index.read_bytes()
    time_index.unlink()  # a missing index may be named too
    run_main("rebuild-index", "--apply", time_index, status=0)
    assert time_index.read_bytes() == entries


def test_rebuilt_transaction_index_keeps_aborted_transactions(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        (log,) = manager.create_topic("t", 1)
        builder = KpBuilder(2, 0, 1 << 30, transactional=True, producer_id=7, producer_epoch=0,
                            base_sequence=0)  # fmt: skip
        builder.append(T0, b"k", b"v", [])
        builder.close()
        log.append_as_leader(bytes(builder.buffer()))
        log.append_as_leader(
            build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=T0),
            origin=AppendOrigin.COORDINATOR,
        )  # fmt: skip
    part = root / "t-0"
    txn = part / f"{0:020d}.txnindex"
    batches = kp_batches(part / f"{0:020d}.log")
    marker = next(b for b in batches if b.is_control_batch)
    data = next(b for b in batches if not b.is_control_batch)
    txn.unlink()
    run_main("rebuild-index", "--apply", part, status=0)
    version, pid, first, last, _lso = struct.unpack(">hqqqq", txn.read_bytes())
    assert (version, pid, first, last) == (0, data.producer_id, data.base_offset,
                                           marker.base_offset)  # fmt: skip
