"""A coordinator's internal topic: where its records go and how they are read back on start.

Both coordinators keep their state as records of an internal topic (``__consumer_offsets``,
``__transaction_state``), one owner per key: a group or transactional id maps to the partition
``abs(javaHashCode(id)) % partitions``, exactly as Kafka (GroupCoordinator.partitionFor,
TransactionStateManager.partitionFor) so a data directory written by a real broker, and read
here, keeps every key in the partition it was written to.

Writes are one batch per coordinator operation (atomic: all records of a commit or none),
uncompressed, stamped with the broker's clock, appended through the broker as origin
"coordinator" and flushed before the operation answers: an acknowledged commit, join or
transaction step survives a power loss, as acks=all does in this server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import CoordinatorLoadError, KafkalogError
from ..format.builder import MemoryRecordsBuilder
from ..format.constants import ControlRecordType
from ..format.control import decode_control_type
from ..log.datadir import TopicPartition

__all__ = [
    "CoordinatorLoadError",
    "CoordinatorLog",
    "LoggedRecord",
    "java_string_hash",
    "partition_for",
]

_INT32 = 1 << 32


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) % _INT32
    return h - _INT32 if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One record read back from an internal topic, with what its batch said about it.

    ``control`` is the marker type (COMMIT or ABORT) for a transaction marker, else None.
    """

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: ControlRecordType | None


class CoordinatorLog:
    """Appends to and reads one internal topic through the broker (see the module docstring)."""

    def __init__(self, broker, topic: str, partitions: int) -> None:
        self.broker = broker
        self.topic = topic
        self.partitions = partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    async def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        now_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> int:
        """Append ``(key, value)`` records as one batch, flushed; returns the last offset."""
        builder = MemoryRecordsBuilder(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if transactional else -1,
            is_transactional=transactional,
        )
        for key, value in records:
            builder.append(timestamp=now_ms, key=key, value=value)
        _, last = await self.broker.append_records(
            self.topic, partition, builder.build(), origin="coordinator"
        )
        await self.broker.flush(self.topic, partition)
        return last

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        """Every record of one partition from its log start, markers included, in offset order.

        Damage (a bad CRC, a torn record) raises :class:`CoordinatorLoadError` naming the
        partition directory, the offset and the byte position.
        """
        log = self.broker.log_manager.get_log(TopicPartition(self.topic, partition))
        if log is None:
            return
        try:
            yield from self._read(log)
        except KafkalogError as e:
            segment = log.segment_for(e.offset) if e.offset is not None else None
            where = str(segment.log.path) if segment is not None else str(log.dir)
            raise CoordinatorLoadError(
                f"cannot load {self.topic}-{partition}: {e.message}; check the data directory "
                f"with `kafkalog verify` and repair or remove the damaged segment",
                path=e.path or where, offset=e.offset, position=e.position,
            ) from e  # fmt: skip

    def _read(self, log) -> Iterator[LoggedRecord]:
        for batch in log.batches(log.log_start_offset):
            if batch.last_offset < log.log_start_offset:
                continue
            batch.ensure_valid()
            has_pid = batch.magic >= 2 and batch.producer_id >= 0
            for record in batch.records():
                if record.offset < log.log_start_offset:
                    continue
                control = None
                if batch.magic >= 2 and batch.is_control:
                    kind = decode_control_type(record.key)
                    if kind not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        continue
                    control = ControlRecordType(kind)
                yield LoggedRecord(
                    offset=record.offset,
                    key=record.key,
                    value=record.value,
                    producer_id=batch.producer_id if has_pid else -1,
                    producer_epoch=batch.producer_epoch if has_pid else -1,
                    transactional=batch.magic >= 2 and batch.is_transactional,
                    control=control,
                )
