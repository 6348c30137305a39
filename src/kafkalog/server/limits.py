"""Open-file limits: the server's connections, segment files and fetch answers share them.

At start the soft ``RLIMIT_NOFILE`` is raised to the hard limit (what Kafka's packaging asks
the operator to set), and split (:func:`plan_descriptors`) between

- the segment files' budget (:mod:`kafkalog.log.segment.file_cache`): every ``.log``, ``.index``,
  ``.timeindex`` and ``.txnindex`` is opened on demand and the least recently used closed again
  beyond it, so any number of partitions is served within the limit;
- the descriptors fetch answers own while being sent (a duplicate per segment window; windows
  beyond the allowance are copied instead);
- connections: ``max.connections`` is capped to what is left, with a warning, so a full table
  shows up as refused connections rather than failing ``accept`` calls, segment rolls or fetch
  answers.

When ``accept`` still runs out (other processes), asyncio pauses accepting for a second; the log
line for it is rate-limited here instead of one traceback per attempt.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DESCRIPTOR_MARGIN",
    "AcceptErrorLog",
    "DescriptorPlan",
    "effective_max_connections",
    "open_descriptors",
    "plan_descriptors",
    "raise_open_files_limit",
]

log = logging.getLogger("kafkalog.server")

# Descriptors kept free beyond connections: segment rolls, fetch answers' windows, checkpoints.
DESCRIPTOR_MARGIN = 64
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
MIN_FILES_BUDGET = 16  # segment files open at once, at the least (below, every read reopens)
MAX_WINDOW_DESCRIPTORS = 256  # fetch answers' own descriptors, at the most
DEFAULT_FILES_BUDGET = 4096  # when the limit is unknown


@dataclass(frozen=True)
class DescriptorPlan:
    """How the open-files limit is shared: ``files`` for segment files (the file cache's
    budget), ``windows`` for the descriptors fetch answers hold while being sent."""

    files: int
    windows: int


def plan_descriptors(
    limit: int | None, in_use: int | None, files: int | None = None
) -> DescriptorPlan:
    """Share what the limit leaves after ``in_use`` and the margin: an eighth (at most
    256) for fetch answers' windows, half the rest for segment files (``files`` if given), the
    other half for connections (:func:`effective_max_connections`)."""
    if limit is None or in_use is None:
        return DescriptorPlan(files or DEFAULT_FILES_BUDGET, MAX_WINDOW_DESCRIPTORS)
    left = max(0, limit - in_use - DESCRIPTOR_MARGIN)
    windows = min(MAX_WINDOW_DESCRIPTORS, left // 8)
    if files is None:
        files = max(MIN_FILES_BUDGET, (left - windows) // 2)
    return DescriptorPlan(files, windows)


def raise_open_files_limit() -> int | None:
    """Raise the soft open-files limit to the hard one; the soft limit now (None if unknown)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # an infinite hard limit above the kernel's nr_open
            log.debug("open-files limit stays at %d: %s", soft, e)
    return None if soft == resource.RLIM_INFINITY else soft


def open_descriptors() -> int | None:
    """How many descriptors this process holds (None where the system does not say)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(directory)) - 1  # less the one listdir itself opened
        except OSError:
            continue
    return None


def effective_max_connections(
    configured: int,
    limit: int | None,
    in_use: int | None,
    reserved: int = 0,
    *,
    quiet: bool = False,
) -> int:
    """``max.connections`` capped to the descriptors left; a clear error when none are left.

    ``in_use``: descriptors held now other than segment files'; ``reserved``: those set aside
    for segment files (their budget, however many are open now) and fetch answers' windows;
    ``quiet``: no warning when capped (asking what is left).
    """
    if limit is None or in_use is None:
        return configured
    room = limit - in_use - reserved - DESCRIPTOR_MARGIN
    if room < 1:
        held = f"{in_use} descriptors are in use"
        if reserved:
            held += f" and {reserved} reserved for segment files and fetch answers"
        raise OSError(
            errno.EMFILE,
            f"the open-files limit is {limit} (ulimit -n) and {held}, leaving none for "
            f"connections (keeping {DESCRIPTOR_MARGIN} spare): raise the limit (ulimit -n, "
            "LimitNOFILE=) or lower --max-open-files",
        )
    if room < configured:
        if quiet:
            return room
        log.warning(
            "max.connections %d capped to %d: the open-files limit is %d (ulimit -n), %d "
            "descriptors are in use and %d reserved for segment files and fetch answers; "
            "raise the limit to serve more connections",
            configured, room, limit, in_use, reserved,
        )  # fmt: skip
        return room
    return configured


class AcceptErrorLog:
    """An event-loop exception handler logging out-of-descriptor ``accept`` failures at most
    once per ``interval`` seconds (with the count since), and everything else as before."""

    def __init__(self, interval: float = 30.0, clock=time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.failures = 0
        self._suppressed = 0
        self._last: float | None = None

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _OUT_OF_DESCRIPTORS):
            loop.default_exception_handler(context)
            return
        self.failures += 1
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            self._suppressed += 1
            return
        since = f" ({self._suppressed} more since the last report)" if self._suppressed else ""
        log.error(
            "cannot accept connections: %s%s; accepting pauses and retries "
            "(raise the open-files limit, ulimit -n, or lower --max-connections)",
            exc.strerror or exc, since,
        )  # fmt: skip
        self._last, self._suppressed = now, 0
