"""Data directories for the Spark tests, written with kafkalog's log layer."""

from __future__ import annotations

from kafkalog.format import ControlRecordType, MemoryRecordsBuilder
from kafkalog.format.builder import build_end_txn_marker_batch
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def record(topic: str, partition: int, i: int) -> dict:
    return {
        "key": None if i % 5 == 0 else f"{topic}-k{i % 7}".encode(),
        "value": f"{topic}/{partition}/{i}".encode(),
        "timestamp": T0 + i * 1000,
        "headers": [("h", str(i).encode())] if i % 2 else [],
    }


def write_dir(root, topics: dict[str, int], per_partition: int, *, batch: int = 10,
              compression: str = "none", segment_bytes: int | None = None) -> dict:  # fmt: skip
    """``topics`` {name: partitions}, each partition holding ``per_partition`` records of
    :func:`record`; returns {(topic, partition): [records]}."""
    written = {}
    configs = {"internal.segment.bytes": str(segment_bytes)} if segment_bytes else {}
    with LogManager(root, writable=True, create=True) as manager:
        for topic, count in topics.items():
            manager.create_topic(topic, count, configs)
            for p in range(count):
                log = manager.get_log(TopicPartition(topic, p))
                rows = [record(topic, p, i) for i in range(per_partition)]
                for start in range(0, per_partition, batch):
                    b = MemoryRecordsBuilder(compression=compression)
                    for r in rows[start : start + batch]:
                        b.append(timestamp=r["timestamp"], key=r["key"], value=r["value"],
                                 headers=r["headers"])  # fmt: skip
                    log.append_as_leader(b.build())
                written[(topic, p)] = rows
    return written


def write_transactions(root, topic: str = "tx") -> dict:
    """One partition: plain records, a committed transaction, an aborted one, interleaved with
    another producer's, then an open transaction. Returns what read_committed and
    read_uncommitted must see (values) and the offsets."""
    pid_a, pid_b, epoch = 1000, 2000, 0
    seen_uncommitted, seen_committed = [], []
    with LogManager(root, writable=True, create=True) as manager:
        manager.create_topic(topic, 1)
        log = manager.get_log(TopicPartition(topic, 0))

        def data(values, pid=-1, seq=-1, txn=False):
            b = MemoryRecordsBuilder(producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                                     base_sequence=seq, is_transactional=txn)  # fmt: skip
            for v in values:
                b.append(timestamp=T0, key=None, value=v)
            log.append_as_leader(b.build())
            seen_uncommitted.extend(values)

        def marker(kind, pid):
            m = build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                           coordinator_epoch=0, timestamp=T0)  # fmt: skip
            from kafkalog.format.validate.types import AppendOrigin

            log.append_as_leader(m, origin=AppendOrigin.COORDINATOR)

        data([b"plain-0", b"plain-1"])
        seen_committed += [b"plain-0", b"plain-1"]
        data([b"a-commit-0", b"a-commit-1"], pid_a, 0, True)
        data([b"b-abort-0"], pid_b, 0, True)
        data([b"a-commit-2"], pid_a, 2, True)
        marker(ControlRecordType.COMMIT, pid_a)
        seen_committed += [b"a-commit-0", b"a-commit-1", b"a-commit-2"]
        data([b"b-abort-1"], pid_b, 1, True)
        marker(ControlRecordType.ABORT, pid_b)
        data([b"plain-2"])
        seen_committed += [b"plain-2"]
        lso = log.log_end_offset
        data([b"a-open-0"], pid_a, 3, True)  # never decided: read_committed stops before it
        data([b"plain-3"])
    return {"uncommitted": seen_uncommitted, "committed": seen_committed, "lso": lso}
