"""The writing side of ``kafkalog produce``: partitioning, batching and appending as a leader.

Records are buffered per partition and encoded by the columnar encoder into magic 2 batches of
about ``--batch-size`` bytes; each batch is appended with :meth:`Log.append_as_leader`, so Kafka's
validation assigns the offsets and the log keeps its indexes and producer state. Idempotent and
transactional writes carry a producer id, epoch and sequence numbers that continue the ones the
log already holds for that producer; a transaction ends with one COMMIT or ABORT control batch
per partition, appended as the transaction coordinator would (which writes the ``.txnindex``).
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass, field

from ..dataset import StickyPartitioner
from ..errors import InternalTopicError
from ..format import columnar as fast
from ..format.builder import build_end_txn_marker_batch
from ..format.constants import ControlRecordType
from ..format.partitioner import partition_for_key
from ..format.validate import AppendOrigin
from ..log.datadir import INTERNAL_TOPICS, LogManager, TopicPartition
from ..log.partition import Log
from .record_json import InputRecord, RecordFormatError

__all__ = ["InternalTopicError", "PartitionWriter", "internal_topic_refusal"]


def internal_topic_refusal(topic: str) -> str | None:
    """Why ``produce`` refuses ``topic`` without ``--allow-internal-topics``, or None."""
    if topic not in INTERNAL_TOPICS:
        return None
    return (
        f"Cannot append to internal topic {topic}: only the broker writes it, and a broker "
        f"refuses produce requests to it (INVALID_TOPIC_EXCEPTION); give "
        f"--allow-internal-topics to write it anyway"
    )


_SEQUENCE_WRAP = 1 << 31  # sequences run 0 .. Int.MAX, then start again at 0
_KEY_CACHE_SIZE = 100_000
_RECORD_OVERHEAD = 21  # a record's framing besides key, value and headers (an estimate)
# Default producer ids come from here up. A KRaft controller hands out ids from 0 in blocks of
# 1000 (and kafkalog's server from 0 too) and never gets near, so a broker started on the
# directory never gives one of its producers an id whose sequences kafkalog wrote: it would
# take that producer's first batches for duplicates and drop them.
DEFAULT_PRODUCER_IDS = 1 << 62


@dataclass
class _Pending:
    """Records buffered for one partition, and what was written to it so far."""

    log: Log
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)
    headers: list = field(default_factory=list)
    size: int = 0
    sequence: int = -1
    written: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    marker: str | None = None


class PartitionWriter:
    """Where each record goes and how it is appended, for one ``produce`` run."""

    def __init__(self, manager: LogManager, args: argparse.Namespace, configs: dict[str, str]):
        self.manager = manager
        self.topic: str | None = args.topic
        self.allow_internal: bool = getattr(args, "allow_internal_topics", False)
        self.partition: int | None = args.partition
        self.new_partitions: int = args.partitions
        self.configs = configs
        self.codec: str = args.codec
        self.level: int | None = args.compression_level
        self.batch_size: int = args.batch_size
        self.default_timestamp: int | None = args.timestamp
        self.transaction: str | None = args.transaction
        self.coordinator_epoch: int = args.coordinator_epoch
        idempotent = args.idempotent or args.producer_id is not None or args.transaction
        self.producer_id = -1
        self.producer_epoch = -1
        if idempotent:
            self.producer_id = (
                args.producer_id if args.producer_id is not None else self._new_producer_id()
            )
            self.producer_epoch = (
                args.producer_epoch if args.producer_epoch is not None else self._current_epoch()
            )
        self.pending: dict[TopicPartition, _Pending] = {}
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, StickyPartitioner] = {}
        self.key_partitions: dict[str, dict[bytes, int]] = {}

    # -- producer identity ------------------------------------------------------------------
    def _new_producer_id(self) -> int:
        """One above the ids the directory's producer states hold in kafkalog's range."""
        ids = [
            pid
            for log in self.manager.logs.values()
            for pid in log.producer_state.active_producers
            if pid >= DEFAULT_PRODUCER_IDS
        ]
        return max(ids, default=DEFAULT_PRODUCER_IDS - 1) + 1

    def _current_epoch(self) -> int:
        epochs = [
            entry.producer_epoch
            for log in self.manager.logs.values()
            if (entry := log.producer_state.last_entry(self.producer_id)) is not None
        ]
        return max(epochs, default=0)

    # -- routing ----------------------------------------------------------------------------
    def _partition_count(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is not None:
            return count
        existing = [tp.partition for tp in self.manager.logs if tp.topic == topic]
        if existing:
            count = max(existing) + 1
            if self.configs:
                warnings.warn(f"topic {topic} exists: --config ignored for it", stacklevel=2)
        else:
            count = self.new_partitions  # created once a record for it is known to fit
        self.partition_counts[topic] = count
        return count

    def _route(self, record: InputRecord, size: int) -> TopicPartition:
        topic = self.topic or record.topic
        if not topic:
            raise RecordFormatError('no topic: give --topic or a "topic" field')
        refusal = None if self.allow_internal else internal_topic_refusal(topic)
        if refusal is not None:
            raise InternalTopicError(refusal)
        count = self._partition_count(topic)
        partition = self.partition if self.partition is not None else record.partition
        if partition is not None and not 0 <= partition < count:
            # A broker answers UNKNOWN_TOPIC_OR_PARTITION; adding partitions is an admin's act.
            raise RecordFormatError(
                f"partition {partition} of topic {topic} does not exist (it has {count} "
                f"partition{'s' if count != 1 else ''}, 0..{count - 1}): "
                f"UNKNOWN_TOPIC_OR_PARTITION"
            )
        if not any(tp.topic == topic for tp in self.manager.logs):
            self.manager.create_topic(topic, count, self.configs)
        if partition is None:
            if record.key is not None:
                cache = self.key_partitions.setdefault(topic, {})
                partition = cache.get(record.key)
                if partition is None:  # murmur2 in Python costs; keys repeat
                    if len(cache) >= _KEY_CACHE_SIZE:
                        cache.clear()
                    partition = cache[record.key] = partition_for_key(record.key, count)
            else:
                sticky = self.sticky.get(topic)
                if sticky is None:
                    sticky = self.sticky[topic] = StickyPartitioner(count, self.batch_size)
                partition = int(sticky.assign([size])[0])
        return TopicPartition(topic, partition)

    def _open(self, tp: TopicPartition) -> _Pending:
        log = self.manager.get_or_create_log(tp)
        pending = _Pending(log)
        if self.producer_id >= 0:
            entry = log.producer_state.last_entry(self.producer_id)
            same_epoch = entry is not None and entry.producer_epoch == self.producer_epoch
            if same_epoch and entry.last_seq >= 0:
                pending.sequence = (entry.last_seq + 1) % _SEQUENCE_WRAP
            else:
                pending.sequence = 0
        self.pending[tp] = pending
        return pending

    # -- writing ----------------------------------------------------------------------------
    def send(self, record: InputRecord, extra_headers: tuple = ()) -> None:
        headers = list(record.headers) + list(extra_headers)
        size = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
        size += sum(len(k) + len(v or b"") + 2 for k, v in headers)
        tp = self._route(record, size)
        pending = self.pending.get(tp) or self._open(tp)
        if record.timestamp is not None:
            timestamp = record.timestamp
        elif self.default_timestamp is not None:
            timestamp = self.default_timestamp
        else:
            timestamp = time.time_ns() // 1_000_000
        pending.keys.append(record.key)
        pending.values.append(record.value)
        pending.timestamps.append(timestamp)
        pending.headers.append(headers)
        pending.size += size
        if pending.size >= self.batch_size:
            self._flush_one(tp, pending)

    def flush(self) -> None:
        for tp, pending in self.pending.items():
            self._flush_one(tp, pending)

    def _flush_one(self, tp: TopicPartition, p: _Pending) -> None:
        if not p.keys:
            return
        rows = (p.keys, p.values, p.timestamps, p.headers)
        p.keys, p.values, p.timestamps, p.headers, p.size = [], [], [], [], 0
        data = fast.encode_columnar(
            *rows, compression=self.codec, compression_level=self.level,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=p.sequence, is_transactional=self.transaction is not None,
            batch_bytes=self.batch_size,
        )  # fmt: skip
        view = memoryview(data)
        pos = done = 0
        while pos < len(view):
            size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
            try:
                # A client's batch starts at offset 0 (the broker checks it); the base offset
                # lies outside the CRC, so later batches of the encoder's output are patched.
                data[pos : pos + 8] = bytes(8)
                info = p.log.append_as_leader(view[pos : pos + size])
            except (ValueError, OSError) as e:
                lost = len(rows[0]) - done
                raise RecordFormatError(
                    f"{tp}: the log refused a batch, {lost} records not written: {e}"
                ) from e
            pos += size
            count = info.last_offset - info.first_offset + 1
            done += count
            p.written += count
            p.first_offset = info.first_offset if p.first_offset is None else p.first_offset
            p.last_offset = info.last_offset
            if p.sequence >= 0:
                p.sequence = (p.sequence + count) % _SEQUENCE_WRAP

    def finish(self, *, failed: bool) -> None:
        """End the transaction: COMMIT or ABORT markers (ABORT when the run failed)."""
        if self.transaction not in ("commit", "abort"):
            return
        if not failed:
            self.flush()
        marker = "COMMIT" if self.transaction == "commit" and not failed else "ABORT"
        control = ControlRecordType.COMMIT if marker == "COMMIT" else ControlRecordType.ABORT
        targets = dict(self.pending)
        for tp, log in self.manager.logs.items():  # earlier runs' open transactions of this id
            entry = log.producer_state.last_entry(self.producer_id)
            if entry is not None and entry.current_txn_first_offset is not None:
                targets.setdefault(tp, _Pending(log))
        for tp in sorted(targets, key=lambda t: (t.topic, t.partition)):
            p = targets[tp]
            entry = p.log.producer_state.last_entry(self.producer_id)
            if entry is None or entry.current_txn_first_offset is None:
                continue  # nothing of this producer's transaction reached the partition
            batch = build_end_txn_marker_batch(
                control, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                coordinator_epoch=self.coordinator_epoch, timestamp=time.time_ns() // 1_000_000,
            )  # fmt: skip
            info = p.log.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
            p.marker = f"{marker} marker at offset {info.first_offset}"
            self.pending[tp] = p

    def summary(self) -> list[str]:
        lines = []
        for tp in sorted(self.pending, key=lambda t: (t.topic, t.partition)):
            p = self.pending[tp]
            text = f"{tp}: {p.written} record{'' if p.written == 1 else 's'}"
            if p.written:
                text += f" at offsets {p.first_offset} to {p.last_offset}"
            if self.producer_id >= 0:
                text += f" (producer id {self.producer_id}, epoch {self.producer_epoch})"
            if p.marker:
                text += f", {p.marker}"
            lines.append(text)
        return lines
