"""Telling a torn append from a damaged length field (part of :mod:`kafkalog.log.verify`;
also used by ``kafkalog dump``, so both say the same of the same bytes).

Kafka's FileLogInputStream stops quietly where an entry claims more bytes than the file has left,
and LogSegment.recover truncates the segment there (LogLoader then deletes every later segment).
That is right for the batch a broker was appending when it died, but a damaged size field looks
the same to it, and the bytes after it are then records that recovery would throw away. Two signs
set the damage apart:

- the declared size is larger than any batch the broker accepts (``max.message.bytes``; Kafka
  refuses bigger batches with RecordTooLargeException, and ByteBufferLogInputStream calls such a
  size corrupt);
- a complete batch with a matching CRC starts inside the bytes the entry claims: a torn append is
  the last thing written, so nothing whole can follow it.
"""

from __future__ import annotations

import struct

from ...format.constants import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
)
from ...format.crc import crc32c

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "next_valid_batch", "partial_tail_problem"]

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes (and message.max.bytes) default

_SIZE = struct.Struct(">i")
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17  # baseOffset int64, length int32, partitionLeaderEpoch int32, magic int8
_ATTRIBUTES_OFFSET = _CRC_OFFSET + 4
_MAGIC_V2 = bytes([MAGIC_VALUE_V2])


def partial_tail_problem(
    view, at: int, *, max_batch_size: int, limit_name: str = "max.message.bytes"
) -> str | None:
    """Why the incomplete entry at ``view[at:]`` is damage rather than a torn append, or None.

    ``max_batch_size`` is the largest batch the broker could have written (``max.message.bytes``,
    which Kafka compares with a batch's whole size, log overhead included), ``limit_name`` what
    sets it.
    """
    left = len(view) - at
    if left <= HEADER_SIZE_UP_TO_MAGIC:  # Kafka's FileLogInputStream stops there: not read
        return None
    size = _SIZE.unpack_from(view, at + 8)[0]
    if size + LOG_OVERHEAD > max_batch_size:
        return (
            f"the entry declares {size + LOG_OVERHEAD} bytes, more than the largest batch a "
            f"broker accepts ({limit_name} {max_batch_size}): its size field is damaged, "
            f"and the {left} bytes from here on are unreadable"
        )
    found = next_valid_batch(view, at + 1, len(view))
    if found is not None:
        return (
            f"the entry declares {size + LOG_OVERHEAD} bytes but only {left} are left, and a "
            f"complete batch with a matching CRC starts at position {found}: its size field is "
            f"damaged, not a torn append"
        )
    return None


def next_valid_batch(view, start: int, end: int) -> int | None:
    """Where the first complete magic 2 batch with a matching CRC in ``view[start:end]`` starts."""
    data = bytes(view[start:end])
    i = MAGIC_OFFSET - 1
    while True:
        i = data.find(_MAGIC_V2, i + 1)
        pos = i - MAGIC_OFFSET
        if i < 0 or pos + RECORD_BATCH_OVERHEAD > len(data):
            return None
        size = _SIZE.unpack_from(data, pos + 8)[0]
        stop = pos + LOG_OVERHEAD + size
        if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or stop > len(data):
            continue
        stored = _CRC.unpack_from(data, pos + _CRC_OFFSET)[0]
        if crc32c(data[pos + _ATTRIBUTES_OFFSET : stop]) == stored:
            return start + pos
