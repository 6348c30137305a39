"""Why a tiered partition cannot be read past an offset: each names the offset and the file or
object (or the metadata) that says so. All are DataLossError: the records before the offset are
read, none after it."""

from __future__ import annotations

from ...errors import DataLossError

__all__ = [
    "RemoteSegmentMissingError",
    "RemoteSegmentTruncatedError",
    "TieredOffsetGapError",
    "TieredStorageError",
]


class TieredStorageError(DataLossError):
    """A tiered partition's log stops being readable at ``offset``."""


class RemoteSegmentMissingError(TieredStorageError):
    """The metadata says a remote segment was copied, but a file of it is not in the store."""


class RemoteSegmentTruncatedError(TieredStorageError):
    """A remote segment's ``.log`` ends before the end offset its metadata gives."""


class TieredOffsetGapError(TieredStorageError):
    """No remote segment holds the offsets between the log start (or the last remote segment)
    and the next remote segment or the local log start."""
