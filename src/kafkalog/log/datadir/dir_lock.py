"""Holding one data directory's ``.lock`` while changing a single partition in it.

A broker, and kafkalog's :class:`~kafkalog.log.datadir.manager.LogManager` opened writable, hold an
exclusive ``flock`` on ``<data dir>/.lock``. A tool that changes one partition directory (recover,
rebuild an index, compact, apply retention) must hold the same lock, or it could cut a file a
running broker is appending to.

The lock that guards a partition is the one of the data directory that really holds it: paths
are resolved first (``os.path.realpath``), so a symlink to a live partition from elsewhere
(``ln -s DATA/t-0 other/t-0``) makes a writer lock ``DATA/.lock``, the broker's, and not
``other/.lock``. :func:`real_data_dirs` names the directories to lock, :class:`DataDirLocks`
holds several at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from ...errors import DataDirLockedError

__all__ = ["LOCK_FILE_NAME", "DataDirLock", "DataDirLockedError", "DataDirLocks", "real_data_dirs"]

LOCK_FILE_NAME = ".lock"


class DataDirLock:
    """The exclusive lock of ``directory`` for a ``with`` block (DataDirLockedError if taken)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None

    def __enter__(self) -> DataDirLock:
        real = Path(os.path.realpath(self.directory))
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(real / LOCK_FILE_NAME, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            where = str(self.directory)
            if str(real) != os.path.abspath(self.directory):
                where += f" (really {real})"
            raise DataDirLockedError(
                f"Failed to acquire lock on file .lock in {where}. A Kafka instance or "
                f"another kafkalog process is currently using this directory.",
                path=str(self.directory),
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None

    def __del__(self) -> None:
        # Dropped while held (its holder abandoned): the lock goes with the descriptor.
        if getattr(self, "_fd", None) is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def real_data_dirs(
    data_dirs: Iterable[str | os.PathLike], partitions: Iterable[str | os.PathLike] = ()
) -> list[Path]:
    """The real directories whose ``.lock`` a writer of ``partitions`` (partition directories)
    in ``data_dirs`` must hold: each data directory resolved, and each partition directory's
    resolved parent (a symlinked partition belongs to the data directory it really lives in).
    Distinct, in a fixed order (so two writers take them in the same order)."""
    found = {Path(os.path.realpath(d)) for d in data_dirs}
    found.update(Path(os.path.realpath(p)).parent for p in partitions)
    return sorted(found)


class DataDirLocks:
    """Several data directories' locks for a ``with`` block: all of them, or none (the ones
    taken are released when one is held by another process)."""

    def __init__(self, directories: Iterable[str | os.PathLike]) -> None:
        self.directories = [Path(d) for d in directories]
        self._held = contextlib.ExitStack()

    def __enter__(self) -> DataDirLocks:
        with contextlib.ExitStack() as taking:
            for directory in self.directories:
                taking.enter_context(DataDirLock(directory))
            self._held = taking.pop_all()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._held.close()
