"""A stand-in for the server's Broker over a real LogManager, for coordinator tests without sockets.

It offers what coordinators use of the broker (log_manager, append_records, flush,
ensure_internal_topic, add_shutdown_hook) with the log layer's own appends, so what the
coordinators write is validated and stored exactly as in the server, and can be reopened.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from kafkalog.format.validate.types import AppendOrigin
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition
from kafkalog.server.handlers import RequestContext

T0 = 1_700_000_000_000


class FakeBroker:
    node_id = 1
    host = "127.0.0.1"
    port = 9092

    def __init__(self, data_dir: Path, clock: MockClock | None = None, config=None) -> None:
        self.clock = clock or MockClock(now_ms=T0)
        self.log_manager = LogManager(data_dir, writable=True, create=True, clock=self.clock)
        self.config = config or SimpleNamespace(
            offsets_topic_num_partitions=4,
            transaction_state_log_num_partitions=4,
            extra={"group.initial.rebalance.delay.ms": "100"},
        )
        self.shutdown_hooks: list = []
        self.flushes = 0

    def add_shutdown_hook(self, hook) -> None:
        self.shutdown_hooks.append(hook)

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        if name not in self.log_manager.topics():
            self.log_manager.create_topic(name, partitions, configs)

    def log(self, topic: str, partition: int):
        return self.log_manager.get_or_create_log(TopicPartition(topic, partition))

    def get_log(self, topic: str, partition: int):
        """The partition's log, None when it does not exist (as the broker's)."""
        return self.log_manager.get_log(TopicPartition(topic, partition))

    async def append_records(self, topic: str, partition: int, records: bytes, *, origin: str):
        info = self.log(topic, partition).append_as_leader(records, origin=AppendOrigin(origin))
        return info.first_offset, info.last_offset

    async def flush(self, topic: str, partition: int) -> None:
        self.flushes += 1
        self.log(topic, partition).flush()

    def close(self) -> None:
        for hook in self.shutdown_hooks:
            result = hook()
            if asyncio.iscoroutine(result):
                asyncio.get_event_loop().run_until_complete(result)
        self.log_manager.close()


def ctx(api_key: int, version: int, client_id: str = "client", connection_id: int = 1):
    return RequestContext(
        api_key=api_key, api_version=version, correlation_id=1, client_id=client_id,
        client_host="/127.0.0.1", connection_id=connection_id,
    )  # fmt: skip
