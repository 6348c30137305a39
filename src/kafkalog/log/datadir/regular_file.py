"""Refusing files of a data directory that are not regular files, before opening them.

A FIFO named ``00000000000000000000.log`` blocks ``open()`` until a writer comes (a hang), a
device may have side effects when opened, a socket cannot be opened at all, and a symlink loop
cannot be followed. Kafka only ever writes regular files, so each of these is refused with an
error naming the path, decided from ``os.stat`` (which follows symlinks, as ``open`` would)
before any ``open``; :func:`open_regular` also checks the opened descriptor (``O_NONBLOCK``, so
a FIFO swapped in between the two cannot block) for the race between the check and the open.

The error is an :class:`OSError` (``errno`` EINVAL, or ELOOP for a symlink loop), so every
command reports it as a file it cannot read: exit status 3.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from ...errors import NotRegularFileError

__all__ = [
    "NotRegularFileError",
    "describe_mode",
    "irregular_reason",
    "is_regular_file",
    "open_regular",
    "open_regular_fd",
    "require_regular_entries",
    "require_regular_file",
]


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


def describe_mode(mode: int) -> str:
    """What a ``st_mode`` is, in words ("a FIFO", "a socket", ...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return f"file type {stat.S_IFMT(mode):#o}"


def _not_regular(path: str | os.PathLike, mode: int) -> NotRegularFileError:
    return NotRegularFileError(
        errno.EINVAL, f"not a regular file ({describe_mode(mode)})", os.fspath(path)
    )


def _looped(error: OSError, path: str | os.PathLike) -> OSError:
    """A symlink loop's ELOOP as NotRegularFileError; any other OSError as it is."""
    if error.errno == errno.ELOOP:
        return NotRegularFileError(
            errno.ELOOP, "not a regular file (a symbolic link loop)", os.fspath(path)
        )
    return error


def require_regular_file(path: str | os.PathLike) -> os.stat_result:
    """``os.stat(path)`` when it is a regular file (symlinks followed); else NotRegularFileError.

    Never opens ``path``. A symlink loop is a NotRegularFileError (ELOOP); a missing file stays
    the FileNotFoundError ``os.stat`` raises.
    """
    try:
        st = os.stat(path)
    except OSError as e:
        raise _looped(e, path) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    return st


def is_regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file (symlinks followed); never raises, never opens."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_regular_fd(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """``os.open(path, flags, mode)`` for a regular file only: opened without blocking (a FIFO
    swapped in cannot hang it) and checked on the descriptor; NotRegularFileError otherwise."""
    extra = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | extra, mode)
    except OSError as e:
        raise _looped(e, path) from None
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise _not_regular(path, st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only: checked before the open (so a FIFO or a
    device is never opened) and on the descriptor after it."""
    require_regular_file(path)
    return os.fdopen(open_regular_fd(path), "rb")


def irregular_reason(path: str | os.PathLike) -> str | None:
    """Why a directory entry is neither a regular file nor a directory ("not a regular file (a
    FIFO)", "... (a symbolic link loop)", "... (a dangling symbolic link)"), or None when it is
    one of the two. Never opens ``path``, never raises."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "not a regular file (a symbolic link loop)"
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return "not a regular file (a dangling symbolic link)"
        except OSError:
            pass
        return f"cannot read: {e.strerror or e}"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return f"not a regular file ({describe_mode(mode)})"


_SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def require_regular_entries(directory: str | os.PathLike) -> None:
    """Raise NotRegularFileError for the first entry of ``directory`` (a partition directory)
    that is neither a regular file nor a directory: a FIFO, socket or device named like a
    segment would block or break the loader, a symlink loop cannot be read. Nothing is opened."""
    for name in sorted(os.listdir(directory)):
        path = os.path.join(os.fspath(directory), name)
        reason = irregular_reason(path)
        if reason is not None and not os.path.lexists(path):
            continue  # gone since the listing (a writer's temporary file, renamed or deleted)
        if reason is None and name.endswith(_SEGMENT_FILE_SUFFIXES) and os.path.isdir(path):
            reason = "not a regular file (a directory named like a segment file)"
        if reason is not None:
            code = errno.ELOOP if "loop" in reason else errno.EINVAL
            raise NotRegularFileError(code, reason, path)
