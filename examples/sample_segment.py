"""Write a small but varied Kafka log segment: every codec, headers, a transaction, legacy messages.

    python examples/sample_segment.py out/demo-0/00000000000000000000.log

The file is what a broker would have on disk for partition 0 of topic ``demo`` (offsets assigned
from 0, batches back to back), so ``kafkalog dump`` and Kafka's own kafka-dump-log both read it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kafkalog.format import (
    CompressionType,
    ControlRecordType,
    MemoryRecordsBuilder,
    TimestampType,
    build_end_txn_marker_batch,
)

BASE_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def event(i: int) -> tuple[bytes, bytes]:
    key = f"user-{i % 7}".encode()
    value = json.dumps({"event": "click", "n": i, "page": f"/item/{i * 37 % 101}"}).encode()
    return key, value


def build_segment() -> bytes:
    out = bytearray()
    offset = 0
    # Legacy message sets first, as an old broker would have left them (magic 1, then magic 0).
    for magic, codec in (
        (1, CompressionType.NONE),
        (1, CompressionType.GZIP),
        (0, CompressionType.SNAPPY),
    ):
        builder = MemoryRecordsBuilder(magic=magic, compression=codec, base_offset=offset)
        for i in range(3):
            key, value = event(offset + i)
            builder.append(timestamp=BASE_TIME_MS + offset + i, key=key, value=value)
        offset = builder.next_offset
        out += builder.build()
    # Magic 2 batches with every codec, headers and an idempotent producer.
    for n, codec in enumerate(CompressionType):
        builder = MemoryRecordsBuilder(
            compression=codec,
            base_offset=offset,
            producer_id=1000,
            producer_epoch=0,
            base_sequence=n * 5,
            partition_leader_epoch=3,
        )
        for i in range(5):
            key, value = event(offset + i)
            builder.append(
                timestamp=BASE_TIME_MS + 1000 + offset + i,
                key=key,
                value=value,
                headers=[("source", b"web"), ("trace-id", f"{offset + i:08x}".encode())],
            )
        offset = builder.next_offset
        out += builder.build()
    # A broker-stamped batch (LogAppendTime) and a committed transaction.
    builder = MemoryRecordsBuilder(
        base_offset=offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=BASE_TIME_MS + 5000,
        compression=CompressionType.LZ4,
    )
    for i in range(4):
        builder.append(timestamp=BASE_TIME_MS + 4000 + i, key=None, value=b"audit %d" % i)
    offset = builder.next_offset
    out += builder.build()
    txn = MemoryRecordsBuilder(
        base_offset=offset,
        producer_id=2000,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
        compression=CompressionType.ZSTD,
    )
    for i in range(3):
        key, value = event(offset + i)
        txn.append(timestamp=BASE_TIME_MS + 6000 + i, key=key, value=value)
    offset = txn.next_offset
    out += txn.build()
    out += build_end_txn_marker_batch(
        ControlRecordType.COMMIT,
        producer_id=2000,
        producer_epoch=1,
        coordinator_epoch=0,
        base_offset=offset,
        timestamp=BASE_TIME_MS + 7000,
    )
    return bytes(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    data = build_segment()
    path.write_bytes(data)
    print(f"wrote {len(data)} bytes to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
