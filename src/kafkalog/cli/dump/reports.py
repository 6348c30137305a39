"""kafka-dump-log's end-of-run reports: index mismatches, time index problems and non-consecutive
offsets are collected while the files are dumped and printed on stderr after the last one, in
kafka-dump-log's order and with its lines."""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["DumpReports", "java_absolute_path"]


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
