"""Offset, time and transaction indexes: Kafka's append, lookup, truncate, trim and sanity rules.

Lookups are checked against a linear scan over a sorted-list model (hypothesis), large enough to
cross the 8 KiB warm section. Real broker ``.index``/``.timeindex`` files under
../shared/fixtures/kafka-data open read-only and must show what EXPECTED.json says of them
(expected values come only from EXPECTED.json), with their bytes unchanged.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptIndexError
from kafkalog.log.datadir.naming import offset_from_file_name
from kafkalog.log.errors import IndexOffsetOverflowError, InvalidOffsetError
from kafkalog.log.segment.offset_index import OffsetIndex, OffsetPosition
from kafkalog.log.segment.time_index import TimeIndex, TimestampOffset
from kafkalog.log.segment.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from shared_fixtures import EXPECTED, KAFKA_DATA, requires_shared_fixtures

INT_MAX = 2**31 - 1
BASE = 1000
HYPOTHESIS = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    max_examples=40,
    deadline=None,
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def offset_index(
    tmp_path: Path, entries=(), *, base=BASE, size=4096, name="0.index"
) -> OffsetIndex:
    index = OffsetIndex(tmp_path / name, base, writable=True, max_index_size=size)
    for offset, position in entries:
        index.append(offset, position)
    return index


def time_index(
    tmp_path: Path, entries=(), *, base=BASE, size=4096, name="0.timeindex"
) -> TimeIndex:
    index = TimeIndex(tmp_path / name, base, writable=True, max_index_size=size)
    for timestamp, offset in entries:
        index.maybe_append(timestamp, offset)
    return index


# -- offset index: files ----------------------------------------------------------------------


def test_a_new_writable_index_is_preallocated_to_max_size_rounded_to_entries(tmp_path):
    index = offset_index(tmp_path, size=100)
    assert (tmp_path / "0.index").stat().st_size == 96
    assert (index.length, index.max_entries, index.entries) == (96, 12, 0)
    assert not index.is_full()


def test_max_index_size_below_one_entry_is_refused_and_creates_nothing(tmp_path):
    with pytest.raises(ValueError, match="Invalid max index size"):
        OffsetIndex(tmp_path / "0.index", 0, writable=True, max_index_size=7)
    assert not (tmp_path / "0.index").exists()


def test_entries_are_big_endian_relative_offset_then_position(tmp_path):
    index = offset_index(tmp_path, [(1005, 0), (1010, 4096)])
    index.close()
    assert (tmp_path / "0.index").read_bytes() == struct.pack(">iiii", 5, 0, 10, 4096)


def test_close_trims_and_reopening_counts_entries_from_the_length(tmp_path):
    index = offset_index(tmp_path, [(1001, 10), (1002, 20), (1003, 30)])
    index.close()
    index.close()  # twice is harmless
    assert (tmp_path / "0.index").stat().st_size == 24
    reopened = OffsetIndex(tmp_path / "0.index", BASE, writable=True)
    assert reopened.entries == 3 and reopened.is_full()
    assert reopened.last_offset == 1003
    assert reopened.resize(4096) and reopened.max_entries == 512
    reopened.append(1004, 40)
    assert list(reopened)[-1] == OffsetPosition(offset=1004, position=40)


def test_resize_below_the_entries_is_refused(tmp_path):
    index = offset_index(tmp_path, [(1001, 1), (1002, 2)])
    with pytest.raises(ValueError, match="entries use 16"):
        index.resize(8)
    assert index.resize(17) and index.length == 16  # rounded down to whole entries
    assert not index.resize(16)


def test_reset_empties_and_grows_back_to_max_size(tmp_path):
    index = offset_index(tmp_path, [(1001, 1)], size=80)
    index.trim_to_valid_size()
    assert index.length == 8
    index.reset()
    assert (index.entries, index.length, index.last_offset) == (0, 80, BASE)


def test_delete_and_rename(tmp_path):
    index = offset_index(tmp_path, [(1001, 1)])
    index.rename_to(tmp_path / "0.index.deleted")
    assert index.file == tmp_path / "0.index.deleted" and index.file.exists()
    assert index.entry(0) == OffsetPosition(offset=1001, position=1)  # map still valid
    assert index.delete_if_exists()
    assert not index.delete_if_exists()
    assert list(tmp_path.iterdir()) == []


# -- offset index: appends --------------------------------------------------------------------


def test_append_requires_increasing_offsets(tmp_path):
    index = offset_index(tmp_path, [(1005, 0)])
    for offset in (1005, 1004):
        with pytest.raises(InvalidOffsetError, match="no larger than the last offset") as info:
            index.append(offset, 10)
        assert info.value.path == str(tmp_path / "0.index")
    assert index.entries == 1


@pytest.mark.parametrize("offset", [BASE - 1, BASE + INT_MAX + 1])
def test_append_requires_offsets_within_int_of_the_base(tmp_path, offset):
    index = offset_index(tmp_path)
    assert not index.can_append_offset(offset)
    with pytest.raises(IndexOffsetOverflowError, match="Integer overflow"):
        index.append(offset, 0)
    assert index.can_append_offset(BASE + INT_MAX)


def test_append_to_a_full_index_is_refused(tmp_path):
    index = offset_index(tmp_path, [(1001, 0), (1002, 1)], size=16)
    assert index.is_full()
    with pytest.raises(ValueError, match="full index"):
        index.append(1003, 2)


def test_append_refuses_positions_outside_int(tmp_path):
    with pytest.raises(ValueError, match="position"):
        offset_index(tmp_path).append(1001, -1)


# -- offset index: lookups and truncation -----------------------------------------------------


def test_lookup_finds_the_largest_entry_at_or_below_the_target(tmp_path):
    index = offset_index(tmp_path, [(1010, 100), (1020, 200), (1030, 300)])
    assert index.lookup(1020) == OffsetPosition(offset=1020, position=200)
    assert index.lookup(1029) == OffsetPosition(offset=1020, position=200)
    assert index.lookup(10**12) == OffsetPosition(offset=1030, position=300)
    assert index.lookup(1009) == OffsetPosition(offset=BASE, position=0)  # below the first
    assert index.entry(1) == OffsetPosition(offset=1020, position=200)
    assert index.last_entry == OffsetPosition(offset=1030, position=300)
    with pytest.raises(IndexError):
        index.entry(3)


def test_an_empty_index_looks_up_the_base_offset_at_position_0(tmp_path):
    index = offset_index(tmp_path)
    assert index.lookup(5000) == OffsetPosition(offset=BASE, position=0)
    assert index.last_entry == OffsetPosition(offset=BASE, position=0)
    assert index.fetch_upper_bound_offset(OffsetPosition(offset=BASE, position=0), 10) is None


def test_fetch_upper_bound_is_an_entry_past_the_fetched_bytes(tmp_path):
    index = offset_index(tmp_path, [(1010, 100), (1020, 200), (1030, 300)])
    start = OffsetPosition(offset=BASE, position=0)
    assert index.fetch_upper_bound_offset(start, 150) == OffsetPosition(offset=1020, position=200)
    assert index.fetch_upper_bound_offset(start, 200) == OffsetPosition(offset=1020, position=200)
    assert index.fetch_upper_bound_offset(start, 50) == OffsetPosition(offset=1010, position=100)
    assert index.fetch_upper_bound_offset(start, 301) is None


@pytest.mark.parametrize(
    ("truncate_to", "remaining"),
    [(1020, 1), (1021, 2), (1005, 0), (1010, 0), (2000, 3), (1030, 2)],
)
def test_truncate_to_removes_entries_at_or_above_the_offset(tmp_path, truncate_to, remaining):
    index = offset_index(tmp_path, [(1010, 100), (1020, 200), (1030, 300)])
    index.truncate_to(truncate_to)
    assert index.entries == remaining
    assert index.last_offset == ([BASE, 1010, 1020, 1030][remaining])
    index.append(1040, 400)  # appends continue after the new last entry
    assert index.entry(remaining).offset == 1040


sorted_offsets = st.lists(st.integers(0, INT_MAX), unique=True, max_size=60).map(sorted)


def linear_lookup(keys: list[int], target: int) -> int | None:
    """Index of the largest key <= target, by scanning."""
    found = None
    for i, key in enumerate(keys):
        if key <= target:
            found = i
    return found


def big_sorted(seed: int, size: int, max_gap: int = 50) -> list[int]:
    rng = random.Random(seed)
    values, value = [], rng.randrange(max_gap)
    for _ in range(size):
        values.append(value)
        value += 1 + rng.randrange(max_gap)
    return values


def check_offset_lookups(index: OffsetIndex, relatives: list[int], targets: list[int]) -> None:
    for target in targets:
        slot = linear_lookup([BASE + r for r in relatives], target)
        expected = (
            OffsetPosition(offset=BASE, position=0)
            if slot is None
            else OffsetPosition(offset=BASE + relatives[slot], position=slot * 10)
        )
        assert index.lookup(target) == expected, target


@given(relatives=sorted_offsets, targets=st.lists(st.integers(-5, INT_MAX + 5), max_size=20))
@HYPOTHESIS
def test_offset_lookup_agrees_with_a_linear_scan(tmp_path, relatives, targets):
    index = offset_index(tmp_path, [(BASE + r, i * 10) for i, r in enumerate(relatives)], size=800)
    extra = [BASE + r + d for r in relatives[:5] for d in (-1, 0, 1)]
    check_offset_lookups(index, relatives, [BASE + t for t in targets] + extra)
    index.delete_if_exists()


@given(
    seed=st.integers(0, 2**32), size=st.integers(1000, 3000), picks=st.lists(st.integers(0, 10**6))
)
@HYPOTHESIS
def test_offset_lookup_agrees_with_a_linear_scan_across_the_warm_section(
    tmp_path, seed, size, picks
):
    relatives = big_sorted(seed, size)  # more than the 1024-entry warm section
    index = offset_index(
        tmp_path, [(BASE + r, i * 10) for i, r in enumerate(relatives)], size=size * 8
    )
    targets = [BASE + relatives[p % size] + (p % 3) - 1 for p in picks]
    targets += [BASE - 1, BASE + relatives[0], BASE + relatives[-1] + 7]
    targets += [BASE + relatives[size - 1025], BASE + relatives[size - 1026] + 1]
    check_offset_lookups(index, relatives, targets)
    start = OffsetPosition(offset=BASE, position=0)
    for p in [*picks[:5], 0, (size - 1) * 10, size * 10]:
        upper = index.fetch_upper_bound_offset(start, p)
        if upper is not None:
            assert upper.position >= p
        if p < (size - 1) * 10:
            assert upper is not None
    index.delete_if_exists()


@given(relatives=sorted_offsets, truncate_at=st.integers(-1, INT_MAX))
@HYPOTHESIS
def test_offset_truncate_to_agrees_with_the_model(tmp_path, relatives, truncate_at):
    index = offset_index(tmp_path, [(BASE + r, 0) for r in relatives], size=800)
    index.truncate_to(BASE + truncate_at)
    assert [e.offset - BASE for e in index] == [r for r in relatives if r < truncate_at]
    index.delete_if_exists()


# -- offset index: sanity ---------------------------------------------------------------------


def test_sanity_check_flags_a_last_offset_below_the_base(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(struct.pack(">iiii", 1, 0, -5, 10))
    index = OffsetIndex(path, BASE)
    with pytest.raises(CorruptIndexError, match=r"\(entry 1\).*last offset is 995") as info:
        index.sanity_check()
    assert info.value.path == str(path)


def test_sanity_check_flags_a_length_not_a_multiple_of_8(tmp_path):
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\0\0\0")
    index = OffsetIndex(path, BASE)
    assert index.entries == 1
    with pytest.raises(CorruptIndexError, match="found 11 bytes, which is not a multiple of 8"):
        index.sanity_check()


# -- kafkalog's checks on the entries (indexes are hints) --------------------------------------
@pytest.mark.parametrize(
    ("entries", "log_size", "end", "problem"),
    [
        ([(1, 100), (5, 300), (9, 700)], 800, 1010, None),
        ([], 0, None, None),
        ([(9, 0), (5, 0), (1, 0)], 800, None, r"\(entry 1\).*offsets do not increase"),
        ([(1, 100), (1, 300)], 800, None, r"\(entry 1\).*offsets do not increase"),
        ([(1, 300), (5, 100)], 800, None, r"\(entry 1\).*positions do not increase"),
        ([(1, -70), (3, 10)], 800, None, r"\(entry 0\).*negative position"),
        ([(1, 100), (2, 900)], 800, None, r"\(entry 1\).*position 900 is outside the log"),
        ([(-3, 100)], 800, None, r"\(entry 0\).*below the base offset"),
        ([(1, 100), (10, 200)], 800, 1010, r"\(entry 1\).*offset 1010 is not below"),
    ],
)
def test_offset_index_entries_must_increase_inside_the_log(
    tmp_path, entries, log_size, end, problem
):
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in entries))
    index = OffsetIndex(path, BASE)
    if "below the base" not in (problem or ""):
        index.sanity_check()  # Kafka's own checks pass the others
    if problem is None:
        index.check_entries(log_size, end)
    else:
        with pytest.raises(CorruptIndexError, match=problem) as info:
            index.check_entries(log_size, end)
        assert info.value.path == str(path)


@pytest.mark.parametrize(
    ("entries", "end", "problem"),
    [
        ([(10, 1), (10, 2), (30, 5)], 1010, None),
        ([(9000, 9), (100, 1), (95, 0)], None, r"\(entry 1\).*timestamps decrease"),
        ([(10, 5), (20, 3)], None, r"\(entry 1\).*offsets decrease"),
        ([(10, -1)], None, r"\(entry 0\).*below the base offset"),
        ([(10, 1), (20, 10)], 1010, r"\(entry 1\).*offset 1010 is not below"),
    ],
)
def test_time_index_entries_must_not_decrease(tmp_path, entries, end, problem):
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", t, r) for t, r in entries))
    index = TimeIndex(path, BASE)
    if problem is None:
        index.check_entries(end)
    else:
        with pytest.raises(CorruptIndexError, match=problem):
            index.check_entries(end)


# -- read-only --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_read_only_opening_never_creates_a_file(tmp_path, cls):
    with pytest.raises(FileNotFoundError):
        cls(tmp_path / "missing", 0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_read_only_empty_files_have_no_entries(tmp_path, cls):
    path = tmp_path / "empty"
    path.touch()
    with cls(path, BASE) as index:
        assert index.entries == 0 and index.max_entries == 0
        index.sanity_check()
        assert list(index) == []
        assert index.count_valid_entries() == 0
    assert path.stat().st_size == 0


def test_read_only_indexes_refuse_every_change_and_keep_the_bytes(tmp_path):
    path = tmp_path / "0.index"
    writer = offset_index(tmp_path, [(1001, 1), (1002, 2)], size=4096)
    writer.close_handler()  # "crash": the preallocated tail is never trimmed
    before, mtime = sha256(path), path.stat().st_mtime_ns
    index = OffsetIndex(path, BASE)
    for change in (
        lambda: index.append(1003, 3),
        lambda: index.truncate_to(1001),
        lambda: index.truncate(),
        lambda: index.resize(16),
        lambda: index.trim_to_valid_size(),
        lambda: index.reset(),
        lambda: index.delete_if_exists(),
        lambda: index.rename_to(tmp_path / "moved"),
    ):
        with pytest.raises(PermissionError, match="read-only"):
            change()
    index.flush()
    index.close()
    assert sha256(path) == before and path.stat().st_mtime_ns == mtime
    assert path.stat().st_size == 4096


def test_an_untrimmed_index_counts_slots_like_kafka_unless_the_zero_tail_is_skipped(tmp_path):
    path = tmp_path / "0.index"
    writer = offset_index(tmp_path, [(BASE, 0), (1001, 10), (1002, 20)], size=80)
    writer.close_handler()
    as_kafka = OffsetIndex(path, BASE)
    assert as_kafka.entries == 10 and as_kafka.last_offset == BASE  # zero slots = (base, 0)
    assert as_kafka.count_valid_entries() == 3
    index = OffsetIndex(path, BASE, skip_zero_tail=True)
    assert index.entries == 3
    assert index.last_entry == OffsetPosition(offset=1002, position=20)
    assert index.lookup(10**9) == OffsetPosition(offset=1002, position=20)


@given(count=st.integers(0, 20_000), slots=st.integers(0, 3000))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_zero_tail_starts_at_the_first_zero_relative_offset_after_slot_0(
    tmp_path, count, slots
):
    path = tmp_path / "0.timeindex"
    entries = b"".join(struct.pack(">qi", 10 + i, i) for i in range(count))  # slot 0 is offset 0
    path.write_bytes(entries + bytes(12 * slots))
    with TimeIndex(path, 0, skip_zero_tail=True) as index:
        assert index.entries == count + (1 if count == 0 and slots else 0)


def test_a_preallocated_index_is_read_up_to_its_zero_tail_across_growing_reads(tmp_path):
    """A live broker's active index: entries, then preallocated zeros to 10 MB. The read-only
    copy stops past the first piece holding the zero tail; the entries are those a whole copy
    gives, the last ones beyond the first reads included."""
    path = tmp_path / "0.timeindex"
    count = 120_000  # 1.44 MB of entries: the 64 KB, 256 KB and 1 MB pieces are all full
    entries = b"".join(struct.pack(">qi", 1_000 + i, i) for i in range(count))
    path.write_bytes(entries + bytes(10 * 1024 * 1024 - len(entries)))
    with TimeIndex(path, 0, skip_zero_tail=True) as index:
        assert index.entries == count
        assert index.last_entry == TimestampOffset(timestamp=1_000 + count - 1, offset=count - 1)
        assert index.lookup(1_000 + 99_999) == TimestampOffset(
            timestamp=1_000 + 99_999, offset=99_999
        )
    path.write_bytes(entries)  # trimmed: no zero tail, read whole
    with TimeIndex(path, 0, skip_zero_tail=True) as index:
        assert index.entries == count


# -- time index -------------------------------------------------------------------------------


def test_time_index_entries_are_timestamp_then_relative_offset(tmp_path):
    index = time_index(tmp_path, [(1_700_000_000_000, 1005)])
    index.close()
    assert (tmp_path / "0.timeindex").read_bytes() == struct.pack(">qi", 1_700_000_000_000, 5)


def test_time_index_appends_only_larger_timestamps(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(-1, 1001)  # NO_TIMESTAMP (magic 0): nothing to index
    assert index.entries == 0
    index.maybe_append(100, 1001)
    index.maybe_append(100, 1001)  # the same entry again (roll, close): ignored
    index.maybe_append(100, 1005)  # same timestamp, later offset: ignored
    assert index.entries == 1
    index.maybe_append(200, 1005)
    assert list(index) == [
        TimestampOffset(timestamp=100, offset=1001),
        TimestampOffset(timestamp=200, offset=1005),
    ]
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        index.maybe_append(300, 1004)
    with pytest.raises(ValueError, match="no larger than the last timestamp"):
        index.maybe_append(199, 1006)


def test_time_index_is_full_one_entry_early_keeping_a_slot_for_the_roll(tmp_path):
    index = time_index(tmp_path, [(1, 1001), (2, 1002)], size=36)
    assert index.max_entries == 3 and index.is_full()
    with pytest.raises(ValueError, match="full time index"):
        index.maybe_append(3, 1003)
    index.maybe_append(3, 1003, skip_full_check=True)
    assert index.entries == 3


def test_time_index_lookup(tmp_path):
    index = time_index(tmp_path, [(100, 1001), (200, 1005), (300, 1009)])
    assert index.lookup(250) == TimestampOffset(timestamp=200, offset=1005)
    assert index.lookup(300) == TimestampOffset(timestamp=300, offset=1009)
    assert index.lookup(99) == TimestampOffset(timestamp=-1, offset=BASE)
    assert time_index(tmp_path, name="e").lookup(5) == TimestampOffset(timestamp=-1, offset=BASE)
    assert time_index(tmp_path, name="f").last_entry == TimestampOffset(timestamp=-1, offset=BASE)


@pytest.mark.parametrize(("truncate_to", "remaining"), [(1005, 1), (1006, 2), (1000, 0), (5000, 3)])
def test_time_index_truncate_to_uses_offsets(tmp_path, truncate_to, remaining):
    index = time_index(tmp_path, [(100, 1001), (200, 1005), (300, 1009)])
    index.truncate_to(truncate_to)
    assert index.entries == remaining
    expected_last = [(-1, BASE), (100, 1001), (200, 1005), (300, 1009)][remaining]
    assert index.last_entry == TimestampOffset(timestamp=expected_last[0], offset=expected_last[1])


@given(
    timestamps=st.lists(st.integers(0, 2**62), unique=True, max_size=60).map(sorted),
    targets=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
)
@HYPOTHESIS
def test_time_lookup_agrees_with_a_linear_scan(tmp_path, timestamps, targets):
    index = time_index(tmp_path, [(t, BASE + i) for i, t in enumerate(timestamps)], size=1200)
    for target in targets + [t + d for t in timestamps[:5] for d in (-1, 0, 1)]:
        slot = linear_lookup(timestamps, target)
        expected = (
            TimestampOffset(timestamp=-1, offset=BASE)
            if slot is None
            else TimestampOffset(timestamp=timestamps[slot], offset=BASE + slot)
        )
        assert index.lookup(target) == expected
    index.delete_if_exists()


@given(
    seed=st.integers(0, 2**32), size=st.integers(700, 2000), picks=st.lists(st.integers(0, 10**6))
)
@HYPOTHESIS
def test_time_lookup_agrees_with_a_linear_scan_across_the_warm_section(tmp_path, seed, size, picks):
    timestamps = big_sorted(seed, size)  # more than the 682-entry warm section
    index = time_index(
        tmp_path, [(t, BASE + i) for i, t in enumerate(timestamps)], size=size * 12 + 12
    )
    for target in [timestamps[p % size] + (p % 3) - 1 for p in picks] + [
        -5,
        timestamps[-1] + 1,
        timestamps[size - 683],
    ]:
        slot = linear_lookup(timestamps, target)
        assert index.lookup(target).offset == (BASE if slot is None else BASE + slot)
    index.delete_if_exists()


def test_time_index_sanity_check(tmp_path):
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 200, 1, 100, 2))
    with pytest.raises(
        CorruptIndexError, match="last timestamp is 100, which is less than the first"
    ):
        TimeIndex(path, BASE).sanity_check()
    path.write_bytes(struct.pack(">qi", 200, -1))
    with pytest.raises(CorruptIndexError, match="last offset is 999"):
        TimeIndex(path, BASE).sanity_check()
    path.write_bytes(struct.pack(">qi", 200, 1) + b"\0")
    with pytest.raises(CorruptIndexError, match="13 bytes, which is not a multiple of 12"):
        TimeIndex(path, BASE).sanity_check()


# -- transaction index ------------------------------------------------------------------------


def txn(pid: int, first: int, last: int, lso: int) -> AbortedTxn:
    return AbortedTxn(producer_id=pid, first_offset=first, last_offset=last, last_stable_offset=lso)


def test_a_read_only_transaction_index_without_a_file_is_empty_and_creates_none(tmp_path):
    index = TransactionIndex(tmp_path / "0.txnindex", 0)
    assert index.all_aborted_txns() == []
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult(
        aborted_txns=(), is_complete=False
    )
    index.sanity_check()
    with pytest.raises(PermissionError):
        index.append(txn(1, 0, 5, 0))
    index.close()
    assert list(tmp_path.iterdir()) == []


def test_transaction_index_layout_and_appends(tmp_path):
    path = tmp_path / "0.txnindex"
    index = TransactionIndex(path, 0, writable=True)
    assert not path.exists()  # created on the first append
    index.append(txn(7, 0, 10, 0))
    index.append(txn(8, 5, 20, 5))
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(txn(9, 21, 20, 5))
    index.flush()
    index.close()
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 7, 0, 10, 0) + struct.pack(
        ">hqqqq", 0, 8, 5, 20, 5
    )
    reopened = TransactionIndex(path, 0, writable=True)
    assert reopened.all_aborted_txns() == [txn(7, 0, 10, 0), txn(8, 5, 20, 5)]
    with pytest.raises(ValueError, match="must increase"):  # checked against the file too
        reopened.append(txn(9, 0, 20, 0))


def test_transaction_index_truncate_and_reset(tmp_path):
    index = TransactionIndex(tmp_path / "0.txnindex", 0, writable=True)
    for last in (10, 20, 30):
        index.append(txn(1, last - 5, last, 0))
    index.truncate_to(20)
    assert [t.last_offset for t in index] == [10]
    index.append(txn(1, 15, 25, 0))  # the last offset is now 10 again
    index.reset()
    assert index.all_aborted_txns() == [] and (tmp_path / "0.txnindex").stat().st_size == 0
    index.append(txn(1, 0, 1, 0))
    assert index.delete_if_exists() and not index.delete_if_exists()


def test_collect_aborted_txns_stops_at_an_lso_past_the_range(tmp_path):
    index = TransactionIndex(tmp_path / "0.txnindex", 0, writable=True)
    a, b, c = txn(1, 0, 10, 0), txn(2, 12, 20, 11), txn(3, 30, 40, 35)
    for t in (a, b, c):
        index.append(t)
    assert index.collect_aborted_txns(11, 25) == TxnIndexSearchResult(
        aborted_txns=(b,), is_complete=True
    )
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult(
        aborted_txns=(a, b, c), is_complete=False
    )


aborted_lists = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 50), st.integers(0, 60)), max_size=15
).map(
    lambda rows: [
        txn(i, last - span, last, lso)
        for i, (last, span, lso) in enumerate(
            (sum(r[0] + 1 for r in rows[: k + 1]), r[1], r[2]) for k, r in enumerate(rows)
        )
    ]
)


@given(txns=aborted_lists, fetch=st.integers(-5, 900), width=st.integers(0, 300))
@HYPOTHESIS
def test_collect_aborted_txns_agrees_with_the_model(tmp_path, txns, fetch, width):
    path = tmp_path / "0.txnindex"
    path.unlink(missing_ok=True)
    index = TransactionIndex(path, 0, writable=True)
    for t in txns:
        index.append(t)
    upper = fetch + width
    expected, complete = [], False
    for t in txns:
        if t.last_offset >= fetch and t.first_offset < upper:
            expected.append(t)
        if t.last_stable_offset >= upper:
            complete = True
            break
    result = index.collect_aborted_txns(fetch, upper)
    assert result == TxnIndexSearchResult(aborted_txns=tuple(expected), is_complete=complete)
    index.close()


def test_transaction_index_sanity_and_version(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 90, 95, 0))
    with pytest.raises(CorruptIndexError, match=r"\(entry 0\).*less than start offset 100"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(
        struct.pack(">hqqqq", 0, 1, 100, 105, 0) + struct.pack(">hqqqq", 1, 1, 0, 0, 0)
    )
    with pytest.raises(CorruptIndexError, match=r"\(entry 1\).*version 1") as info:
        TransactionIndex(path, 100).all_aborted_txns()
    assert info.value.path == str(path)


def test_a_torn_transaction_index_tail_is_not_an_entry_and_is_overwritten(tmp_path):
    path = tmp_path / "0.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 5, 0) + b"\0\0\0")
    before = sha256(path)
    read_only = TransactionIndex(path, 0)
    assert read_only.all_aborted_txns() == [txn(1, 0, 5, 0)]
    with pytest.raises(CorruptIndexError, match="37 bytes"):
        read_only.sanity_check()
    read_only.close()
    assert sha256(path) == before
    writer = TransactionIndex(path, 0, writable=True)
    writer.append(txn(2, 6, 9, 0))
    assert writer.all_aborted_txns() == [txn(1, 0, 5, 0), txn(2, 6, 9, 0)]
    assert path.stat().st_size == 68
    writer.sanity_check()


# -- real broker data -------------------------------------------------------------------------


def expected_indexes() -> dict[str, dict]:
    facts = EXPECTED.get("indexes", {})
    return {k: v for k, v in facts.items() if v["kind"] in ("index", "timeindex")}


EXPECTED_INDEXES = expected_indexes()


@requires_shared_fixtures
def test_every_real_index_file_has_expected_facts():
    on_disk = {
        str(p.relative_to(KAFKA_DATA))
        for p in KAFKA_DATA.rglob("*")
        if p.is_file() and (".index" in p.name or ".timeindex" in p.name)
    }
    assert on_disk == set(EXPECTED_INDEXES)
    assert len(on_disk) > 600


@requires_shared_fixtures
@pytest.mark.parametrize("kind", ["index", "timeindex"])
def test_real_index_files_open_read_only_and_match_expected(kind):
    checked = 0
    for name, facts in EXPECTED_INDEXES.items():
        if facts["kind"] != kind:
            continue
        path = KAFKA_DATA / name
        before = sha256(path)
        assert before == facts["sha256"], f"{name}: fixture differs from EXPECTED.json"
        mtime = path.stat().st_mtime_ns
        base = offset_from_file_name(path.name)
        cls = OffsetIndex if kind == "index" else TimeIndex
        with cls(path, base) as as_kafka:
            assert as_kafka.entries == facts["slots"], name  # Kafka's count: length / entry size
        with cls(path, base, skip_zero_tail=True) as index:
            assert index.entries == facts["entries"], name
            if kind == "index":
                rows = [[e.offset - base, e.position] for e in index]
            else:
                rows = [[e.timestamp, e.offset - base] for e in index]
            assert rows[: len(facts["first_entries"])] == facts["first_entries"], name
            assert (rows[-1] if rows else None) == facts["last_entry"], name
            if facts["monotonic"]:
                # offset index: offsets and positions increase; time index: timestamps
                # increase, offsets never decrease
                pairs = list(itertools.pairwise(rows))
                assert all(a[0] < b[0] for a, b in pairs), name
                if kind == "index":
                    assert all(a[1] < b[1] for a, b in pairs), name
                else:
                    assert all(a[1] <= b[1] for a, b in pairs), name
                index.sanity_check()
            if rows:  # each entry is found by looking up its own key
                first, last = index.entry(0), index.last_entry
                key = (lambda e: e.offset) if kind == "index" else (lambda e: e.timestamp)
                assert index.lookup(key(first)) == first
                assert index.lookup(key(last)) == last
        assert sha256(path) == before and path.stat().st_mtime_ns == mtime, name
        checked += 1
    assert checked > 300


@requires_shared_fixtures
def test_a_real_index_copied_and_reopened_writable_keeps_its_entries(tmp_path):
    name = max(
        (n for n, f in EXPECTED_INDEXES.items() if f["kind"] == "index"),
        key=lambda n: EXPECTED_INDEXES[n]["entries"],
    )
    facts = EXPECTED_INDEXES[name]
    copy = tmp_path / Path(name).name
    copy.write_bytes((KAFKA_DATA / name).read_bytes())
    base = offset_from_file_name(copy.name)
    index = OffsetIndex(copy, base, writable=True, max_index_size=os.path.getsize(copy) + 800)
    assert index.entries == facts["entries"]
    index.resize(index.max_index_size)
    last = index.last_entry
    index.append(last.offset + 1, last.position + 1)
    index.close()
    assert copy.stat().st_size == 8 * (facts["entries"] + 1)
    assert copy.read_bytes()[:-8] == (KAFKA_DATA / name).read_bytes()


# -- the descriptor budget (kafkalog.log.segment.file_cache)
# ----------------------------------------------


def test_writable_indexes_beyond_the_budget_are_unmapped_and_mapped_again(tmp_path):
    """A writable index's map holds a descriptor: it counts in the budget, is unmapped when
    the least recently used, and mapped again on the next lookup."""
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    indexes = []
    for i in range(40):
        base = i * 1000
        index = OffsetIndex(tmp_path / f"{base:020d}.index", base, writable=True,
                            max_index_size=4096, file_cache=cache)  # fmt: skip
        index.append_all([(base + 10 * k, 100 * k) for k in range(1, 50)])
        index.lookup(base + 55)
        indexes.append(index)
        assert cache.open_count <= 8
    assert sum(ix.is_mapped for ix in indexes) <= 8
    for _ in range(2):
        for i, index in enumerate(indexes):
            base = i * 1000
            assert index.lookup(base + 55) == OffsetPosition(offset=base + 50, position=500)
            index.append(base + 1000 - 1, 99_999)
            index.flush()
            assert cache.open_count <= 8
            index.truncate_to(base + 1000 - 1)
    for index in indexes:
        index.close()
        assert index.entries == 49
    assert cache.open_count == 0


def test_an_index_in_use_by_another_thread_is_not_unmapped(tmp_path):
    import threading

    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    busy = TimeIndex(tmp_path / "busy.timeindex", 0, writable=True, max_index_size=1200,
                     file_cache=cache)  # fmt: skip
    busy.maybe_append(1000, 5)
    assert busy.lookup(1000).offset == 5 and busy.is_mapped
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with busy._lock:  # as a lookup in progress
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    try:
        others = [OffsetIndex(tmp_path / f"{i:020d}.index", i, writable=True,
                              max_index_size=80, file_cache=cache) for i in range(20)]  # fmt: skip
        for other in others:
            other.append(other.base_offset + 1, 10)
            other.lookup(other.base_offset + 1)
        assert busy.is_mapped  # skipped while in use: the budget is exceeded meanwhile
    finally:
        release.set()
        t.join()
    others[0].lookup(1)  # the next open evicts it now
    for other in others[1:]:
        other.lookup(other.base_offset + 1)
    assert not busy.is_mapped
    assert busy.lookup(1000).offset == 5  # mapped again
    for index in [busy, *others]:
        index.close()


def test_transaction_indexes_reopen_after_eviction(tmp_path):
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    indexes = []
    for i in range(30):
        txn = TransactionIndex(tmp_path / f"{i:020d}.txnindex", 0, writable=True,
                               file_cache=cache)  # fmt: skip
        txn.append(AbortedTxn(producer_id=i, first_offset=0, last_offset=10, last_stable_offset=5))
        indexes.append(txn)
    assert cache.open_count <= 8
    for i, txn in enumerate(indexes):
        assert [a.producer_id for a in txn] == [i]
        txn.append(
            AbortedTxn(producer_id=i, first_offset=11, last_offset=20, last_stable_offset=15)
        )
        txn.flush()
    for txn in indexes:
        assert [a.last_offset for a in txn.all_aborted_txns()] == [10, 20]
        txn.close()
    assert cache.open_count == 0
