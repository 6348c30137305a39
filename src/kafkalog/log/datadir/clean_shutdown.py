"""A log dir's ``.kafka_cleanshutdown`` marker (CleanShutdownFileHandler.java, KIP-966).

Its presence means the broker shut down cleanly, so loading may skip segment recovery. Kafka
3.6+ writes ``{"version":0,"brokerEpoch":N}`` (compact JSON, no line end); older brokers left an
empty file. :func:`read_clean_shutdown` returns the broker epoch, or None for the empty legacy
marker; whether the file exists is the caller's question. Kafka itself ignores a marker it cannot
parse; we raise :class:`CorruptCheckpointError` and let the caller decide.
"""

from __future__ import annotations

import json
import os

from ..errors import CorruptCheckpointError
from .bounded_json import loads_bounded
from .checkpoints import read_text_file, write_file_atomically

__all__ = [
    "CLEAN_SHUTDOWN_FILE_NAME",
    "CURRENT_VERSION",
    "read_clean_shutdown",
    "write_clean_shutdown",
]

CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
CURRENT_VERSION = 0
_INT64 = (-(2**63), 2**63 - 1)


def read_clean_shutdown(path: str | os.PathLike) -> int | None:
    """The broker epoch recorded at clean shutdown; None for an empty (pre-3.6) marker or one
    without ``brokerEpoch``. Unknown fields are ignored, as Kafka's reader does."""
    where = os.fspath(path)
    text = read_text_file(path)
    if not text.strip():
        return None
    content = loads_bounded(text, path=where)
    if not isinstance(content, dict):
        raise CorruptCheckpointError(
            f'expected a JSON object {{"version":0,"brokerEpoch":N}}, got {type(content).__name__}',
            path=where,
            line=1,
        )
    version = content.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise CorruptCheckpointError(f"version {version!r} is not an int", path=where, line=1)
    epoch = content.get("brokerEpoch")
    if epoch is None:
        return None
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not _INT64[0] <= epoch <= _INT64[1]:
        raise CorruptCheckpointError(f"brokerEpoch {epoch!r} is not a long", path=where, line=1)
    return epoch


def write_clean_shutdown(path: str | os.PathLike, broker_epoch: int | None) -> None:
    """Atomically write the marker; ``broker_epoch=None`` writes the empty legacy marker."""
    if broker_epoch is None:
        data = b""
    else:
        if isinstance(broker_epoch, bool) or not isinstance(broker_epoch, int):
            raise ValueError(f"broker_epoch must be an int, got {broker_epoch!r}")
        if not _INT64[0] <= broker_epoch <= _INT64[1]:
            raise ValueError(f"broker_epoch {broker_epoch} does not fit in a long")
        data = json.dumps(
            {"version": CURRENT_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")
        ).encode("ascii")
    write_file_atomically(path, data)
