"""Coordinators answer only after their records are durable: a simulated power cut (the log
layer's recording disk, tests/log/test_crash.py) right after a run of acknowledged offset
commits and transactions loses none of them.

The coordinators run over a real LogManager with every write and fsync recorded; when the power
goes, the disk is rebuilt as a cut may leave it (only fsynced bytes of ``.log`` files are sure;
indexes, snapshots and unsynced tails are mangled in the ways a cut allows), recovered as the next
start does, and the coordinators load it: every acknowledged commit and transaction outcome must
be there.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from kafkalog.format.builder import MemoryRecordsBuilder
from kafkalog.server import coordinators

from .coordination_helpers import FakeBroker, ctx
from .test_server_durability import _recording_disk

pytestmark = pytest.mark.slow


async def workload(broker: FakeBroker, rng: random.Random, acked: dict, txns: dict) -> None:
    c = await coordinators.load(broker)
    await c.stop()
    broker.log_manager.create_topic("t", 1, {"segment.index.bytes": "65536"})
    for step in range(rng.randint(10, 30)):
        if rng.random() < 0.7:
            group = f"g{rng.randrange(3)}"
            partition, offset = rng.randrange(2), step * 10 + rng.randrange(10)
            req = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                   "topics": [{"name": "t", "partitions": [
                       {"partition_index": partition, "committed_offset": offset}]}]}  # fmt: skip
            response = await c.offsets.offset_commit(ctx(8, 8), req)
            assert response["topics"][0]["partitions"][0]["error_code"] == 0
            acked[(group, partition)] = offset
        else:
            txn_id = f"tx{rng.randrange(2)}"
            init = await c.transactions.init_producer_id(
                ctx(22, 4), {"transactional_id": txn_id, "transaction_timeout_ms": 60_000}
            )
            pid, epoch = init["producer_id"], init["producer_epoch"]
            add = {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                   "v3_and_below_producer_epoch": epoch,
                   "v3_and_below_topics": [{"name": "t", "partitions": [0]}]}  # fmt: skip
            await c.transactions.add_partitions_to_txn(ctx(24, 3), add)
            builder = MemoryRecordsBuilder(producer_id=pid, producer_epoch=epoch,
                                           base_sequence=0, is_transactional=True)  # fmt: skip
            builder.append(timestamp=broker.clock.milliseconds(), value=b"v%d" % step)
            await broker.append_records("t", 0, builder.build(), origin="client")
            commit = rng.random() < 0.5
            end = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                   "committed": commit}  # fmt: skip
            assert (await c.transactions.end_txn(ctx(26, 3), end))["error_code"] == 0
            txns[txn_id] = "CompleteCommit" if commit else "CompleteAbort"


async def reload(after: Path) -> tuple[dict, dict, object]:
    broker = FakeBroker(after)
    c = await coordinators.load(broker)
    await c.stop()
    offsets = {(g, p): v.offset for g, by_tp in c.offsets.store.offsets.items()
               for (_, p), v in by_tp.items()}  # fmt: skip
    states = {t: m.state.name_in_kafka for t, m in c.transactions.txns.items()}
    return offsets, states, broker


@pytest.mark.parametrize("seed", range(3))
def test_acknowledged_coordinator_writes_survive_a_power_cut(tmp_path, monkeypatch, seed):
    RecordingDisk, Crash = _recording_disk()
    rng = random.Random(seed)
    live = tmp_path / "live"
    disk = RecordingDisk(live, budget=10**9)  # the power goes when the test says so
    acked: dict = {}
    txns: dict = {}
    patched = monkeypatch.context().__enter__()
    disk.install(patched)
    broker = FakeBroker(live)
    try:
        asyncio.run(workload(broker, rng, acked, txns))
        with pytest.raises(Crash):
            disk.power_off()
    finally:
        patched.undo()  # the disk as recorded stays as the power left it
    for cut in range(3):
        after = tmp_path / f"after-{cut}"
        disk.after_power_cut(after, random.Random(seed * 10 + cut))
        offsets, states, again = asyncio.run(reload(after))
        try:
            assert offsets == acked
            assert states == txns
            log = again.log("t", 0)
            assert log.last_stable_offset == log.log_end_offset  # every transaction ended
        finally:
            again.log_manager.close()
