"""A malformed ``leader-epoch-checkpoint``: found, and rebuilt from the log's own batches.

Kafka cannot open a partition whose leader-epoch-checkpoint it cannot parse: the read fails with
an IOException and the whole log directory goes offline. The file is only a cache of what the
batches carry: every magic 2 batch records the leader epoch it was written in, so the epochs and
the offsets where each began can be read back from the log, as a follower's appends record them
(an epoch enters the cache at the first batch written in it, if it is newer than the last one).
``kafkalog recover`` plans this (:func:`leader_epoch_problem`) and, with ``--apply``, moves the
malformed file to the partition's quarantine and writes the rebuilt one
(:func:`rebuild_leader_epoch_checkpoint`) before the log is opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...errors import KafkalogError
from ...format import Batch
from ..clock import SystemClock
from ..datadir import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    EpochEntry,
    offset_from_file_name,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from ..segment import LogSegment
from .config import LogConfig
from .quarantine import Quarantine

__all__ = [
    "describe_epochs",
    "epochs_from_batches",
    "leader_epoch_problem",
    "rebuild_leader_epoch_checkpoint",
    "rebuilt_leader_epochs",
]


def leader_epoch_problem(directory: str | os.PathLike) -> str | None:
    """Why ``directory``'s leader-epoch-checkpoint cannot be read (None: absent or fine)."""
    path = Path(directory) / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return None
    try:
        read_leader_epoch_checkpoint(path)
    except KafkalogError as e:
        line = getattr(e, "line", None)
        return f"{e.message}" + (f" (line {line})" if line is not None else "")
    return None


def epochs_from_batches(batches: Iterable[Batch]) -> list[EpochEntry]:
    """The epoch entries the batches imply, in log order: each epoch newer than the last starts
    at the base offset of its first batch (legacy batches carry no epoch)."""
    entries: list[EpochEntry] = []
    for batch in batches:
        epoch = batch.partition_leader_epoch if batch.magic >= 2 else -1
        if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
            entries.append(EpochEntry(epoch=epoch, start_offset=batch.base_offset))
    return entries


def rebuilt_leader_epochs(directory: str | os.PathLike) -> list[EpochEntry]:
    """The entries read back from the partition's segments (``*.log``, in offset order), up to
    the first batch that cannot be framed: recovery cuts the log there, so epochs after it
    would be trimmed anyway."""
    directory = Path(directory)
    bases = sorted(
        offset_from_file_name(p.name)
        for p in directory.iterdir()
        if p.is_file() and p.name.endswith(LOG_FILE_SUFFIX)
    )
    config, clock = LogConfig(), SystemClock()

    def batches() -> Iterable[Batch]:
        for base in bases:
            segment = LogSegment.open(directory, base, config, clock, writable=False)
            try:
                yield from segment.log.batches()
            except KafkalogError:
                return
            finally:
                segment.close()

    return epochs_from_batches(batches())


def rebuild_leader_epoch_checkpoint(
    directory: str | os.PathLike, *, clock_ms: int | None = None
) -> tuple[list[EpochEntry], Path | None]:
    """Replace a malformed leader-epoch-checkpoint with one rebuilt from the batches; the old
    file goes to the quarantine. Returns (the entries written, where the old file went); does
    nothing, (``[]``, None), when the file is absent or reads fine."""
    problem = leader_epoch_problem(directory)
    if problem is None:
        return [], None
    path = Path(directory) / LEADER_EPOCH_CHECKPOINT
    entries = rebuilt_leader_epochs(directory)
    moved = Quarantine(directory, clock_ms=clock_ms).move_file(
        path, f"malformed ({problem}): rebuilt from the batches' partition leader epochs"
    )
    write_leader_epoch_checkpoint(path, entries)
    return entries, moved


def describe_epochs(entries: list[EpochEntry]) -> str:
    """``epoch@startOffset`` pairs, as the recovery plan prints them."""
    return ", ".join(f"{e.epoch}@{e.start_offset}" for e in entries) or "none"
