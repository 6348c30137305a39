"""Naming the file an error is about when the raiser only knew a position and an offset.

Errors raised while a partition's log is opened (recovery, index rebuilds, producer state) carry
the byte position and offset of the damage, but the code that met it may not know which segment
file it was reading. The caller knows the partition directory: the segment holding an offset is
the one with the greatest base offset at or below it (segment file names are base offsets).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import KafkalogError
from .datadir import LOG_FILE_SUFFIX

__all__ = ["locate_in_partition", "segment_holding"]


def segment_holding(directory: str | os.PathLike, offset: int) -> Path | None:
    """The ``.log`` file of ``directory`` whose base offset is the greatest at or below
    ``offset``, or None (no segment, or an unreadable directory)."""
    best: tuple[int, str] | None = None
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        stem = name[: -len(LOG_FILE_SUFFIX)] if name.endswith(LOG_FILE_SUFFIX) else ""
        if len(stem) != 20 or not stem.isdigit():
            continue
        base = int(stem)
        if base <= offset and (best is None or base > best[0]):
            best = (base, name)
    return None if best is None else Path(directory) / best[1]


def locate_in_partition(error: KafkalogError, directory: str | os.PathLike) -> KafkalogError:
    """``error`` with its ``path`` filled in when it had none: the segment holding its offset
    when that is known (and it has a byte position, so the position is in that file), else the
    partition directory. Returns ``error``."""
    if error.path is not None:
        return error
    segment = None
    if error.offset is not None and error.position is not None:
        segment = segment_holding(directory, error.offset)
    return error.located(path=str(segment if segment is not None else directory))
