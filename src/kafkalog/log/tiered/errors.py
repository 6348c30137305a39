"""Why a tiered partition cannot be read past an offset (the classes are defined in
:mod:`kafkalog.errors`, with every other exception): each names the offset and the file or
object (or the metadata) that says so. All are DataLossError: the records before the offset are
read, none after it."""

from __future__ import annotations

from ...errors import (
    RemoteSegmentMissingError,
    RemoteSegmentTruncatedError,
    TieredOffsetGapError,
    TieredStorageError,
)

__all__ = [
    "RemoteSegmentMissingError",
    "RemoteSegmentTruncatedError",
    "TieredOffsetGapError",
    "TieredStorageError",
]
