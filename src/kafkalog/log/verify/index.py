"""Checking a segment's ``.index``, ``.timeindex`` and ``.txnindex`` against its log, and one
segment as a whole (part of :mod:`kafkalog.log.verify`; nothing here writes).

Index entries are checked while the log is walked, without holding the log's batches:

- ``.index`` (offset, position): Kafka 4.x writes (batch lastOffset, batch position); Kafka 1.x-3.x
  wrote (last offset of an append, position of its first batch), and an append may hold several
  batches (a follower's fetch, a cleaned chunk); 0.10 and earlier wrote the *first* offset of the
  append. So the position must be a batch start and the offset the batch's base offset, its last
  offset, or the last offset of a later batch. Anything else makes lookups start at the wrong place
  (DumpLogSegments calls it a mismatch).
- ``.timeindex`` (timestamp, offset): the offset lies in a batch whose max timestamp is the entry's
  timestamp (DumpLogSegments' check; older brokers indexed the record's own offset, inside the
  batch); timestamps strictly increase and offsets never decrease.
- ``.txnindex``: each aborted transaction's lastOffset is an ABORT marker of that producer in this
  segment (Kafka writes the entry into the segment the marker went to, and the cleaner keeps
  entries only with their markers); an ABORT marker without an entry is a warning, as the cleaner
  keeps markers whose records it already removed.

The offset and time index checks ride along the log walk as observers of :func:`.scan_log` and keep
only the index's entries, never the log's batches.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ...errors import CorruptIndexError
from ...format import Tail
from ..datadir import offset_index_file, time_index_file, transaction_index_file
from ..segment import ENTRY_SIZE as TXN_ENTRY_SIZE
from ..segment import OffsetIndex, OffsetPosition, TimeIndex, TransactionIndex
from .report import FindingSink
from .segment import BatchFacts, LogScan, scan_log
from .tail import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "check_index_file",
    "check_segment",
    "check_txn_index",
    "open_index",
    "written_entries",
]

_UNINDEXED_ABORT = (
    "READ_COMMITTED consumers would see the aborted records if any remain (the log cleaner keeps "
    "a marker without an entry once the transaction's records are gone)"
)


# -- offset and time index checks ------------------------------------------------------------------


def _entry_mismatch(
    sink: FindingSink, code: str, path: str, entry: str, position: int, offset: int, why: str
) -> None:
    """An index entry the batches do not bear out; ``position`` is the entry's in the file."""
    sink.error(code, path, f"{entry}: {why}", position=position, offset=offset)


class _OffsetIndexCheck:
    """Lockstep check of ``.index`` entries against the batches, in position order."""

    def __init__(self, index: OffsetIndex, written: list, sink: FindingSink) -> None:
        self.path, self.sink = str(index.file), sink
        entries = [(e.position, e.offset, n) for n, e in enumerate(written)]
        _check_monotonic(entries, sink, self.path, "index", offsets_strict=True)
        self.entries = sorted(entries)
        self.next = 0
        # offset that must be the last offset of a later batch -> (entry number, position)
        self.pending: dict[int, tuple[int, int]] = {}

    def _mismatch(self, n: int, position: int, offset: int, why: str) -> None:
        entry = f"entry {n} (offset {offset}, position {position})"
        _entry_mismatch(self.sink, "index-entry-mismatch", self.path, entry, n * 8, offset, why)

    def on_batch(self, facts: BatchFacts, prev_last: int | None) -> None:
        self.pending.pop(facts.last_offset, None)
        for offset in [o for o in self.pending if o < facts.last_offset]:
            n, position = self.pending.pop(offset)
            self._mismatch(n, position, offset, "no batch from its position on ends there")
        while self.next < len(self.entries) and self.entries[self.next][0] <= facts.position:
            position, offset, n = self.entries[self.next]
            self.next += 1
            if position < facts.position:
                self._mismatch(n, position, offset, "the position is not where a batch starts")
            elif offset == facts.last_offset or offset == facts.base_offset:
                continue  # Kafka 4.x (batch lastOffset), or <= 0.10 (first offset of an append)
            elif offset > facts.last_offset:
                self.pending[offset] = (n, position)  # an append of several batches (1.x-3.x)
            elif facts.base_offset is None and (prev_last is None or offset > prev_last):
                continue  # inside a legacy wrapper that could not be decompressed
            else:
                self._mismatch(
                    n, position, offset,
                    f"the batch there holds offsets {facts.base_offset}..{facts.last_offset}, "
                    f"so the offset is neither its first nor its last",
                )  # fmt: skip

    def finish(self, scan: LogScan) -> None:
        left = [(n, offset) for offset, (n, _) in self.pending.items()]
        left += [(n, offset) for _, offset, n in self.entries[self.next :]]
        if _past_unreadable(left, scan, self.sink, self.path):
            return
        for offset, (n, position) in self.pending.items():
            self._mismatch(n, position, offset, f"the log's last offset is {scan.last_offset}")
        for position, offset, n in self.entries[self.next :]:
            self._mismatch(
                n, position, offset,
                f"the position is at or past the end of the last complete batch "
                f"({scan.valid_bytes} bytes)",
            )  # fmt: skip


class _TimeIndexCheck:
    """Lockstep check of ``.timeindex`` entries against the batches, in offset order."""

    def __init__(self, index: TimeIndex, written: list, sink: FindingSink) -> None:
        self.path, self.sink = str(index.file), sink
        entries = [(e.timestamp, e.offset, n) for n, e in enumerate(written)]
        _check_monotonic(entries, sink, self.path, "time-index", offsets_strict=False)
        self.entries = sorted((offset, timestamp, n) for timestamp, offset, n in entries)
        self.next = 0

    def _mismatch(self, n: int, timestamp: int, offset: int, why: str) -> None:
        entry = f"entry {n} (timestamp {timestamp}, offset {offset})"
        _entry_mismatch(
            self.sink, "time-index-entry-mismatch", self.path, entry, n * 12, offset, why
        )

    def on_batch(self, facts: BatchFacts, prev_last: int | None) -> None:
        low = facts.base_offset
        if low is None:
            low = facts.last_offset if prev_last is None else prev_last + 1
        while self.next < len(self.entries) and self.entries[self.next][0] <= facts.last_offset:
            offset, timestamp, n = self.entries[self.next]
            self.next += 1
            if offset < low:
                self._mismatch(n, timestamp, offset, "no batch holds this offset")
            elif timestamp != facts.max_timestamp:
                self._mismatch(
                    n, timestamp, offset,
                    f"the batch holding it (position {facts.position}) has max timestamp "
                    f"{facts.max_timestamp}",
                )  # fmt: skip

    def finish(self, scan: LogScan) -> None:
        left = [(n, offset) for offset, _, n in self.entries[self.next :]]
        if _past_unreadable(left, scan, self.sink, self.path):
            return
        for offset, timestamp, n in self.entries[self.next :]:
            self._mismatch(n, timestamp, offset, f"the log's last offset is {scan.last_offset}")


def _past_unreadable(left: list[tuple[int, int]], scan: LogScan, sink, path: str) -> bool:
    """One finding for the ``(entry number, offset)`` entries left unchecked because the log
    stops being readable before them: they follow from the log's own finding there, and one
    line per entry would bury it. False when the log reads to its end (each is a mismatch)."""
    if not left or scan.tail == Tail.NONE:
        return False
    numbers = sorted(n for n, _ in left)
    first = min(offset for _, offset in left)
    sink.info(
        "index-past-unreadable", path,
        f"{len(left)} entries (entry {numbers[0]} to {numbers[-1]}, from offset {first}) point "
        f"past position {scan.valid_bytes}, where the log stops being readable ({scan.tail} "
        f"tail, reported on the log): not checked",
        offset=first,
    )  # fmt: skip
    return True


def written_entries(index) -> list:
    """The entries Kafka wrote. An untrimmed (preallocated) file's entries end at its first zero
    slot after slot 0 (``skip_zero_tail``); slot 0 itself is unwritten when it is all zeros and
    nothing follows, since Kafka never indexes a segment's first batch (position 0)."""
    found = list(index)
    if len(found) == 1 and index.length > index.ENTRY_SIZE:
        entry = found[0]
        other = entry.position if isinstance(entry, OffsetPosition) else entry.timestamp
        if entry.offset == index.base_offset and other == 0:
            return []
    return found


def _check_monotonic(entries, sink: FindingSink, path: str, kind: str, *, offsets_strict: bool):
    """Entries as (key, offset, n) in file order: keys (positions or timestamps) strictly
    increase; offsets strictly increase in the offset index and never fall in the time index."""
    size = 8 if kind == "index" else 12
    for (key0, off0, _), (key1, off1, n) in itertools.pairwise(entries):
        if key1 <= key0 or off1 < off0 or (offsets_strict and off1 == off0):
            sink.error(
                f"{kind}-not-monotonic", path,
                f"entry {n} ({key1}, offset {off1}) does not follow entry {n - 1} ({key0}, offset "
                f"{off0}): Kafka's binary search needs increasing entries",
                position=n * size, offset=off1,
            )  # fmt: skip


# -- one segment -----------------------------------------------------------------------------------


def open_index(kind, path: Path, base: int, sink: FindingSink, code: str, *, active: bool):
    """Open an index read-only, run Kafka's sanity check and read its written entries:
    ``(index, entries)``, or None when the file cannot be read."""
    try:
        index = kind(path, base, skip_zero_tail=True)
    except OSError as e:
        sink.io_error(path, e)
        return None
    sink.files_checked += 1
    try:
        index.sanity_check()
    except CorruptIndexError as e:
        whole = index.length - index.length % index.ENTRY_SIZE
        sink.error(
            f"{code}-corrupt", path,
            f"{e.message} (Kafka's sanity check fails, so the broker rebuilds it from the log)",
            position=whole if index.length != whole else None,
        )  # fmt: skip
    entries = written_entries(index)
    written = len(entries) * index.ENTRY_SIZE
    if written < index.length - index.length % index.ENTRY_SIZE and not active:
        sink.warning(
            f"{code}-untrimmed", path,
            f"{written // index.ENTRY_SIZE} entries then {index.length - written} bytes of "
            f"unwritten (zero) slots: Kafka trims the index when it rolls the segment, so this "
            f"one was not closed cleanly",
            position=written,
        )  # fmt: skip
    return index, entries


def check_segment(
    directory: Path,
    base: int,
    log_path: Path,
    sink: FindingSink,
    *,
    deep: bool,
    active: bool,
    suffix: str = "",
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    index_files: tuple[Path, Path, Path] | None = None,
) -> LogScan:
    """The segment's log and its three indexes (missing offset/time indexes are reported);
    ``max_message_bytes`` is the topic's. ``index_files`` (offset, time, transaction index)
    name a remote segment's, which are not where Kafka names a local segment's: a missing one
    is an error there (Kafka's remote fetch reads them and never rebuilds them)."""
    remote = index_files is not None
    if index_files is None:
        index_files = (offset_index_file(directory, base, suffix),
                       time_index_file(directory, base, suffix),
                       transaction_index_file(directory, base, suffix))  # fmt: skip
    observers, opened = [], []
    for kind, path, code, check in (
        (OffsetIndex, index_files[0], "index", _OffsetIndexCheck),
        (TimeIndex, index_files[1], "time-index", _TimeIndexCheck),
    ):
        if not path.exists():
            if remote:
                sink.error(
                    f"{code}-missing", path,
                    f"no {path.name} for a remote segment: Kafka's remote fetch reads it (its "
                    f"RemoteIndexCache) and cannot rebuild it, so it cannot serve these offsets",
                )  # fmt: skip
            elif not suffix:
                state = (
                    "the active segment: Kafka preallocates its index and trims it only on roll"
                    if active
                    else "a rolled segment: Kafka rebuilds it from the log on startup"
                )
                sink.warning(f"{code}-missing", path, f"no {path.name} for {state}")
            continue
        found = open_index(kind, path, base, sink, code, active=active)
        if found is not None:
            opened.append(found[0])
            observers.append(check(*found, sink))
    try:
        scan = scan_log(log_path, sink, deep=deep, base_offset=base, active=active,
                        observers=observers, max_message_bytes=max_message_bytes)  # fmt: skip
    finally:
        for index in opened:
            index.close()
    check_txn_index(index_files[2], base, scan, sink)
    return scan


def check_txn_index(path: Path, base: int, scan: LogScan | None, sink: FindingSink) -> None:
    """Aborted transactions against the segment's ABORT markers (``scan`` None: format only)."""
    markers = dict(scan.abort_markers) if scan is not None else {}
    if not path.exists():
        if markers:
            first = min(markers)
            sink.warning(
                "txn-index-entry-missing", path,
                f"{len(markers)} ABORT markers (the first at offset {first}) but no transaction "
                f"index: {_UNINDEXED_ABORT}",
                offset=first,
            )  # fmt: skip
        return
    sink.files_checked += 1
    index = TransactionIndex(path, base)
    try:
        previous, n = None, -1
        try:
            for n, txn in enumerate(index):
                _check_txn_entry(txn, n, previous, base, markers, scan, sink, path)
                previous = txn.last_offset
        except CorruptIndexError as e:
            sink.error("txn-index-corrupt", path, e.message, position=(n + 1) * TXN_ENTRY_SIZE)
        size = path.stat().st_size
        if size % TXN_ENTRY_SIZE:
            sink.error(
                "txn-index-corrupt", path,
                f"{size % TXN_ENTRY_SIZE} bytes after the last whole {TXN_ENTRY_SIZE}-byte entry "
                f"(a torn append)",
                position=size - size % TXN_ENTRY_SIZE,
            )  # fmt: skip
    finally:
        index.close()
    for offset in sorted(markers):
        sink.warning(
            "txn-index-entry-missing", path,
            f"the ABORT marker at offset {offset} has no entry: {_UNINDEXED_ABORT}",
            offset=offset,
        )  # fmt: skip


def _check_txn_entry(txn, n, previous, base, markers, scan, sink, path) -> None:
    where = {"position": n * TXN_ENTRY_SIZE, "offset": txn.last_offset}
    if txn.last_offset < base or txn.first_offset > txn.last_offset:
        sink.error(
            "txn-index-corrupt", path,
            f"entry {n} spans offsets {txn.first_offset}..{txn.last_offset}, not an aborted "
            f"transaction ending in this segment (base offset {base})",
            **where,
        )  # fmt: skip
    elif previous is not None and txn.last_offset <= previous:
        sink.error(
            "txn-index-not-monotonic", path,
            f"entry {n} ends at offset {txn.last_offset}, not after the previous entry's "
            f"{previous}",
            **where,
        )  # fmt: skip
    elif scan is not None and markers.pop(txn.last_offset, None) != txn.producer_id:
        sink.error(
            "txn-index-entry-mismatch", path,
            f"entry {n}: no ABORT marker of producer {txn.producer_id} at offset "
            f"{txn.last_offset} in the segment",
            **where,
        )  # fmt: skip


def check_index_file(
    path: Path, base: int, sink: FindingSink, *, time_index: bool, active: bool
) -> None:
    """One ``.index`` or ``.timeindex`` alone: sanity, order, and entries against its ``.log``
    (whose own problems are only counted: verify the .log, or the partition, for them)."""
    kind, code, check = (
        (TimeIndex, "time-index", _TimeIndexCheck)
        if time_index
        else (OffsetIndex, "index", _OffsetIndexCheck)
    )
    found = open_index(kind, path, base, sink, code, active=active)
    if found is None:
        return
    index = found[0]
    try:
        checker = check(*found, sink)
        log = path.with_name(f"{path.name.split('.', 1)[0]}.log")
        if not log.exists():
            sink.warning(
                "orphan-index", path, f"no {log.name}: Kafka's loader deletes an index without it"
            )
            return
        log_sink = FindingSink()
        scan_log(log, log_sink, deep=False, base_offset=base, active=active, observers=[checker])
        sink.files_checked += log_sink.files_checked
        errors, _ = log_sink.count_since(0)
        if errors:
            sink.info(
                "log-has-errors", log,
                f"{errors} errors in the segment's log itself; verify {log.name} for them",
            )  # fmt: skip
    finally:
        index.close()
