"""Building log entries of any magic, codec, timestamp type and producer fields.

Kafka's MemoryRecordsBuilder.

One builder makes what Kafka's MemoryRecordsBuilder makes: for magic 2 one batch (a control batch
when ``is_control``); for magic 0/1 one message per record, or a single compressed wrapper. Records
take consecutive offsets from ``base_offset`` unless an explicit offset is given (which must
increase, as Kafka requires: "Illegal offset ... following previous offset").
"""

from __future__ import annotations

from collections.abc import Sequence

from .batch import empty_batch, encode_batch_header
from .codecs import CompressionType, codec_for, compress
from .constants import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    ControlRecordType,
    TimestampType,
)
from .control import encode_control_key, encode_end_txn_marker
from .legacy import encode_legacy_message_set
from .record import Header, encode_record_v2

__all__ = ["MemoryRecordsBuilder", "build_end_txn_marker_batch"]

HeaderLike = Header | tuple[str, bytes | None]


class MemoryRecordsBuilder:
    """Accumulate records, then :meth:`build` the bytes of one batch (or legacy message set)."""

    def __init__(
        self,
        *,
        magic: int = MAGIC_VALUE_V2,
        compression: int | str = CompressionType.NONE,
        compression_level: int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        base_offset: int = 0,
        log_append_time: int = NO_TIMESTAMP,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
    ) -> None:
        if isinstance(compression, str):
            compression = CompressionType.from_label(compression)
        compression = CompressionType(compression)
        codec_for(compression, magic=magic)  # rejects zstd below magic 2
        if magic not in (MAGIC_VALUE_V0, MAGIC_VALUE_V1, MAGIC_VALUE_V2):
            raise ValueError(f"unknown magic {magic}")
        if magic < MAGIC_VALUE_V2:
            if is_transactional or is_control or producer_id != NO_PRODUCER_ID:
                raise ValueError(
                    f"magic {magic} supports no producer ids, transactions or control records"
                )
            if delete_horizon_ms is not None:
                raise ValueError(f"magic {magic} has no delete horizon")
        if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time == NO_TIMESTAMP:
            raise ValueError("LogAppendTime needs log_append_time")
        if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE and magic != MAGIC_VALUE_V0:
            raise ValueError("NoTimestampType is only for magic 0")
        if is_transactional and producer_id == NO_PRODUCER_ID:
            raise ValueError("a transactional batch needs a producer id")
        self.magic = magic
        self.compression = compression
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self._records: list[tuple[int, int, bytes | None, bytes | None, Sequence[HeaderLike]]] = []

    @property
    def num_records(self) -> int:
        return len(self._records)

    @property
    def next_offset(self) -> int:
        return self._records[-1][0] + 1 if self._records else self.base_offset

    def append(
        self,
        *,
        timestamp: int = NO_TIMESTAMP,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Sequence[HeaderLike] = (),
        offset: int | None = None,
    ) -> int:
        """Add a record; returns its offset."""
        if offset is None:
            offset = self.next_offset
        elif self._records and offset <= self._records[-1][0]:
            raise ValueError(
                f"Illegal offset {offset} following previous offset {self._records[-1][0]} "
                f"(offsets must increase)"
            )
        elif offset < self.base_offset:
            raise ValueError(f"offset {offset} is below the base offset {self.base_offset}")
        if headers and self.magic < MAGIC_VALUE_V2:
            raise ValueError(f"magic {self.magic} records cannot have headers")
        if self.magic == MAGIC_VALUE_V0:
            timestamp = NO_TIMESTAMP
        elif timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"invalid negative timestamp {timestamp}")
        if self.is_control and key is None:
            raise ValueError("control records need a key")
        self._records.append((offset, timestamp, _as_bytes(key), _as_bytes(value), headers))
        return offset

    def append_end_txn_marker(
        self, control_type: ControlRecordType, coordinator_epoch: int, *, timestamp: int
    ) -> int:
        """Add a COMMIT or ABORT marker (the builder must be a transactional control batch)."""
        if not self.is_control:
            raise ValueError("end transaction markers go in control batches")
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"{control_type!r} is not an end transaction marker")
        return self.append(
            timestamp=timestamp,
            key=encode_control_key(control_type),
            value=encode_end_txn_marker(coordinator_epoch),
        )

    def build(self) -> bytes:
        if not self._records:
            raise ValueError("cannot build a batch without records (see batch.empty_batch)")
        if self.magic < MAGIC_VALUE_V2:
            return self._build_legacy()
        return self._build_v2()

    def _build_legacy(self) -> bytes:
        offsets = [r[0] for r in self._records]
        if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
            if self.compression != CompressionType.NONE:
                raise ValueError("compressed legacy message sets need consecutive offsets")
            return b"".join(
                encode_legacy_message_set(
                    [(ts, key, value)],
                    magic=self.magic,
                    base_offset=offset,
                    timestamp_type=self.timestamp_type,
                    log_append_time=self.log_append_time,
                )
                for offset, ts, key, value, _ in self._records
            )
        return encode_legacy_message_set(
            [(ts, key, value) for _, ts, key, value, _ in self._records],
            magic=self.magic,
            base_offset=offsets[0],
            compression=self.compression,
            compression_level=self.compression_level,
            timestamp_type=self.timestamp_type,
            log_append_time=self.log_append_time,
        )

    def _build_v2(self) -> bytes:
        records = self._records
        base_offset = self.base_offset
        timestamps = [ts for _, ts, _, _, _ in records]
        max_ts = max(timestamps)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            max_ts = self.log_append_time
        # Record timestamps are deltas from baseTimestamp, which holds the delete horizon when
        # one is set (MemoryRecordsBuilder does the same).
        base_timestamp = timestamps[0] if self.delete_horizon_ms is None else self.delete_horizon_ms
        body = b"".join(
            encode_record_v2(
                offset_delta=offset - base_offset,
                timestamp_delta=ts - base_timestamp,
                key=key,
                value=value,
                headers=headers,
            )
            for offset, ts, key, value, headers in records
        )
        if self.compression != CompressionType.NONE:
            body = compress(self.compression, body, level=self.compression_level)
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.is_control:
            attributes |= CONTROL_FLAG_MASK
        if self.delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_FLAG_MASK
        return encode_batch_header(
            base_offset=base_offset,
            length=RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
            attributes=attributes,
            last_offset_delta=records[-1][0] - base_offset,
            base_timestamp=base_timestamp,
            max_timestamp=max_ts,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            records_count=len(records),
            partition_leader_epoch=self.partition_leader_epoch,
            records=body,
        )


def _as_bytes(data) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        raise TypeError("keys and values are bytes; encode strings first")
    return bytes(data)


def build_end_txn_marker_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker.

    Kafka's MemoryRecords.withEndTransactionMarker.
    """
    builder = MemoryRecordsBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append_end_txn_marker(control_type, coordinator_epoch, timestamp=timestamp)
    return builder.build()


__all__ += ["empty_batch"]
