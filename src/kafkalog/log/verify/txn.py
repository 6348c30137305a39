"""Segments whose ABORT markers no ``.txnindex`` lists (part of
:mod:`kafkalog.log.verify`; also used by ``kafkalog consume``, which warns where
read_committed cannot drop aborted records).

Kafka creates a segment's ``.txnindex`` only when it first records an aborted transaction there,
so a missing file is normal for a segment without ABORT markers. With markers, a READ_COMMITTED
fetch finds no aborted transactions (the broker reads only the index) and returns the aborted
records as if committed. Finding the markers reads only batch headers and the control batches'
few records, never the data batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import KafkalogError
from ...format.batch import RecordBatch
from ...format.constants import ControlRecordType
from ...format.control import decode_control_type
from ...format.entries import entry_header
from ..datadir import (
    LOG_FILE_SUFFIX,
    log_file,
    offset_from_file_name,
    transaction_index_file,
)
from .segment import ReadOnlyMap

__all__ = ["UnindexedAborts", "abort_markers", "unindexed_aborts"]


@dataclass(frozen=True, slots=True)
class UnindexedAborts:
    """A segment with ABORT markers and no ``.txnindex``."""

    log: Path
    markers: tuple[int, ...]  # the markers' offsets


def abort_markers(path: str | os.PathLike) -> list[int]:
    """Offsets of the ABORT markers in a segment, in file order. The walk stops quietly where
    the framing ends or a control batch does not decode: verify and the readers report those."""
    found: list[int] = []
    with ReadOnlyMap(path) as view:
        pos, end = 0, len(view)
        while True:
            try:
                header = entry_header(view, pos, end)
            except KafkalogError:
                break
            if header is None:
                break
            if header.control:
                try:
                    for record in RecordBatch(view[pos : header.end], pos).records():
                        if decode_control_type(record.key) == ControlRecordType.ABORT:
                            found.append(record.offset)
                except KafkalogError:
                    break
            pos = header.end
        del view
    return found


def unindexed_aborts(directory: Path, start: int, end: int) -> list[UnindexedAborts]:
    """The segments of a partition directory holding offsets of ``[start, end)`` that have
    ABORT markers in that range but no ``.txnindex``."""
    bases = sorted(
        offset_from_file_name(p.name)
        for p in directory.iterdir()
        if p.name.endswith(LOG_FILE_SUFFIX) and p.name[:-4].isdigit()
    )
    out = []
    for i, base in enumerate(bases):
        following = bases[i + 1] if i + 1 < len(bases) else None
        if base >= end or (following is not None and following <= start):
            continue
        if transaction_index_file(directory, base).exists():
            continue
        log = log_file(directory, base)
        markers = tuple(o for o in abort_markers(log) if start <= o < end)
        if markers:
            out.append(UnindexedAborts(log, markers))
    return out
