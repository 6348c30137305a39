"""The segments of a partition directory in object storage, as a read-only load finds them.

A local read-only load (:func:`kafkalog.log.partition.load_segments`) also sorts out what a
crash or an unfinished clean left (``.deleted``, ``.cleaned``, ``.swap`` files) and judges the
last segment's tail. Object storage holds copies, never written by a broker: its live ``.log``
objects are the segments (leftovers are not segments, and are left alone, as Kafka's tiered
storage reads only whole uploaded segments); the tail is judged by the reader, as for a
read-only local open (a torn tail is reported, never cut).
"""

from __future__ import annotations

from ..clock import Clock
from ..datadir import LOG_FILE_SUFFIX
from ..partition import LogConfig
from ..storage import RemotePath
from .log_segment import LogSegment

__all__ = ["open_remote_segments"]


def open_remote_segments(
    directory: RemotePath, config: LogConfig, clock: Clock
) -> list[LogSegment]:
    """The segments of ``directory``, by base offset, opened read-only: one listing, each
    segment's indexes fetched whole (one entry per ``index.interval.bytes`` of log: small), its
    ``.log`` only by ranges, when read."""
    bases = []
    for child in directory.iterdir():
        name = child.name
        stem = name[: -len(LOG_FILE_SUFFIX)]
        if name.endswith(LOG_FILE_SUFFIX) and stem.isdigit() and child.is_file():
            bases.append(int(stem))
    segments: list[LogSegment] = []
    try:
        for base in sorted(bases):
            segments.append(LogSegment.open(directory, base, config, clock, writable=False))
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments
