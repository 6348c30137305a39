"""The offset, key and value presence of each record of a magic 2 batch, through the columnar
fast path (:mod:`kafkalog.format.fast`), for the log's passes that look at every record (the
cleaner's offset map and filter): no Python object per record but its key, where decoding record
by record made a million records cost seconds.

Batches of a few records (where setting up the kernels costs more than it saves), legacy entries
and anything the kernels reject are left to the record-at-a-time decoder (None): the kernels
follow its rules, so a batch they accept decodes the same there, and one they reject gets that
decoder's precise error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import NamedTuple

from ..errors import CorruptRecordError, InvalidRecordError
from ..format import fast
from ..format.constants import MAGIC_VALUE_V2
from ..format.records import Batch

__all__ = ["MIN_RECORDS", "RecordFields", "keys_and_offsets", "record_fields"]

MIN_RECORDS = 16
_local = threading.local()


class RecordFields(NamedTuple):
    """Per record, in order."""

    offsets: list[int]
    keys: list[bytes | None]
    has_value: list[bool]

    def rows(self) -> Iterator[tuple[int, bytes | None, bool]]:
        return zip(self.offsets, self.keys, self.has_value)


def record_fields(batch: Batch) -> RecordFields | None:
    """The batch's records as columns, or None (see the module's docstring)."""
    if batch.magic != MAGIC_VALUE_V2 or batch.count < MIN_RECORDS:
        return None
    decoder = getattr(_local, "decoder", None)
    if decoder is None:
        decoder = _local.decoder = fast.ColumnarDecoder()  # one per thread: not thread-safe
    try:
        rows = decoder.decode(batch.buffer, position_base=batch.position)
    except (CorruptRecordError, InvalidRecordError):
        return None
    if rows.num_rows != batch.count:
        return None
    values = rows.column("value")
    has_value = [True] * len(values) if not values.null_count else values.is_valid().to_pylist()
    return RecordFields(
        rows.column("offset").to_pylist(), rows.column("key").to_pylist(), has_value
    )


def keys_and_offsets(batch: Batch) -> Iterator[tuple[bytes | None, int]]:
    """(key, offset) of every record, from columns where :func:`record_fields` gives them."""
    fields = record_fields(batch)
    if fields is None:
        return ((record.key, record.offset) for record in batch.records())
    return zip(fields.keys, fields.offsets)
