"""``kafkalog transactions``: aborted, committed and open transactions, with the expectations
worked out here by walking the segments with kafka-python."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.format import ControlRecordType, build_end_txn_marker_batch
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .operate_support import T0, json_lines, kp_batches, run_main

CONTROL_TYPES = {0: "aborted", 1: "committed"}


def kp_transactions(part: Path) -> list[tuple]:
    """(state, producer id, first offset, last offset, marker offset) per transaction, in the
    order of first offsets, from kafka-python's batches."""
    ongoing: dict[int, list] = {}
    done = []
    for log in sorted(part.glob("*.log")):
        for batch in kp_batches(log):
            if not batch.is_transactional:
                continue
            pid = batch.producer_id
            if not batch.is_control_batch:
                txn = ongoing.setdefault(pid, ["open", pid, batch.base_offset, None, None])
                txn[3] = batch.base_offset + batch.last_offset_delta
                continue
            (record,) = list(batch)
            kind = struct.unpack(">hh", record.key)[1]
            if kind in CONTROL_TYPES:
                txn = ongoing.pop(pid, [None, pid, None, None, None])
                txn[0], txn[4] = CONTROL_TYPES[kind], batch.base_offset
                done.append(tuple(txn))
    done += [tuple(t) for t in ongoing.values()]
    return sorted(done, key=lambda t: t[2] if t[2] is not None else t[4])


def listed(stdout: str) -> list[tuple]:
    return [(o["state"], o["producerId"], o["firstOffset"], o["lastOffset"], o["markerOffset"])
            for o in json_lines(stdout) if o["type"] == "transaction"]  # fmt: skip


def txn_batch(pid: int, seq: int, n: int, ts: int) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30, transactional=True, producer_id=pid, producer_epoch=0,
                        base_sequence=seq)  # fmt: skip
    for i in range(n):
        builder.append(ts + i, b"k%d" % i, b"v%d" % i, [])
    builder.close()
    return bytes(builder.buffer())


def marker(kind: ControlRecordType, pid: int) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                      coordinator_epoch=3, timestamp=T0)  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """t-0: producer 7 aborts twice, 8 commits, 9 stays open; interleaved."""
    root = tmp_path_factory.mktemp("txn") / "data"
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        (log,) = manager.create_topic("t", 1)
        coordinator = {"origin": AppendOrigin.COORDINATOR}
        log.append_as_leader(txn_batch(7, 0, 2, T0))
        log.append_as_leader(txn_batch(8, 0, 1, T0))
        log.append_as_leader(txn_batch(7, 2, 1, T0))
        log.append_as_leader(marker(ControlRecordType.ABORT, 7), **coordinator)
        log.append_as_leader(marker(ControlRecordType.COMMIT, 8), **coordinator)
        log.append_as_leader(txn_batch(7, 3, 1, T0 + 5))
        log.append_as_leader(marker(ControlRecordType.ABORT, 7), **coordinator)
        log.append_as_leader(txn_batch(9, 0, 3, T0 + 9))
    return root


def test_aborted_and_open_transactions(data_dir: Path) -> None:
    expected = kp_transactions(data_dir / "t-0")
    assert [t[0] for t in expected] == ["aborted", "committed", "aborted", "open"]
    out, _ = run_main("transactions", "--json", "--now-ms", T0 + 1000, data_dir, status=0)
    assert listed(out) == [t for t in expected if t[0] != "committed"]
    objects = json_lines(out)
    assert all(o["inTxnIndex"] for o in objects if o.get("state") == "aborted")
    (partition,) = [o for o in objects if o["type"] == "partition"]
    end = sum(b.last_offset_delta + 1 for b in kp_batches(data_dir / "t-0" / f"{0:020d}.log"))
    assert partition == {"type": "partition", "partition": "t-0", "logEndOffset": end,
                         "lastStableOffset": expected[-1][2]}  # fmt: skip
    assert objects[-1] == {"type": "summary", "path": str(data_dir), "partitions": 1,
                           "aborted": 2, "open": 1, "hanging": 0, "committed": 1,
                           "txnIndexOnly": 0, "notInTxnIndex": 0}  # fmt: skip
    out, _ = run_main("transactions", "--all", "--json", "--now-ms", T0 + 1000,
                      data_dir / "t-0", status=0)  # fmt: skip
    assert listed(out) == expected


def test_an_old_open_transaction_is_hanging(data_dir: Path) -> None:
    out, _ = run_main("transactions", "--now-ms", T0 + 10**7, data_dir, status=1)
    lines = out.splitlines()
    assert lines[0].split() == ["PARTITION", "STATE", "PRODUCER", "EPOCH", "FIRST", "LAST",
                                "MARKER", "RECORDS", "STARTED"]  # fmt: skip
    row = next(line.split() for line in lines if " open" in line)
    assert row[:8] == ["t-0", "open", "(hanging)", "9", "0", *map(str, kp_transactions(
        data_dir / "t-0")[-1][2:4]), "-"]  # fmt: skip
    assert lines[-1] == "1 partitions: 2 aborted, 1 open (1 hanging), 1 committed transactions"
    assert lines[-2].startswith(
        f"t-0: last stable offset {kp_transactions(data_dir / 't-0')[-1][2]}"
    )
    run_main("transactions", "--timeout-ms", 10**8, "--now-ms", T0 + 10**7, data_dir, status=0)


def test_an_aborted_transaction_missing_from_the_txnindex(data_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = Path(shutil.copytree(data_dir, tmp_path / "copy"))
    txn = root / "t-0" / f"{0:020d}.txnindex"
    txn.write_bytes(txn.read_bytes()[:34])  # keep the first entry only
    # read_committed consumers would return the second one's records: a problem (exit 1).
    out, err = run_main("transactions", "--json", "--now-ms", T0, root, status=1)
    objects = json_lines(out)
    assert [o["inTxnIndex"] for o in objects if o.get("state") == "aborted"] == [True, False]
    assert objects[-1]["notInTxnIndex"] == 1 and "missing from the .txnindex" in err


def test_a_deleted_txnindex_is_a_problem_until_rebuilt(data_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = Path(shutil.copytree(data_dir, tmp_path / "copy"))
    (root / "t-0" / f"{0:020d}.txnindex").unlink()
    expected = [t for t in kp_transactions(root / "t-0") if t[0] == "aborted"]
    out, err = run_main("transactions", "--json", "--now-ms", T0, root, status=1)
    aborted = [o for o in json_lines(out) if o.get("state") == "aborted"]
    assert [(o["producerId"], o["firstOffset"], o["markerOffset"]) for o in aborted] == [
        (t[1], t[2], t[4]) for t in expected
    ]
    assert not any(o["inTxnIndex"] for o in aborted) and "rebuild-index" in err
    run_main("rebuild-index", "--apply", root / "t-0", status=0)
    run_main("transactions", "--now-ms", T0, root, status=0)


@requires_shared_fixtures
def test_committed_transactions_of_a_real_broker() -> None:
    data_dir = KAFKA_DATA / "Danielowo2000+BigDataTechnologies-Version-2"
    part = data_dir / "_confluent-ksql-default__command_topic-0"
    expected = kp_transactions(part)
    assert expected and {t[0] for t in expected} == {"committed"}
    out, _ = run_main("transactions", "--all", "--json", part, status=0)
    assert listed(out) == expected
    summary = json_lines(run_main("transactions", "--json", data_dir, status=0)[0])[-1]
    assert (summary["aborted"], summary["open"], summary["committed"]) == (0, 0, len(expected))
