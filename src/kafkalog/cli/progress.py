"""Progress bars for long command-line work: on stderr, only for people, never in piped output.

A bar appears when the work reads more than ``THRESHOLD_BYTES``, stderr is a terminal and the
user did not pass ``--quiet``; otherwise the tracker only counts. Standard output is identical
either way, so scripts that parse it never see a difference. Two environment variables tune it:
``KAFKALOG_PROGRESS=always`` draws the bar whatever the size and stream (``never``: never), and
``KAFKALOG_PROGRESS_THRESHOLD=BYTES`` moves the size threshold.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import TextIO

from .remote import is_url

THRESHOLD_BYTES = 64 * 1024 * 1024


def add_quiet_flag(parser: argparse.ArgumentParser) -> None:
    """Give a command the shared ``--quiet`` flag (no progress bar)."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar on stderr (it is also off when stderr is not a terminal)",
    )


def total_bytes(paths: list[str]) -> int:
    """Bytes under ``paths`` (files, or directories walked recursively); unreadable ones count 0."""
    total = 0
    for path in paths:
        if is_url(path):
            total += _remote_size(path)
        elif os.path.isdir(path):
            for root, _dirs, files in os.walk(path):
                total += sum(_size(os.path.join(root, name)) for name in files)
        else:
            total += _size(path)
    return total


def _remote_size(url: str) -> int:
    """Bytes of an object, or of the objects under a prefix (one listing per directory)."""
    from ..log.storage import as_path

    try:
        pending, total = [as_path(url)], 0
        while pending:
            path = pending.pop()
            if path.is_dir():
                pending.extend(path.iterdir())
            else:
                total += path.stat().st_size
        return total
    except (OSError, ValueError):
        return 0


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class Progress:
    """Counts bytes done out of a known total and draws a bar when a person is watching.

    Use as a context manager; call ``advance(n)`` as bytes are consumed. ``shown`` says whether a
    bar is drawn (tests check it through a pseudo-terminal).
    """

    def __init__(
        self,
        total: int,
        description: str,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        threshold: int | None = None,
    ) -> None:
        self.total = total
        self.done = 0
        self._stream = stream if stream is not None else sys.stderr
        mode = os.environ.get("KAFKALOG_PROGRESS", "auto")
        if threshold is None:
            threshold = _env_threshold()
        big = total > threshold and _is_terminal(self._stream)
        self.shown = not quiet and mode != "never" and (mode == "always" or big)
        self._bar = None
        if self.shown:
            from tqdm import tqdm  # imported only when a bar is drawn

            self._bar = tqdm(
                total=total,
                desc=description,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                file=self._stream,
                leave=False,
                mininterval=0.2,
                **_width(self._stream),
            )

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _width(stream: TextIO) -> dict:
    """Follow the terminal's size; a terminal that reports none (a fresh pseudo-terminal, some
    container consoles) gets COLUMNS and LINES or 80x24, where tqdm would draw nothing."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        size = os.terminal_size((0, 0))
    if size.columns > 0 and size.lines > 0:
        return {"dynamic_ncols": True}
    fallback = shutil.get_terminal_size((80, 24))
    return {"ncols": fallback.columns or 80, "nrows": fallback.lines or 24}


def _env_threshold() -> int:
    value = os.environ.get("KAFKALOG_PROGRESS_THRESHOLD")
    try:
        return int(value) if value else THRESHOLD_BYTES
    except ValueError:
        return THRESHOLD_BYTES


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
