"""Log compaction (kafkalog.log.cleaner.cleaner) against a model of Kafka's documented cleaner
rules.

Expectations come from what the test appended and from :class:`Model`, a record-level rendering
of Kafka's rules (Cleaner, CleanedTransactionMetadata, MemoryRecords.filterTo): a record stays iff
it is the latest non-aborted record of its key, tombstones and markers go once their batch's
delete horizon (set on first clean to now + delete.retention.ms) has passed, aborted data goes, a
producer's last batch and the batch before the high watermark stay (maybe empty). Client batches
are built by kafka-python 3.0.12, and every segment is read back by kafka-python's
``MemoryRecords`` (CRCs checked, decoded to the last byte), its offset index checked against
Kafka's append rule. Crashes are simulated by raising at each rename of a clean and reopening.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.format import ControlRecordType, MemoryRecordsBuilder, build_end_txn_marker_batch
from kafkalog.format.batch import RecordBatch
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.cleaner.cleaner import (
    clean,
    cleanable_ratio,
    group_segments_by_size,
    log_to_clean,
    needs_cleaning,
    read_cleaner_checkpoint,
)
from kafkalog.log.cleaner.filter import (
    REMOVED_ABORTED,
    REMOVED_NO_KEY,
    REMOVED_SUPERSEDED,
    REMOVED_TOMBSTONE,
)
from kafkalog.log.cleaner.offset_map import OffsetMap
from kafkalog.log.clock import MockClock
from kafkalog.log.partition.config import LogConfig
from kafkalog.log.partition.log import Log
from kafkalog.log.producer.state import OutOfOrderSequenceError
from kafkalog.log.segment import fields as record_fields
from kafkalog.log.segment.log_segment import LogSegment

T0 = 1_700_000_000_000
FAR = 1 << 50
RETENTION = 1000  # delete.retention.ms
INTERVAL = 150  # index.interval.bytes: small, so cleaned segments get index entries
TXN_PIDS = (200, 201)
# fsync and msync cost milliseconds on disk and nothing on tmpfs; these tests check logic, not
# durability, and hypothesis makes hundreds of logs.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# -- building input -----------------------------------------------------------------------------
def config(**overrides) -> LogConfig:
    base = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": 400,
        "delete.retention.ms": RETENTION,
        "index.interval.bytes": INTERVAL,
        "segment.index.bytes": 1200,  # small preallocated indexes keep the tests fast
        "message.timestamp.after.max.ms": FAR,
        "message.timestamp.before.max.ms": FAR,
    }
    return LogConfig({**base, **{k.replace("_", "."): v for k, v in overrides.items()}})


def open_log(directory: Path, clock: MockClock | None = None, **overrides) -> Log:
    return Log.open(directory, config=config(**overrides), clock=clock or MockClock(now_ms=T0),
                    writable=True, create=True)  # fmt: skip


def kp_batch(records, *, codec=0, pid=-1, epoch=-1, seq=-1, txn=False, ts=T0) -> bytes:
    """A client batch as kafka-python's producer writes it."""
    builder = KpBuilder(2, codec, 1 << 30, transactional=txn, producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq)  # fmt: skip
    for key, value in records:
        assert builder.append(ts, key, value, []) is not None
    builder.close()
    return bytes(builder.buffer())


def append(log: Log, records, **kw) -> tuple[int, int]:
    info = log.append_as_leader(kp_batch(records, ts=log.clock.milliseconds(), **kw))
    return info.first_offset, info.last_offset


def end_txn(log: Log, pid: int, commit: bool, epoch: int = 0) -> int:
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    now = log.clock.milliseconds()
    data = build_end_txn_marker_batch(
        control, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=now
    )
    return log.append_as_leader(data, origin=AppendOrigin.COORDINATOR).first_offset


def follower(log: Log, records) -> None:
    """Append a client batch as a follower would, at the log end offset."""
    data = bytearray(kp_batch(records, ts=log.clock.milliseconds()))
    struct.pack_into(">q", data, 0, log.log_end_offset)  # baseOffset is outside the CRC
    log.append_as_follower(bytes(data))


def value(i: int) -> bytes:
    return b"value-%d-" % i * 6  # long and repetitive: kafka-python only compresses what shrinks


# -- reading back independently -----------------------------------------------------------------
@dataclass(frozen=True)
class KpBatch:
    position: int
    size: int
    base_offset: int
    last_offset: int
    is_control: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    codec: int
    delete_horizon: int | None
    records: tuple[tuple[int, bytes | None, bytes | None], ...]


def kp_batches(data: bytes) -> list[KpBatch]:
    """Every batch by kafka-python, CRC-checked; the bytes must end with a batch."""
    out, pos = [], 0
    records = KpRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.magic == 2 and batch.validate_crc(), f"bad batch at position {pos}"
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        horizon = batch.first_timestamp if batch.attributes & 0x40 else None
        recs = tuple((r.offset, r.key, r.value) for r in batch)
        out.append(KpBatch(pos, size, batch.base_offset, batch.last_offset,
                           batch.is_control_batch, batch.producer_id, batch.producer_epoch,
                           batch.base_sequence, batch.is_transactional, batch.attributes & 7,
                           horizon, recs))  # fmt: skip
        pos += size
    assert pos == len(data) == records.valid_bytes(), "torn or undecodable bytes at the end"
    return out


def segment_logs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".log"))


def all_batches(directory: Path) -> list[KpBatch]:
    return [b for path in segment_logs(directory) for b in kp_batches(path.read_bytes())]


def all_records(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    return [r for b in all_batches(directory) for r in b.records]


def index_entries(path: Path) -> list[tuple[int, int]]:
    base, data = int(path.name[:20]), path.read_bytes()
    out = []
    for i in range(len(data) // 8):
        relative, position = struct.unpack_from(">ii", data, i * 8)
        if (i > 0 and relative == 0) or (relative, position) == (0, 0):
            break
        out.append((base + relative, position))
    return out


def check_segments(log: Log) -> None:
    """kafka-python decodes every segment; offsets increase; indexes follow Kafka's rule."""
    last = -1
    for segment in log.segments:
        batches = kp_batches(Path(segment.log.path).read_bytes())
        for b in batches:
            assert b.base_offset > last and b.last_offset >= b.base_offset
            assert all(o >= b.base_offset and o <= b.last_offset for o, _, _ in b.records)
            last = b.last_offset
        if segment is log.active_segment:
            continue
        expected, since = [], 0
        for b in batches:
            if since > INTERVAL:
                expected.append((b.last_offset, b.position))
                since = 0
            since += b.size
        assert index_entries(Path(segment.offset_index.file)) == expected
    assert leftovers(log.dir) == []


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir()
            if p.is_file() and p.name.endswith((".cleaned", ".swap", ".deleted"))]  # fmt: skip


def file_digest(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- the model ----------------------------------------------------------------------------------
@dataclass
class MBatch:
    base: int
    last: int
    pid: int = -1
    epoch: int = -1
    seq: int = -1
    txn: int | None = None  # the model's transaction id, for transactional data and markers
    control: str | None = None  # "COMMIT" or "ABORT"
    codec: int = 0
    records: list[tuple[int, bytes | None, bytes | None]] = field(default_factory=list)
    horizon: int | None = None

    def as_kp(self) -> tuple:
        return (self.base, self.last, self.control is not None, self.pid, self.epoch, self.seq,
                self.txn is not None, self.codec, self.horizon, tuple(self.records))  # fmt: skip


def kp_key(b: KpBatch) -> tuple:
    return (b.base_offset, b.last_offset, b.is_control, b.producer_id, b.producer_epoch,
            b.base_sequence, b.is_transactional, b.codec, b.delete_horizon, b.records)  # fmt: skip


class Model:
    """The log as batches, cleaned by Kafka's rules, knowing nothing of kafkalog's cleaner."""

    def __init__(self) -> None:
        self.batches: list[MBatch] = []
        self.leo = 0
        self.checkpoint = 0
        self.open_txn: dict[int, int] = {}  # pid -> txn id
        self.txn_first: dict[int, int] = {}  # txn id -> first offset
        self.outcome: dict[int, str] = {}  # txn id -> COMMIT / ABORT
        self.next_seq: dict[int, int] = {}
        self.last_data_offset: dict[int, int] = {}
        self._txn_ids = 0

    def data(self, records, data: bytes, *, pid=-1, txn=False) -> MBatch:
        n = len(records)
        seq = -1
        if pid >= 0:
            seq = self.next_seq.get(pid, 0)
            self.next_seq[pid] = seq + n
            self.last_data_offset[pid] = self.leo + n - 1
        txn_id = None
        if txn:
            if pid not in self.open_txn:
                self._txn_ids += 1
                self.open_txn[pid] = self._txn_ids
                self.txn_first[self._txn_ids] = self.leo
            txn_id = self.open_txn[pid]
        recs = [(self.leo + i, k, v) for i, (k, v) in enumerate(records)]
        batch = MBatch(self.leo, self.leo + n - 1, pid, 0 if pid >= 0 else -1, seq, txn_id,
                       None, data[22] & 7, recs)  # fmt: skip
        self.batches.append(batch)
        self.leo += n
        return batch

    def marker(self, pid: int, commit: bool) -> None:
        txn_id = self.open_txn.pop(pid)
        kind = "COMMIT" if commit else "ABORT"
        self.outcome[txn_id] = kind
        key, val = struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0)
        self.batches.append(MBatch(self.leo, self.leo, pid, 0, -1, txn_id, kind, 0,
                                   [(self.leo, key, val)]))  # fmt: skip
        self.leo += 1

    @property
    def lso(self) -> int:
        return min((self.txn_first[t] for t in self.open_txn.values()), default=self.leo)

    def clean(self, now: int, bases: list[int], active_base: int) -> int | None:
        """One clean; returns how many records it removes, None if nothing is cleanable."""
        uncleanable = max(self.checkpoint, min(self.lso, active_base))
        end = max(b for b in bases if b <= uncleanable)
        if end <= self.checkpoint:
            return None
        start, self.checkpoint = self.checkpoint, end
        aborted = {t for t, o in self.outcome.items() if o == "ABORT"}
        latest: dict[bytes, int] = {}
        for b in self.batches:
            if b.last >= start and b.base < end and not b.control and b.txn not in aborted:
                for o, k, _ in b.records:
                    if k is not None and o >= start:
                        latest[k] = o
        present = {b.txn for b in self.batches if b.base < end and not b.control}
        committed: set[int] = set()
        removed, kept_batches = 0, []
        for b in self.batches:
            if b.base >= end:
                kept_batches.append(b)
                continue
            if b.control:
                if not b.records:
                    can_discard = True
                elif b.control == "ABORT":
                    can_discard = b.txn not in present
                else:
                    can_discard = b.pid not in committed
                    committed.discard(b.pid)
                discard = can_discard and b.horizon is not None and b.horizon <= now
            else:
                discard = can_discard = b.txn in aborted
                if b.txn is not None and not can_discard:
                    committed.add(b.pid)
            retain_empty = (b.pid >= 0 and self.last_data_offset.get(b.pid) == b.last) or (
                b.last + 1 == self.leo
            )
            if discard and not retain_empty:
                removed += len(b.records)
                continue
            kept = [r for r in b.records if not discard and self._keep(b, r, latest, end, now)]
            removed += len(b.records) - len(kept)
            if kept:
                tombstone = any(v is None for _, _, v in kept)
                if b.horizon is None and (tombstone or (can_discard and b.control)):
                    b.horizon = now + RETENTION
                b.records = kept
            elif retain_empty:
                b.records, b.horizon, b.codec = [], None, 0
            else:
                continue
            kept_batches.append(b)
        self.batches = kept_batches
        return removed

    @staticmethod
    def _keep(b: MBatch, record, latest, end: int, now: int) -> bool:
        offset, key, val = record
        if b.control or offset > end - 1:
            return True
        if key is None or offset < latest.get(key, -1):
            return False
        return val is not None or b.horizon is None or now < b.horizon

    def expected(self) -> list[tuple]:
        return [b.as_kp() for b in self.batches]


def run_clean(log: Log, model: Model, clock: MockClock) -> None:
    """Dry run, clean, and compare both with the model."""
    now = clock.milliseconds()
    before = file_digest(log.dir)
    removed = model.clean(
        now, [s.base_offset for s in log.segments], log.active_segment.base_offset
    )
    dry = clean(log, now_ms=now, force=True, dry_run=True)
    assert file_digest(log.dir) == before, "a dry run changed files"
    result = clean(log, now_ms=now, force=True)
    assert result.cleaned == dry.cleaned == (removed is not None)
    if removed is not None:
        assert result.records_removed == dry.records_removed == removed
        assert result.stats.removed_by_reason == dry.stats.removed_by_reason
        assert result.end_offset == model.checkpoint == read_cleaner_checkpoint(log)
        assert result.bytes_written == dry.bytes_written
    assert [kp_key(b) for b in all_batches(log.dir)] == model.expected()
    check_segments(log)


# -- the model-based property -------------------------------------------------------------------
KEYS = [b"k%d" % i for i in range(5)]
records_st = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 99).map(value))),
    min_size=1,
    max_size=3,
)
codec_st = st.sampled_from([0, 1, 2, 3, 4])
data_st = st.tuples(st.just("data"), records_st, codec_st, st.sampled_from([-1, -1, 100, 101]))
end_st = st.tuples(st.just("end"), st.sampled_from(TXN_PIDS), st.booleans())
txn_st = st.tuples(st.just("txn"), records_st, codec_st, st.sampled_from(TXN_PIDS))
op_st = st.one_of(
    data_st,
    data_st,
    txn_st,
    txn_st,
    end_st,
    end_st,
    st.tuples(st.just("tick"), st.integers(0, 2 * RETENTION)),
    st.just(("clean",)),
    st.just(("roll",)),
)


def apply(log: Log, model: Model, clock: MockClock, op: tuple) -> None:
    """Run one operation on the log and the model alike."""
    kind = op[0]
    if kind in ("data", "txn"):
        _, records, codec, pid = op
        txn = kind == "txn"
        seq = model.next_seq.get(pid, 0) if pid >= 0 else -1
        data = kp_batch(records, codec=codec, pid=pid, epoch=0 if pid >= 0 else -1, seq=seq,
                        txn=txn, ts=clock.milliseconds())  # fmt: skip
        batch = model.data(records, data, pid=pid, txn=txn)
        assert log.append_as_leader(data).first_offset == batch.base
    elif kind == "end":
        if op[1] in model.open_txn:
            model.marker(op[1], op[2])
            end_txn(log, op[1], op[2])
    elif kind == "tick":
        clock.advance(op[1])
    elif kind == "roll":
        log.roll()
    else:
        log.roll()  # so that new data becomes cleanable
        run_clean(log, model, clock)


@pytest.mark.parametrize("path", ["record by record", "from columns"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_st, min_size=5, max_size=50))
def test_cleaning_matches_the_model_of_kafkas_rules(path, ops) -> None:
    """The cleaner's passes read large magic 2 batches from the fast path's columns
    (record_fields): here every batch goes one way or the other."""
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(record_fields, "MIN_RECORDS", 1 if path == "from columns" else 1 << 62)
        clock = MockClock(now_ms=T0)
        log = open_log(Path(tmp) / "topic-0", clock)
        model = Model()
        filler = ("data", [(b"k0", value(1))], 0, -1)  # new dirty data, so that cleaning runs
        ends = [("end", TXN_PIDS[0], False), ("end", TXN_PIDS[1], True)]  # nothing left unstable
        for op in [*ops, *ends, ("clean",), *[("tick", RETENTION), filler, ("clean",)] * 3]:
            apply(log, model, clock, op)
        log.close()
        for snapshot in Path(log.dir).glob("*.snapshot"):
            snapshot.unlink()  # producer state must come back from the cleaned log alone
        reopened = Log.open(log.dir, config=log.config, clock=clock, writable=True)
        for pid, next_seq in model.next_seq.items():
            entry = reopened.producer_state.last_entry(pid)
            assert entry is not None and entry.last_seq == next_seq - 1
        reopened.close()


# -- what to clean, and when --------------------------------------------------------------------
def test_cleanable_ratio_is_dirty_bytes_over_clean_plus_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(12):
        append(log, [(KEYS[i % 3], value(i))])
    log.roll()
    sizes = [s.size() for s in log.segments[:-1]]
    assert cleanable_ratio(log) == 1.0 and needs_cleaning(log)  # nothing clean yet
    result = clean(log)
    assert result.cleaned and result.end_offset == 12 == read_cleaner_checkpoint(log)
    assert cleanable_ratio(log) == 0.0 and not needs_cleaning(log)  # nothing dirty
    assert not clean(log, force=True).cleaned
    clean_bytes = sum(s.size() for s in log.segments[:-1])
    assert clean_bytes < sum(sizes)
    for i in range(3):
        append(log, [(KEYS[i], value(100 + i))])
    log.roll()
    dirty = log.segments[-2].size()
    ltc = log_to_clean(log)
    assert (ltc.first_dirty_offset, ltc.first_uncleanable_offset) == (12, 15)
    assert ltc.cleanable_ratio == dirty / (clean_bytes + dirty)
    assert needs_cleaning(log) == (ltc.cleanable_ratio > 0.5)
    log.close()
    strict = open_log(tmp_path / "t-0", min_cleanable_dirty_ratio=0.99)
    assert not needs_cleaning(strict)
    assert not clean(strict).cleaned and clean(strict, force=True).cleaned


def test_max_compaction_lag_makes_a_log_due_whatever_its_ratio(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock, min_cleanable_dirty_ratio=0.99,
                   max_compaction_lag_ms=60_000)  # fmt: skip
    append(log, [(b"a", value(1))])
    append(log, [(b"a", value(2))])
    log.roll()
    clean(log, force=True)
    append(log, [(b"b", value(3))])
    log.roll()
    assert not needs_cleaning(log)  # a small dirty part, and young
    clock.advance(60_001)
    assert log_to_clean(log).max_compaction_delay_ms == 1
    assert needs_cleaning(log) and clean(log).cleaned


def test_cleaning_stops_at_the_lso_the_active_segment_and_the_min_compaction_lag(
    tmp_path: Path,
) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock, internal_segment_bytes=200, min_compaction_lag_ms=5000)
    for i in range(4):
        append(log, [(b"a", value(i))])  # one batch a segment
    clock.advance(10_000)
    young = append(log, [(b"a", value(10))])[0]
    txn_start = append(log, [(b"a", value(11))], pid=200, epoch=0, seq=0, txn=True)[0]
    append(log, [(b"a", value(12))])
    append(log, [(b"a", value(13))])
    assert [s.base_offset for s in log.segments] == list(range(8))
    assert log_to_clean(log).first_uncleanable_offset == young  # younger than the lag
    clock.advance(10_000)
    assert log_to_clean(log).first_uncleanable_offset == txn_start  # the LSO
    end_txn(log, 200, commit=True)  # at 8, in a segment of its own
    assert log.active_segment.base_offset == 8
    assert log_to_clean(log).first_uncleanable_offset == 8  # the active segment
    result = clean(log)
    assert result.end_offset == 8
    # a@7 is the latest; the producer's batch at 5 stays, empty; the marker is not cleaned.
    assert [(b.base_offset, len(b.records)) for b in all_batches(log.dir)] == [
        (5, 0), (7, 1), (8, 1)]  # fmt: skip


def test_group_segments_by_size_follows_kafkas_limits() -> None:
    @dataclass
    class Index:
        size_in_bytes: int

    @dataclass
    class Seg:
        base_offset: int
        bytes: int
        index: int = 8
        time: int = 12

        def size(self) -> int:
            return self.bytes

        @property
        def offset_index(self) -> Index:
            return Index(self.index)

        @property
        def time_index(self) -> Index:
            return Index(self.time)

    segs = [Seg(0, 300), Seg(10, 200), Seg(20, 100), Seg(30, 700), Seg(40, 0), Seg(50, 50)]
    groups = group_segments_by_size(segs, 600, 1000, 60)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20], [30], [40, 50]]
    # Each index's bytes count apart: three offset indexes of 12 bytes exceed 30, so do three
    # time indexes of 12 bytes.
    by_offset_index = [Seg(0, 10, 12, 4), Seg(10, 10, 12, 4), Seg(20, 10, 12, 4)]
    by_time_index = [Seg(0, 10, 4, 12), Seg(10, 10, 4, 12), Seg(20, 10, 4, 12)]
    for segs in (by_offset_index, by_time_index):
        groups = group_segments_by_size(segs, 600, 30, 60)
        assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20]]
    far = [Seg(0, 10), Seg(2**31 - 5, 10), Seg(2**31 + 10, 10)]  # offsets must fit 32 bits
    groups = group_segments_by_size(far, 600, 1000, 2**31 + 20)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [2**31 - 5, 2**31 + 10]]


# -- what is kept -------------------------------------------------------------------------------
MD5_A = bytes.fromhex(  # a known MD5 collision pair (Wang et al.): equal digests, different bytes
    "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f8955ad340609f4b30283e48883"
    "2571415a085125e8f7cdc99fd91dbdf280373c5bd8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd"
    "02396306d248cda0e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70"
)
MD5_B = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f8955ad340609f4b30283e48883"
    "25f1415a085125e8f7cdc99fd91dbd7280373c5bd8823e3156348f5bae6dacd436c919c6dd53e23487da03fd"
    "02396306d248cda0e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70"
)


def test_keys_with_the_same_md5_are_one_key_as_in_kafkas_offset_map(tmp_path: Path) -> None:
    assert MD5_A != MD5_B and OffsetMap.digest(MD5_A) == OffsetMap.digest(MD5_B)
    log = open_log(tmp_path / "t-0")
    append(log, [(MD5_A, b"1")])
    append(log, [(MD5_B, b"2")])
    log.roll()
    result = clean(log)
    assert [r[0] for r in all_records(log.dir)] == [1]
    assert result.stats.removed_by_reason == {REMOVED_SUPERSEDED: 1}


def test_a_full_offset_map_ends_the_clean_early_and_the_next_one_goes_on(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", internal_segment_bytes=10_000)
    append(log, [(b"a", value(0))])
    append(log, [(b"b", value(1))])
    append(log, [(b"c", value(2))], pid=200, epoch=0, seq=0, txn=True)
    end_txn(log, 200, commit=True)  # 3: no key to put, but the map's latest offset moves on
    append(log, [(b"a", value(4))])
    follower(log, [(None, b"x")])  # 5, without a key (a follower append is not validated)
    log.roll()
    tiny = 24 * 4  # 4 slots of 24 bytes; at most int(4 * 0.9) = 3 keys are put
    first = clean(log, dedupe_buffer_size=tiny)
    assert first.end_offset == 4 == read_cleaner_checkpoint(log)  # full at a@4
    # Records past the map's latest offset stay whatever they are, even without a key.
    assert [r[0] for r in all_records(log.dir)] == [0, 1, 2, 3, 4, 5]
    second = clean(log, dedupe_buffer_size=tiny, force=True)
    assert second.end_offset == 6
    assert [r[0] for r in all_records(log.dir)] == [1, 2, 3, 4]
    assert second.stats.removed_by_reason == {REMOVED_SUPERSEDED: 1, REMOVED_NO_KEY: 1}


def test_tombstones_get_a_delete_horizon_on_first_clean_then_go(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock)
    append(log, [(b"a", value(1)), (b"b", value(2))])
    append(log, [(b"a", None)])
    log.roll()
    clean(log)
    tombstone = next(b for b in all_batches(log.dir) if b.records[0][1] == b"a")
    assert tombstone.delete_horizon == T0 + RETENTION  # attribute 0x40, baseTimestamp = horizon
    assert tombstone.records == ((2, b"a", None),)
    append(log, [(b"c", value(3))])
    log.roll()
    clock.advance(RETENTION - 1)
    clean(log, force=True)
    assert (2, b"a", None) in all_records(log.dir)  # before the horizon
    append(log, [(b"c", value(4))])
    log.roll()
    clock.advance(1)
    result = clean(log, force=True)
    assert [r[:2] for r in all_records(log.dir)] == [(1, b"b"), (4, b"c")]
    assert result.stats.removed_by_reason == {REMOVED_TOMBSTONE: 1, REMOVED_SUPERSEDED: 1}


def test_aborted_data_goes_and_markers_stay_until_their_transaction_is_gone(
    tmp_path: Path,
) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock, internal_segment_bytes=10_000)
    append(log, [(b"a", value(0))], pid=9, epoch=0, seq=0, txn=True)  # 0
    append(log, [(b"b", value(1))], pid=9, epoch=0, seq=1, txn=True)  # 1
    end_txn(log, 9, commit=False)  # 2
    append(log, [(b"a", value(3))])  # 3
    append(log, [(b"a", value(4))], pid=9, epoch=0, seq=2, txn=True)  # 4
    end_txn(log, 9, commit=True)  # 5
    append(log, [(b"c", value(6))])  # 6
    log.roll()
    result = clean(log)
    assert [(b.base_offset, b.is_control) for b in all_batches(log.dir)] == [
        (2, True), (4, False), (5, True), (6, False)]  # fmt: skip
    assert result.stats.removed_by_reason == {REMOVED_ABORTED: 2, REMOVED_SUPERSEDED: 1}
    # The records looked at count the aborted batch dropped whole too (kafkalog compact's
    # "N of M records removed" once had M < N).
    stats = result.stats
    assert stats.batch_records_removed == 2
    assert stats.records_removed <= stats.messages_read + stats.batch_records_removed
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for s in log.segments for t in s.txn_index] == [(9, 0, 2)]  # fmt: skip
    assert all(b.delete_horizon is None for b in all_batches(log.dir))
    for step in range(2):  # no data left: the ABORT marker gets a horizon, then goes
        append(log, [(b"d", value(7 + step))])
        log.roll()
        clean(log, force=True)
        markers = {b.base_offset: b.delete_horizon for b in all_batches(log.dir) if b.is_control}
        assert markers == (
            {2: clock.milliseconds() + RETENTION, 5: None} if step == 0 else {5: None}
        )
        assert [t for s in log.segments for t in s.txn_index] == []
        clock.advance(RETENTION)
    # The producer's last batch stays (empty once superseded), and so does its COMMIT marker.
    append(log, [(b"a", value(20))])
    log.roll()
    clean(log, force=True)
    batches = {b.base_offset: b for b in all_batches(log.dir)}
    assert batches[4].records == () and batches[4].is_transactional and 5 in batches


def test_a_producers_last_batch_is_kept_empty_so_its_sequence_survives(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock)
    append(log, [(b"a", value(0)), (b"b", value(1))], pid=7, epoch=0, seq=0)
    append(log, [(b"a", value(2)), (b"b", value(3))])
    log.roll()
    clean(log)
    empty = all_batches(log.dir)[0]
    assert (empty.base_offset, empty.last_offset, empty.records) == (0, 1, ())
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (7, 0, 0)
    log.close()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    log = Log.open(log.dir, config=log.config, clock=clock, writable=True)
    assert log.producer_state.last_entry(7).last_seq == 1
    retry = kp_batch([(b"a", value(0)), (b"b", value(1))], pid=7, epoch=0, seq=0)
    assert log.append_as_leader(retry).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(kp_batch([(b"x", b"x")], pid=7, epoch=0, seq=5))
    assert append(log, [(b"x", b"x")], pid=7, epoch=0, seq=2) == (4, 4)


def test_the_last_batch_before_the_high_watermark_is_kept_empty(tmp_path: Path) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock)
    append(log, [(b"a", value(0))])
    append(log, [(b"b", None)])
    log.roll()  # the active segment stays empty: offset 1 is the last before the high watermark
    clean(log)
    (tmp_path / "cleaner-offset-checkpoint").unlink()  # lost: the next clean starts over
    clock.advance(RETENTION)
    result = clean(log, force=True)
    assert result.stats.removed_by_reason == {REMOVED_TOMBSTONE: 1}
    assert [(b.base_offset, b.last_offset, b.records) for b in all_batches(log.dir)] == [
        (0, 0, ((0, b"a", value(0)),)), (1, 1, ())]  # fmt: skip
    log.close()
    assert Log.open(log.dir, config=log.config, clock=clock).log_end_offset == 2


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_rebuilt_batches_keep_codec_producer_fields_and_last_offset(
    tmp_path: Path, codec: int
) -> None:
    log = open_log(tmp_path / "t-0")
    records = [(b"a", value(0)), (b"b", value(1)), (b"c", value(2))]
    append(log, records, codec=codec, pid=7, epoch=3, seq=10)
    append(log, [(b"c", value(3))], codec=codec, pid=7, epoch=3, seq=13)
    log.roll()
    clean(log)
    rebuilt, last = all_batches(log.dir)
    assert (rebuilt.base_offset, rebuilt.last_offset) == (0, 2)  # the tail went, not lastOffset
    assert rebuilt.records == ((0, b"a", value(0)), (1, b"b", value(1)))
    assert (rebuilt.codec, rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (
        codec, 7, 3, 10)  # fmt: skip
    assert last.records == ((3, b"c", value(3)),)
    assert log.producer_state.last_entry(7).last_seq == 13


def legacy(base: int, records, *, codec: int = 0, ts: int = T0) -> bytes:
    builder = MemoryRecordsBuilder(magic=1, compression=codec, base_offset=base)
    for key, val in records:
        builder.append(timestamp=ts, key=key, value=val)
    return builder.build()


def test_legacy_entries_become_v2_and_legacy_tombstones_follow_segment_mtimes(
    tmp_path: Path,
) -> None:
    clock = MockClock(now_ms=T0)
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_follower(legacy(0, [(b"a", b"1"), (b"b", b"1"), (b"c", None)]))
    log.append_as_follower(legacy(3, [(b"a", b"2"), (b"d", b"1"), (b"e", b"1")], codec=1))
    log.roll()
    clean(log)
    batches = all_batches(log.dir)  # kafka-python asserts magic 2 for every batch
    assert [(b.base_offset, b.last_offset, b.codec, b.producer_id) for b in batches] == [
        (1, 1, 0, -1), (2, 2, 0, -1), (3, 5, 1, -1)]  # fmt: skip
    # The first clean has no clean segment to date legacy tombstones by: c stays, and as a v2
    # batch it gets a delete horizon like any other tombstone.
    assert batches[1].records == ((2, b"c", None),) and batches[1].delete_horizon == T0 + RETENTION
    log.append_as_follower(legacy(6, [(b"f", None), (b"g", b"1")]))
    log.roll()
    clean_mtime = os.stat(log.segments[-3].log.path).st_mtime_ns // 1_000_000
    old = (clean_mtime - RETENTION - 1) * 1_000_000
    os.utime(log.segments[-2].log.path, ns=(old, old))  # older than the clean part's horizon
    result = clean(log, force=True)
    assert result.stats.removed_by_reason == {REMOVED_TOMBSTONE: 1}
    assert [r[:2] for r in all_records(log.dir)][-1:] == [(7, b"g")]


def test_records_without_keys_are_removed_as_invalid(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    follower(log, [(None, b"x"), (b"a", b"y")])  # a follower skips the key check
    log.roll()
    result = clean(log)
    assert result.stats.invalid_messages_read == 1
    assert result.stats.removed_by_reason == {REMOVED_NO_KEY: 1}
    assert all_records(log.dir) == [(1, b"a", b"y")]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_large_batches_are_cleaned_from_columns_without_a_record_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: int
) -> None:
    """Batches of 20 records: the first wholly superseded (dropped), the second kept as it is.
    Neither pass decodes them record by record (which made a million records take seconds)."""
    log = open_log(tmp_path / "t-0", internal_segment_bytes=1 << 20)
    first = [(b"key-%d" % i, b"old-%d" % i) for i in range(20)]
    second = [(b"key-%d" % i, b"new-%d" % i) for i in range(20)]
    append(log, first, codec=codec)
    append(log, second, codec=codec)
    log.roll()

    def refuse(self):
        raise AssertionError("decoded record by record")

    monkeypatch.setattr(RecordBatch, "records", refuse)
    result = clean(log, force=True)
    monkeypatch.undo()
    assert result.stats.removed_by_reason == {REMOVED_SUPERSEDED: 20}
    assert all_records(log.dir) == [(20 + i, k, v) for i, (k, v) in enumerate(second)]


# -- checkpoints, dry runs, refusals ------------------------------------------------------------
def test_the_checkpoint_keeps_other_partitions_and_resets_when_outside_the_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text("0\n2\nother 3 42\nt 0 999\n")  # 999: beyond the log end (a lost tail)
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1")])
    append(log, [(b"a", b"2")])
    log.roll()
    ltc = log_to_clean(log)
    assert ltc.force_update_checkpoint and ltc.first_dirty_offset == 0
    clean(log)
    assert path.read_text() == "0\n2\nother 3 42\nt 0 2\n"
    assert not (tmp_path / "cleaner-offset-checkpoint.tmp").exists()


def test_a_dry_run_reports_and_changes_nothing_even_read_only(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(6):
        append(log, [(KEYS[i % 2], value(i))])
    log.roll()
    log.close()
    before = file_digest(tmp_path)
    read_only = Log.open(tmp_path / "t-0", config=log.config, clock=MockClock(now_ms=T0))
    dry = clean(read_only, dry_run=True)
    assert dry.cleaned and dry.dry_run and dry.records_removed == 4 and dry.records_kept == 2
    assert dry.messages[0] == "offset 0 (key b'k0'): superseded by offset 4"
    with pytest.raises(PermissionError):
        clean(read_only)
    assert file_digest(tmp_path) == before


def test_only_compacted_logs_are_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", cleanup_policy="delete")
    assert not needs_cleaning(log)
    with pytest.raises(ValueError, match="not compacted"):
        clean(log, force=True)


# -- crashes ------------------------------------------------------------------------------------
class Crash(BaseException):
    """A kill: no except clause of the cleaner's sees it."""


def crash_at(monkeypatch, step: int) -> list[str]:
    """Raise Crash before the ``step``-th rename or delete of a segment's files."""
    calls: list[str] = []
    for name in ("change_file_suffixes", "delete_if_exists"):
        original = getattr(LogSegment, name)

        def hook(self, *args, _original=original, _name=name):
            if len(calls) == step:
                raise Crash(f"{_name}{args}")
            calls.append(f"{_name}{args}")
            return _original(self, *args)

        monkeypatch.setattr(LogSegment, name, hook)
    return calls


def crash_scenario(directory: Path, clock: MockClock) -> tuple[Log, Model]:
    """Segments of about one segment.bytes each (so every group is one segment), with
    overwrites, a tombstone, an aborted and a committed transaction, an idempotent producer."""
    log, model = open_log(directory, clock), Model()
    ops = [("data", [(KEYS[i % 4], value(i))], i % 2, -1) for i in range(6)]
    ops += [
        ("txn", [(b"k1", value(50))], 0, 200),
        ("data", [(b"k2", None)], 0, 100),
        ("end", 200, False),
        ("txn", [(b"k3", value(51))], 1, 201),
        ("end", 201, True),
    ]
    ops += [("data", [(KEYS[i % 4], value(60 + i))], 0, 100) for i in range(4)]
    for op in [*ops, ("roll",)]:
        apply(log, model, clock, op)
    return log, model


def split_state(after, before, boundary: int) -> list:
    return [r for r in after if r[0] < boundary] + [r for r in before if r[0] >= boundary]


def test_a_crash_at_each_step_of_the_swap_is_finished_or_undone_by_the_loader(
    tmp_path: Path, monkeypatch
) -> None:
    clock = MockClock(now_ms=T0)
    pristine, model = crash_scenario(tmp_path / "pristine" / "t-0", clock)
    before = [r for b in model.batches for r in b.records]
    dry = clean(pristine, now_ms=T0, dry_run=True)
    model.clean(T0, [s.base_offset for s in pristine.segments], pristine.active_segment.base_offset)
    after = [r for b in model.batches for r in b.records]
    pristine.close()
    bases = dry.segments_before
    assert len(bases) >= 3 and dry.segments_after == bases  # one segment a group: 4 steps each
    steps = 4 * len(bases)
    for step in range(steps + 1):
        work = tmp_path / f"crash-{step}"
        shutil.copytree(tmp_path / "pristine", work)
        log = Log.open(work / "t-0", config=pristine.config, clock=clock, writable=True)
        calls = crash_at(monkeypatch, step)
        if step < steps:
            with pytest.raises(Crash):
                clean(log, now_ms=T0)
        else:
            clean(log, now_ms=T0)
            assert len(calls) == steps
        monkeypatch.undo()
        # Crash before a group's first rename: undone; after it: finished.
        group, phase = divmod(step, 4)
        done = group + (phase > 0)
        boundary = bases[done] if done < len(bases) else model.leo
        reopened = Log.open(work / "t-0", config=pristine.config, clock=clock, writable=True)
        assert all_records(reopened.dir) == split_state(after, before, boundary), calls
        check_segments(reopened)
        # A clean after the restart ends where an uninterrupted one does (data records).
        clean(reopened, now_ms=T0, force=True)
        data = [r for b in all_batches(reopened.dir) if not b.is_control for r in b.records]
        assert data == [r for b in model.batches if not b.control for r in b.records]
        reopened.close()


def test_a_crash_while_merging_segments_leaves_a_consistent_log(
    tmp_path: Path, monkeypatch
) -> None:
    clock = MockClock(now_ms=T0)
    pristine, model = crash_scenario(tmp_path / "pristine" / "t-0", clock)
    for op in [("clean",), *[("data", [(b"k%d" % (5 + i), value(i))], 0, -1) for i in range(6)]]:
        apply(pristine, model, clock, op)  # the first clean leaves small segments to merge
    pristine.roll()
    before = [r for b in model.batches for r in b.records]
    dry = clean(pristine, now_ms=T0, force=True, dry_run=True)
    assert len(dry.segments_after) < len(dry.segments_before)  # some groups merge segments
    model.clean(T0, [s.base_offset for s in pristine.segments], pristine.active_segment.base_offset)
    after = [r for b in model.batches for r in b.records]
    pristine.close()
    states = [split_state(after, before, b) for b in [*dry.segments_before, model.leo]]
    step = 0
    while True:
        work = tmp_path / f"crash-{step}"
        shutil.copytree(tmp_path / "pristine", work)
        log = Log.open(work / "t-0", config=pristine.config, clock=clock, writable=True)
        crash_at(monkeypatch, step)
        try:
            clean(log, now_ms=T0, force=True)
            finished = True
        except Crash:
            finished = False
        monkeypatch.undo()
        reopened = Log.open(work / "t-0", config=pristine.config, clock=clock, writable=True)
        assert all_records(reopened.dir) in states
        check_segments(reopened)
        reopened.close()
        if finished:
            assert all_records(reopened.dir) == after
            break
        step += 1


def test_a_crash_while_writing_a_cleaned_segment_is_undone(tmp_path: Path, monkeypatch) -> None:
    clock = MockClock(now_ms=T0)
    log, model = crash_scenario(tmp_path / "t-0", clock)
    before = all_records(log.dir)
    model.clean(T0, [s.base_offset for s in log.segments], log.active_segment.base_offset)
    after = [r for b in model.batches for r in b.records]
    original, crashed_in = LogSegment.append, []

    def append_then_crash(self, largest_offset, records):
        original(self, largest_offset, records)
        if self.log.path.endswith(".cleaned"):
            crashed_in.append(self.base_offset)
            raise Crash("while writing")

    monkeypatch.setattr(LogSegment, "append", append_then_crash)
    with pytest.raises(Crash):
        clean(log, now_ms=T0)
    monkeypatch.undo()
    assert any(p.name.endswith(".log.cleaned") for p in log.dir.iterdir())
    reopened = Log.open(log.dir, config=log.config, clock=clock, writable=True)
    assert leftovers(reopened.dir) == []
    # Groups before the one being written were swapped in; that one is undone.
    assert all_records(reopened.dir) == split_state(after, before, crashed_in[0])
    assert any("unfinished log clean" in note for note in reopened.load_notes)
