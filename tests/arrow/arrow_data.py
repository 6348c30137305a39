"""Data directories for the Arrow API tests: records built by kafka-python (an independent
encoder), appended through kafkalog's log layer as a leader appends them; and the records a
reader must return, computed by decoding the written ``.log`` files with kafka-python."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.format.builder import build_end_txn_marker_batch
from kafkalog.format.constants import ControlRecordType
from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kp_batch(rows, *, codec="none", pid=-1, epoch=-1, seq=-1, txn=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODEC_IDS[codec], is_transactional=txn, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )  # fmt: skip
    for i, (ts, key, value, headers) in enumerate(rows):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def row(topic: str, partition: int, i: int) -> tuple:
    key = None if i % 5 == 0 else f"{topic}-k{i % 7}".encode()
    headers = [("h", str(i).encode()), ("n", None)] if i % 3 == 0 else []
    return (T0 + i * 1000, key, f"{topic}/{partition}/{i}".encode(), headers)


def write_topics(root: Path, topics: dict[str, int], per_partition: int, batch: int = 4) -> None:
    codecs = ["none", "gzip", "zstd", "lz4", "snappy"]
    with LogManager(root, writable=True, create=True) as manager:
        for topic, count in topics.items():
            manager.create_topic(topic, count)
            for p in range(count):
                log = manager.get_log(TopicPartition(topic, p))
                rows = [row(topic, p, i) for i in range(per_partition)]
                for start in range(0, per_partition, batch):
                    data = kp_batch(rows[start : start + batch], codec=codecs[p % len(codecs)])
                    log.append_as_leader(data)


def write_transactions(root: Path, topic: str = "tx") -> None:
    """Plain records, a committed and an aborted transaction interleaved, then an open one."""
    with LogManager(root, writable=True, create=True) as manager:
        manager.create_topic(topic, 1)
        log = manager.get_log(TopicPartition(topic, 0))
        seqs: dict[int, int] = {}

        def data(values, pid=-1):
            rows = [(T0 + 10 * n, None, v, []) for n, v in enumerate(values)]
            if pid < 0:
                log.append_as_leader(kp_batch(rows))
                return
            seq = seqs.get(pid, 0)
            log.append_as_leader(kp_batch(rows, pid=pid, epoch=0, seq=seq, txn=True))
            seqs[pid] = seq + len(values)

        def end(kind, pid):
            marker = build_end_txn_marker_batch(
                kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T0
            )
            log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)

        data([b"plain-0", b"plain-1"])
        data([b"a-0", b"a-1"], 100)
        data([b"b-0"], 200)
        data([b"a-2"], 100)
        end(ControlRecordType.COMMIT, 100)
        data([b"b-1"], 200)
        end(ControlRecordType.ABORT, 200)
        data([b"plain-2"])
        data([b"a-open"], 100)
        data([b"plain-3"])


@dataclass(frozen=True)
class KpRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list
    producer_id: int
    transactional: bool


def kp_records(partition_dir: Path, *, read_committed: bool = False) -> list[KpRecord]:
    """The records a consumer sees, decoded by kafka-python; with ``read_committed`` the
    records of aborted transactions are dropped and reading stops at the first transaction
    that is still open (the last stable offset)."""
    out: list[KpRecord] = []
    open_txn: dict[int, list[KpRecord]] = {}
    for log in sorted(partition_dir.glob("*.log")):
        records = KpMemoryRecords(log.read_bytes())
        while (batch := records.next_batch()) is not None:
            pid = batch.producer_id
            if batch.is_control_batch:
                for r in batch:
                    kind = struct.unpack(">hh", bytes(r.key))[1]
                    done = open_txn.pop(pid, [])
                    if kind == 1 or not read_committed:  # COMMIT, or everything is seen
                        out.extend(done)
                continue
            for r in batch:
                rec = KpRecord(r.offset, r.timestamp, r.key, r.value, list(r.headers), pid,
                               batch.is_transactional)  # fmt: skip
                if batch.is_transactional:
                    open_txn.setdefault(pid, []).append(rec)
                else:
                    out.append(rec)
    if read_committed:
        if open_txn:
            first_open = min(recs[0].offset for recs in open_txn.values())
            out = [r for r in out if r.offset < first_open]
    else:
        for recs in open_txn.values():
            out.extend(recs)
    return sorted(out, key=lambda r: r.offset)
