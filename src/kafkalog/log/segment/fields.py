"""The offset, key and value presence of each record of a magic 2 batch, through the columnar
fast path (:mod:`kafkalog.format.columnar`), for the log's passes that look at every record (the
cleaner's offset map and filter): no Python object per record but its key, where decoding record
by record made a million records cost seconds. Records that must be written again (the survivors
of a batch the cleaner rebuilds) are made from the same columns.

Batches of a few records (where setting up the kernels costs more than it saves), legacy entries
and anything the kernels reject are left to the record-at-a-time decoder (None): the kernels
follow its rules, so a batch they accept decodes the same there, and one they reject gets that
decoder's precise error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import NamedTuple

import pyarrow as pa

from ...errors import CorruptRecordError, InvalidRecordError
from ...format import columnar as fast
from ...format.constants import MAGIC_VALUE_V2, TimestampType
from ...format.record import Header, Record
from ...format.records import Batch

__all__ = ["MIN_RECORDS", "RecordFields", "keys_and_offsets", "record_fields"]

MIN_RECORDS = 16
_local = threading.local()


class RecordFields(NamedTuple):
    """Per record, in order; ``columns``: all of the batch's (``fast.SCHEMA``)."""

    offsets: list[int]
    keys: list[bytes | None]
    has_value: list[bool]
    columns: pa.RecordBatch

    def rows(self) -> Iterator[tuple[int, bytes | None, bool]]:
        return zip(self.offsets, self.keys, self.has_value)

    def records(self, keep: list[bool], timestamp_type: TimestampType) -> list[Record]:
        """A Record for each row whose ``keep`` is True (what a rebuilt batch is written from),
        made from the columns rather than decoded again."""
        picked = self.columns.filter(pa.array(keep, pa.bool_()))
        names = ("offset", "timestamp", "key", "value", "headers")
        offsets, stamps, keys, values, headers = (picked.column(n).to_pylist() for n in names)
        return [
            Record(
                offset=offset,
                timestamp=timestamp,
                timestamp_type=timestamp_type,
                key=key,
                value=value,
                headers=tuple(Header(h["key"], h["value"]) for h in hs),
            )
            for offset, timestamp, key, value, hs in zip(offsets, stamps, keys, values, headers)
        ]


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
        rows.column("offset").to_pylist(), rows.column("key").to_pylist(), has_value, rows
    )


def keys_and_offsets(batch: Batch) -> Iterator[tuple[bytes | None, int]]:
    """(key, offset) of every record, from columns where :func:`record_fields` gives them."""
    fields = record_fields(batch)
    if fields is None:
        return ((record.key, record.offset) for record in batch.records())
    return zip(fields.keys, fields.offsets)
