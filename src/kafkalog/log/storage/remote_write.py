"""Writing objects: what a data directory in object storage needs to be written (whole objects
put, objects and prefixes deleted), with the reads' retries and error naming.

Object stores have no rename and no append: an object is put whole, and becomes visible whole
(a put is atomic per object). The atomic commit of a write of many objects is a manifest
written last (:mod:`kafkalog.log.datadir.manifest`, put by the dataset layer's writer); this
module only puts and deletes, each call retried within :func:`~.remote_storage.retrying`'s
bound.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .remote_storage import filesystem_for, retrying

__all__ = ["delete_objects", "delete_prefix", "put_bytes", "put_file"]

PUT_CHUNK = 8 << 20  # bytes handed to the stream per write (multipart parts are the SDK's)


def put_bytes(url: str, data: bytes) -> None:
    """Put the object ``url`` holding ``data`` (replacing one of that name)."""
    fs, path, shown = filesystem_for(url)

    def call() -> None:
        with fs.open_output_stream(path, metadata={}) as out:
            out.write(data)

    retrying(call, url=shown, what=f"writing {len(data)} bytes")


def put_file(url: str, local: str | os.PathLike) -> int:
    """Put the local file ``local`` as the object ``url``; its size. A failed put is tried
    again whole: a partial object is never visible (the store keeps the old one or none)."""
    fs, path, shown = filesystem_for(url)
    size = os.path.getsize(local)

    def call() -> None:
        with open(local, "rb") as f, fs.open_output_stream(path, metadata={}) as out:
            while chunk := f.read(PUT_CHUNK):
                out.write(chunk)

    retrying(call, url=shown, what=f"writing {size} bytes")
    return size


def delete_objects(urls: Iterable[str]) -> None:
    """Delete the objects ``urls``; those already gone are no error."""
    for url in urls:
        fs, path, shown = filesystem_for(url)
        try:
            retrying(lambda fs=fs, path=path: fs.delete_file(path), url=shown, what="deleting")
        except FileNotFoundError:
            pass


def delete_prefix(url: str) -> None:
    """Delete every object under the prefix ``url`` (a staging area); none is no error."""
    fs, path, shown = filesystem_for(url)
    try:
        retrying(lambda: fs.delete_dir(path), url=shown, what="deleting the prefix")
    except FileNotFoundError:
        pass
