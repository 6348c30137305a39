"""Reading the JSON and text files of a data directory with bounds on size and nesting.

A data directory is hostile input: ``kafkalog-topics.json`` nested 100,000 deep makes the json
module raise RecursionError, a multi-gigabyte checkpoint would be read whole into memory, a FIFO
named like one blocks ``open``. Every JSON or checkpoint file kafkalog reads from a data
directory goes through here: at most ``max_bytes`` are read (beyond, a typed error naming the
file), only regular files are opened (:mod:`.regular_file`), and JSON nested deeper than
``max_depth`` is refused before the json module parses it (the brackets outside strings are
counted first), so RecursionError never escapes. Errors are :class:`CorruptCheckpointError`
(a ``KafkalogError`` and ``ValueError``) naming the file and, where known, the line.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from collections.abc import Iterator

from ..errors import CorruptCheckpointError
from ..storage import as_path, is_remote
from .regular_file import open_regular

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "json_depth",
    "loads_bounded",
    "nesting_guard",
    "read_bounded_bytes",
    "read_json_file",
]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # far above any checkpoint or metadata file Kafka writes
DEFAULT_MAX_DEPTH = 64  # kafkalog-topics.json nests 4 deep, quorum-state 3

# A string, or an unterminated one to the end (so a stray quote costs one pass, not one per quote)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\x02\x02")


def read_bounded_bytes(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes`` (else CorruptCheckpointError
    naming it; a FIFO or device is NotRegularFileError and never opened). A missing file raises
    FileNotFoundError: absence is the caller's call."""
    if is_remote(path):  # an object (a checkpoint, a snapshot in object storage)
        data = as_path(path).read_bytes(max_bytes)
    else:
        with open_regular(path) as f:
            data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CorruptCheckpointError(
            f"larger than the {_size(max_bytes)} kafkalog reads of such a file: not a file "
            f"Kafka writes (or a damaged one)",
            path=os.fspath(path),
        )
    return data


def json_depth(data: bytes | str) -> int:
    """The deepest nesting of arrays and objects in ``data`` (brackets inside strings do not
    count); linear time, no recursion. Malformed JSON gives some number: the parser says why."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw))
    if not brackets:
        return 0
    steps = brackets.translate(_STEP)
    return max(itertools.accumulate(1 if b == 1 else -1 for b in steps))


def loads_bounded(
    data: bytes | str, *, path: str | os.PathLike, max_depth: int = DEFAULT_MAX_DEPTH
) -> object:
    """``json.loads(data)`` of the file ``path``, refusing nesting deeper than ``max_depth``;
    every failure is CorruptCheckpointError naming the file (never RecursionError)."""
    where = os.fspath(path)
    depth = json_depth(data)
    if depth > max_depth:
        raise CorruptCheckpointError(
            f"JSON nested {depth} deep, more than the {max_depth} levels kafkalog reads: not a "
            f"file Kafka or kafkalog writes",
            path=where,
        )
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise CorruptCheckpointError(f"not JSON: {e.msg} (column {e.colno})", path=where,
                                     line=e.lineno) from None  # fmt: skip
    except (ValueError, RecursionError) as e:  # undecodable bytes; nesting the scan missed
        raise CorruptCheckpointError(f"not JSON: {e}", path=where) from None


def read_json_file(
    path: str | os.PathLike,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> object:
    """The JSON document in the data-directory file ``path``, read within both bounds."""
    return loads_bounded(read_bounded_bytes(path, max_bytes=max_bytes), path=path,
                         max_depth=max_depth)  # fmt: skip


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


@contextlib.contextmanager
def nesting_guard(path: str | os.PathLike) -> Iterator[None]:
    """Turn a RecursionError raised inside (a reader that calls the json module itself) into
    CorruptCheckpointError naming ``path``; for readers not yet using :func:`loads_bounded`."""
    try:
        yield
    except RecursionError:
        raise CorruptCheckpointError(
            "JSON nested too deep to read: not a file Kafka or kafkalog writes",
            path=os.fspath(path),
        ) from None
