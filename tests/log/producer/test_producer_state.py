"""Producer state (kafkalog.log.producer.state) against Kafka's rules, and real broker snapshots.

Batches are written by kafka-python 3.0.12 (idempotent and transactional producer fields set
there); transaction markers are kafka-python batches turned into control batches with
kafka-python's CRC-32C. Rules and messages are Kafka's (ProducerAppendInfo, ProducerStateEntry,
ProducerStateManager). Real ``.snapshot`` files of ../shared/fixtures must read as EXPECTED.json
says, and re-encode to the very same bytes.
"""

from __future__ import annotations

import struct

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder
from kafka.record.util import calc_crc32c

from kafkalog.format import MemoryRecords
from kafkalog.log.producer.snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_files,
    read_snapshot,
    snapshot_file_path,
    write_snapshot,
)
from kafkalog.log.producer.state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
)
from shared_fixtures import EXPECTED, KAFKA_DATA, requires_shared_fixtures

NOW = 1_700_000_000_000
INT_MAX = 2**31 - 1


class FakeClock:
    def __init__(self, ms: int = NOW) -> None:
        self.ms = ms

    def milliseconds(self) -> int:
        return self.ms


def data_batch(pid, epoch, seq, n=1, *, offset, txn=False, ts=NOW):
    builder = KpBuilder(
        2,
        0,
        1 << 20,
        transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    for i in range(n):
        builder.append(ts + i, b"k", b"v")
    builder.close()
    return at_offset(builder.buffer(), offset)


def at_offset(data, offset):
    """The batch moved to ``offset`` as a broker assigns it (baseOffset is outside the CRC)."""
    buf = bytearray(data)
    struct.pack_into(">q", buf, 0, offset)
    return next(MemoryRecords(bytes(buf)).batches())


def marker(pid, epoch, *, offset, commit=True, coordinator_epoch=0, ts=NOW):
    """A transactional control batch with one COMMIT/ABORT marker (sequence -1, as brokers do)."""
    builder = KpBuilder(2, 0, 1 << 20, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    builder.append(
        ts, struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, coordinator_epoch)
    )
    builder.close()
    buf = bytearray(builder.buffer())
    struct.pack_into(">h", buf, 21, 0x30)  # transactional | control
    struct.pack_into(">i", buf, 53, -1)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return at_offset(buf, offset)


@pytest.fixture
def manager(tmp_path):
    log_dir = tmp_path / "orders-0"
    log_dir.mkdir()
    return ProducerStateManager(log_dir, clock=FakeClock())


def append(manager, *batches, origin=AppendOrigin.CLIENT):
    """What UnifiedLog does around the write: analyze, then apply."""
    analysis = manager.analyze_batches(batches, origin=origin)
    if analysis.duplicate is not None:
        return analysis
    return manager.apply_append(analysis, batches[-1].last_offset + 1)


# -- sequences and epochs -----------------------------------------------------------------------


def test_sequences_must_follow_each_other(manager):
    append(manager, data_batch(1000, 0, 0, 3, offset=0))
    append(manager, data_batch(1000, 0, 3, 2, offset=3))
    entry = manager.last_entry(1000)
    assert (entry.last_seq, entry.last_data_offset, entry.last_offset_delta) == (4, 4, 1)
    with pytest.raises(OutOfOrderSequenceError) as e:
        append(manager, data_batch(1000, 0, 6, offset=5))
    assert e.value.code == 45
    assert e.value.message == (
        "Out of order sequence number for producer 1000 at offset 5 in partition orders-0: 6 "
        "(incoming seq. number), 4 (current end sequence number)"
    )


def test_new_producer_may_start_at_any_sequence(manager):
    append(manager, data_batch(7, 0, 42, offset=0))
    assert manager.last_entry(7).last_seq == 42


def test_sequence_wraps_past_int_max(manager):
    append(manager, data_batch(1000, 0, INT_MAX - 2, 3, offset=0))
    assert manager.last_entry(1000).last_seq == INT_MAX
    append(manager, data_batch(1000, 0, 0, 2, offset=3))
    assert manager.last_entry(1000).last_seq == 1


def test_wrapping_batch_metadata_gives_back_first_sequence():
    metadata = BatchMetadata(last_seq=1, last_offset=20, offset_delta=4, timestamp=NOW)
    assert (metadata.first_seq, metadata.first_offset) == (INT_MAX - 2, 16)


def test_retried_batch_is_a_duplicate_with_the_original_offsets(manager):
    for i in range(5):
        append(manager, data_batch(1000, 0, 2 * i, 2, offset=10 * i, ts=NOW + i))
    retry = data_batch(1000, 0, 4, 2, offset=0)
    analysis = append(manager, retry)
    assert analysis.duplicate == BatchMetadata(5, 21, 1, NOW + 3)  # the batch maxTimestamp
    assert (analysis.duplicate.first_offset, analysis.duplicate.last_offset) == (20, 21)
    assert manager.last_entry(1000).last_seq == 9  # nothing applied


def test_only_the_last_five_batches_are_remembered(manager):
    for i in range(6):
        append(manager, data_batch(1000, 0, i, offset=i))
    assert len(manager.last_entry(1000).batch_metadata) == 5
    assert append(manager, data_batch(1000, 0, 1, offset=0)).duplicate is not None
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, data_batch(1000, 0, 0, offset=0))


def test_same_sequence_with_other_epoch_is_not_a_duplicate(manager):
    append(manager, data_batch(1000, 0, 0, offset=0))
    analysis = manager.analyze_batches([data_batch(1000, 1, 0, offset=1)])
    assert analysis.duplicate is None
    manager.apply_append(analysis, 2)
    assert manager.last_entry(1000).producer_epoch == 1


def test_new_epoch_must_start_at_sequence_zero(manager):
    append(manager, data_batch(1000, 0, 0, 3, offset=0))
    with pytest.raises(OutOfOrderSequenceError) as e:
        append(manager, data_batch(1000, 1, 3, offset=3))
    assert e.value.message == (
        "Invalid sequence number for new epoch of producer 1000 at offset 3 in partition "
        "orders-0: 1 (request epoch), 3 (seq. number), 0 (current producer epoch)"
    )
    append(manager, data_batch(1000, 1, 0, offset=3))
    assert manager.last_entry(1000).batch_metadata == (BatchMetadata(0, 3, 0, NOW),)


def test_older_epoch_is_fenced(manager):
    append(manager, data_batch(1000, 2, 0, offset=0))
    with pytest.raises(InvalidProducerEpochError) as e:
        append(manager, data_batch(1000, 1, 1, offset=1))
    assert e.value.code == 47
    assert e.value.message == (
        "Epoch of producer 1000 at offset 1 in orders-0 is 1, which is smaller than the last seen "
        "epoch 2"
    )


def test_replication_takes_what_the_leader_accepted(manager):
    append(manager, data_batch(1000, 2, 0, offset=0))
    append(manager, data_batch(1000, 2, 9, offset=1), origin=AppendOrigin.REPLICATION)
    append(manager, data_batch(1000, 1, 0, offset=2), origin=AppendOrigin.REPLICATION)
    assert manager.last_entry(1000).producer_epoch == 1


def test_rejected_append_changes_nothing(manager):
    append(manager, data_batch(1000, 0, 0, offset=0))
    before = manager.last_entry(1000)
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, data_batch(1000, 0, 1, offset=1), data_batch(1000, 0, 5, offset=2))
    assert manager.last_entry(1000) == before and manager.map_end_offset == 1


# -- transactions -------------------------------------------------------------------------------


def test_commit_marker_completes_the_transaction(manager):
    append(manager, data_batch(5, 0, 0, 2, offset=10, txn=True))
    assert manager.first_unstable_offset() == 10 and manager.first_undecided_offset() == 10
    assert manager.last_entry(5).current_txn_first_offset == 10
    done = append(manager, marker(5, 0, offset=12, coordinator_epoch=3))
    assert done == [(CompletedTxn(5, 10, 12, False), 13)]
    entry = manager.last_entry(5)
    assert entry.current_txn_first_offset is None and entry.coordinator_epoch == 3
    # Completed but not replicated: still unstable until the high watermark passes the marker.
    assert manager.first_unstable_offset() == 10 and manager.first_undecided_offset() is None
    manager.on_high_watermark_updated(12)
    assert manager.first_unstable_offset() == 10
    manager.on_high_watermark_updated(13)
    assert manager.first_unstable_offset() is None


def test_abort_marker_and_last_stable_offset_with_another_open_transaction(manager):
    append(manager, data_batch(5, 0, 0, offset=10, txn=True))
    append(manager, data_batch(6, 0, 0, offset=11, txn=True))
    done = append(manager, marker(5, 0, offset=12, commit=False))
    assert done == [(CompletedTxn(5, 10, 12, True), 11)]  # LSO stops at producer 6's start
    done = append(manager, marker(6, 0, offset=13))
    assert done == [(CompletedTxn(6, 11, 13, False), 14)]


def test_marker_without_data_completes_nothing(manager):
    assert append(manager, marker(5, 0, offset=0)) == []


def test_non_transactional_write_inside_a_transaction(manager):
    append(manager, data_batch(5, 0, 0, offset=10, txn=True))
    with pytest.raises(InvalidTxnStateError) as e:
        append(manager, data_batch(5, 0, 1, offset=11))
    assert e.value.code == 48
    assert e.value.message == (
        "Expected transactional write from producer 5 at offset 11 in partition orders-0"
    )


def test_marker_from_an_older_coordinator_is_fenced(manager):
    append(manager, data_batch(5, 0, 0, offset=0, txn=True))
    append(manager, marker(5, 0, offset=1, coordinator_epoch=4), origin=AppendOrigin.COORDINATOR)
    append(manager, data_batch(5, 0, 1, offset=2, txn=True))
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        append(
            manager, marker(5, 0, offset=3, coordinator_epoch=3), origin=AppendOrigin.COORDINATOR
        )
    assert e.value.code == 52
    assert e.value.message == (
        "Invalid coordinator epoch for producerId 5 at offset 3 in partition orders-0: 3 "
        "(zombie), 4 (current)"
    )


def test_replay_of_a_segment_rebuilds_state_and_transactions(manager):
    batches = [
        data_batch(5, 0, 0, 2, offset=0, txn=True),
        data_batch(9, 1, 0, offset=2),
        marker(5, 0, offset=3, commit=False),
    ]
    results = [manager.replay_batch(b) for b in batches]
    assert results == [None, None, (CompletedTxn(5, 0, 3, True), 4)]
    assert manager.map_end_offset == 4 and set(manager.active_producers) == {5, 9}


def test_late_transaction_and_expiry(manager):
    clock = FakeClock(NOW)
    manager = ProducerStateManager(manager.log_dir, clock=clock, producer_id_expiration_ms=1000)
    append(manager, data_batch(5, 0, 0, offset=0, ts=NOW, txn=True))
    append(manager, data_batch(6, 0, 0, offset=1, ts=NOW))
    clock.ms = NOW + 1000
    manager.remove_expired_producers()
    assert set(manager.active_producers) == {5}  # an open transaction keeps its producer
    assert not manager.has_late_transaction(NOW + 900_000 + 300_000)
    assert manager.has_late_transaction(NOW + 900_000 + 300_001)


# -- snapshots ----------------------------------------------------------------------------------


def test_snapshot_round_trip_and_reload(manager):
    append(manager, data_batch(5, 0, 0, 2, offset=0, txn=True))
    append(manager, data_batch(1000, 3, 7, 3, offset=2))
    path = manager.take_snapshot()
    assert path.name == "00000000000000000005.snapshot"
    assert manager.take_snapshot() is None  # nothing new since
    assert not list(path.parent.glob("*.tmp"))
    restored = ProducerStateManager(manager.log_dir, clock=FakeClock())
    restored.truncate_and_reload(0, 5)
    assert dict(restored.active_producers) == dict(manager.active_producers)
    assert restored.first_unstable_offset() == 0 and restored.map_end_offset == 5


def test_corrupt_latest_snapshot_is_deleted_and_an_older_one_used(manager):
    append(manager, data_batch(1000, 0, 0, offset=0))
    manager.take_snapshot()
    append(manager, data_batch(1000, 0, 1, offset=1))
    latest = manager.take_snapshot()
    latest.write_bytes(latest.read_bytes()[:-3])
    restored = ProducerStateManager(manager.log_dir, clock=FakeClock())
    restored.truncate_and_reload(0, 2)
    assert not latest.exists() and restored.map_end_offset == 1
    assert restored.last_entry(1000).last_seq == 0


def test_truncate_and_delete_snapshots(manager):
    for offset in range(3):
        append(manager, data_batch(1000, 0, offset, offset=offset))
        manager.take_snapshot()
    assert [s.offset for s in list_snapshot_files(manager.log_dir)] == [1, 2, 3]
    manager.delete_snapshots_before(2)
    assert [s.offset for s in manager.snapshot_files()] == [2, 3]
    manager.remove_stray_snapshots([0, 2])  # 3 is a stray above every segment: kept
    assert [s.offset for s in list_snapshot_files(manager.log_dir)] == [2, 3]
    manager.remove_stray_snapshots([0, 2, 5])
    assert [s.offset for s in list_snapshot_files(manager.log_dir)] == [2]
    manager.truncate_fully_and_start_at(7)
    assert list_snapshot_files(manager.log_dir) == [] and manager.map_end_offset == 7


def test_snapshot_bytes_layout(tmp_path):
    entry = ProducerStateEntry(
        producer_id=1000,
        producer_epoch=2,
        coordinator_epoch=4,
        last_timestamp=NOW,
        current_txn_first_offset=None,
        batch_metadata=(BatchMetadata(9, 30, 2, NOW),),
    )
    data = encode_snapshot([entry])
    body = struct.pack(">iqhiqiqiq", 1, 1000, 2, 9, 30, 2, NOW, 4, -1)
    assert data == struct.pack(">hI", 1, calc_crc32c(body)) + body
    path = write_snapshot(snapshot_file_path(tmp_path, 31), [entry])
    assert path.name == "00000000000000000031.snapshot"
    assert read_snapshot(path) == [entry]


@pytest.mark.parametrize(
    ("mutate", "what"),
    [
        (lambda d: b"\x00\x02" + d[2:], "unknown file version 2"),
        (lambda d: d[:-1], "truncated: 1 producer entries need 56 bytes, the file has 55"),
        (lambda d: d[:5], "truncated: 5 bytes, the header needs 10"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC is no longer valid"),
    ],
)
def test_corrupt_snapshot_names_file_and_fault(tmp_path, mutate, what):
    entry = ProducerStateEntry(
        producer_id=1,
        producer_epoch=0,
        last_timestamp=NOW,
        batch_metadata=(BatchMetadata(0, 0, 0, NOW),),
    )
    path = tmp_path / "00000000000000000001.snapshot"
    path.write_bytes(mutate(encode_snapshot([entry])))
    with pytest.raises(CorruptSnapshotError) as e:
        read_snapshot(path)
    assert what in e.value.message and str(path) in str(e.value)


# -- real broker snapshots ----------------------------------------------------------------------


def _fixture_snapshots() -> list[tuple[str, dict]]:
    indexes = EXPECTED.get("indexes", {})
    return sorted((k, v) for k, v in indexes.items() if v.get("kind") == "producer-snapshot")


SNAPSHOTS = _fixture_snapshots()


@requires_shared_fixtures
def test_every_fixture_snapshot_matches_expected():
    on_disk = {p.relative_to(KAFKA_DATA).as_posix() for p in KAFKA_DATA.rglob("*.snapshot")}
    assert on_disk == {name for name, _ in SNAPSHOTS}
    with_entries = 0
    for name, facts in SNAPSHOTS:
        data = (KAFKA_DATA / name).read_bytes()
        assert facts["version"] == 1 and facts["crc_ok"], name  # all real files are good
        entries = decode_snapshot(data, path=name)
        assert len(entries) == facts["producer_entries"], name
        sample = facts["entries_sample"]
        got = [
            {
                "pid": e.producer_id,
                "epoch": e.producer_epoch,
                "last_seq": e.last_seq,
                "last_offset": e.last_data_offset,
                "offset_delta": e.last_offset_delta,
                "ts": e.last_timestamp,
                "coord_epoch": e.coordinator_epoch,
                "txn_first_offset": -1
                if e.current_txn_first_offset is None
                else e.current_txn_first_offset,
            }
            for e in entries[: len(sample)]
        ]
        assert got == sample, name
        # Kafka writes its HashMap's order: re-encoding gives the broker's bytes back.
        assert encode_snapshot(entries) == data, name
        with_entries += bool(entries)
    assert with_entries >= 5
