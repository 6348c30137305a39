"""The transaction coordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
(Kafka's TransactionCoordinator and TransactionStateManager, transactions V1, one node).

Every step is one operation under one lock: the new state is written to
``__transaction_state`` (flushed) before it counts. Ending a transaction writes PrepareCommit or
PrepareAbort, then a COMMIT or ABORT control batch to every partition of the transaction (with
the producer's id and epoch and this coordinator's epoch, which the log layer checks and turns
into the last stable offset and ``.txnindex`` entries), then CompleteCommit or CompleteAbort,
and only then answers: a client that hears "committed" finds its data readable.

Markers written to ``__consumer_offsets`` also settle the transaction's offset commits in the
group coordinator (``on_offsets_marker``). A transaction open longer than its timeout is aborted
by the coordinator with a bumped epoch, which fences the producer that went quiet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ...errors import KafkalogError
from ...errors import RequestRefused as _Refused
from ...format.builder import build_end_txn_marker_batch
from ...format.constants import ControlRecordType
from ...log.datadir import TopicPartition
from ...log.producer import (
    InvalidProducerEpochError,
    TransactionCoordinatorFencedError,
)
from ..coordinator_log import CoordinatorLog
from ..error_codes import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    UNKNOWN_TOPIC_OR_PARTITION,
    code_of,
)
from ..handlers import RequestContext
from ..internal_topics import OFFSETS_TOPIC
from .producer_ids import ProducerIdManager
from .state import (
    COMPLETE_STATES,
    MAX_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
)

__all__ = ["TransactionConfig", "TransactionCoordinator"]

_log = logging.getLogger("kafkalog.server.transactions")


_S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The broker settings the transaction coordinator reads; defaults are Kafka's."""

    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_timed_out_interval_ms: int = 10_000  # ...abort.timed.out.transaction.cleanup.interval.ms
    state_log_partitions: int = 50  # transaction.state.log.num.partitions
    offsets_topic_partitions: int = 50  # where AddOffsetsToTxn finds a group's partition
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000  # ...remove.expired.transaction.cleanup.interval


class TransactionCoordinator:
    """Transactional ids of one node, their producer ids and epochs, and their transactions."""

    def __init__(
        self,
        log: CoordinatorLog,
        clock,
        producer_ids: ProducerIdManager,
        config: TransactionConfig | None = None,
        *,
        on_offsets_marker: Callable[[int, int, bool], Awaitable[None]] | None = None,
    ) -> None:
        self.log = log
        self.broker = log.broker
        self.clock = clock
        self.producer_ids = producer_ids
        self.config = config or TransactionConfig()
        self.on_offsets_marker = on_offsets_marker
        self.txns: dict[str, TransactionMetadata] = {}
        self.lock = asyncio.Lock()

    def now(self) -> int:
        return self.clock.milliseconds()

    # -- InitProducerId -------------------------------------------------------------------------
    async def init_producer_id(self, ctx: RequestContext, req: dict) -> dict:
        txn_id = req.get("transactional_id")
        if txn_id is None:  # an idempotent producer: a fresh id every time
            async with self.lock:
                producer_id = self.producer_ids.generate_producer_id()
            return {"error_code": NONE, "producer_id": producer_id, "producer_epoch": 0}
        fail = {"producer_id": -1, "producer_epoch": -1}
        if txn_id == "":
            return {**fail, "error_code": INVALID_REQUEST}
        timeout = req["transaction_timeout_ms"]
        if not 0 < timeout <= self.config.max_timeout_ms:
            return {**fail, "error_code": INVALID_TRANSACTION_TIMEOUT}
        expected = (req.get("producer_id", -1), req.get("producer_epoch", -1))
        async with self.lock:
            txn = self.txns.get(txn_id)
            existed = txn is not None
            try:
                if txn is None:
                    txn = TransactionMetadata(
                        txn_id, self.producer_ids.generate_producer_id(), -1, timeout
                    )
                    self.txns[txn_id] = txn
                elif expected[0] >= 0 and not _is_valid_retry(txn, expected):
                    raise _Refused(PRODUCER_FENCED)
                if txn.state == _S.ONGOING:
                    # A new instance of the producer: abort what the old one left open.
                    await self._fence_and_abort(txn)
                elif txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                    raise _Refused(CONCURRENT_TRANSACTIONS)
                if (
                    existed
                    and expected[0] >= 0
                    and ((txn.producer_id, txn.producer_epoch) != expected)
                ):
                    # A retry whose bump was already written: answer what was given.
                    return {"error_code": NONE, "producer_id": txn.producer_id,
                            "producer_epoch": txn.producer_epoch}  # fmt: skip
                txn.last_producer_id, txn.last_producer_epoch = txn.producer_id, txn.producer_epoch
                if txn.producer_epoch >= MAX_PRODUCER_EPOCH - 1:  # exhausted: a new id
                    txn.producer_id = self.producer_ids.generate_producer_id()
                    txn.producer_epoch = 0
                else:
                    txn.producer_epoch += 1
                txn.timeout_ms = timeout
                await self._transition(txn, _S.EMPTY)
            except _Refused as refused:
                return {**fail, "error_code": _fenced(refused.code, ctx.api_version, 4)}
            except (KafkalogError, OSError) as e:
                return {**fail, "error_code": code_of(e)}
            return {"error_code": NONE, "producer_id": txn.producer_id,
                    "producer_epoch": txn.producer_epoch}  # fmt: skip

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
    async def add_partitions_to_txn(self, ctx: RequestContext, req: dict) -> dict:
        topics = req.get("v3_and_below_topics") or []
        wanted = [(t["name"], p) for t in topics for p in t.get("partitions") or []]
        errors = await self._add_partitions(
            req["v3_and_below_transactional_id"], req["v3_and_below_producer_id"],
            req["v3_and_below_producer_epoch"], wanted, ctx.api_version,
        )  # fmt: skip
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), code in errors.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "partition_error_code": code}
            )
        return {"results_by_topic_v3_and_below": [
            {"name": t, "results_by_partition": rows} for t, rows in by_topic.items()
        ]}  # fmt: skip

    async def add_offsets_to_txn(self, ctx: RequestContext, req: dict) -> dict:
        partition = CoordinatorLog(
            self.broker, OFFSETS_TOPIC, self.config.offsets_topic_partitions
        ).partition_for(req["group_id"])
        errors = await self._add_partitions(
            req["transactional_id"], req["producer_id"], req["producer_epoch"],
            [(OFFSETS_TOPIC, partition)], ctx.api_version,
        )  # fmt: skip
        return {"error_code": next(iter(errors.values()))}

    async def _add_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int,
        wanted: list[tuple[str, int]], version: int,
    ) -> dict[tuple[str, int], int]:  # fmt: skip
        def all_with(code: int) -> dict[tuple[str, int], int]:
            return dict.fromkeys(wanted, code)

        unknown = [tp for tp in wanted if tp[0] != OFFSETS_TOPIC and self._missing(tp)]
        if unknown:
            return {tp: UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED
                    for tp in wanted}  # fmt: skip
        async with self.lock:
            try:
                txn = self._checked(txn_id, producer_id, producer_epoch)
                if txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                    raise _Refused(CONCURRENT_TRANSACTIONS)
                if txn.state == _S.PREPARE_EPOCH_FENCE:
                    raise _Refused(INVALID_TXN_STATE)
                if txn.state == _S.ONGOING and set(wanted) <= txn.partitions:
                    return all_with(NONE)
                if txn.state != _S.ONGOING:
                    txn.partitions.clear()
                    txn.start_timestamp_ms = self.now()
                txn.partitions.update(wanted)
                await self._transition(txn, _S.ONGOING)
            except _Refused as refused:
                return all_with(_fenced(refused.code, version, 2))
            except (KafkalogError, OSError) as e:
                return all_with(code_of(e))
        return all_with(NONE)

    def _missing(self, tp: tuple[str, int]) -> bool:
        return self.broker.log_manager.get_log(TopicPartition(*tp)) is None

    def _checked(self, txn_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        txn = self.txns.get(txn_id)
        if txn is None or txn.producer_id != producer_id:
            raise _Refused(INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != producer_epoch:
            raise _Refused(PRODUCER_FENCED)
        return txn

    # -- EndTxn ---------------------------------------------------------------------------------
    async def end_txn(self, ctx: RequestContext, req: dict) -> dict:
        commit = bool(req["committed"])
        async with self.lock:
            try:
                txn = self._checked(req["transactional_id"], req["producer_id"],
                                    req["producer_epoch"])  # fmt: skip
                done = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
                if txn.state == _S.ONGOING:
                    await self._end(txn, commit)
                elif txn.state != done:  # a retry of a finished EndTxn succeeds, else refuse
                    raise _Refused(INVALID_TXN_STATE)
            except _Refused as refused:
                return {"error_code": _fenced(refused.code, ctx.api_version, 2)}
            except (KafkalogError, OSError) as e:
                return {"error_code": code_of(e)}
        return {"error_code": NONE}

    async def _end(self, txn: TransactionMetadata, commit: bool) -> None:
        """Prepare, write the markers, complete (the whole of Kafka's two-phase end)."""
        await self._transition(txn, _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT)
        await self._write_markers(txn, commit)
        await self._transition(txn, _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT)

    async def _fence_and_abort(self, txn: TransactionMetadata) -> None:
        """Abort an open transaction with a bumped epoch, so its producer can no longer write."""
        if txn.producer_epoch < MAX_PRODUCER_EPOCH:
            txn.producer_epoch += 1
        await self._end(txn, commit=False)

    async def _write_markers(self, txn: TransactionMetadata, commit: bool) -> None:
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        coordinator_epoch = self._coordinator_epoch(txn.transactional_id)
        for topic, partition in sorted(txn.partitions):
            if self._missing((topic, partition)) and topic != OFFSETS_TOPIC:
                _log.warning("transaction %s: %s-%d is gone; no marker written there",
                             txn.transactional_id, topic, partition)  # fmt: skip
                continue
            batch = build_end_txn_marker_batch(
                kind, producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
                coordinator_epoch=coordinator_epoch, timestamp=self.now(),
            )  # fmt: skip
            try:
                await self.broker.append_records(topic, partition, batch, origin="coordinator")
            except (InvalidProducerEpochError, TransactionCoordinatorFencedError) as e:
                # The partition already saw a newer epoch of this producer or a newer
                # coordinator: this transaction was settled there; a marker would be a zombie's.
                _log.warning("transaction %s: no marker for %s-%d: %s",
                             txn.transactional_id, topic, partition, e)  # fmt: skip
                continue
            await self.broker.flush(topic, partition)
            if topic == OFFSETS_TOPIC and self.on_offsets_marker is not None:
                await self.on_offsets_marker(txn.producer_id, partition, commit)

    def _coordinator_epoch(self, txn_id: str) -> int:
        """The leader epoch of the id's ``__transaction_state`` partition, as Kafka's markers
        carry; a partition whose markers came from a newer epoch would refuse older ones."""
        tp = TopicPartition(self.log.topic, self.log.partition_for(txn_id))
        found = self.broker.log_manager.get_log(tp)
        latest = None if found is None else found.leader_epoch_cache.latest_epoch()
        return latest or 0

    async def _transition(self, txn: TransactionMetadata, state: TransactionState) -> None:
        txn.state = state
        if state in COMPLETE_STATES or state == _S.EMPTY:
            txn.partitions.clear()  # as Kafka writes them: the markers are out
        txn.last_update_timestamp_ms = self.now()
        key, value = txn.record()
        await self.log.append(self.log.partition_for(txn.transactional_id), [(key, value)],
                              now_ms=self.now())  # fmt: skip

    # -- timeouts and loading -------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> list[str]:
        """Abort (fencing their producers) the transactions open longer than their timeout."""
        aborted = []
        async with self.lock:
            now = self.now()
            for txn in list(self.txns.values()):
                if txn.is_expired(now):
                    _log.info("aborting transaction %s: open for more than %d ms",
                              txn.transactional_id, txn.timeout_ms)  # fmt: skip
                    try:
                        await self._fence_and_abort(txn)
                        aborted.append(txn.transactional_id)
                    except KafkalogError:
                        _log.exception("could not abort transaction %s", txn.transactional_id)
        return aborted

    async def remove_expired_transactional_ids(self) -> list[str]:
        """Forget ids idle (no open transaction) longer than transactional.id.expiration.ms,
        with a tombstone each, as Kafka's removeExpiredTransactionalIds."""
        removed = []
        async with self.lock:
            now = self.now()
            limit = self.config.transactional_id_expiration_ms
            for txn in list(self.txns.values()):
                idle = txn.state == _S.EMPTY or txn.state in COMPLETE_STATES
                if idle and now - txn.last_update_timestamp_ms >= limit:
                    key, _ = txn.record()
                    partition = self.log.partition_for(txn.transactional_id)
                    await self.log.append(partition, [(key, None)], now_ms=now)
                    del self.txns[txn.transactional_id]
                    removed.append(txn.transactional_id)
        return removed

    async def complete_prepared_transactions(self) -> None:
        """After loading: finish transactions whose Prepare state was written but not their end."""
        async with self.lock:
            for txn in list(self.txns.values()):
                if txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                    commit = txn.state == _S.PREPARE_COMMIT
                    await self._write_markers(txn, commit)
                    await self._transition(txn, _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT)


def _is_valid_retry(txn: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """KIP-360: a producer may re-init with the id and epoch it has, or the ones it had."""
    return expected in (
        (txn.producer_id, txn.producer_epoch),
        (txn.last_producer_id, txn.last_producer_epoch),
    )


def _fenced(code: int, version: int, first_version: int) -> int:
    """Versions older than ``first_version`` do not know PRODUCER_FENCED (KafkaApis maps it)."""
    return INVALID_PRODUCER_EPOCH if code == PRODUCER_FENCED and version < first_version else code
