"""Dumps of a segment's indexes: ``.index``, ``.timeindex``, ``.txnindex``.

Text lines and checks are kafka-dump-log's (DumpLogSegments.dumpIndex, dumpTimeIndex,
dumpTxnIndex, Kafka 3.9-4.2): index entries are checked against the segment's ``.log`` and
mismatches reported on stderr after the last file; ``--verify-index-only`` checks without printing
entries; ``--index-sanity-check`` runs only the check a broker runs at startup to decide whether to
rebuild an index. Where kafka-dump-log would crash (a missing ``.log``, an entry pointing past the
end of the log) the problem is reported and the dump goes on.
"""

from __future__ import annotations

import os

from ...errors import CorruptIndexError, KafkalogError
from ...format import Batch, RecordsScan
from ...format.constants import NO_TIMESTAMP
from ...log.segment import ENTRY_SIZE as TXN_ENTRY_SIZE
from ...log.segment import OffsetIndex, TimeIndex, TransactionIndex
from ..progress import Progress
from .columnar import records_of
from .file_dump import (
    LEFTOVER_SUFFIXES,
    SegmentFileDump,
    file_exists,
    file_size,
    open_buffer,
    segment_start_offset,
)

__all__ = ["OffsetIndexDump", "TimeIndexDump", "TxnIndexDump", "sibling"]


def sibling(path: str, suffix: str) -> str:
    """The segment file with ``suffix`` next to ``path`` (kafka-dump-log: the name up to its first
    dot plus ``suffix``). For a leftover (``.index.swap``) its own leftover twin is preferred when
    it exists (``.log.swap``), as the two belong to the same unfinished clean."""
    directory, name = os.path.split(path)
    stem = name.split(".", 1)[0]
    for leftover in LEFTOVER_SUFFIXES:
        if name.endswith(leftover):
            twin = os.path.join(directory, stem + suffix + leftover)
            if file_exists(twin):
                return twin
    return os.path.join(directory, stem + suffix)


class _MappedIndexDump(SegmentFileDump):
    """An ``.index`` or ``.timeindex``: its entries (or only the sanity check), each checked
    against the segment's ``.log``, then a summary."""

    INDEX: type[OffsetIndex] | type[TimeIndex]

    def mismatch(
        self,
        message: str,
        table: dict,
        pair: tuple[int, int],
        *,
        position: int,
        offset: int,
        problem: bool = True,
    ) -> None:
        """An entry that does not match the log: an ``error`` object in JSON; in text, a line of
        kafka-dump-log's closing report. One that is no ``problem`` (kafka-dump-log reports it,
        the index is right) is only the report's line: no error, no exit status 1."""
        error = KafkalogError(message, position=position, offset=offset)
        if self.options.json:
            if problem:
                self.error(error)
        else:
            if problem:
                self.errors.append(error)
            self.reports.add(table, self.path, pair)

    def sanity_check(self, index: OffsetIndex | TimeIndex) -> None:
        try:
            index.sanity_check()
        except CorruptIndexError as e:
            self.error(KafkalogError(e.message))
            return
        if not self.options.json:
            self.line(f"{self.path} passed sanity check.")

    def dump(self, progress: Progress) -> None:
        base = self.base_offset()
        if base is None:
            return self.summary()
        with self.INDEX(self.path, base) as index:
            self.entries = index.entries
            if self._said_empty(index):
                pass  # no entries to dump or check
            elif self.options.sanity_only:
                self.sanity_check(index)
            else:
                self._entries(index, base)
        progress.advance(file_size(self.path))
        self.summary()

    def _said_empty(self, index: OffsetIndex | TimeIndex) -> bool:
        """Whether an empty index was reported as such instead of its entries."""
        return False

    def _entries(self, index, base: int) -> None:
        raise NotImplementedError

    def _log_to_check(self) -> str:
        """The segment's ``.log``, or "" (reported) when it does not exist."""
        log_path = sibling(self.path, ".log")
        if not file_exists(log_path):
            self.error(KafkalogError(f"entries not checked: {log_path} does not exist"))
            return ""
        return log_path

    def _written(self, index: OffsetIndex | TimeIndex, base: int):
        """(n, entry) for each entry up to the unwritten slots of a preallocated file not
        trimmed after a crash (an entry i > 0 at the base offset), which ``entries`` leaves out."""
        for i in range(index.entries):
            entry = index.entry(i)
            if entry.offset == base and i > 0:
                self.entries = i
                return
            yield i, entry

    def entry_mismatch(
        self,
        i: int,
        message: str,
        table: dict,
        pair: tuple[int, int],
        offset: int,
        *,
        problem: bool = True,
    ) -> None:
        """:meth:`mismatch` of the ``i``-th entry (at byte ``i`` times the entry size)."""
        position = i * self.INDEX.ENTRY_SIZE
        self.mismatch(message, table, pair, position=position, offset=offset, problem=problem)


def _first_batch(view: memoryview, position: int) -> tuple[Batch | None, KafkalogError | None]:
    scan = RecordsScan(view[position:], position_base=position)
    for batch in scan:
        return batch, None
    return None, scan.error


class OffsetIndexDump(_MappedIndexDump):
    """``.index``: ``offset: O position: P`` per entry, each checked against its ``.log``."""

    INDEX = OffsetIndex

    def _said_empty(self, index: OffsetIndex | TimeIndex) -> bool:
        if index.entries != 0:
            return False
        if not self.options.json:
            self.line(f"{self.path} is empty.")
        return True

    def _entries(self, index: OffsetIndex, base: int) -> None:
        log_path = self._log_to_check()
        with open_buffer(log_path) if log_path else _NoLog() as log:
            for i, entry in self._written(index, base):
                batch_last = None
                if log is not None:
                    batch_last = self._check(log, i, entry.offset, entry.position)
                if self.options.verify_only:
                    continue
                if self.options.json:
                    self.emit(
                        {
                            "type": "indexEntry",
                            "entry": i,
                            "offset": entry.offset,
                            "position": entry.position,
                            "batchLastOffset": batch_last,
                        }
                    )
                else:
                    self.line(f"offset: {entry.offset} position: {entry.position}")
        self.trailing_bytes(file_size(self.path), 8)

    def _check(self, log: memoryview, i: int, offset: int, position: int) -> int | None:
        batch, problem = _first_batch(log, position)
        limit = self.options.max_message_size
        if batch is not None and batch.size_in_bytes > limit:
            problem, batch = KafkalogError(f"the batch is larger than {limit} bytes"), None
        if batch is None:
            why = problem.message if problem is not None else "the log ends there"
            self.error(
                KafkalogError(
                    f"no batch at log position {position} ({len(log)} bytes): {why}",
                    position=i * 8,
                    offset=offset,
                )
            )
            return None
        if batch.last_offset != offset:
            self.entry_mismatch(
                i,
                f"Index offset: {offset}, log offset: {batch.last_offset}",
                self.reports.index_mismatches,
                (offset, batch.last_offset),
                offset,
            )
        return batch.last_offset


class _NoLog:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        pass


class TimeIndexDump(_MappedIndexDump):
    """``.timeindex``: ``timestamp: T offset: O`` per entry, each checked against its ``.log``."""

    # Where to resume scanning the log without an .index: (a batch's position, the last offset
    # before it); entries for offsets above that offset can start there.
    _resume: tuple[int, int] = (0, -1)
    INDEX = TimeIndex

    def _entries(self, index: TimeIndex, base: int) -> None:
        offset_index = None
        # With no entries there is nothing to check against the log.
        log_path = self._log_to_check() if index.entries != 0 else ""
        if log_path:
            index_path = sibling(self.path, ".index")
            if file_exists(index_path):
                offset_index = OffsetIndex(index_path, base, skip_zero_tail=True)
        previous = NO_TIMESTAMP
        try:
            with open_buffer(log_path) if log_path else _NoLog() as log:
                for i, entry in self._written(index, base):
                    found = None
                    if log is not None:
                        position, below = 0, -1
                        if offset_index is not None:
                            position = offset_index.lookup(entry.offset).position
                        elif entry.offset > self._resume[1]:
                            # No .index: go on from the last batch found instead of rescanning
                            # the log from its start for every entry.
                            position, below = self._resume
                        found = self._check(log, i, entry.timestamp, entry.offset, position, below)
                        if found is not None and found[0] == entry.offset:
                            if previous >= entry.timestamp:
                                self.entry_mismatch(
                                    i,
                                    f"Index timestamp: {entry.timestamp}, "
                                    f"Previously indexed timestamp: {previous}",
                                    self.reports.time_out_of_order,
                                    (entry.timestamp, previous),
                                    entry.offset,
                                )
                    if not self.options.verify_only:
                        self._entry(i, entry.timestamp, entry.offset, found)
                    previous = entry.timestamp
        finally:
            if offset_index is not None:
                offset_index.close()
        self.trailing_bytes(file_size(self.path), 12)

    def _entry(self, i: int, timestamp: int, offset: int, found: tuple | None) -> None:
        if not self.options.json:
            self.line(f"timestamp: {timestamp} offset: {offset}")
            return
        self.emit(
            {
                "type": "timeIndexEntry",
                "entry": i,
                "timestamp": timestamp,
                "offset": offset,
                "batchLastOffset": None if found is None else found[0],
                "batchMaxTimestamp": None if found is None else found[1],
            }
        )

    def _check(
        self, log: memoryview, i: int, timestamp: int, offset: int, position: int, below: int
    ) -> tuple[int, int | None] | None:
        """kafka-dump-log's check: the first batch from ``position`` reaching ``offset`` must end
        at it, and the largest record timestamp in it be the entry's. Returns (that batch's last
        offset, its largest timestamp or None), or None when no batch reaches ``offset``."""
        scan = RecordsScan(log[position:], position_base=position)
        batch = None
        previous_last = below  # every offset before ``position`` is at most this
        for candidate in scan:
            if candidate.last_offset >= offset:
                batch = candidate
                self._resume = (candidate.position, previous_last)
                break
            previous_last = candidate.last_offset
        if batch is None or batch.last_offset != offset:
            found = -1 if batch is None else batch.last_offset
            self.entry_mismatch(
                i,
                f"Indexed offset: {offset}, found log offset: {found}",
                self.reports.time_not_found,
                (offset, found),
                offset,
            )
            return None if batch is None else (found, None)
        try:
            max_timestamp = max((r.timestamp for r in records_of(batch)), default=NO_TIMESTAMP)
        except KafkalogError as e:
            self.error(e.located(position=i * 12, offset=offset))
            return batch.last_offset, None
        if max_timestamp != timestamp:
            # A batch Kafka's log cleaner emptied (it keeps a producer's last batch, and a marker
            # until its delete horizon, without records) still carries the entry's timestamp in
            # its header: kafka-dump-log reports a mismatch with -1, which is printed as it does,
            # but the index is right and it is no problem.
            emptied = (
                max_timestamp == NO_TIMESTAMP
                and batch.magic >= 2
                and batch.max_timestamp == timestamp
            )
            self.entry_mismatch(
                i,
                f"Index timestamp: {timestamp}, log timestamp: {max_timestamp}",
                self.reports.time_mismatches,
                (timestamp, max_timestamp),
                offset,
                problem=not emptied,
            )
        return batch.last_offset, max_timestamp


class TxnIndexDump(SegmentFileDump):
    """``.txnindex``: one line per aborted transaction."""

    def dump(self, progress: Progress) -> None:
        base = segment_start_offset(os.path.basename(self.path))
        with TransactionIndex(self.path, 0 if base is None else base) as index:
            try:
                for n, txn in enumerate(index):
                    self.entries = n + 1
                    if self.options.json:
                        self.emit(
                            {
                                "type": "abortedTxn",
                                "version": txn.version,
                                "producerId": txn.producer_id,
                                "firstOffset": txn.first_offset,
                                "lastOffset": txn.last_offset,
                                "lastStableOffset": txn.last_stable_offset,
                            }
                        )
                    else:
                        self.line(
                            f"version: {txn.version} producerId: {txn.producer_id} "
                            f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
                            f"lastStableOffset: {txn.last_stable_offset}"
                        )
            except CorruptIndexError as e:
                self.error(e)
            else:
                self.trailing_bytes(file_size(self.path), TXN_ENTRY_SIZE)
        progress.advance(file_size(self.path))
        self.summary()
