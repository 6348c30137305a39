"""What every kind of ``kafkalog dump`` shares: the options, one file's output and its errors.

Problems kafka-dump-log would crash on are reported as they are met, as ``Error in FILE at
position P (offset O): MESSAGE`` on stderr (text) or ``error`` objects (JSON); what kafka-dump-log
reports after the last file goes to :class:`.reports.DumpReports`.
"""

from __future__ import annotations

import mmap
import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from ...errors import KafkalogError
from ...log.datadir import offset_from_file_name, open_regular
from ...log.errors import InvalidFileNameError
from ..output import write_json
from ..progress import Progress
from ..remote import is_url
from .message_parsers import PayloadParser
from .reports import DumpReports

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "LEFTOVER_SUFFIXES",
    "DumpOptions",
    "FileDump",
    "SegmentFileDump",
    "file_exists",
    "file_size",
    "open_buffer",
    "optional_long",
    "segment_start_offset",
]


DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # kafka-dump-log's --max-message-size
# What a clean, a swap or a deletion appends to a segment's file names (kafka-dump-log ignores it).
LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap")


@dataclass(frozen=True, slots=True, kw_only=True)
class DumpOptions:
    """The command line, resolved: ``deep`` already implied by printing or decoding."""

    deep: bool = False
    print_data: bool = False
    skip_metadata: bool = False
    max_bytes: int | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    verify_only: bool = False
    sanity_only: bool = False
    json: bool = False
    decoded: bool = False  # a decoder was chosen: JSON records carry decodedKey/decodedValue
    parser: PayloadParser = field(default_factory=PayloadParser)


class FileDump:
    """One file's dump: writes text lines or JSON objects and keeps the errors met."""

    def __init__(self, path: str, options: DumpOptions, reports: DumpReports) -> None:
        self.path = path
        self.options = options
        self.reports = reports
        self.errors: list[KafkalogError] = []
        self.out: TextIO = sys.stdout

    def emit(self, obj: dict) -> None:
        write_json(obj, self.out)

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def error(self, error: KafkalogError) -> None:
        """Record a problem: an ``error`` object (JSON) or a line on stderr (text)."""
        self.errors.append(error)
        if self.options.json:
            self.emit(
                {
                    "type": "error",
                    "position": error.position,
                    "offset": error.offset,
                    "message": error.message,
                }
            )
            return
        where = ""
        if error.position is not None:
            where = f" at position {error.position}"
            if error.offset is not None:
                where += f" (offset {error.offset})"
        elif error.offset is not None:
            where = f" at offset {error.offset}"
        self.out.flush()
        print(f"Error in {self.path}{where}: {error.message}", file=sys.stderr)

    def dump(self, progress: Progress) -> None:
        raise NotImplementedError


class SegmentFileDump(FileDump):
    """A file named by its segment's base offset; ends with an ``indexSummary`` in JSON."""

    entries = 0

    def base_offset(self) -> int | None:
        base = segment_start_offset(os.path.basename(self.path))
        if base is None:
            self.error(KafkalogError("the file name does not start with a segment base offset"))
        return base

    def summary(self) -> None:
        if self.options.json:
            self.emit(
                {
                    "type": "indexSummary",
                    "entries": self.entries,
                    "error": self.errors[0].message if self.errors else None,
                }
            )

    def trailing_bytes(self, size: int, entry_size: int) -> None:
        extra = size % entry_size
        if extra:
            self.error(
                KafkalogError(
                    f"{extra} bytes after the last whole {entry_size}-byte entry",
                    position=size - extra,
                )
            )


class open_buffer:
    """The file's bytes as a read-only memoryview over an mmap (empty files as an empty view);
    an object's bytes, fetched (object storage has nothing to map)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._mmap: mmap.mmap | None = None

    def __enter__(self) -> memoryview:
        if is_url(self._path):  # an object: fetched whole, as the dump reads it whole
            from ...log.storage import as_path

            return memoryview(as_path(self._path).read_bytes())
        with open_regular(self._path) as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return memoryview(b"")
            self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(self._mmap)

    def __exit__(self, *exc: object) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass  # a view is still referenced (an exception traceback); the GC unmaps it


def file_size(path: str) -> int:
    """The size of a file or an object (a URL is never given to ``os``)."""
    if is_url(path):
        from ...log.storage import as_path

        return as_path(path).stat().st_size
    return os.path.getsize(path)


def file_exists(path: str) -> bool:
    """Whether a file or an object exists."""
    if is_url(path):
        from ...log.storage import as_path

        return as_path(path).exists()
    return os.path.exists(path)


def optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString()``, as kafka-dump-log prints it."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def segment_start_offset(name: str) -> int | None:
    """The offset a file name starts with (``00000000000000000042.index`` -> 42), if any; a
    remote segment's file in Kafka's LocalTieredStorage (``OFFSET-SEGMENTID.index``) gives
    its start offset, where kafka-dump-log stops with a NumberFormatException."""
    try:
        return offset_from_file_name(name)
    except InvalidFileNameError:
        from ...log.tiered import LocalTieredStorageLayout

        return LocalTieredStorageLayout.start_offset_of(name)
