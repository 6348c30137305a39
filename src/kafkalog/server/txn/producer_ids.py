"""Producer ids that never repeat, across restarts included (Kafka's ProducerIdManager).

A producer id names one producer's sequence numbers and transactions in every partition, so
handing the same id to two producers would make the log reject one as out of order, or fence
it. Kafka's controller hands out blocks of 1000 ids and records each block before use; here the
block is recorded in ``kafkalog-producer-ids.json`` at the root of the first data directory,
written atomically and fsynced before any id of the block is given out. A crash wastes at most
the rest of a block, never reuses an id.

A data directory written by a real Kafka broker has no such file: the first start reserves
from above every producer id its logs and ``__transaction_state`` still mention (``floor``),
so producers that wrote there are never confused with new ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import KafkalogError
from ...log.datadir import PRODUCER_IDS_FILE_NAME, write_file_atomically

__all__ = [
    "PRODUCER_IDS_FILE_NAME",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdManager",
    "highest_producer_id_in_logs",
]

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_VERSION = 1
_MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdManager:
    """Hands out producer ids from durably reserved blocks."""

    def __init__(self, data_dir: Path, *, floor: int = 0) -> None:
        self.path = Path(data_dir) / PRODUCER_IDS_FILE_NAME
        self._next_block_start = max(self._read(), floor)
        self._next_id = self._block_end = self._next_block_start

    def _read(self) -> int:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return 0
        try:
            doc = json.loads(text)
            start = doc["next_block_start"]
            if doc.get("version") != _VERSION or not isinstance(start, int) or start < 0:
                raise ValueError(f"unsupported version or start in {doc!r}")
        except (ValueError, KeyError, TypeError) as e:
            raise KafkalogError(
                f"{self.path} is not a producer id block file: {e}; remove it only if every "
                f"producer id below the highest one in use is known",
                path=str(self.path),
            ) from None
        return start

    def generate_producer_id(self) -> int:
        """The next unused id; reserves (and persists) a new block when the current one is spent."""
        if self._next_id >= self._block_end:
            start = self._next_block_start
            end = start + PRODUCER_ID_BLOCK_SIZE
            if end > _MAX_PRODUCER_ID:
                raise KafkalogError("producer ids are exhausted")
            doc = {"version": _VERSION, "next_block_start": end}
            write_file_atomically(self.path, (json.dumps(doc) + "\n").encode("utf-8"))
            self._next_id, self._block_end, self._next_block_start = start, end, end
        producer_id = self._next_id
        self._next_id += 1
        return producer_id


def highest_producer_id_in_logs(log_manager) -> int:
    """The highest producer id any partition's producer state remembers (-1 if none)."""
    highest = -1
    for log in log_manager.logs.values():
        producers = log.producer_state.active_producers
        if producers:
            highest = max(highest, max(producers))
    return highest
