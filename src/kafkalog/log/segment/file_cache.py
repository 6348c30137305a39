"""A budget of open segment and index files shared by the process: an LRU of descriptors.

A data directory holds a ``.log``, ``.index`` and ``.timeindex`` per segment (and a ``.txnindex``
where transactions aborted); a broker with 10,000 partitions would hold 30,000 descriptors if each
file kept its own, far above the usual ``ulimit -n`` of 1024. Instead every segment file is a
:class:`CachedFile` (and every writable index's memory map an entry of its own, since a map holds
a descriptor): its descriptor is opened on first use, counted in one :class:`FileCache`, and
closed again when the cache is over its budget and the file is the least recently used one. The
next use reopens it by path, transparently (renames go through the owner, which updates the path;
the descriptor follows a rename, the path is only needed to reopen).

A descriptor is never closed while it is in use: :meth:`CachedFile.acquire` pins it until
:meth:`CachedFile.release`, and eviction skips pinned entries (the budget is then exceeded for as
long as they are pinned rather than a read or a ``sendfile`` getting a closed, or worse a reused,
descriptor number). Closing a pinned file defers the ``close`` to the last release. An entry
dropped without being closed (garbage) closes its descriptor itself; the cache only holds weak
references.

The budget of the process-wide cache (:func:`default_cache`) is the ``KAFKALOG_MAX_OPEN_FILES``
environment variable if set, else half the soft open-files limit; ``kafkalog serve`` sets it
from its own limit (see :mod:`kafkalog.server.limits`).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from ..datadir import open_regular_fd

__all__ = [
    "CachedFile",
    "FileCache",
    "PinnedFile",
    "configured_capacity",
    "default_cache",
    "set_default_capacity",
]

MIN_CAPACITY = 8
_CREATION_FLAGS = os.O_CREAT | os.O_EXCL | os.O_TRUNC


class FileCache:
    """Open descriptors of :class:`CachedFile` (and other entries) within ``capacity``.

    An entry is any object with an ``_evict() -> bool`` method, called with the cache's lock
    held, which closes the entry's descriptor unless it is in use (then it returns False and
    stays). Entries must not call back into the cache from ``_evict``.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self._lock = threading.RLock()
        self._lru: OrderedDict[int, weakref.ref] = OrderedDict()
        self._capacity = max(MIN_CAPACITY, capacity or _default_capacity())
        self.opens = 0  # descriptors opened (first opens and reopens)
        self.evictions = 0  # descriptors closed to stay within the budget

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._lock:
            self._capacity = max(MIN_CAPACITY, int(value))
            self._shrink(self._capacity)

    @property
    def open_count(self) -> int:
        """Descriptors held by the entries now (pinned ones over the budget included)."""
        with self._lock:
            return len(self._lru)

    # -- for entries ---------------------------------------------------------------------------
    def _shrink(self, target: int) -> None:
        """Evict least recently used entries until at most ``target`` hold descriptors (fewer
        may be evictable: pinned entries stay, and the budget is exceeded while they are)."""
        lru = self._lru
        kept = []  # in use: they keep their place at the old end
        while lru and len(lru) + len(kept) > target:
            key, ref = lru.popitem(last=False)
            entry = ref()
            if entry is None:  # collected: it closed its own descriptor
                continue
            if entry._evict():
                self.evictions += 1
            else:
                kept.append((key, ref))
        for key, ref in reversed(kept):
            lru[key] = ref
            lru.move_to_end(key, last=False)

    def make_room(self) -> None:
        """Before opening a descriptor: evict down to one below the budget."""
        with self._lock:
            self._shrink(self._capacity - 1)

    def add(self, entry: object) -> None:
        """``entry`` now holds a descriptor (the most recently used one)."""
        with self._lock:
            self._lru[id(entry)] = weakref.ref(entry)
            self.opens += 1

    def touch(self, entry: object) -> None:
        try:
            self._lru.move_to_end(id(entry))
        except KeyError:
            pass

    def discard(self, entry: object) -> None:
        """``entry`` closed its descriptor itself."""
        with self._lock:
            key = id(entry)
            ref = self._lru.get(key)
            if ref is not None and ref() is entry:
                del self._lru[key]

    def __repr__(self) -> str:
        return f"FileCache(capacity={self._capacity}, open={len(self._lru)})"


class CachedFile:
    """One file's descriptor, opened on demand within a :class:`FileCache`'s budget.

    ``flags`` are ``os.open``'s; creation flags (``O_CREAT``, ``O_EXCL``, ``O_TRUNC``) apply to
    the first open only, so a file deleted behind the owner's back is not silently recreated
    empty by a reopen (``FileNotFoundError`` instead). ``open_now=True`` opens at once (errors
    surface in the constructor, as with a plain ``os.open``).
    """

    __slots__ = ("__weakref__", "_cache", "_closed", "_fd", "_flags", "_mode", "_pins", "path")

    def __init__(
        self,
        path: str | os.PathLike,
        flags: int = os.O_RDONLY,
        *,
        mode: int = 0o644,
        cache: FileCache | None = None,
        open_now: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self._flags = flags
        self._mode = mode
        self._cache = cache or default_cache()
        self._fd = -1
        self._pins = 0
        self._closed = False
        if open_now:
            self.release(self.acquire())

    @property
    def cache(self) -> FileCache:
        return self._cache

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now (it may be evicted and reopened at any time)."""
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        return self._closed

    def acquire(self) -> int:
        """The descriptor, (re)opened if needed and pinned until :meth:`release`."""
        cache = self._cache
        with cache._lock:
            if self._closed:
                raise ValueError(f"{self.path} is closed")
            fd = self._fd
            if fd >= 0:
                try:
                    cache._lru.move_to_end(id(self))
                except KeyError:  # (not expected) counted again
                    cache.add(self)
            else:
                cache._shrink(cache._capacity - 1)
                fd = open_regular_fd(self.path, self._flags, self._mode)
                self._flags &= ~_CREATION_FLAGS
                self._fd = fd
                cache.add(self)
            self._pins += 1
            return fd

    def release(self, fd: int | None = None) -> None:
        """Unpin (once per :meth:`acquire`)."""
        with self._cache._lock:
            self._pins -= 1
            if self._pins == 0 and self._closed and self._fd >= 0:
                self._cache.discard(self)
                self._close_fd()

    @contextmanager
    def use(self) -> Iterator[int]:
        """``with f.use() as fd:``: the descriptor, pinned for the block."""
        fd = self.acquire()
        try:
            yield fd
        finally:
            self.release()

    def dup(self) -> int:
        """A duplicate descriptor the caller owns (outside the budget; it keeps the inode)."""
        with self.use() as fd:
            return os.dup(fd)

    def rename_to(self, new_path: str | os.PathLike) -> None:
        """Rename the file (the descriptor follows it; a reopen uses the new path)."""
        with self._cache._lock:
            os.replace(self.path, new_path)
            self.path = os.fspath(new_path)

    def drop(self) -> None:
        """Close the descriptor now if it is not in use (it reopens on next use)."""
        with self._cache._lock:
            if self._fd >= 0 and self._pins == 0:
                self._cache.discard(self)
                self._close_fd()

    def close(self) -> None:
        """Close for good (deferred to the last release while pinned). Twice is harmless."""
        with self._cache._lock:
            self._closed = True
            if self._fd >= 0 and self._pins == 0:
                self._cache.discard(self)
                self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, -1
        os.close(fd)

    def _evict(self) -> bool:
        if self._pins or self._fd < 0:
            return self._fd < 0
        fd, self._fd = self._fd, -1
        try:
            os.close(fd)
        except OSError:
            pass
        return True

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._fd >= 0 else "evicted")
        return f"CachedFile({self.path!r}, {state})"


class PinnedFile:
    """A descriptor owned outright (a duplicate a fetch answer holds): the same calls as
    :class:`CachedFile`, never evicted, closed by :meth:`close`."""

    __slots__ = ("_closed", "_fd", "path")

    def __init__(self, path: str | os.PathLike, fd: int) -> None:
        self.path = os.fspath(path)
        self._fd = fd
        self._closed = False

    is_open = property(lambda self: not self._closed)
    closed = property(lambda self: self._closed)

    def acquire(self) -> int:
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        return self._fd

    def release(self, fd: int | None = None) -> None:
        pass

    @contextmanager
    def use(self) -> Iterator[int]:
        yield self.acquire()

    def dup(self) -> int:
        return os.dup(self.acquire())

    def rename_to(self, new_path: str | os.PathLike) -> None:
        os.replace(self.path, new_path)
        self.path = os.fspath(new_path)

    def drop(self) -> None:
        pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            try:
                os.close(self._fd)
            except OSError:
                pass


def configured_capacity() -> int | None:
    """The budget the ``KAFKALOG_MAX_OPEN_FILES`` environment variable sets, if it does."""
    configured = os.environ.get("KAFKALOG_MAX_OPEN_FILES", "").strip()
    return max(MIN_CAPACITY, int(configured)) if configured.isdigit() else None


def _default_capacity() -> int:
    configured = configured_capacity()
    if configured is not None:
        return configured
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return 512
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 1 << 16
    return max(MIN_CAPACITY, soft // 2)


_default: FileCache | None = None
_default_lock = threading.Lock()


def default_cache() -> FileCache:
    """The process-wide cache every segment file uses unless given another."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = FileCache()
    return _default


def set_default_capacity(capacity: int) -> None:
    """Set the process-wide budget (evicting down to it now)."""
    default_cache().capacity = capacity
