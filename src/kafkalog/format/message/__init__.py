"""Kafka's message-schema language, one engine for the wire protocol and the internal topics.

:mod:`.schema` holds the field model and the table notation, :mod:`.codec` the byte rules (read
and write, compiled per version). :mod:`kafkalog.protocol` describes requests and responses with
it, :mod:`kafkalog.format.internal` the records of ``__consumer_offsets``,
``__transaction_state``, KRaft metadata and control records.
"""

from __future__ import annotations

from collections.abc import Mapping

from .codec import RECORDS, Dialect, Encoded, Reader
from .schema import MAX_VERSION, ZERO_UUID, Field, Message, Versions

__all__ = [
    "MAX_VERSION",
    "RECORDS",
    "ZERO_UUID",
    "Dialect",
    "Encoded",
    "Field",
    "Message",
    "Reader",
    "Versions",
    "read_message",
    "write_message",
]


def read_message(msg: Message, buf, pos: int, end: int, version: int) -> tuple[dict, int]:
    """Read ``msg`` at ``version`` from ``buf[pos:end]``; return the fields and the end position.

    The caller checks ``version in msg.valid`` (an unknown version is not corruption); bad bytes
    raise the message's dialect error (CorruptRecordError for records) with the byte position.
    """
    return msg.read(buf, pos, end, version)


def write_message(msg: Message, data: Mapping, version: int) -> bytes:
    """``data`` (missing fields at their defaults) as ``msg`` at ``version``: the inverse of
    :func:`read_message`. Caller bugs raise ValueError naming the field."""
    return msg.write(data, version)  # type: ignore[arg-type]
