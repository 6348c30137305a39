"""Checking a tiered partition's remote part (KIP-405; part of :mod:`kafkalog.log.verify`;
nothing here writes).

Which remote segments serve which offsets is the readers' plan
(:func:`kafkalog.log.tiered.open_tiered_partition`), taken whole: verify checks what the
readers read, and past a problem what they would read next. Each remote segment is checked as
a rolled local segment is (batches, CRCs, records, offsets from its start offset, its indexes
and transaction index, its producer snapshot and leader epochs), then against its metadata: its
batches end at the metadata's end offset, neither before (``remote-segment-truncated``) nor past
it into the next segment's offsets (``remote-segment-overlap``). Offsets no copied remote
segment holds (``remote-offset-gap``) and a copied segment whose ``.log`` is not in the store
(``remote-segment-missing``) are where every reader's data ends.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import KafkalogError
from ...format import Tail
from ..tiered import (
    LocalTieredStorageLayout,
    RemoteFileType,
    RemotePartitionMetadata,
    RemoteSegmentMissingError,
    RemoteStorageLayout,
    TieredPartition,
    TieredSegment,
    TieredStorageError,
    TopicIdPartition,
    copied_remote_offsets,
    open_tiered_partition,
    read_remote_log_metadata,
)
from .index import check_segment
from .partition import PartitionContext, check_leader_epoch_file, check_snapshot_file, error_text
from .report import FindingSink, PartitionSummary

__all__ = ["RemoteStore", "TieredCheck", "open_remote_store"]

RemoteMetadata = Mapping[TopicIdPartition, RemotePartitionMetadata]


@dataclass(slots=True)
class RemoteStore:
    """The remote store verify was given (None: not given) and the data directory's remote log
    metadata (empty: no tiered storage there)."""

    layout: RemoteStorageLayout | None
    metadata: RemoteMetadata


def open_remote_store(
    data_dir: Path, remote_storage: RemoteStorageLayout | str | os.PathLike | None, sink
) -> RemoteStore:
    """The data directory's ``__remote_log_metadata`` folded; a value that cannot be read is an
    error finding (``remote-log-metadata-corrupt``), and no partition is then read as tiered."""
    layout = (
        LocalTieredStorageLayout(remote_storage)
        if isinstance(remote_storage, (str, os.PathLike))
        else remote_storage
    )
    try:
        metadata = read_remote_log_metadata(data_dir)
    except KafkalogError as e:
        sink.error("remote-log-metadata-corrupt", e.path or data_dir,
                   f"{error_text(e)}: the remote segments cannot be told apart from deleted "
                   f"ones, so no partition's remote part is verified", offset=e.offset)  # fmt: skip
        metadata = {}
    except OSError as e:
        sink.io_error(data_dir, e, "cannot read the remote log metadata")
        metadata = {}
    return RemoteStore(layout, metadata)


class TieredCheck:
    """One partition's remote part: :meth:`prepare` before the local checks (which offsets
    the remote store holds), :meth:`check` after them."""

    def __init__(self, directory: Path, store: RemoteStore, context: PartitionContext) -> None:
        self.directory, self.store, self.context = directory, store, context
        self.copied: tuple[int, int] | None = None
        self.tiered: TieredPartition | None = None
        self.unopened: str | None = None  # why the plan could not be made

    def prepare(self) -> None:
        """Open the plan, and tell the local checks where the local log's offsets begin: an
        index left below it by local retention is a leftover, not a lost segment."""
        if not self.store.metadata:
            return
        try:
            self.copied = copied_remote_offsets(self.directory, metadata=self.store.metadata)
            if self.copied is None:
                return
            self.context.remote_end = self.copied[1] + 1
            if self.store.layout is None:
                return
            self.tiered = open_tiered_partition(
                self.directory, self.store.layout, metadata=self.store.metadata,
                log_start_offset=self.context.log_start_offset,
            )  # fmt: skip
        except (KafkalogError, OSError) as e:
            self.unopened = str(e)  # the local checks say what is wrong locally
            return
        self.context.remote_end = self.tiered.local_log_start_offset

    def check(self, sink: FindingSink, summary: PartitionSummary, *, deep: bool) -> None:
        """Every remote segment and problem of the plan, in offset order; the partition's
        summary then covers the whole log."""
        start = len(sink.findings)
        self._check(sink, summary, deep=deep)
        errors, warnings = sink.count_since(start)
        summary.errors += errors
        summary.warnings += warnings

    def close(self) -> None:
        if self.tiered is not None:
            self.tiered.close()

    def _check(self, sink: FindingSink, summary: PartitionSummary, *, deep: bool) -> None:
        if self.copied is None:
            return
        local_start = summary.log_start_offset or 0
        if self.tiered is None:
            first = max(self.copied[0], self.context.log_start_offset or 0)
            if first < local_start:
                why = (
                    "no remote storage was given (--remote-storage)"
                    if self.unopened is None
                    else f"the partition cannot be opened: {self.unopened}"
                )
                sink.warning(
                    "remote-segments-not-verified", self.directory,
                    f"offsets {first} to {local_start - 1} are in tiered storage (copied remote "
                    f"segments in the remote log metadata): not verified, {why}",
                    offset=first,
                )  # fmt: skip
            return
        tiered = self.tiered
        remote = [p for p in (*tiered.segments, *tiered.beyond) if p.remote is not None]
        items: list[tuple[int, TieredSegment | TieredStorageError]] = [(p.start, p) for p in remote]
        items += [(e.offset or 0, e) for e in tiered.problems]
        for _, item in sorted(items, key=lambda i: (i[0], isinstance(i[1], TieredSegment))):
            if isinstance(item, TieredSegment):
                self._segment(item, sink, summary, deep=deep)
            else:
                _problem(item, sink)
        summary.segments += len(remote)
        summary.log_start_offset = tiered.log_start_offset
        if tiered.segments and tiered.segments[0].remote is not None:
            served = [p for p in tiered.segments if p.remote is not None]
            sink.info(
                "remote-segments", self.directory,
                f"offsets {tiered.log_start_offset} to {served[-1].end - 1} are read from "
                f"{len(served)} remote segments ({_where(served[0])}); the local log starts "
                f"at {tiered.local_log_start_offset}",
                offset=tiered.log_start_offset,
            )  # fmt: skip

    def _segment(
        self, piece: TieredSegment, sink: FindingSink, summary: PartitionSummary, *, deep: bool
    ) -> None:
        meta, layout = piece.remote, self.store.layout
        assert meta is not None and layout is not None and self.tiered is not None
        files = {t: Path(os.fspath(layout.segment_file(meta, t))) for t in RemoteFileType}
        log_path = files[RemoteFileType.SEGMENT]
        try:
            scan = check_segment(
                self.directory, meta.start_offset, log_path, sink, deep=deep, active=False,
                max_message_bytes=self.context.max_message_bytes,
                index_files=(files[RemoteFileType.OFFSET_INDEX],
                             files[RemoteFileType.TIME_INDEX],
                             files[RemoteFileType.TRANSACTION_INDEX]),
            )  # fmt: skip
        except OSError as e:
            sink.io_error(log_path, e)
            return
        summary.batches += scan.batches
        summary.records += scan.records
        next_offset = scan.next_offset if scan.next_offset is not None else meta.start_offset
        truncated = piece.truncation(next_offset, position=scan.valid_bytes)
        where = {"position": scan.valid_bytes, "offset": next_offset}
        if truncated is not None and scan.tail in (Tail.NONE, Tail.PARTIAL):
            sink.error(
                "remote-segment-truncated", log_path,
                f"{truncated.message}: its records from offset {next_offset} to "
                f"{meta.end_offset} are lost (every reader stops at {next_offset})",
                **where,
            )  # fmt: skip
        elif scan.size < meta.segment_size_in_bytes:
            sink.error(
                "remote-segment-truncated", log_path,
                f"remote segment {meta.segment_id} is {scan.size} bytes, its metadata says "
                f"{meta.segment_size_in_bytes}: bytes are missing from its end",
                **where,
            )  # fmt: skip
        elif scan.last_offset is not None and scan.last_offset > meta.end_offset:
            sink.error(
                "remote-segment-overlap", log_path,
                f"batches up to offset {scan.last_offset}, past the end offset "
                f"{meta.end_offset} its metadata gives: the offsets after it are the next "
                f"segment's (remote, or the local log's from "
                f"{self.tiered.local_log_start_offset}), which holds them too",
                offset=meta.end_offset + 1,
            )  # fmt: skip
        snapshot = files[RemoteFileType.PRODUCER_SNAPSHOT]
        if snapshot.is_file():
            check_snapshot_file(snapshot, sink, offset=meta.end_offset + 1)
        epochs = files[RemoteFileType.LEADER_EPOCH_CHECKPOINT]
        if epochs.is_file():
            check_leader_epoch_file(epochs, sink)


def _problem(error: TieredStorageError, sink: FindingSink) -> None:
    """A problem of the plan: every reader's data ends at its offset."""
    code = (
        "remote-segment-missing"
        if isinstance(error, RemoteSegmentMissingError)
        else "remote-offset-gap"
    )
    sink.error(code, error.path or "", f"{error.message}: the records there are lost (every "
               f"reader stops at offset {error.offset})", offset=error.offset)  # fmt: skip


def _where(piece: TieredSegment) -> str:
    return os.path.dirname(piece.path)
