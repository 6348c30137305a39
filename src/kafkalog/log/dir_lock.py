"""Holding one data directory's ``.lock`` while changing a single partition in it.

A broker, and kafkalog's :class:`~kafkalog.log.manager.LogManager` opened writable, hold an
exclusive ``flock`` on ``<data dir>/.lock``. A tool that changes one partition directory (recover,
rebuild an index, compact, apply retention) must hold the same lock, or it could cut a file a
running broker is appending to.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from ..errors import KafkalogError

__all__ = ["LOCK_FILE_NAME", "DataDirLock", "DataDirLockedError"]

LOCK_FILE_NAME = ".lock"


class DataDirLockedError(KafkalogError):
    """Another process holds the data directory's ``.lock`` (a broker, or another kafkalog)."""


class DataDirLock:
    """The exclusive lock of ``directory`` for a ``with`` block (DataDirLockedError if taken)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None

    def __enter__(self) -> DataDirLock:
        fd = os.open(self.directory / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLockedError(
                f"Failed to acquire lock on file .lock in {self.directory}. A Kafka instance or "
                f"another kafkalog process is currently using this directory.",
                path=str(self.directory),
            ) from None
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
