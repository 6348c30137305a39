"""The transaction coordinator and producer ids, driven by request dicts over a real log.

Markers and records are read back with kafka-python's record reader (independent of ours) and
the internal-topic decoders; the log layer's own view (last stable offset, aborted transactions
for read_committed fetches) is checked where Fetch would use it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KafkaPythonRecords

from kafkalog.format.builder import MemoryRecordsBuilder
from kafkalog.format.internal import decode_transaction_log_key, decode_transaction_log_value
from kafkalog.log.datadir.naming import TopicPartition
from kafkalog.server import coordinators
from kafkalog.server import error_codes as ec
from kafkalog.server.apis import transactions as partition_txn_apis
from kafkalog.server.txn.producer_ids import (
    PRODUCER_ID_BLOCK_SIZE,
    PRODUCER_IDS_FILE_NAME,
    ProducerIdManager,
)

from .coordination_helpers import FakeBroker, ctx

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_COMMIT, FETCH = 22, 24, 25, 26, 28, 9


class Txns:
    def __init__(self, tmp_path, clock=None) -> None:
        self.broker = FakeBroker(tmp_path, clock)
        if "t" not in self.broker.log_manager.topics():
            self.broker.log_manager.create_topic("t", 2)

    async def start(self):
        self.c = await coordinators.load(self.broker)
        await self.c.stop()  # the tests fire timeouts themselves, on the mock clock
        self.tc = self.c.transactions
        return self

    async def stop(self):
        await self.c.stop()
        self.broker.log_manager.close()

    async def init(self, txn_id="tx", timeout=60_000, version=4, **expected):
        req = {"transactional_id": txn_id, "transaction_timeout_ms": timeout, **expected}
        return await self.tc.init_producer_id(ctx(INIT, version), req)

    async def add(self, pid, epoch, partitions, txn_id="tx", version=3):
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        req = {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
               "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                   {"name": t, "partitions": ps} for t, ps in topics.items()]}  # fmt: skip
        response = await self.tc.add_partitions_to_txn(ctx(ADD_PARTITIONS, version), req)
        return {(t["name"], r["partition_index"]): r["partition_error_code"]
                for t in response["results_by_topic_v3_and_below"]
                for r in t["results_by_partition"]}  # fmt: skip

    async def end(self, pid, epoch, commit, txn_id="tx", version=3):
        req = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
               "committed": commit}  # fmt: skip
        return (await self.tc.end_txn(ctx(END_TXN, version), req))["error_code"]

    async def produce(self, pid, epoch, seq, values, partition=0):
        builder = MemoryRecordsBuilder(producer_id=pid, producer_epoch=epoch,
                                       base_sequence=seq, is_transactional=True)  # fmt: skip
        for v in values:
            builder.append(timestamp=self.broker.clock.milliseconds(), value=v)
        await self.broker.append_records("t", partition, builder.build(), origin="client")

    def log(self, topic="t", partition=0):
        return self.broker.log_manager.get_log(TopicPartition(topic, partition))

    def markers(self, topic="t", partition=0):
        """(control type, producer id, epoch) of every control batch, read by kafka-python."""
        log = self.log(topic, partition)
        data = b"".join(Path(s.log.path).read_bytes() for s in log.segments)
        out, batches = [], KafkaPythonRecords(data)
        while (batch := batches.next_batch()) is not None:
            if batch.is_control_batch:
                key = next(iter(batch)).key
                out.append(("COMMIT" if key[3] == 1 else "ABORT", batch.producer_id,
                            batch.producer_epoch))  # fmt: skip
        return out

    def states(self, txn_id="tx"):
        tlog = self.tc.log
        out = []
        for r in tlog.read(tlog.partition_for(txn_id)):
            if decode_transaction_log_key(r.key).data["transactionalId"] == txn_id:
                out.append(None if r.value is None else decode_transaction_log_value(r.value).data)
        return out


def run(coro_fn, tmp_path):
    async def main():
        h = await Txns(tmp_path).start()
        try:
            await coro_fn(h)
        finally:
            await h.stop()

    asyncio.run(main())


def test_idempotent_producers_get_distinct_ids_that_survive_a_restart(tmp_path):
    seen = []

    async def first(h):
        for _ in range(3):
            r = await h.init(txn_id=None)
            assert (r["error_code"], r["producer_epoch"]) == (0, 0)
            seen.append(r["producer_id"])

    run(first, tmp_path)
    doc = json.loads((tmp_path / PRODUCER_IDS_FILE_NAME).read_text())
    assert doc == {"version": 1, "next_block_start": PRODUCER_ID_BLOCK_SIZE}

    async def second(h):
        seen.append((await h.init(txn_id=None))["producer_id"])

    run(second, tmp_path)
    assert seen[:3] == [0, 1, 2] and seen[3] == PRODUCER_ID_BLOCK_SIZE


def test_producer_id_blocks_are_reserved_before_use(tmp_path):
    manager = ProducerIdManager(tmp_path, floor=5000)
    ids = [manager.generate_producer_id() for _ in range(PRODUCER_ID_BLOCK_SIZE + 1)]
    assert ids == list(range(5000, 5000 + PRODUCER_ID_BLOCK_SIZE + 1))
    assert ProducerIdManager(tmp_path).generate_producer_id() == 5000 + 2 * PRODUCER_ID_BLOCK_SIZE
    (tmp_path / PRODUCER_IDS_FILE_NAME).write_text("{nonsense")
    with pytest.raises(Exception, match="not a producer id block file"):
        ProducerIdManager(tmp_path)


def test_commit_writes_markers_and_states_in_kafkas_order(tmp_path):
    async def body(h):
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        assert (r["error_code"], epoch) == (0, 0)
        assert await h.add(pid, epoch, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
        await h.produce(pid, epoch, 0, [b"a", b"b"])
        assert h.log().last_stable_offset == 0  # open transaction holds back read_committed
        assert await h.end(pid, epoch, True) == 0
        assert h.markers("t", 0) == [("COMMIT", pid, epoch)]
        assert h.markers("t", 1) == [("COMMIT", pid, epoch)]
        assert h.log().last_stable_offset == h.log().log_end_offset == 3
        statuses = [s["transactionStatus"] for s in h.states()]
        assert statuses == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
        ongoing = h.states()[1]
        assert {
            (t["topic"], tuple(t["partitionIds"])) for t in ongoing["transactionPartitions"]
        } == {("t", (0, 1))}
        assert h.states()[-1]["transactionPartitions"] == []
        assert await h.end(pid, epoch, True) == 0  # a retried EndTxn succeeds
        assert await h.end(pid, epoch, False) == 48  # INVALID_TXN_STATE

    run(body, tmp_path)


def test_abort_writes_abort_markers_and_the_txn_index(tmp_path):
    async def body(h):
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await h.add(pid, epoch, [("t", 0)])
        await h.produce(pid, epoch, 0, [b"x"])
        assert await h.end(pid, epoch, False) == 0
        assert h.markers() == [("ABORT", pid, epoch)]
        info = h.log().read(0, 1 << 20, isolation="read_committed")
        assert [(a.producer_id, a.first_offset) for a in info.aborted_transactions] == [(pid, 0)]

    run(body, tmp_path)


def test_a_new_instance_fences_the_old_and_aborts_its_transaction(tmp_path):
    async def body(h):
        old = await h.init()
        pid, epoch = old["producer_id"], old["producer_epoch"]
        await h.add(pid, epoch, [("t", 0)])
        await h.produce(pid, epoch, 0, [b"zombie"])
        new = await h.init()
        assert new["producer_id"] == pid and new["producer_epoch"] == epoch + 2
        assert h.markers() == [("ABORT", pid, epoch + 1)]
        assert await h.add(pid, epoch, [("t", 1)]) == {("t", 1): 90}  # PRODUCER_FENCED
        assert await h.add(pid, epoch, [("t", 1)], version=1) == {("t", 1): 47}
        assert await h.end(pid, epoch, True) == 90
        assert await h.end(pid, epoch, True, version=1) == 47
        assert h.log().last_stable_offset == h.log().log_end_offset

    run(body, tmp_path)


def test_hung_transaction_is_aborted_after_its_timeout(tmp_path):
    async def body(h):
        r = await h.init(timeout=5_000)
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await h.add(pid, epoch, [("t", 0)])
        await h.produce(pid, epoch, 0, [b"late"])
        h.broker.clock.advance(4_000)
        assert await h.tc.abort_timed_out_transactions() == []
        h.broker.clock.advance(2_000)
        assert await h.tc.abort_timed_out_transactions() == ["tx"]
        assert h.markers() == [("ABORT", pid, epoch + 1)]
        assert await h.end(pid, epoch, True) == 90
        assert h.log().last_stable_offset == h.log().log_end_offset

    run(body, tmp_path)


def test_requests_that_break_the_rules(tmp_path):
    async def body(h):
        assert (await h.init(timeout=10**9))["error_code"] == 50  # INVALID_TRANSACTION_TIMEOUT
        assert (await h.init(txn_id=""))["error_code"] == 42
        assert await h.end(123, 0, True, txn_id="nobody") == 49  # INVALID_PRODUCER_ID_MAPPING
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        assert await h.end(pid, epoch, True) == 48  # nothing to end: INVALID_TXN_STATE
        assert await h.add(pid + 1, epoch, [("t", 0)]) == {("t", 0): 49}
        assert await h.add(pid, epoch, [("t", 0), ("nope", 0)]) == {
            ("t", 0): 55, ("nope", 0): 3,
        }  # fmt: skip
        retry = await h.init(producer_id=pid, producer_epoch=epoch)  # KIP-360 re-init
        assert (retry["producer_id"], retry["producer_epoch"]) == (pid, epoch + 1)
        stale = await h.init(producer_id=pid, producer_epoch=epoch - 5)
        assert stale["error_code"] == 90

    run(body, tmp_path)


def test_transactional_offsets_count_only_when_committed(tmp_path):
    async def commit_offsets(h, pid, epoch, offset):
        assert (await h.tc.add_offsets_to_txn(ctx(ADD_OFFSETS, 3), {
            "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
            "group_id": "g"}))["error_code"] == 0  # fmt: skip
        response = await h.c.offsets.txn_offset_commit(ctx(TXN_COMMIT, 3), {
            "transactional_id": "tx", "group_id": "g", "producer_id": pid,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": offset}]}]})  # fmt: skip
        assert response["topics"][0]["partitions"][0]["error_code"] == 0

    async def fetch(h, stable=True):
        response = await h.c.offsets.offset_fetch(ctx(FETCH, 7), {
            "group_id": "g", "require_stable": stable,
            "topics": [{"name": "t", "partition_indexes": [0]}]})  # fmt: skip
        p = response["topics"][0]["partitions"][0]
        return p["committed_offset"], p["error_code"]

    async def body(h):
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await commit_offsets(h, pid, epoch, 10)
        assert await fetch(h) == (-1, 88)  # UNSTABLE_OFFSET_COMMIT
        assert await fetch(h, stable=False) == (-1, 0)
        assert await h.end(pid, epoch, False) == 0
        assert await fetch(h) == (-1, 0)
        await commit_offsets(h, pid, epoch, 20)
        assert await h.end(pid, epoch, True) == 0
        assert await fetch(h) == (20, 0)
        offsets_partition = h.c.groups.log.partition_for("g")
        kinds = [m[0] for m in h.markers("__consumer_offsets", offsets_partition)]
        assert kinds == ["ABORT", "COMMIT"]

    run(body, tmp_path)

    async def after_restart(h):
        assert await fetch(h) == (20, 0)
        assert h.tc.txns["tx"].state.name_in_kafka == "CompleteCommit"

    run(after_restart, tmp_path)


def test_a_prepared_commit_is_finished_after_a_restart(tmp_path):
    async def crash_between_prepare_and_markers(h):
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await h.add(pid, epoch, [("t", 0)])
        await h.produce(pid, epoch, 0, [b"v"])
        txn = h.tc.txns["tx"]
        from kafkalog.server.txn.state import TransactionState

        await h.tc._transition(txn, TransactionState.PREPARE_COMMIT)
        assert h.markers() == []

    run(crash_between_prepare_and_markers, tmp_path)

    async def restart(h):
        txn = h.tc.txns["tx"]
        assert txn.state.name_in_kafka == "CompleteCommit"
        assert h.markers() == [("COMMIT", txn.producer_id, txn.producer_epoch)]
        assert h.log().last_stable_offset == h.log().log_end_offset
        epoch = txn.producer_epoch
        assert (await h.init())["producer_epoch"] == epoch + 1

    run(restart, tmp_path)


def test_idle_transactional_ids_expire(tmp_path):
    async def body(h):
        await h.init(txn_id="old")
        r = await h.init(txn_id="busy")
        await h.add(r["producer_id"], r["producer_epoch"], [("t", 0)], txn_id="busy")
        h.broker.clock.advance(h.tc.config.transactional_id_expiration_ms)
        assert await h.tc.remove_expired_transactional_ids() == ["old"]
        assert set(h.tc.txns) == {"busy"}
        assert h.states("old")[-1] is None  # a tombstone

    run(body, tmp_path)

    async def after_restart(h):
        assert set(h.tc.txns) == {"busy"}

    run(after_restart, tmp_path)


def test_describe_and_list_transactions(tmp_path):
    from kafkalog.server.txn.describe import describe_transactions, list_transactions

    async def body(h):
        r = await h.init(txn_id="open")
        await h.add(r["producer_id"], r["producer_epoch"], [("t", 1), ("t", 0)], txn_id="open")
        await h.init(txn_id="idle")
        h.broker.clock.advance(5_000)
        described = await describe_transactions(
            h.tc, ctx(65, 0), {"transactional_ids": ["open", "nobody"]}
        )
        found, missing = described["transaction_states"]
        assert (found["transaction_state"], found["producer_id"]) == ("Ongoing", r["producer_id"])
        assert found["topics"] == [{"topic": "t", "partitions": [0, 1]}]
        assert missing["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
        listed = await list_transactions(
            h.tc, ctx(66, 1), {"state_filters": [], "duration_filter": -1}
        )
        states = {
            t["transactional_id"]: t["transaction_state"] for t in listed["transaction_states"]
        }
        assert states == {"open": "Ongoing", "idle": "Empty"}
        hanging = await list_transactions(
            h.tc, ctx(66, 1), {"state_filters": ["Ongoing", "Bogus"], "duration_filter": 4_000}
        )
        assert [t["transactional_id"] for t in hanging["transaction_states"]] == ["open"]
        assert hanging["unknown_state_filters"] == ["Bogus"]
        young = await list_transactions(h.tc, ctx(66, 1), {"duration_filter": 60_000})
        assert young["transaction_states"] == []

    run(body, tmp_path)


def test_no_zombie_marker_where_a_newer_epoch_already_wrote(tmp_path):
    async def body(h):
        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await h.add(pid, epoch, [("t", 0), ("t", 1)])
        await h.produce(pid, epoch + 3, 0, [b"from a newer epoch"], partition=1)
        assert await h.end(pid, epoch, False) == 0
        assert h.markers("t", 0) == [("ABORT", pid, epoch)]
        assert h.markers("t", 1) == []  # the log refuses an older epoch's marker

    run(body, tmp_path)


def test_describe_producers_and_write_txn_markers(tmp_path):
    """kafka-transactions' partition-side APIs: DescribeProducers shows the open transaction's
    start offset; a marker written by hand ends it (the last stable offset moves), and the log's
    epoch rules refuse an older producer or coordinator epoch, as Kafka's."""

    async def body(h):
        apis = partition_txn_apis.handlers(h.broker)
        describe, write = apis[61], apis[27]

        async def producers(partition=0):
            req = {"topics": [{"name": "t", "partition_indexes": [partition]}]}
            (entry,) = (await describe(ctx(61, 0), req))["topics"][0]["partitions"]
            return entry

        async def marker(pid, epoch, coordinator_epoch, commit=False, partitions=(0,)):
            topics = [{"name": "t", "partition_indexes": list(partitions)}]
            req = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "topics": topics,
                                "transaction_result": commit,
                                "coordinator_epoch": coordinator_epoch}]}  # fmt: skip
            answer = await write(ctx(27, 1), req)
            return [p["error_code"] for p in answer["markers"][0]["topics"][0]["partitions"]]

        r = await h.init()
        pid, epoch = r["producer_id"], r["producer_epoch"]
        await h.add(pid, epoch, [("t", 0)])
        await h.produce(pid, epoch, 0, [b"a", b"b"])
        entry = await producers()
        assert entry["error_code"] == 0
        (state,) = entry["active_producers"]
        assert (state["producer_id"], state["producer_epoch"], state["last_sequence"]) == (
            pid,
            0,
            1,
        )
        assert state["current_txn_start_offset"] == 0
        assert h.log().last_stable_offset == 0
        assert (await producers(7))["error_code"] == ec.UNKNOWN_TOPIC_OR_PARTITION
        assert await marker(pid, epoch, 5, partitions=(0, 9)) == [0, ec.UNKNOWN_TOPIC_OR_PARTITION]
        assert h.markers() == [("ABORT", pid, epoch)]
        assert h.log().last_stable_offset == h.log().log_end_offset == 3
        (state,) = (await producers())["active_producers"]
        assert (state["current_txn_start_offset"], state["coordinator_epoch"]) == (-1, 5)
        info = h.log().read(0, 1 << 20, isolation="read_committed")
        assert [(a.producer_id, a.first_offset) for a in info.aborted_transactions] == [(pid, 0)]
        assert await marker(pid, epoch, 4) == [ec.TRANSACTION_COORDINATOR_FENCED]
        assert await marker(pid, epoch - 1, 5) == [ec.INVALID_PRODUCER_EPOCH]
        assert h.markers() == [("ABORT", pid, epoch)]  # nothing written by the refused ones

    run(body, tmp_path)
