"""Kafka's record-format constants: magic values, sentinels, attribute bits and header layouts.

Values are Kafka's (RecordBatch, DefaultRecordBatch, LegacyRecord, ControlRecordType); sentinels are
-1 as in Kafka, never ``None``, so that they survive a round trip through the bytes unchanged.
"""

from __future__ import annotations

import enum
import struct

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Every log entry (batch or legacy message) starts with offset i64 | size i32.
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
# Kafka reads 17 bytes (up to and including magic) before it knows how to parse an entry.
HEADER_SIZE_UP_TO_MAGIC = 17

# Magic 2 batch header (DefaultRecordBatch), offsets from the start of the entry.
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
# The whole fixed header in one unpack: baseOffset .. recordsCount.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")

# Magic 2 attribute bits.
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# Legacy (magic 0/1) message: offsets from the start of the message (after the 12-byte overhead).
LEGACY_CRC_OFFSET = 0
LEGACY_MAGIC_OFFSET = 4
LEGACY_ATTRIBUTES_OFFSET = 5
LEGACY_TIMESTAMP_OFFSET = 6
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
RECORD_OVERHEAD_V1 = 22  # plus timestamp 8
LOG_OVERHEAD_PLUS = {0: RECORD_OVERHEAD_V0, 1: RECORD_OVERHEAD_V1}

# The smallest possible v2 record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headerCount are each at least one byte.
MIN_V2_RECORD_SIZE = 7


class TimestampType(enum.IntEnum):
    """Kafka's TimestampType; ``str()`` gives Kafka's display name."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    def __str__(self) -> str:
        return _TIMESTAMP_TYPE_NAMES[self]


_TIMESTAMP_TYPE_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ControlRecordType(enum.IntEnum):
    """The ``type`` field of a control record key (ControlRecordType.java)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
