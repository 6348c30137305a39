"""Which segments a tiered partition is read from, and for which offsets, as Kafka serves a fetch.

An offset at or past the local log start offset (the first local segment's base, or the log
start when DeleteRecords moved it past that) comes from the local log, one below it from the
copied remote segments (the metadata's COPY_SEGMENT_FINISHED), down to the log start offset. A
segment in both places (copied, not yet deleted locally) is read once, locally. Offsets no copied
segment holds, or a copied segment whose ``.log`` is not in the store, end the readable prefix
(:attr:`~.partition.TieredPartition.problem`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..clock import SystemClock
from ..datadir import (
    TopicPartition,
    parse_partition_dir_name,
    read_offset_checkpoint,
    read_partition_metadata,
)
from ..partition import Log, LogConfig
from ..segment import FileRecords, LogSegment, OffsetIndex, TimeIndex, TransactionIndex
from .errors import RemoteSegmentMissingError, TieredOffsetGapError, TieredStorageError
from .layout import LocalTieredStorageLayout, RemoteFileType, RemoteStorageLayout
from .metadata import (
    RemoteLogSegmentMetadata,
    RemotePartitionMetadata,
    TopicIdPartition,
    read_remote_log_metadata,
)
from .partition import TieredPartition, TieredSegment

__all__ = ["copied_remote_offsets", "open_tiered_partition"]

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


def open_tiered_partition(
    local_partition_dir: str | os.PathLike,
    remote_storage: RemoteStorageLayout | str | os.PathLike,
    *,
    metadata: Mapping[TopicIdPartition, RemotePartitionMetadata] | None = None,
    log_start_offset: int | None = None,
) -> TieredPartition:
    """Open a partition of a broker with tiered storage: its local directory (read-only, as any
    local log) and its remote segments.

    ``remote_storage`` is a :class:`~.layout.RemoteStorageLayout`, or the root directory of
    Kafka's LocalTieredStorage (its ``dir`` config). ``metadata`` defaults to the data
    directory's ``__remote_log_metadata`` partitions, ``log_start_offset`` to its
    ``log-start-offset-checkpoint`` (both beside ``local_partition_dir``).
    """
    local_dir = Path(local_partition_dir)
    data_dir = local_dir.parent
    tp = parse_partition_dir_name(local_dir.name).topic_partition
    topic_id = read_partition_metadata(local_dir / "partition.metadata").topic_id
    tip = TopicIdPartition(topic_id, tp.topic, tp.partition)
    layout = (
        LocalTieredStorageLayout(remote_storage)
        if isinstance(remote_storage, (str, os.PathLike))
        else remote_storage
    )
    if metadata is None:
        metadata = read_remote_log_metadata(data_dir)
    remote = metadata.get(tip) or RemotePartitionMetadata(tip)
    if log_start_offset is None:
        log_start_offset = _checkpointed_log_start(data_dir, tp)
    local = Log.open(local_dir)
    try:
        return _plan(tip, local, remote, layout, log_start_offset)
    except BaseException:
        local.close()
        raise


def copied_remote_offsets(
    local_partition_dir: str | os.PathLike,
    *,
    metadata: Mapping[TopicIdPartition, RemotePartitionMetadata] | None = None,
) -> tuple[int, int] | None:
    """(first, last) offset of a partition's copied remote segments, None when it has none: how
    a reader of the local directory alone learns that the offsets below its first segment are
    in remote storage (neither lost nor absent). ``metadata`` defaults to the data
    directory's ``__remote_log_metadata`` partitions."""
    local_dir = Path(local_partition_dir)
    if metadata is None:
        metadata = read_remote_log_metadata(local_dir.parent)
    if not metadata:
        return None
    tp = parse_partition_dir_name(local_dir.name).topic_partition
    topic_id = read_partition_metadata(local_dir / "partition.metadata").topic_id
    part = metadata.get(TopicIdPartition(topic_id, tp.topic, tp.partition))
    copied = part.copied_segments() if part is not None else []
    if not copied:
        return None
    return copied[0].start_offset, max(m.end_offset for m in copied)


def _checkpointed_log_start(data_dir: Path, tp: TopicPartition) -> int:
    path = data_dir / LOG_START_OFFSET_CHECKPOINT
    if not path.is_file():
        return 0
    return read_offset_checkpoint(path).get(tp, 0)


def _plan(
    tip: TopicIdPartition,
    local: Log,
    remote: RemotePartitionMetadata,
    layout: RemoteStorageLayout,
    log_start: int,
) -> TieredPartition:
    copied = remote.copied_segments()
    # Kafka keeps log start <= local log start: a log start moved past the first local base
    # (DeleteRecords) moves the local one too. The checkpoint may lag remote retention: the
    # first copied segment bounds the log start from below.
    local_start = max(local.log_start_offset, log_start)
    start = max(log_start, copied[0].start_offset) if copied else local_start
    start = min(start, local_start)
    pieces: list[TieredSegment] = []
    problems: list[TieredStorageError] = []
    readable = None  # how many pieces come before the first problem
    next_offset = start
    # Past a problem the plan goes on (the pieces beyond it are what verify checks too); the
    # readers stop at the first one.
    for meta in copied:
        if meta.end_offset < next_offset:
            continue  # below the log start, or offsets an earlier segment served
        if meta.start_offset >= local_start:
            break  # served locally
        if meta.start_offset > next_offset:
            problems.append(_gap(tip, next_offset, meta.start_offset, "remote segment",
                                 layout.segment_file(meta, RemoteFileType.SEGMENT)))  # fmt: skip
            next_offset = meta.start_offset
        end = min(meta.end_offset + 1, local_start)
        opened = _open_remote(layout, meta, next_offset)
        if isinstance(opened, TieredStorageError):
            problems.append(opened)
        else:
            if problems and readable is None:
                readable = len(pieces)
            pieces.append(TieredSegment(opened, next_offset, end, meta))
        next_offset = end
    if next_offset < local_start:
        first_local = local.segments[0].log.path if local.segments else local.dir
        problems.append(_gap(tip, next_offset, local_start, "local log start", first_local))
    if problems and readable is None:
        readable = len(pieces)
    next_offset = max(next_offset, local_start)
    for i, seg in enumerate(local.segments):
        nxt = local.segments[i + 1].base_offset if i + 1 < len(local.segments) else None
        end = local.log_end_offset if nxt is None else nxt
        if end > next_offset:
            pieces.append(TieredSegment(seg, max(seg.base_offset, next_offset), end))
    cut = len(pieces) if readable is None else readable
    return TieredPartition(tip, local, pieces[:cut], start, local_start,
                           problems[0] if problems else None, beyond=pieces[cut:],
                           problems=problems)  # fmt: skip


def _gap(
    tip: TopicIdPartition, at: int, until: int, what: str, next_file: str | os.PathLike
) -> TieredOffsetGapError:
    return TieredOffsetGapError(
        f"{tip}: no copied remote segment holds offsets {at} to {until - 1} (the next data is "
        f"the {what} at {until})",
        offset=at,
        path=os.fspath(next_file),
    )


def _open_remote(
    layout: RemoteStorageLayout, meta: RemoteLogSegmentMetadata, at: int
) -> LogSegment | TieredStorageError:
    """The remote segment as a read-only LogSegment, or why it cannot be read."""
    files = {t: os.fspath(layout.segment_file(meta, t)) for t in RemoteFileType}
    log_path = files[RemoteFileType.SEGMENT]
    if not _exists(log_path):
        return RemoteSegmentMissingError(
            f"remote segment {meta.segment_id} of {meta.topic_id_partition} (offsets "
            f"{meta.start_offset} to {meta.end_offset}) has no {os.path.basename(log_path)}",
            offset=max(at, meta.start_offset),
            path=log_path,
        )
    base = meta.start_offset
    config = LogConfig()
    indexes = []
    for kind, t in (
        (OffsetIndex, RemoteFileType.OFFSET_INDEX),
        (TimeIndex, RemoteFileType.TIME_INDEX),
    ):
        path = files[t]
        indexes.append(
            kind(path, base, max_index_size=config["segment.index.bytes"], skip_zero_tail=True)
            if _exists(path)
            else None
        )
    return LogSegment(
        FileRecords(log_path),
        indexes[0],
        indexes[1],
        TransactionIndex(files[RemoteFileType.TRANSACTION_INDEX], base),
        base,
        index_interval_bytes=config["index.interval.bytes"],
        roll_jitter_ms=0,
        clock=SystemClock(),
    )


def _exists(path: str) -> bool:
    if "://" in path:
        from ..storage import as_path

        return as_path(path).exists()
    return os.path.exists(path)
