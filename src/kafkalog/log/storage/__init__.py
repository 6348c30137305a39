"""Data directories in object storage (``s3://``, ``gs://``, ``abfss://``, ``hdfs://``).

Kafka's tiered storage reads a remote log segment through a RemoteStorageManager; kafkalog reads
whole data directories that way, through one seam: a :class:`RemotePath` stands where a local
``pathlib.Path`` would (listing, names, small files such as checkpoints), and a
:class:`RemoteFile` where a local descriptor would (``read_at`` is ``os.pread``: ranged reads,
retried with a bound). Everything else (segments, indexes, planning, decoding) is the code that
reads local files; a local path never comes here (:func:`is_remote` is the test). Writes put
whole objects (:mod:`.remote_write`); their atomic commit is a manifest, in the dataset layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .remote_file import RemoteFile, fetched_bytes
    from .remote_path import RemotePath, as_path, is_remote
    from .remote_storage import SCHEMES, RemoteStorageError, filesystem_for
    from .remote_write import delete_objects, delete_prefix, put_bytes, put_file

_EXPORTS = {
    "RemoteFile": "remote_file",
    "RemotePath": "remote_path",
    "RemoteStorageError": "remote_storage",
    "SCHEMES": "remote_storage",
    "as_path": "remote_path",
    "delete_objects": "remote_write",
    "delete_prefix": "remote_write",
    "fetched_bytes": "remote_file",
    "filesystem_for": "remote_storage",
    "is_remote": "remote_path",
    "put_bytes": "remote_write",
    "put_file": "remote_write",
}
__all__ = [
    "SCHEMES",
    "RemoteFile",
    "RemotePath",
    "RemoteStorageError",
    "as_path",
    "delete_objects",
    "delete_prefix",
    "fetched_bytes",
    "filesystem_for",
    "is_remote",
    "put_bytes",
    "put_file",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
