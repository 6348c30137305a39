"""The append paths' batch walk: every magic 2 header of a buffer in one unpack, CRCs checked.

A broker touches each appended batch a few times (CRC, offsets, leader epoch, producer state,
index entries, roll checks); through :class:`~kafkalog.format.batch.RecordBatch` views each field
is a property call, which costs more than the CRC of a 16 KB batch. :func:`scan_v2_batches` reads
the fixed header of every batch with one ``struct`` call and returns plain tuples.

It only takes the common case: complete magic 2 batches back to back, each with a valid CRC-32C.
Anything else (a legacy entry, a corrupt or partial entry, a CRC mismatch) returns None, and the
caller takes its general path over :func:`~kafkalog.format.records.iter_batches`, which raises the
precise error or handles the old formats; so the fast walk never words an error of its own.
"""

from __future__ import annotations

from typing import NamedTuple

from ..constants import BATCH_HEADER, LOG_OVERHEAD, MAGIC_VALUE_V2, RECORD_BATCH_OVERHEAD
from ..crc import crc32c

__all__ = ["V2Header", "scan_v2_batches"]

_CRC_FROM = 21  # the CRC-32C covers attributes to the end of the batch
_CONTROL = 0x20


class V2Header(NamedTuple):
    """One batch's fixed header and where it is (``position`` in the scanned buffer)."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)


def scan_v2_batches(view: memoryview, *, check_crc: bool = True) -> list[V2Header] | None:
    """The headers of the whole magic 2 batches filling ``view`` exactly, CRCs checked; None
    when ``view`` holds anything else (the caller's general path then explains or handles it)."""
    unpack, make = BATCH_HEADER.unpack_from, V2Header._make
    headers: list[V2Header] = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < RECORD_BATCH_OVERHEAD or view[pos + 16] != MAGIC_VALUE_V2:
            return None
        fields = unpack(view, pos)
        size = fields[1] + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or size > end - pos:
            return None
        if check_crc and crc32c(view[pos + _CRC_FROM : pos + size]) != fields[4]:
            return None
        headers.append(make((pos, size, fields[0], fields[2], *fields[4:])))
        pos += size
    return headers
