"""Any sequence of group requests, timeouts and restarts keeps the coordinator consistent.

Hypothesis drives members through joins, syncs, heartbeats, leaves and commits with arbitrary
ids and generations, in any order, with time passing in between; every request must be answered
with a Kafka error code (never an exception), the group's bookkeeping must stay coherent, and
what a restart loads back from ``__consumer_offsets`` must equal what was committed.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.server.groups.load import load_groups
from kafkalog.server.groups.state import GroupState

from .test_groups import CONFIG, Harness

MEMBERS = 3
ops = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, MEMBERS - 1), st.sampled_from([3, 7])),
        st.tuples(st.just("sync"), st.integers(0, MEMBERS - 1), st.integers(-1, 3)),
        st.tuples(st.just("heartbeat"), st.integers(0, MEMBERS - 1), st.integers(-1, 3)),
        st.tuples(st.just("leave"), st.integers(0, MEMBERS - 1), st.just(0)),
        st.tuples(st.just("commit"), st.integers(0, MEMBERS - 1), st.integers(-1, 3)),
        st.tuples(st.just("tick"), st.sampled_from([0, 50, 100, 4_000, 11_000]), st.just(0)),
    ),
    max_size=40,
)


def check_coherent(group) -> None:
    awaiting = [m for m in group.members.values() if m.join_future is not None]
    assert group.num_members_awaiting_join == len(awaiting)
    assert group.leader_id is None or group.leader_id in group.members or not group.members
    assert group.pending_sync_members <= set(group.members)
    assert not (group.pending_members & set(group.members))
    if group.state == GroupState.EMPTY:
        assert not group.members
    if group.state == GroupState.STABLE:
        assert not awaiting and group.protocol_name is not None


async def drive(h: Harness, steps) -> dict:
    ids = ["" for _ in range(MEMBERS)]
    tasks = []
    committed: dict = {}
    for op, who, arg in steps:
        if op == "join":
            task = h.join(member_id=ids[who], version=arg, client=f"c{who}")
            tasks.append((task, who))
        elif op == "sync":
            gen = h.groups.groups["g"].generation_id if "g" in h.groups.groups else 0
            gen = gen if arg < 0 else arg
            tasks.append((h.sync(ids[who], gen, [(m, b"x") for m in ids if m]), None))
        elif op == "heartbeat":
            assert await h.heartbeat(ids[who] or "none", arg) in (0, 22, 25, 27)
        elif op == "leave":
            r = await h.groups.leave_group(
                h.ctx_leave,
                {
                    "group_id": "g",
                    "members": [{"member_id": ids[who] or "none", "group_instance_id": None}],
                },
            )
            codes = [m["error_code"] for m in r.get("members", [])] or [r["error_code"]]
            assert codes[0] in (0, 25)
        elif op == "commit":
            offset = len(committed) + who
            result = await h.commit({("t", who): offset}, ids[who], arg)
            assert result[("t", who)] in (0, 22, 25, 27, 69)
            if result[("t", who)] == 0:
                committed[("t", who)] = offset
        else:
            await h.tick(who)
        for _ in range(3):
            await asyncio.sleep(0)
        for task, joiner in tasks:
            if task.done():
                answer = task.result()
                assert isinstance(answer["error_code"], int)
                if joiner is not None and answer["error_code"] in (0, 79):
                    ids[joiner] = answer["member_id"]
        tasks = [(t, j) for t, j in tasks if not t.done()]
        if "g" in h.groups.groups:
            check_coherent(h.groups.groups["g"])
    for task, _ in tasks:
        task.cancel()
    return committed


@settings(max_examples=30, deadline=None)
@given(steps=ops)
def test_any_request_sequence_keeps_the_group_coherent_and_durable(steps):
    from .coordination_helpers import ctx

    with tempfile.TemporaryDirectory() as tmp:

        async def run():
            h = Harness(Path(tmp))
            h.ctx_leave = ctx(13, 4)
            committed = await drive(h, steps)
            fetched = await h.fetch()
            assert {tp: o for tp, (o, _) in fetched.items()} == committed
            h.broker.log_manager.close()
            again = Harness(Path(tmp), h.broker.clock)
            load_groups(again.offsets)
            refetched = await again.fetch()
            assert refetched == fetched
            again.broker.log_manager.close()

        asyncio.run(run())


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    """Members arriving forever cannot hold a group in its initial rebalance past the timeout."""
    with tempfile.TemporaryDirectory() as tmp:

        async def run():
            h = Harness(Path(tmp))
            first = await h.join(rebalance=1_000)
            join = h.join(member_id=first["member_id"], rebalance=1_000)
            for i in range(30):
                if join.done():
                    break
                extra = await h.join(client=f"late{i}", rebalance=1_000)
                h.join(member_id=extra["member_id"], client=f"late{i}", rebalance=1_000)
                await h.tick(CONFIG.initial_rebalance_delay_ms)
            assert join.done() and (await join)["generation_id"] == 1
            h.broker.log_manager.close()

        asyncio.run(run())
