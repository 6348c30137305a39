"""The v2 batch header rule (``kafkalog.format.offsets_rule.check_batch_header``) and the header
walk that applies it (``kafkalog.log.segment.entry_walk.SegmentWalk``).

The rules are Kafka's DefaultRecordBatch's, none of which needs a record decoded:
lastOffsetDelta >= 0; 0 <= recordsCount <= lastOffsetDelta + 1 (records have distinct offset
deltas in [0, lastOffsetDelta]; compaction leaves fewer, never more); an uncompressed record takes
at least 7 bytes (seven one-byte varints), so recordsCount <= (size - 61) / 7. Batches are built by
kafka-python; fields are changed with ``struct`` and the CRC recomputed, so that only the rule
can tell.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.format.crc import crc32c
from kafkalog.format.entries import Tail
from kafkalog.format.offsets_rule import check_batch_header
from kafkalog.log.segment.entry_walk import SegmentWalk

INT32_MAX = (1 << 31) - 1


def kp_batch(records: int, *, offset: int, codec: int = 0, value: bytes = b"v") -> bytearray:
    builder = KpBuilder(2, codec, 1 << 30)
    for i in range(records):
        assert builder.append(1_700_000_000_000 + i, None, value, []) is not None
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, offset)
    return data


def with_header(batch: bytearray, *, delta: int | None = None, count: int | None = None) -> bytes:
    if delta is not None:
        struct.pack_into(">i", batch, 23, delta)
    if count is not None:
        struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_headers_kafka_writes_pass() -> None:
    for records in (1, 2, 50):
        batch = kp_batch(records, offset=7)
        check_batch_header(7, records - 1, records, len(batch), False, position=0)
    # compaction leaves fewer records than offsets, and may leave none
    check_batch_header(7, 9, 3, 61 + 3 * 7, False, position=0)
    check_batch_header(7, 9, 0, 61, False, position=0)
    # compressed: the size does not bound the count
    check_batch_header(0, INT32_MAX - 1, INT32_MAX, 100, True, position=0)


@pytest.mark.parametrize(
    ("delta", "count", "size", "compressed", "error", "words"),
    [
        (-1, 0, 61, False, CorruptRecordError, "lastOffsetDelta -1 is negative"),
        (5, -1, 100, False, InvalidRecordError, "Found invalid record count -1"),
        (1, 3, 200, False, CorruptRecordError, "records count 3 is more than the 2 offsets"),
        (1, 3, 200, True, CorruptRecordError, "records count 3 is more than the 2 offsets"),
        (20, 6, 61 + 5 * 7 + 6, False, CorruptRecordError, "at most 5 records"),
        (10, 1, 61, False, CorruptRecordError, "at most 0 records"),
    ],
)
def test_headers_that_disagree_with_themselves(delta, count, size, compressed, error, words):
    with pytest.raises(error, match=words) as raised:
        check_batch_header(40, delta, count, size, compressed, position=123)
    assert (raised.value.position, raised.value.offset) == (123, 40)


def test_the_header_walk_stops_at_a_header_that_disagrees(tmp_path: Path) -> None:
    good = bytes(kp_batch(2, offset=0))
    bad = with_header(kp_batch(3, offset=2), count=INT32_MAX)
    after = bytes(kp_batch(1, offset=5))
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(good + bad + after)
    walk = SegmentWalk(log)
    assert [h.base_offset for h in walk] == [0]
    assert (walk.valid_end, walk.tail, walk.last_offset) == (len(good), Tail.CORRUPT, 1)
    assert isinstance(walk.error, CorruptRecordError)
    assert (walk.error.path, walk.error.position) == (str(log), len(good))


def test_the_header_walk_takes_compacted_and_compressed_batches(tmp_path: Path) -> None:
    compacted = with_header(kp_batch(2, offset=0), delta=9)  # offsets 0..9, 2 records left
    compressed = bytes(kp_batch(40, offset=10, codec=1, value=b"x" * 20))  # gzip
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(compacted + compressed)
    walk = SegmentWalk(log).run()
    assert (walk.valid_end, walk.tail, walk.error, walk.last_offset) == (
        len(compacted) + len(compressed),
        Tail.NONE,
        None,
        49,
    )
