"""An append's batches read once, for the log's checks, producer state and index entries.

Magic 2 headers come from :func:`kafkalog.format.validate.scan.scan_v2_batches` (one unpack per
batch, CRCs checked on the way); anything else through batch views, which also raise the precise
error for a corrupt entry or CRC.
"""

from __future__ import annotations

from ...format import Batch, MemoryRecords, RecordBatch
from ...format.constants import NO_PRODUCER_ID
from ...format.validate import scan_v2_batches

__all__ = ["walk_append", "walk_validated"]


def walk_append(view: memoryview, *, check_crc: bool) -> tuple[list, list, list, int]:
    """An append's batches in one pass: ``(offsets, summaries, producer batches, valid bytes)``
    with ``(base offset, last offset, max timestamp, leader epoch)`` per batch for the checks,
    ``(last offset, max timestamp, size)`` for the segment's index entries, the batches that
    carry a producer id (for the producer state) and where the last complete batch ends.

    Magic 2 headers are read in one unpack each (the usual case); anything else goes through
    batch views, which also raise the precise error for a corrupt entry or CRC."""
    offsets: list[tuple[int, int, int, int]] = []
    summaries: list[tuple[int, int, int]] = []
    producers: list[Batch] = []
    headers = scan_v2_batches(view, check_crc=check_crc)
    if headers is not None:
        for h in headers:
            base, max_ts = h.base_offset, h.max_timestamp
            last = base + h.last_offset_delta
            offsets.append((base, last, max_ts, h.partition_leader_epoch))
            summaries.append((last, max_ts, h.size))
            if h.producer_id > NO_PRODUCER_ID:
                producers.append(RecordBatch(view[h.position : h.position + h.size], h.position))
        return offsets, summaries, producers, len(view)
    valid = 0
    for batch in MemoryRecords(view):
        if check_crc:
            batch.ensure_valid()
        last, max_ts = batch.last_offset, batch.max_timestamp
        epoch = batch.partition_leader_epoch if batch.magic >= 2 else -1
        offsets.append((batch.base_offset, last, max_ts, epoch))
        summaries.append((last, max_ts, batch.size_in_bytes))
        producers.append(batch)
        valid = batch.position + batch.size_in_bytes
    return offsets, summaries, producers, valid


def walk_validated(parts: tuple) -> tuple[list, list]:
    """``(summaries, producer batches)`` as :func:`walk_append` gives them, for the validator's
    output (whose CRCs it made). An in-place assignment comes as one magic 2 batch in two parts, its
    patched header and its records: the header alone answers what the segment and the producer
    state read of it (a control batch, whose record the producer state reads, is joined)."""
    if len(parts) == 1:
        _, summaries, producers, _ = walk_append(memoryview(parts[0]), check_crc=False)
        return summaries, producers
    header = RecordBatch(memoryview(parts[0]))
    size = sum(len(part) for part in parts)
    producers: list[Batch] = []
    if header.producer_id > NO_PRODUCER_ID:
        producers.append(RecordBatch(memoryview(b"".join(parts))) if header.is_control else header)
    return [(header.last_offset, header.max_timestamp, size)], producers
