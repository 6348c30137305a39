"""Control records: the key every control record has, and the end-transaction marker value.

Key: version int16 (0) | type int16 (ControlRecordType). A COMMIT or ABORT marker's value:
version int16 (0) | coordinatorEpoch int32 (EndTransactionMarker.java). Kafka reads newer key and
marker versions by their leading fields, so do we. Other control types' values (leader change,
snapshot header/footer, KRaft version and voters) are decoded in :mod:`kafkalog.format.internal`.
"""

from __future__ import annotations

import struct

from ..errors import InvalidRecordError
from .constants import ControlRecordType

__all__ = [
    "CONTROL_KEY_SIZE",
    "decode_control_type",
    "decode_end_txn_marker",
    "encode_control_key",
    "encode_end_txn_marker",
]

CONTROL_KEY_SIZE = 4
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


def decode_control_type(key: bytes | None) -> int:
    """The control type number of a control record key (unknown types are returned as numbers)."""
    if key is None or len(key) < CONTROL_KEY_SIZE:
        size = -1 if key is None else len(key)
        raise InvalidRecordError(
            f"Invalid control record key: expected at least {CONTROL_KEY_SIZE} bytes, found {size}"
        )
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"Invalid negative control record key version {version}")
    return control_type


def decode_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinatorEpoch)`` of a COMMIT/ABORT marker value."""
    if value is None or len(value) < _MARKER.size:
        size = -1 if value is None else len(value)
        raise InvalidRecordError(
            f"Invalid end transaction marker value: expected at least {_MARKER.size} bytes, "
            f"found {size}"
        )
    version, coordinator_epoch = _MARKER.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"Invalid negative end transaction marker version {version}")
    return version, coordinator_epoch


def encode_control_key(control_type: int | ControlRecordType) -> bytes:
    return _KEY.pack(CURRENT_CONTROL_KEY_VERSION, int(control_type))


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    return _MARKER.pack(CURRENT_END_TXN_MARKER_VERSION, coordinator_epoch)
