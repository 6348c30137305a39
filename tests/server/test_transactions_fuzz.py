"""Any sequence of transaction requests, produces, timeouts and restarts leaves the coordinator
and the logs agreeing: every answer is a Kafka error code, a partition's last stable offset is
held back exactly while a transaction that wrote there is open, and a restart loads the same
state the coordinator had."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkalogError
from kafkalog.server.txn.state import TransactionState

from .test_transactions import Txns

CODES = {0, 3, 42, 47, 48, 49, 50, 51, 55, 90}
ids = st.sampled_from(["a", "b"])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("init"), ids, st.integers(1_000, 20_000)),
        st.tuples(st.just("add"), ids, st.sampled_from([0, 1, 2])),
        st.tuples(st.just("produce"), ids, st.integers(1, 3)),
        st.tuples(st.just("end"), ids, st.booleans()),
        st.tuples(st.just("stale_end"), ids, st.booleans()),
        st.tuples(st.just("tick"), st.sampled_from([500, 25_000]), st.just(0)),
        st.tuples(st.just("restart"), st.just(""), st.just(0)),
    ),
    max_size=25,
)


def snapshot(h: Txns) -> dict:
    return {
        t: (m.producer_id, m.producer_epoch, m.state, frozenset(m.partitions), m.timeout_ms)
        for t, m in h.tc.txns.items()
    }


@settings(max_examples=40, deadline=None)
@given(steps=ops)
def test_any_transaction_sequence_keeps_coordinator_and_logs_agreeing(steps):
    with tempfile.TemporaryDirectory() as tmp:

        async def run():
            h = await Txns(Path(tmp)).start()
            seq: dict[tuple[int, int, int], int] = {}  # (pid, epoch, partition) -> next sequence
            try:
                for op, txn_id, arg in steps:
                    txn = h.tc.txns.get(txn_id)
                    pid, epoch = (txn.producer_id, txn.producer_epoch) if txn else (7, 0)
                    if op == "init":
                        assert (await h.init(txn_id=txn_id, timeout=arg))["error_code"] in CODES
                    elif op == "add":
                        partitions = [("t", 0), ("t", 1), ("missing", 0)][: arg + 1]
                        result = await h.add(pid, epoch, partitions, txn_id=txn_id)
                        assert set(result.values()) <= CODES
                    elif op == "produce" and txn and txn.state == TransactionState.ONGOING:
                        for partition in sorted(p for t, p in txn.partitions if t == "t"):
                            key = (pid, epoch, partition)
                            try:
                                await h.produce(pid, epoch, seq.get(key, 0), [b"v"] * arg,
                                                partition=partition)  # fmt: skip
                                seq[key] = seq.get(key, 0) + arg
                            except KafkalogError:
                                pass  # fenced by a newer epoch: the log refuses, as it must
                    elif op == "end":
                        assert await h.end(pid, epoch, arg, txn_id=txn_id) in CODES
                    elif op == "stale_end":
                        assert await h.end(pid, epoch - 1, arg, txn_id=txn_id) in CODES
                    elif op == "tick":
                        h.broker.clock.advance(txn_id)
                        await h.tc.abort_timed_out_transactions()
                    elif op == "restart":
                        before = snapshot(h)
                        clock = h.broker.clock
                        await h.stop()
                        h = await Txns(Path(tmp), clock).start()
                        assert snapshot(h) == before
                    open_partitions = {
                        p for m in h.tc.txns.values() if m.state == TransactionState.ONGOING
                        for t, p in m.partitions if t == "t"
                    }  # fmt: skip
                    for partition in (0, 1):
                        log = h.log("t", partition)
                        if partition not in open_partitions:
                            assert log.last_stable_offset == log.log_end_offset
            finally:
                await h.stop()

        asyncio.run(run())
