"""A directory or object in object storage, standing where a ``pathlib.Path`` stands.

It has the part of ``Path``'s interface that reading a data directory uses (``name``,
``parent``, ``/``, ``with_name``, ``with_suffix``, ``iterdir``, ``is_dir``, ``is_file``,
``exists``, ``stat().st_size``, ``read_bytes``), and ``str()`` and ``os.fspath()`` give its
URL, so error messages name it as they name a local path. A directory is listed once (one LIST
request, kept by the object), and its children answer ``is_file``/``exists``/``stat`` from that
listing: planning a partition costs one listing, not a request per file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .remote_storage import FIRST_PAUSE, filesystem_for, missing_object, retrying

__all__ = ["RemotePath", "as_path", "is_remote"]

_FILE, _DIR, _MISSING = "file", "dir", "missing"
CONFIRMATIONS = 3  # listings that must all be empty before a directory is taken as empty


def is_remote(path: object) -> bool:
    """Whether ``path`` names object storage (a :class:`RemotePath` or a URL such as
    ``s3://bucket/prefix``) rather than a local file."""
    if isinstance(path, RemotePath):
        return True
    return isinstance(path, str) and "://" in path[:12] and not path.startswith("file://")


def as_path(path: str | os.PathLike) -> os.PathLike:
    """A :class:`RemotePath` for a URL (or one already), else a ``pathlib.Path``."""
    if isinstance(path, RemotePath):
        return path
    if is_remote(path):
        return RemotePath(path)  # type: ignore[arg-type]
    from pathlib import Path

    return Path(path)


@dataclass(frozen=True)
class _Stat:
    st_size: int
    st_mtime: float


class RemotePath(os.PathLike):
    """``url``: ``s3://bucket/prefix/...`` (see :mod:`.remote_storage` for the others)."""

    __slots__ = ("_fs", "_fs_path", "_kind", "_listing", "_mtime", "_parent", "_size", "url")

    def __init__(self, url: str, *, _resolved=None, _parent: RemotePath | None = None) -> None:
        if _resolved is None:
            _resolved = filesystem_for(url)
        self._fs, self._fs_path, self.url = _resolved
        self._parent = _parent
        self._kind: str | None = None
        self._size: int | None = None
        self._mtime: float = 0.0
        self._listing: dict[str, RemotePath] | None = None

    # -- names -------------------------------------------------------------------------------
    def __fspath__(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __lt__(self, other: RemotePath) -> bool:
        return self.url < other.url

    @property
    def name(self) -> str:
        return self._fs_path.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if dot > 0 else ""

    @property
    def parent(self) -> RemotePath:
        if self._parent is None:
            head = self.url.rsplit("/", 1)[0]
            if head.endswith(":/"):  # the bucket itself
                return self
            fs_head = self._fs_path.rsplit("/", 1)[0]
            self._parent = RemotePath(head, _resolved=(self._fs, fs_head, head))
        return self._parent

    def __truediv__(self, name: str) -> RemotePath:
        name = os.fspath(name).strip("/")
        if self._listing is not None and name in self._listing:
            return self._listing[name]
        child = RemotePath(
            f"{self.url}/{name}",
            _resolved=(self._fs, f"{self._fs_path}/{name}", f"{self.url}/{name}"),
            _parent=self,
        )
        if self._listing is not None and "/" not in name:
            child._kind = _MISSING  # listed, and not there
        return child

    def with_name(self, name: str) -> RemotePath:
        """The sibling object called ``name`` (a segment's ``.log`` beside its index)."""
        return self.parent / name

    def with_suffix(self, suffix: str) -> RemotePath:
        stem = self.name[: -len(self.suffix)] if self.suffix else self.name
        return self.with_name(stem + suffix)

    # -- listing and facts -------------------------------------------------------------------
    def _info(self) -> str:
        if self._kind is None:
            info = retrying(
                lambda: self._fs.get_file_info(self._fs_path), url=self.url, what="looking up"
            )
            self._learn(info)
            if self._kind == _MISSING:  # believed once a listing confirms it (see _list)
                self._kind = _DIR if self._list() else _MISSING
        assert self._kind is not None
        return self._kind

    def _list(self) -> list:
        """One listing of the children. An S3 answer cut short can parse as an empty listing
        without an error (the SDK does not check the body's length), so an empty one is asked
        again: absence is believed only when it is the answer every time."""
        from pyarrow import fs

        selector = fs.FileSelector(self._fs_path, recursive=False, allow_not_found=True)
        pause = FIRST_PAUSE
        for _ in range(CONFIRMATIONS):
            infos = retrying(lambda: self._fs.get_file_info(selector), url=self.url, what="listing")
            if infos:
                return infos
            time.sleep(pause)
            pause *= 2
        return []

    def _learn(self, info) -> None:
        from pyarrow import fs

        if info.type == fs.FileType.File:
            self._kind, self._size = _FILE, info.size
            self._mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        elif info.type == fs.FileType.Directory:
            self._kind = _DIR
        else:
            self._kind = _MISSING

    def iterdir(self) -> Iterator[RemotePath]:
        """The children, from one listing kept for the life of this object (a snapshot, as a
        plan is)."""
        if self._listing is None:
            infos = self._list()
            listing = {}
            for info in infos:
                name = info.path.rstrip("/").rsplit("/", 1)[-1]
                child = RemotePath(
                    f"{self.url}/{name}",
                    _resolved=(self._fs, f"{self._fs_path}/{name}", f"{self.url}/{name}"),
                    _parent=self,
                )
                child._learn(info)
                listing[name] = child
            self._listing = listing
            if listing and self._kind is None:
                self._kind = _DIR
        return iter(sorted(self._listing.values()))

    def is_dir(self) -> bool:
        return self._info() == _DIR

    def is_file(self) -> bool:
        return self._info() == _FILE

    def exists(self) -> bool:
        return self._info() != _MISSING

    def stat(self) -> _Stat:
        if self._info() == _MISSING:
            raise missing_object(self.url)
        return _Stat(self._size or 0, self._mtime)

    @property
    def size(self) -> int | None:
        """The object's size when a listing or lookup told it."""
        return self._size

    def read_bytes(self, max_bytes: int | None = None) -> bytes:
        """The whole object (small files: checkpoints, indexes), or ``max_bytes + 1`` bytes of
        it at most, so the caller can refuse an oversized one."""
        from .remote_file import RemoteFile

        with RemoteFile(self.url, self._size if self._kind == _FILE else None) as f:
            size = f.size()
            return f.read_at(size if max_bytes is None else min(size, max_bytes + 1), 0)

    def open_file(self):
        """The object as a :class:`~.remote_file.RemoteFile`."""
        from .remote_file import RemoteFile

        return RemoteFile(self.url, self._size if self._kind == _FILE else None)
