"""The offset rule (kafkalog.format.offsets_rule) and the record-at-a-time views that apply it."""

from __future__ import annotations

import struct

import pytest
from kafka.record import MemoryRecords as KpMemoryRecords

from kafkalog.errors import CorruptRecordError
from kafkalog.format import MemoryRecords, MemoryRecordsBuilder
from kafkalog.format.legacy import encode_legacy_entry
from kafkalog.format.offsets_rule import MAX_LAST_OFFSET, check_entry_offsets

INT64_MAX = (1 << 63) - 1


def test_offsets_that_fit_and_increase_pass():
    check_entry_offsets(0, 0, None, position=0)
    check_entry_offsets(0, MAX_LAST_OFFSET, None, position=0)
    check_entry_offsets(5, 9, 4, position=100)
    check_entry_offsets(5, 4, 4, position=100)  # a negative lastOffsetDelta is not this rule's


@pytest.mark.parametrize(
    ("base", "last"),
    [(INT64_MAX, INT64_MAX + 9), (MAX_LAST_OFFSET - 2, MAX_LAST_OFFSET + 1), (INT64_MAX, 5)],
)
def test_offsets_past_int64_overflow(base, last):
    with pytest.raises(CorruptRecordError) as e:
        check_entry_offsets(base, last, None, position=61)
    assert e.value.message == (
        f"Batch offsets {base} to {last} overflow a 64-bit offset (the baseOffset field, which "
        f"the CRC does not cover, is damaged)"
    )
    assert (e.value.position, e.value.offset) == (61, base)


def test_a_negative_base_offset_is_damage():
    with pytest.raises(CorruptRecordError) as e:
        check_entry_offsets(-1, 8, None, position=7, offset=99)
    assert e.value.message == (
        "Batch offsets -1 to 8 are negative: a log's offsets start at 0 (the baseOffset field, "
        "which the CRC does not cover, is damaged)"
    )
    assert (e.value.position, e.value.offset) == (7, 99)


@pytest.mark.parametrize("base", [9, 3, 0])
def test_a_base_offset_not_above_the_previous_last_offset(base):
    with pytest.raises(CorruptRecordError) as e:
        check_entry_offsets(base, base + 2, 9, position=300)
    assert e.value.message == (
        f"Batch baseOffset {base} is not above the previous batch's last offset 9: offsets must "
        f"increase through a log"
    )
    assert (e.value.position, e.value.offset) == (300, base)


def test_range_comes_before_order():
    with pytest.raises(CorruptRecordError, match="are negative"):
        check_entry_offsets(-5, -5, 10, position=0)


def _batch(base: int, n: int = 3) -> bytes:
    b = MemoryRecordsBuilder(base_offset=base)
    for i in range(n):
        b.append(timestamp=i, key=b"k", value=b"v%d" % i)
    return b.build()


@pytest.mark.parametrize("base", [INT64_MAX, MAX_LAST_OFFSET - 1, -1, -(1 << 63)])
def test_record_batch_records_apply_the_range_rule_first(base):
    raw = bytearray(_batch(0))
    struct.pack_into(">q", raw, 0, base)  # outside the CRC: it still matches
    batch = next(iter(MemoryRecords(bytes(raw))))
    assert batch.is_valid
    with pytest.raises(CorruptRecordError, match="Batch offsets") as e:
        list(batch.records())
    assert (e.value.position, e.value.offset) == (0, base)
    with pytest.raises(CorruptRecordError, match="Batch offsets"):
        batch.check_offsets()


def test_record_batch_at_the_last_offset_a_log_can_hold_decodes_as_kafka_python():
    raw = bytearray(_batch(0))
    struct.pack_into(">q", raw, 0, MAX_LAST_OFFSET - 2)
    mine = [r.offset for r in MemoryRecords(bytes(raw)).records()]
    kp = KpMemoryRecords(bytes(raw)).next_batch()
    assert mine == [r.offset for r in kp] == [MAX_LAST_OFFSET - 2 + i for i in range(3)]


@pytest.mark.parametrize("offset", [-1, INT64_MAX])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_apply_the_range_rule(magic, offset):
    entry = encode_legacy_entry(offset=offset, magic=magic, key=b"k", value=b"v", timestamp=1)
    batch = next(iter(MemoryRecords(entry)))
    with pytest.raises(CorruptRecordError, match=f"Batch offsets {offset} to {offset} ") as e:
        batch.records()
    assert (e.value.position, e.value.offset) == (0, offset)
