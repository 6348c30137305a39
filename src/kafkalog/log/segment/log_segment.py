"""One log segment: a ``.log`` file with its ``.index``, ``.timeindex`` and ``.txnindex``.

Append rules (Kafka 4.x): each appended batch may get an offset-index entry ``(batch lastOffset,
batch position)`` once more than ``index.interval.bytes`` were written since the last entry (so the
first batch of a segment never does), together with a time-index entry for the largest timestamp
so far. Recovery rebuilds both the same way from the batches on disk, checking each batch's CRC and
cutting the file at the first invalid one.

Read-only segments (the default) never change a file. Kafka preallocates the active segment's
indexes to 10 MiB and trims them only on roll or clean shutdown, so a copy of a live or crashed
broker's disk may hold untrimmed indexes (read up to their first unwritten slot) or none at all
(the fixtures lack them): then lookups fall back to scanning the ``.log`` from the start.

Indexes are hints (docs/reading.md): a position taken from the offset index is used only once the
entry there frames (:func:`kafkalog.format.entries.entry_header`) and its base offset lies between
the segment's base offset and the offset looked up. A position that fails the check makes the
lookup start at position 0 (a scan of the segment) and the index untrusted for this segment, so
later lookups do not pay the failed check again; a writable segment rebuilds both indexes from the
log then, as Kafka rebuilds an index it does not trust. Verified positions are remembered (one
``pread`` of 61 bytes the first time a position is used, none after).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ...errors import CorruptRecordError, InvalidRecordError
from ...format import MemoryRecords
from ...format.constants import MAGIC_VALUE_V2, NO_TIMESTAMP
from ...format.entries import HEADER_PEEK, entry_header
from ..clock import Clock
from ..datadir import log_file, offset_index_file, time_index_file, transaction_index_file
from ..errors import IndexOffsetOverflowError
from ..partition import LogConfig
from ..producer import CompletedTxn
from ..storage import as_path
from .file_records import FileRecords, LogOffsetPosition, PinnedDescriptor, TimestampAndOffset
from .offset_index import OffsetIndex, OffsetPosition
from .recovery_scan import RecoveryScan, scan_for_recovery
from .time_index import TimeIndex, TimestampOffset
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from .valid_prefix import marker_error

__all__ = ["FetchDataInfo", "LogOffsetMetadata", "LogSegment", "RollParams"]

_INT32_MAX = (1 << 31) - 1
_UNKNOWN = TimestampOffset(timestamp=NO_TIMESTAMP, offset=-1)
_VERIFIED_MAX = 4096  # index positions remembered as verified, per segment
_log = logging.getLogger("kafkalog.log")


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it starts and a window of the segment file (zero-copy)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords | None
    first_entry_incomplete: bool = False
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


class RollParams(NamedTuple):
    """What decides a roll before an append (Kafka's RollParams)."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class LogSegment:
    """A segment of a partition's log. Build one with :meth:`open`."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex | None,
        time_index: TimeIndex | None,
        txn_index: TransactionIndex,
        base_offset: int,
        *,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Clock,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.created = clock.milliseconds()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_so_far: TimestampOffset | None = None
        self.dropped = False  # set when recovery moved the segment's files to quarantine
        # Indexes are hints: False once an offset-index position failed its check (lookups
        # then scan from position 0, and the time index is not used either).
        self.index_trusted = True
        # Index positions whose entry was checked: position -> the entry's first offset (the
        # log only grows between truncations, which clear it).
        self._verified: dict[int, int] = {}

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        writable: bool = False,
        file_already_exists: bool = True,
        suffix: str = "",
    ) -> LogSegment:
        """Open (or, writable and not existing, create) the segment at ``base_offset``."""
        path = log_file(directory, base_offset, suffix)
        if writable and not file_already_exists:
            records = FileRecords(path, writable=True, create=True)
        else:
            records = FileRecords(path, writable=writable)
        max_index = config["segment.index.bytes"]
        indexes = []
        for kind, file in (
            (OffsetIndex, offset_index_file(directory, base_offset, suffix)),
            (TimeIndex, time_index_file(directory, base_offset, suffix)),
        ):
            if writable:
                indexes.append(kind(file, base_offset, writable=True, max_index_size=max_index))
            elif file.exists():
                indexes.append(
                    kind(file, base_offset, max_index_size=max_index, skip_zero_tail=True)
                )
            else:
                indexes.append(None)
        txn = TransactionIndex(
            transaction_index_file(directory, base_offset, suffix), base_offset, writable=writable
        )
        jitter = config["segment.jitter.ms"]
        return cls(
            records,
            indexes[0],
            indexes[1],
            txn,
            base_offset,
            index_interval_bytes=config["index.interval.bytes"],
            roll_jitter_ms=random.randrange(jitter) if jitter > 0 else 0,
            clock=clock,
        )

    # -- facts -------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return as_path(self.log.path)

    def size(self) -> int:
        return self.log.size_in_bytes()

    def last_modified(self) -> int:
        return int(as_path(self.log.path).stat().st_mtime * 1000)

    def _max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_so_far is None:
            self._max_so_far = self._read_largest_timestamp()
        return self._max_so_far

    def _read_largest_timestamp(self) -> TimestampOffset:
        trusted = self.time_index is not None and self.index_trusted
        last = self.time_index.last_entry if trusted else _UNKNOWN
        if last.timestamp == NO_TIMESTAMP:
            last = _UNKNOWN
        position = self._index_lookup(last.offset).position if last.offset >= 0 else 0
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last.timestamp:
            return TimestampOffset(timestamp=after.timestamp, offset=after.offset)
        return last

    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_so_far().timestamp

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime when there is none (retention)."""
        ts = self.max_timestamp_so_far()
        return ts if ts >= 0 else self.last_modified()

    def _index_lookup(self, offset: int) -> OffsetPosition:
        """Where a walk for ``offset`` may start: the offset index's entry for it once the
        position is verified (:meth:`_check_position`, once per position), else the segment's
        start."""
        index = self.offset_index
        start = OffsetPosition(offset=self.base_offset, position=0)
        if index is None or not self.index_trusted:
            return start
        found = index.lookup(offset)
        position = found.position
        if position == 0:
            return start  # the segment's start: always a place to walk from
        first = self._verified.get(position)
        if first is None:
            first, why = self._check_position(position, offset)
            if first is None:
                self._distrust_index(found, offset, why)
                return start
            if len(self._verified) >= _VERIFIED_MAX:
                self._verified.clear()
            self._verified[position] = first
        if not self.base_offset <= first <= offset:
            self._distrust_index(
                found, offset, f"the batch there starts at offset {first}, past {offset}"
            )
            return start
        return found

    def _check_position(self, position: int, offset: int) -> tuple[int | None, str]:
        """The first offset of the entry at ``position`` (one read of its header), or None and
        why the position cannot be a batch start for a lookup of ``offset``."""
        log = self.log
        size = log.size_in_bytes()
        if not 0 <= position < size:
            return None, f"position {position} is outside the segment (size {size})"
        try:
            header = entry_header(log.read(position, HEADER_PEEK), 0, size - position)
        except CorruptRecordError as e:
            return None, f"no batch starts there ({e.message})"
        if header is None:
            return None, "no complete batch starts there"
        first = header.base_offset
        if header.magic < MAGIC_VALUE_V2 and first > offset and header.attributes & 0x07:
            # A legacy compressed wrapper carries its last inner offset; an index written by
            # Kafka 0.10 points at it with its first one: decompress to know it.
            try:
                first = next(iter(log.batches(position))).base_offset
            except (CorruptRecordError, InvalidRecordError, StopIteration) as e:
                return None, f"no readable batch starts there ({e})"
        return first, ""

    def _distrust_index(self, found: OffsetPosition, offset: int, why: str) -> None:
        """Stop using this segment's indexes (a walk from its start finds every batch); a
        writable segment rebuilds them from the log."""
        self.index_trusted = False
        self._verified.clear()
        index = self.offset_index
        writable = index is not None and index.writable and self.time_index is not None
        _log.log(
            logging.WARNING if writable else logging.INFO,
            "%s: entry (offset %d, position %d) used for offset %d is not a batch start at or "
            "below it (%s): the index is %s",
            index.file if index is not None else self.log.path,
            found.offset,
            found.position,
            offset,
            why,
            "rebuilt from the log" if writable else "not used (lookups walk the segment)",
        )
        if writable:
            self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Write the offset and time indexes anew from the log's batches (as :meth:`recover`
        does, without checking CRCs or cutting anything: up to the first entry that does not
        frame). The transaction index is left as it is."""
        offset_index, time_index = self.offset_index, self.time_index
        active = offset_index.length > offset_index.size_in_bytes  # has room: not rolled
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        max_so_far = _UNKNOWN
        position = last_index_entry = 0
        try:
            for batch in self.log.batches():
                if batch.max_timestamp > max_so_far.timestamp:
                    max_so_far = TimestampOffset(
                        timestamp=batch.max_timestamp, offset=batch.last_offset
                    )
                if position - last_index_entry > self.index_interval_bytes:
                    offset_entries.append((batch.last_offset, position))
                    time_entries.append((max_so_far.timestamp, max_so_far.offset))
                    last_index_entry = position
                position += batch.size_in_bytes
        except (CorruptRecordError, InvalidRecordError):
            pass  # the entries up to the damage; reads stop there
        offset_index.reset()
        time_index.reset()
        kept = min(len(offset_entries), offset_index.max_entries, time_index.max_entries - 1)
        offset_index.append_all(offset_entries[:kept])  # a full index: lookups walk further
        time_index.maybe_append_all(time_entries[:kept])
        self._bytes_since_last_index_entry = position - last_index_entry
        self._max_so_far = max_so_far
        if not active:
            if max_so_far.offset >= 0:
                time_index.maybe_append(
                    max_so_far.timestamp, max_so_far.offset, skip_full_check=True
                )
            offset_index.trim_to_valid_size()
            time_index.trim_to_valid_size()
        self._verified.clear()
        self.index_trusted = True

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # -- appending ---------------------------------------------------------------------------------
    def append(self, largest_offset: int, records, batches=None) -> None:
        """Append validated ``records`` (whole batches) whose last offset is ``largest_offset``.

        ``batches``: the batches of ``records`` when the caller has them already (saves a walk).
        """
        view = memoryview(records)
        summaries = [
            (b.last_offset, b.max_timestamp, b.size_in_bytes)
            for b in (MemoryRecords(view) if batches is None else batches)
        ]
        self.append_summarized(largest_offset, (view,), summaries)

    def append_summarized(
        self, largest_offset: int, parts: Sequence, summaries: Sequence[tuple[int, int, int]]
    ) -> None:
        """:meth:`append` of the bytes of ``parts`` written one after the other, with each batch
        given as ``(last offset, max timestamp, size)``, in order (the log's append paths read
        them in one walk that also checked the CRCs)."""
        if not summaries:
            return  # no batch, no bytes
        if not self.can_convert_to_relative_offset(largest_offset):
            raise IndexOffsetOverflowError(
                f"Detected offset overflow at offset {largest_offset} in segment "
                f"{self.log.path} (base offset {self.base_offset})",
                path=self.log.path,
                offset=largest_offset,
            )
        position = self.log.append_parts(parts)
        if position == 0 and summaries:  # what loadFirstBatchTimestamp would read back
            self._rolling_based_timestamp = summaries[0][1]
        so_far = self._max_timestamp_so_far()
        max_ts, max_offset = so_far.timestamp, so_far.offset
        since, interval = self._bytes_since_last_index_entry, self.index_interval_bytes
        offset_entries, time_entries = [], []
        for last_offset, timestamp, size in summaries:
            if timestamp > max_ts:
                max_ts, max_offset = timestamp, last_offset
            if since > interval:
                offset_entries.append((last_offset, position))
                time_entries.append((max_ts, max_offset))
                since = 0
            position += size
            since += size
        if max_offset != so_far.offset or max_ts != so_far.timestamp:
            self._max_so_far = TimestampOffset(timestamp=max_ts, offset=max_offset)
        self._bytes_since_last_index_entry = since
        if offset_entries:
            before = self.offset_index.entries
            try:
                self.offset_index.append_all(offset_entries)
            finally:  # each time entry goes with its offset entry, as Kafka appends them
                added = self.offset_index.entries - before
                self.time_index.maybe_append_all(time_entries[:added])

    def update_txn_index(self, completed_txn: CompletedTxn, last_stable_offset: int) -> None:
        if completed_txn.is_aborted:
            self.txn_index.append(
                AbortedTxn(
                    producer_id=completed_txn.producer_id,
                    first_offset=completed_txn.first_offset,
                    last_offset=completed_txn.last_offset,
                    last_stable_offset=last_stable_offset,
                )
            )

    # -- reading -----------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (the first whose last offset >= it), from the index on."""
        mapping = self._index_lookup(offset)
        return self.log.search_for_offset_with_size(
            offset, max(mapping.position, starting_position)
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        *,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """A window of this segment from the batch holding ``start_offset``; None if beyond it."""
        if max_size < 0:
            raise ValueError(
                f"Invalid max size {max_size} for log read from segment {self.log.path}"
            )
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, found.position)
        size = max(max_size, found.size) if min_one_message else max_size
        limit = self.size() if max_position is None else max_position
        if size == 0:
            return FetchDataInfo(metadata, None)
        fetch_size = min(limit - found.position, size)
        return FetchDataInfo(
            metadata, self.log.slice(found.position, fetch_size), size < found.size
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        start = self._index_lookup(
            self.offset_index.last_offset if self.offset_index is not None else self.base_offset
        ).position
        next_offset = self.base_offset
        for batch in self.log.batches(start):
            next_offset = batch.next_offset
        return next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` at or after ``starting_offset``."""
        if self.time_index is not None and self.index_trusted:
            hint = self.time_index.lookup(timestamp).offset
        else:
            hint = self.base_offset
        position = self._index_lookup(max(hint, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- rolling -----------------------------------------------------------------------------------
    def _first_batch_timestamp(self) -> int:
        if self._rolling_based_timestamp is None:
            for batch in self.log.batches():
                self._rolling_based_timestamp = batch.max_timestamp
                break
        return -1 if self._rolling_based_timestamp is None else self._rolling_based_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        ts = self._first_batch_timestamp()
        return message_timestamp - ts if ts >= 0 else now - self.created

    def should_roll(self, params: RollParams) -> bool:
        reached_roll_ms = (
            self.time_waited_for_roll(params.now, params.max_timestamp_in_messages)
            > params.max_segment_ms - self.roll_jitter_ms
        )
        size = self.size()
        return (
            size > params.max_segment_bytes - params.messages_size
            or (size > 0 and reached_roll_ms)
            or (self.offset_index is not None and self.offset_index.is_full())
            or (self.time_index is not None and self.time_index.is_full())
            or not self.can_convert_to_relative_offset(params.max_offset_in_messages)
        )

    def resize_indexes(self, size: int) -> None:
        """Grow (or trim) both indexes to ``size`` bytes: a segment that becomes the active one
        again after a reopen gets its room for entries back (Kafka's resizeIndexes)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive_segment(self) -> None:
        """Roll: final time-index entry, indexes trimmed to their entries."""
        so_far = self._max_timestamp_so_far()
        if so_far.offset >= 0:
            self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    # -- recovery and truncation -------------------------------------------------------------------
    def recovery_scan(self) -> RecoveryScan:
        """The read-only walk :meth:`recover` applies (:mod:`.recovery_scan`): a caller that
        must know the segment recovers (no marker producer state cannot take) before it changes
        other files takes it first and hands it to :meth:`recover`."""
        return scan_for_recovery(self, self.index_interval_bytes)

    def recover(
        self,
        producer_state=None,
        leader_epoch_cache=None,
        *,
        before_truncate: Callable[[int], None] | None = None,
        scan: RecoveryScan | None = None,
    ) -> int:
        """Rebuild the indexes from the log, cut it at the first invalid batch; bytes cut.

        ``producer_state`` (a ProducerStateManager) and ``leader_epoch_cache`` are brought up to
        date with every valid batch, and aborted transactions go to the transaction index.
        ``scan``: this segment's :meth:`recovery_scan`, when the caller took it (else taken
        here, before anything is written).
        """
        if scan is None:
            scan = self.recovery_scan()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_so_far = _UNKNOWN
        self.offset_index.append_all(scan.offset_entries)
        self.time_index.maybe_append_all(scan.time_entries)
        if leader_epoch_cache is not None:
            for epoch, base_offset in scan.epochs:
                latest = leader_epoch_cache.latest_epoch()
                if latest is None or epoch > latest:
                    leader_epoch_cache.assign(epoch, base_offset)
        if producer_state is not None:
            for batch in scan.to_replay():
                try:
                    completed = producer_state.replay_batch(batch)
                except (CorruptRecordError, InvalidRecordError) as e:
                    if batch.is_control:
                        raise marker_error(e, batch, str(self.log.path)) from None
                    raise e.located(path=str(self.log.path), position=batch.position) from None
                if completed is not None:
                    self.update_txn_index(*completed)
            if scan.last_v2_offset is not None:
                producer_state.update_map_end_offset(scan.last_v2_offset + 1)
        max_so_far = scan.max_so_far
        self._max_so_far = max_so_far
        valid_bytes = scan.valid_bytes
        truncated = self.log.size_in_bytes() - valid_bytes
        if truncated and before_truncate is not None:
            before_truncate(valid_bytes)  # a chance to keep the bytes about to be cut
        self.log.truncate_to(valid_bytes)
        self.offset_index.trim_to_valid_size()
        if max_so_far.offset >= 0:
            self.time_index.maybe_append(
                max_so_far.timestamp, max_so_far.offset, skip_full_check=True
            )
        self.time_index.trim_to_valid_size()
        self._verified.clear()
        self.index_trusted = True  # rebuilt from the log
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping.position)
        self._verified.clear()  # positions past the cut may be written again
        if self.log.size_in_bytes() == 0:
            self.created = self._clock.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_so_far = None
        return removed

    def has_overflow(self) -> bool:
        next_offset = self.read_next_offset()
        return next_offset > self.base_offset and not self.can_convert_to_relative_offset(
            next_offset - 1
        )

    # -- files -------------------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        for index in (self.offset_index, self.time_index, self.txn_index):
            if index is not None:
                index.flush()

    def pin_for_fsync(self, *, log: bool = True, indexes: bool = True) -> list[PinnedDescriptor]:
        """:meth:`flush` in two halves (the ``.log`` and/or the indexes): the descriptors pinned
        now, on the log's thread, to be fsynced and released on any thread (see
        :class:`~.file_records.PinnedDescriptor`)."""
        parts = ([self.log] if log else []) + (
            [self.offset_index, self.time_index, self.txn_index] if indexes else []
        )
        pins: list[PinnedDescriptor] = []
        try:
            for part in parts:
                pin = part.pin_for_fsync() if part is not None else None
                if pin is not None:
                    pins.append(pin)
        except BaseException:
            for pin in pins:
                pin.release()
            raise
        return pins

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment (``.cleaned`` -> ``.swap`` -> ``""``, ``.deleted``)."""
        self.log.rename_to(_replace_suffix(self.log.path, old_suffix, new_suffix))
        for index in (self.offset_index, self.time_index, self.txn_index):
            if index is not None:
                index.rename_to(_replace_suffix(str(index.file), old_suffix, new_suffix))

    def close(self) -> None:
        if self.offset_index is not None and self.offset_index.writable and self._max_so_far:
            so_far = self._max_so_far
            # The final entry takes the slot kept for it; an index trimmed at roll has none left
            # (Kafka's close swallows the overflow): an inactive segment gets no entry then.
            if so_far.offset >= 0 and self.time_index.entries < self.time_index.max_entries:
                self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
        for part in (self.offset_index, self.time_index, self.txn_index, self.log):
            if part is not None:
                part.close()

    def delete_if_exists(self) -> None:
        self.close()
        for path in (
            self.log.path,
            self.offset_index_path,
            self.time_index_path,
            self.txn_index.file,
        ):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    @property
    def offset_index_path(self) -> Path:
        return self._index_path(self.offset_index, ".index")

    @property
    def time_index_path(self) -> Path:
        return self._index_path(self.time_index, ".timeindex")

    def _index_path(self, index: OffsetIndex | TimeIndex | None, suffix: str) -> Path:
        """The index's file, or where it would be for a segment opened without it."""
        return index.file if index is not None else Path(self.log.path).with_suffix(suffix)

    def __repr__(self) -> str:
        return (
            f"LogSegment(baseOffset={self.base_offset}, size={self.size()}, path={self.log.path})"
        )


def _replace_suffix(path: str, old: str, new: str) -> str:
    if not path.endswith(old):
        raise ValueError(f"{path} does not end with {old!r}")
    return path[: len(path) - len(old)] + new
