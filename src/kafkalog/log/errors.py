"""Errors of the log layer's files: checkpoints, names, index appends (defined in
:mod:`kafkalog.errors`, with every other exception).

Each names the file (``path``) and, for text files, the 1-based ``line`` that broke a rule, so a
reader of a dead broker's disk learns what is wrong where without a traceback. All are also
``ValueError`` (bad data, never a bare ``ValueError``/``IndexError`` escaping from parsing).
Corrupt index *contents* use :class:`kafkalog.errors.CorruptIndexError`.
"""

from __future__ import annotations

from ..errors import (
    CorruptCheckpointError,
    IndexOffsetOverflowError,
    InvalidFileNameError,
    InvalidOffsetError,
    InvalidTopicError,
)

__all__ = [
    "CorruptCheckpointError",
    "IndexOffsetOverflowError",
    "InvalidFileNameError",
    "InvalidOffsetError",
    "InvalidTopicError",
]
