"""A segment file's entries a header at a time: the valid prefix of a log without its records.

One ``pread`` of 61 bytes per entry, so only header pages are touched. Entries are framed by
the one entry walk (:func:`kafkalog.format.entries.entry_header`), their offsets checked by
the offset rule (:func:`kafkalog.format.offsets_rule.check_entry_offsets`: offsets fit int64
and increase) and a v2 batch's header by the header rule
(:func:`kafkalog.format.offsets_rule.check_batch_header`: lastOffsetDelta, records count and
size agree), so a planner, a checker and a reader agree on where a segment's valid entries
end and why. After iterating, a :class:`SegmentWalk` says how it ended: ``valid_end`` (where
Kafka's recovery would cut, as far as headers tell), ``tail`` (a :class:`Tail` value) and the
``error`` met (a partial tail has none; a zero-filled one gets one, as only a crash leaves it).
CRCs and records are the reader's to check: this walk does not read them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator

from ...errors import KafkalogError
from ...format.constants import COMPRESSION_CODEC_MASK, MAGIC_VALUE_V2
from ...format.entries import HEADER_PEEK, EntryHeader, Tail, entry_header, zeros_error
from ...format.offsets_rule import check_batch_header, check_entry_offsets
from ..storage import RemoteFile, is_remote

__all__ = ["SegmentWalk"]

_ZERO_CHUNK = 1 << 20


class SegmentWalk:
    """Entry headers of ``path`` from ``start`` up to ``end`` (the file's size by default).
    ``previous_last`` is the last offset before ``start`` when the caller knows it (the offset
    rule then applies to the first entry too)."""

    def __init__(
        self,
        path: str | os.PathLike,
        start: int = 0,
        end: int | None = None,
        *,
        previous_last: int | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.start = start
        self.end = end
        self.previous_last = previous_last
        self.valid_end = start
        self.last_offset: int | None = previous_last
        self.tail = Tail.NONE
        self.error: KafkalogError | None = None

    def __iter__(self) -> Iterator[EntryHeader]:
        if is_remote(self.path):  # an object: the same walk over ranged reads (in blocks)
            remote = RemoteFile(self.path)
            fd, pread, size = -1, remote.read_at, remote.size
        else:
            remote = None
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            pread, size = functools.partial(os.pread, fd), lambda: os.fstat(fd).st_size
        try:
            end = size() if self.end is None else self.end
            self.end = end
            pos, last = self.start, self.previous_last
            while True:
                head = pread(min(HEADER_PEEK, max(end - pos, 0)), pos)
                try:
                    header = entry_header(head, 0, end - pos, position_base=pos)
                    if header is not None:
                        check_entry_offsets(
                            header.base_offset, header.last_offset, last, position=pos
                        )
                        if header.magic == MAGIC_VALUE_V2:
                            check_batch_header(
                                header.base_offset,
                                header.last_offset - header.base_offset,
                                header.records_count,
                                header.size,
                                bool(header.attributes & COMPRESSION_CODEC_MASK),
                                position=pos,
                            )
                except KafkalogError as e:
                    self._end(pread, pos, end, e.located(path=self.path))
                    return
                if header is None:
                    self._end(pread, pos, end, None)
                    return
                pos, last = header.end, header.last_offset
                self.valid_end, self.last_offset = pos, last
                yield header
        finally:
            if remote is not None:
                remote.close()
            else:
                os.close(fd)

    def _end(self, pread, pos: int, end: int, error: KafkalogError | None) -> None:
        self.valid_end = pos
        if pos >= end:
            self.tail = Tail.NONE
        elif _zeros_to(pread, pos, end):
            self.tail = Tail.ZEROS
            self.error = zeros_error(end - pos, pos).located(path=self.path)
        elif error is None:
            self.tail = Tail.PARTIAL
        else:
            self.tail, self.error = Tail.CORRUPT, error

    def run(self) -> SegmentWalk:
        """Walk to the end (headers unused); returns self, for its ``valid_end`` and ``tail``."""
        for _ in self:
            pass
        return self


def _zeros_to(pread: Callable[[int, int], bytes], pos: int, end: int) -> bool:
    while pos < end:
        chunk = pread(min(_ZERO_CHUNK, end - pos), pos)
        if not chunk or chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True
