"""The valid prefix of a segment: the batches Kafka's LogSegment.recover keeps.

One rule, walked by recovery (:meth:`LogSegment.recover`, which rebuilds indexes from the
batches it is given), by recovery's dry run (:mod:`.recovery_plan`) and by ``rebuild-index``:
batches are kept in order until the first that

- cannot be framed (:func:`kafkalog.format.entries.frame_entry`; a partial tail ends the walk),
- fails its checks (``ensure_valid``: size and CRC),
- breaks the offset rule (:func:`kafkalog.format.offsets_rule.check_entry_offsets`: offsets fit
  int64 and increase), or
- holds an offset the segment cannot index (more than 2^31 - 1 past its base);

and a transaction marker that producer state cannot take (not a COMMIT or ABORT that decodes)
raises :class:`MarkerError`: Kafka cannot load such a log (its recovery replays the marker into
producer state, and so does the producer-state rebuild that follows), so neither recovery nor its
dry run gets past it.

After iterating, :class:`ValidPrefixWalk` says where the kept bytes end and why the rest goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...errors import CorruptRecordError, InvalidRecordError, KafkalogError, MarkerError
from ...format.offsets_rule import check_entry_offsets
from ...format.records import Batch
from ..producer import end_txn_marker

if TYPE_CHECKING:
    from .log_segment import LogSegment

__all__ = ["MarkerError", "ValidPrefixWalk", "marker_error"]


class ValidPrefixWalk:
    """Iterate the valid batches of ``segment``'s log; then ``valid_bytes`` (bytes kept, from
    the log's start), ``last_offset`` (of the last batch kept, None if none), ``error`` (what
    ended the walk: None for the end of the file or a partial tail), ``bad_offset`` (the
    offending batch's offset, when a whole batch was read) and ``reason`` (a phrase for
    reports, None when every byte is kept)."""

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.valid_bytes = 0
        self.last_offset: int | None = None
        self.error: KafkalogError | None = None
        self.bad_offset: int | None = None
        self.reason: str | None = None

    def __iter__(self) -> Iterator[Batch]:
        segment = self.segment
        try:
            for batch in segment.log.batches():
                try:
                    batch.ensure_valid()
                    check_entry_offsets(
                        batch.base_offset if batch.magic >= 2 else batch.last_offset,
                        batch.last_offset,
                        self.last_offset,
                        position=batch.position,
                    )
                except (CorruptRecordError, InvalidRecordError) as e:
                    self._stop(e, batch, f"an invalid batch: {e.message}")
                    return
                if not segment.can_convert_to_relative_offset(batch.last_offset):
                    error = CorruptRecordError(
                        f"Offset {batch.last_offset} does not fit segment {segment.base_offset} "
                        f"(more than 2^31 - 1 past its base offset)",
                        position=batch.position,
                        offset=batch.last_offset,
                    )
                    self._stop(error, batch, error.message)
                    return
                if batch.magic >= 2 and batch.is_control and batch.producer_id >= 0:
                    _check_marker(batch, str(segment.log.path))
                self.last_offset = batch.last_offset
                self.valid_bytes += batch.size_in_bytes
                yield batch
        except (CorruptRecordError, InvalidRecordError) as e:
            self.error = e.located(path=str(segment.log.path))
            self.reason = f"corrupt framing: {e.message}"
            return
        if self.valid_bytes < segment.log.size_in_bytes():
            self.reason = "a torn last batch (incomplete)"

    def _stop(self, error: KafkalogError, batch: Batch, reason: str) -> None:
        self.error = error.located(path=str(self.segment.log.path))
        self.bad_offset = batch.base_offset if batch.magic >= 2 else batch.last_offset
        self.reason = reason


def _check_marker(batch: Batch, path: str) -> None:
    try:
        end_txn_marker(batch)
    except (CorruptRecordError, InvalidRecordError) as e:
        raise marker_error(e, batch, path) from None


def marker_error(error: KafkalogError, batch: Batch, path: str) -> MarkerError:
    """The error for a producer's marker that producer state cannot take."""
    return MarkerError(
        f"a transaction marker that producer state cannot take ({error.message}): Kafka "
        f"cannot load this log",
        path=path,
        position=batch.position,
        offset=batch.base_offset,
    )
