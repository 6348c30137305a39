"""What every kind of ``kafkalog dump`` shares: options, output, errors and the closing reports.

kafka-dump-log collects index mismatches, time index problems and non-consecutive offsets while
it dumps, and prints them on stderr after the last file; :class:`DumpReports` does the same, with
its exact lines. Problems kafka-dump-log would crash on are reported as they are met instead, as
``Error in FILE at position P (offset O): MESSAGE`` on stderr (text) or ``error`` objects (JSON).
"""

from __future__ import annotations

import json
import mmap
import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from ..errors import KafkalogError
from ..log.datadir import offset_from_file_name, open_regular
from ..log.errors import InvalidFileNameError
from .dump_payload import PayloadParser
from .progress import Progress

__all__ = [
    "DumpOptions",
    "DumpReports",
    "FileDump",
    "java_absolute_path",
    "open_buffer",
    "optional_long",
    "segment_start_offset",
]


DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # kafka-dump-log's --max-message-size


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


def java_absolute_path(path: str) -> str:
    """``File.getAbsolutePath()``: joined to the working directory, not normalised."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


class DumpReports:
    """kafka-dump-log's end-of-run reports on stderr, in its order and with its lines."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    @staticmethod
    def add(table: dict[str, list[tuple[int, int]]], path: str, pair: tuple[int, int]) -> None:
        table.setdefault(java_absolute_path(path), []).append(pair)

    def write(self, err: TextIO) -> None:
        # Index mismatches newest first (a TreeMap in reverse order in 4.3+, a Scala List
        # prepended to before); offset gaps in ascending order (4.3+'s TreeMap).
        for name, pairs in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            for index_offset, log_offset in reversed(pairs):
                err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
        for name, pairs in self.time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in pairs:
                err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, pairs in self.time_out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            for index_ts, previous in pairs:
                err.write(
                    f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}\n"
                )
        for name, pairs in self.time_not_found.items():
            err.write(f"The following indexed offsets are not found in :{name}\n")  # 4.3+
            for indexed, found in pairs:
                err.write(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            for first, second in sorted(pairs):  # 4.3+: a TreeMap (3.9-4.2 newest first)
                err.write(f"  {first} is followed by {second}\n")


class FileDump:
    """One file's dump: writes text lines or JSON objects and keeps the errors met."""

    def __init__(self, path: str, options: DumpOptions, reports: DumpReports) -> None:
        self.path = path
        self.options = options
        self.reports = reports
        self.errors: list[KafkalogError] = []
        self.out: TextIO = sys.stdout

    def emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")

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


class open_buffer:
    """The file's bytes as a read-only memoryview over an mmap (empty files as an empty view)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._mmap: mmap.mmap | None = None

    def __enter__(self) -> memoryview:
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


def optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString()``, as kafka-dump-log prints it."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def segment_start_offset(name: str) -> int | None:
    """The offset a file name starts with (``00000000000000000042.index`` -> 42), if any."""
    try:
        return offset_from_file_name(name)
    except InvalidFileNameError:
        return None
