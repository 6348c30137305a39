"""The group and transaction coordinators of a broker: loaded from their logs, registered, run.

``load(broker)`` creates ``__consumer_offsets`` and ``__transaction_state`` when missing (or
uses the partition count they already have, so a data directory from a real broker keeps its
keys where that broker put them), replays both and finishes any transaction a crash left between
its Prepare record and its markers. The :class:`Coordinators` it returns give their handlers
(:meth:`Coordinators.routes`: 8 OffsetCommit, 9 OffsetFetch, 11 JoinGroup, 12 Heartbeat,
13 LeaveGroup, 14 SyncGroup, 15 DescribeGroups, 16 ListGroups, 42 DeleteGroups,
22 InitProducerId, 24 AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn, 28 TxnOffsetCommit,
65 DescribeTransactions, 66 ListTransactions) and run one background task for the timeouts
(sessions, rebalances, transactions) once :meth:`Coordinators.start` is called; the server's
:mod:`~kafkalog.server.app` does both.

Settings come from the broker config's attributes ``offsets_topic_num_partitions`` and
``transaction_state_log_num_partitions`` and, by Kafka's names, from its ``extra`` dict:
group.min.session.timeout.ms, group.max.session.timeout.ms, group.initial.rebalance.delay.ms,
group.max.size, offset.metadata.max.bytes, offsets.retention.minutes,
offsets.retention.check.interval.ms, transaction.max.timeout.ms,
transaction.abort.timed.out.transaction.cleanup.interval.ms, transactional.id.expiration.ms and
transaction.remove.expired.transaction.cleanup.interval.ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, fields

from ..log.datadir import INTERNAL_TOPIC_CONFIGS
from .config import broker_settings
from .coordinator_log import CoordinatorLog
from .groups.coordinator import GroupConfig, GroupCoordinator
from .groups.delete import delete_groups, delete_offsets
from .groups.describe import describe_groups, list_groups
from .groups.load import load_groups
from .groups.offsets import GroupOffsets
from .handlers import Handler
from .internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from .txn.coordinator import TransactionConfig, TransactionCoordinator
from .txn.describe import describe_transactions, list_transactions
from .txn.load import load_transactions
from .txn.producer_ids import (
    PRODUCER_IDS_FILE_NAME,
    ProducerIdManager,
    highest_producer_id_in_logs,
)

__all__ = ["OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "Coordinators", "load"]

_log = logging.getLogger("kafkalog.server")

# Kafka's settings for both topics (offsets.topic.segment.bytes, transaction.state.log.*).
_MAX_IDLE_S = 0.1  # the longest a timeout can fire late

_GROUP_SETTINGS = {
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.max.size": "max_size",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.retention.minutes": None,
}
_TXN_SETTINGS = {
    "transaction.max.timeout.ms": "max_timeout_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "abort_timed_out_interval_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "remove_expired_interval_ms",
}


@dataclass
class Coordinators:
    """What :func:`load` built (the server keeps it as ``broker.coordinators``)."""

    groups: GroupCoordinator
    offsets: GroupOffsets
    transactions: TransactionCoordinator
    task: asyncio.Task | None = None

    def routes(self) -> dict[int, Handler]:
        """The coordinators' handlers by API key."""
        groups, offsets, transactions = self.groups, self.offsets, self.transactions
        return {
            8: offsets.offset_commit,
            9: offsets.offset_fetch,
            11: groups.join_group,
            12: groups.heartbeat,
            13: groups.leave_group,
            14: groups.sync_group,
            15: lambda ctx, req: describe_groups(groups, ctx, req),
            16: lambda ctx, req: list_groups(groups, ctx, req),
            42: lambda ctx, req: delete_groups(offsets, ctx, req),
            47: lambda ctx, req: delete_offsets(offsets, ctx, req),
            22: transactions.init_producer_id,
            24: transactions.add_partitions_to_txn,
            25: transactions.add_offsets_to_txn,
            26: transactions.end_txn,
            28: offsets.txn_offset_commit,
            65: lambda ctx, req: describe_transactions(transactions, ctx, req),
            66: lambda ctx, req: list_transactions(transactions, ctx, req),
        }

    def start(self) -> None:
        """Start the timeouts task (on the running loop); :meth:`stop` ends it."""
        self.task = asyncio.get_running_loop().create_task(self.run_timeouts())

    async def run_timeouts(self) -> None:
        """Fire due timeouts until cancelled; a failure is logged and the loop goes on."""
        txn_config = self.transactions.config
        periodic = [
            (txn_config.abort_timed_out_interval_ms,
             self.transactions.abort_timed_out_transactions),
            (txn_config.remove_expired_interval_ms,
             self.transactions.remove_expired_transactional_ids),
            (self.groups.config.offsets_retention_check_interval_ms, self.offsets.expire_offsets),
        ]  # fmt: skip
        due = [self.groups.now() + interval for interval, _ in periodic]
        while True:
            try:
                await self.groups.run_due()
                for i, (interval, job) in enumerate(periodic):
                    if self.groups.now() >= due[i]:
                        await job()
                        due[i] = self.groups.now() + interval
            except Exception:
                _log.exception("coordinator timeouts failed")
            deadline = self.groups.scheduler.next_deadline()
            wait = _MAX_IDLE_S
            if deadline is not None:
                wait = min(wait, max(deadline - self.groups.now(), 0) / 1000)
            await asyncio.sleep(wait)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


SETTING_NAMES = frozenset(_GROUP_SETTINGS) | frozenset(_TXN_SETTINGS)


def _settings(config, names: dict[str, str | None], defaults) -> dict:
    """``defaults``' fields set by Kafka's names in the server's ``extra`` (integers; a bad one
    is a KafkalogError naming it); offsets.retention.minutes becomes milliseconds."""
    extra = getattr(config, "extra", None) or {}
    known = {f.name for f in fields(defaults)}
    table = [(k, f, int, None) for k, f in names.items() if f in known]
    if "offsets.retention.minutes" in names and "offsets_retention_ms" in known:
        table.append(("offsets.retention.minutes", "offsets_retention_minutes", int, 0))
    out = broker_settings(extra, table)
    if "offsets_retention_minutes" in out:
        out["offsets_retention_ms"] = out.pop("offsets_retention_minutes") * 60_000  # type: ignore[operator]
    return out


def _partitions(broker, topic: str, configured: int) -> int:
    """The partition count of an internal topic: what the data directory holds, else configured."""
    existing = broker.log_manager.topics().get(topic)
    if existing:
        return max(existing) + 1
    broker.ensure_internal_topic(topic, configured, dict(INTERNAL_TOPIC_CONFIGS[topic]))
    return configured


async def load(broker) -> Coordinators:
    """Load both coordinators' state (their handlers: :meth:`Coordinators.routes`)."""
    config = broker.config
    clock = broker.log_manager.clock
    offsets_partitions = _partitions(
        broker, OFFSETS_TOPIC, getattr(config, "offsets_topic_num_partitions", 50)
    )
    txn_partitions = _partitions(
        broker, TRANSACTION_STATE_TOPIC, getattr(config, "transaction_state_log_num_partitions", 50)
    )
    group_config = GroupConfig(
        offsets_topic_partitions=offsets_partitions,
        **_settings(config, _GROUP_SETTINGS, GroupConfig),
    )
    txn_config = TransactionConfig(
        state_log_partitions=txn_partitions,
        offsets_topic_partitions=offsets_partitions,
        **_settings(config, _TXN_SETTINGS, TransactionConfig),
    )
    groups = GroupCoordinator(
        CoordinatorLog(broker, OFFSETS_TOPIC, offsets_partitions), clock, group_config
    )
    offsets = GroupOffsets(groups)
    loaded = load_groups(offsets)

    data_dir = broker.log_manager.data_dirs[0]
    fresh = not (data_dir / PRODUCER_IDS_FILE_NAME).exists()
    transactions = TransactionCoordinator(
        CoordinatorLog(broker, TRANSACTION_STATE_TOPIC, txn_partitions),
        clock,
        ProducerIdManager(data_dir),
        txn_config,
        on_offsets_marker=offsets.complete_transaction,
    )
    highest = load_transactions(transactions)
    if fresh:  # first start on this directory: stay above every producer id already in it
        highest = max(highest, highest_producer_id_in_logs(broker.log_manager))
        transactions.producer_ids = ProducerIdManager(data_dir, floor=highest + 1)
    await transactions.complete_prepared_transactions()
    _log.info(
        "coordinators loaded: %d groups (%d records), %d transactional ids",
        len(groups.groups), loaded, len(transactions.txns),
    )  # fmt: skip

    return Coordinators(groups, offsets, transactions)
