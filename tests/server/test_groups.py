"""The classic group coordinator driven by request dicts, with a mock clock and a real log."""

from __future__ import annotations

import asyncio

import pytest

from kafkalog.format.internal import decode_consumer_offsets_key, decode_consumer_offsets_value
from kafkalog.server.coordinator_log import (
    CoordinatorLoadError,
    CoordinatorLog,
    java_string_hash,
    partition_for,
)
from kafkalog.server.groups.coordinator import GroupConfig, GroupCoordinator
from kafkalog.server.groups.describe import describe_groups, list_groups
from kafkalog.server.groups.load import load_groups
from kafkalog.server.groups.offsets import GroupOffsets
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .coordination_helpers import FakeBroker, ctx

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9
PARTITIONS = 4
CONFIG = GroupConfig(initial_rebalance_delay_ms=100, offsets_topic_partitions=PARTITIONS)


class Harness:
    def __init__(self, tmp_path, clock=None) -> None:
        self.broker = FakeBroker(tmp_path, clock)
        self.broker.ensure_internal_topic("__consumer_offsets", PARTITIONS, {})
        log = CoordinatorLog(self.broker, "__consumer_offsets", PARTITIONS)
        self.groups = GroupCoordinator(log, self.broker.clock, CONFIG)
        self.offsets = GroupOffsets(self.groups)

    async def tick(self, ms: int) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        self.broker.clock.advance(ms)
        await self.groups.run_due()
        for _ in range(3):
            await asyncio.sleep(0)

    def join(self, member_id="", version=7, protocols=(("range", b"meta"),), client="c1",
             session=10_000, rebalance=30_000, group="g", instance=None):  # fmt: skip
        req = {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
               "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
               "protocols": [{"name": n, "metadata": m} for n, m in protocols]}  # fmt: skip
        return asyncio.ensure_future(self.groups.join_group(ctx(JOIN, version, client), req))

    def sync(self, member_id, generation, assignments=(), group="g"):
        req = {"group_id": group, "generation_id": generation, "member_id": member_id,
               "protocol_type": "consumer", "protocol_name": "range",
               "assignments": [{"member_id": m, "assignment": a}
                               for m, a in assignments]}  # fmt: skip
        return asyncio.ensure_future(self.groups.sync_group(ctx(SYNC, 5), req))

    async def heartbeat(self, member_id, generation, group="g"):
        req = {"group_id": group, "generation_id": generation, "member_id": member_id}
        return (await self.groups.heartbeat(ctx(HEARTBEAT, 4), req))["error_code"]

    async def commit(self, offsets, member_id="", generation=-1, version=8, metadata="", group="g"):
        req = {"group_id": group, "generation_id_or_member_epoch": generation,
               "member_id": member_id, "topics": [
                   {"name": t, "partitions": [{"partition_index": p, "committed_offset": o,
                                               "committed_metadata": metadata}]}
                   for (t, p), o in offsets.items()]}  # fmt: skip
        response = await self.offsets.offset_commit(ctx(COMMIT, version), req)
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in response["topics"] for p in t["partitions"]}  # fmt: skip

    async def fetch(self, topics=None, version=7, require_stable=False, group="g"):
        req = {"group_id": group, "require_stable": require_stable,
               "topics": None if topics is None else [
                   {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}  # fmt: skip
        response = await self.offsets.offset_fetch(ctx(FETCH, version), req)
        return {(t["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
                for t in response["topics"] for p in t["partitions"]}  # fmt: skip

    def records(self, group="g"):
        log = self.groups.log
        return [
            (decode_consumer_offsets_key(r.key), r)
            for r in log.read(log.partition_for(group))
            if r.control is None
        ]


async def form_group(h: Harness, *clients: str) -> dict[str, dict]:
    """Members join (learning their id first), the initial delay passes, the leader syncs."""
    ids = {}
    for client in clients:
        first = await h.join(client=client)
        assert first["error_code"] == 79  # MEMBER_ID_REQUIRED
        ids[client] = first["member_id"]
        assert ids[client].startswith(client + "-")
    joins = {c: h.join(member_id=ids[c], client=c) for c in clients}
    # The initial delay starts over while new members keep arriving.
    for _ in range(len(clients)):
        await h.tick(CONFIG.initial_rebalance_delay_ms)
    answers = {c: await joins[c] for c in clients}
    leader = next(c for c in clients if answers[c]["leader"] == ids[c])
    generation = answers[leader]["generation_id"]
    assignments = [(ids[c], f"assign-{c}".encode()) for c in clients]
    syncs = {c: h.sync(ids[c], generation, assignments if c == leader else ()) for c in clients}
    for c in clients:
        sync = await syncs[c]
        assert sync["error_code"] == 0 and sync["assignment"] == f"assign-{c}".encode()
    return {c: {"member_id": ids[c], "generation": generation, "leader": c == leader}
            for c in clients}  # fmt: skip


def test_partition_for_matches_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # the classic collision
    assert java_string_hash("\u00e9t\u00e9") == (233 * 31 + 116) * 31 + 233
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) is 0


@requires_shared_fixtures
def test_partition_for_agrees_with_where_real_brokers_wrote_groups():
    root = KAFKA_DATA
    from kafka.record import MemoryRecords

    checked = set()
    for path in sorted(root.glob("*/__consumer_offsets-*/*.log")):
        partitions = len(list(path.parent.parent.glob("__consumer_offsets-*")))
        partition = int(path.parent.name.rsplit("-", 1)[1])
        batches = MemoryRecords(path.read_bytes())
        if partitions != 50 or (batch := batches.next_batch()) is None:
            continue
        for record in batch:
            key = decode_consumer_offsets_key(record.key)
            group = (key.data or {}).get("group")
            if group is not None:
                assert partition_for(group, partitions) == partition, (path, group)
                checked.add(group)
    assert len(checked) >= 5, checked


def test_one_member_joins_syncs_and_heartbeats(tmp_path):
    async def run():
        h = Harness(tmp_path)
        group = await form_group(h, "c1")
        member = group["c1"]
        assert member["generation"] == 1 and member["leader"]
        assert await h.heartbeat(member["member_id"], 1) == 0
        assert await h.heartbeat(member["member_id"], 0) == 22  # ILLEGAL_GENERATION
        assert await h.heartbeat("nobody", 1) == 25  # UNKNOWN_MEMBER_ID
        g = h.groups.groups["g"]
        assert g.state.value == "Stable" and g.protocol_name == "range"
        stored = [decode_consumer_offsets_value(k, r.value) for k, r in h.records()]
        last = stored[-1].data
        assert stored[-1].kind == "group_metadata" and last["generation"] == 1
        assert last["protocol"] == "range" and last["leader"] == member["member_id"]
        assert [m["memberId"] for m in last["members"]] == [member["member_id"]]
        assert stored[0].data["members"] == [] and stored[0].data["generation"] == 0

    asyncio.run(run())


def test_second_member_triggers_a_rebalance_both_rejoin(tmp_path):
    async def run():
        h = Harness(tmp_path)
        first = (await form_group(h, "c1"))["c1"]
        pending = await h.join(client="c2")
        c2 = pending["member_id"]
        c2_join = h.join(member_id=c2, client="c2")
        await h.tick(0)
        assert h.groups.groups["g"].state.value == "PreparingRebalance"
        assert await h.heartbeat(first["member_id"], 1) == 27  # REBALANCE_IN_PROGRESS
        c1_join = h.join(member_id=first["member_id"], client="c1")
        a1, a2 = await c1_join, await c2_join
        assert a1["generation_id"] == a2["generation_id"] == 2
        assert a1["leader"] == first["member_id"] and len(a1["members"]) == 2
        assert a2["members"] == []
        s2 = h.sync(c2, 2)
        s1 = h.sync(first["member_id"], 2, [(first["member_id"], b"A"), (c2, b"B")])
        assert (await s1)["assignment"] == b"A" and (await s2)["assignment"] == b"B"
        assert h.groups.groups["g"].state.value == "Stable"

    asyncio.run(run())


def test_silent_member_expires_and_the_group_rebalances_without_it(tmp_path):
    async def run():
        h = Harness(tmp_path)
        group = await form_group(h, "c1", "c2")
        alive, dead = group["c1"], group["c2"]
        for _ in range(4):
            await h.tick(4_000)
            assert await h.heartbeat(alive["member_id"], 1) in (0, 27)
        g = h.groups.groups["g"]
        assert dead["member_id"] not in g.members and g.state.value == "PreparingRebalance"
        rejoin = await h.join(member_id=alive["member_id"], client="c1")
        assert rejoin["generation_id"] == 2 and len(rejoin["members"]) == 1

    asyncio.run(run())


def test_last_member_leaving_empties_the_group_and_stores_it(tmp_path):
    async def run():
        h = Harness(tmp_path)
        member = (await form_group(h, "c1"))["c1"]
        req = {"group_id": "g", "members": [
            {"member_id": member["member_id"], "group_instance_id": None},
            {"member_id": "ghost", "group_instance_id": None}]}  # fmt: skip
        response = await h.groups.leave_group(ctx(LEAVE, 4), req)
        assert [m["error_code"] for m in response["members"]] == [0, 25]
        g = h.groups.groups["g"]
        assert g.state.value == "Empty" and g.generation_id == 2
        key, record = h.records()[-1]
        value = decode_consumer_offsets_value(key, record.value).data
        assert value["generation"] == 2 and value["members"] == [] and value["protocol"] is None
        legacy = await h.groups.leave_group(ctx(LEAVE, 1), {"group_id": "g", "member_id": "x"})
        assert legacy == {"error_code": 25}

    asyncio.run(run())


def test_join_rejects_bad_session_timeout_group_id_and_protocols(tmp_path):
    async def run():
        h = Harness(tmp_path)
        assert (await h.join(session=10))["error_code"] == 26
        assert (await h.join(group=""))["error_code"] == 24
        assert (await h.join(protocols=()))["error_code"] == 23
        assert (await h.join(member_id="unknown"))["error_code"] == 25
        await form_group(h, "c1")
        other = await h.join(client="c2", protocols=(("roundrobin", b""),), version=3)
        assert other["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL

    asyncio.run(run())


def test_old_join_version_gets_a_member_id_at_once(tmp_path):
    async def run():
        h = Harness(tmp_path)
        join = h.join(version=3)
        await h.tick(CONFIG.initial_rebalance_delay_ms)
        answer = await join
        assert answer["error_code"] == 0 and answer["generation_id"] == 1
        assert answer["leader"] == answer["member_id"]

    asyncio.run(run())


def test_leader_that_never_syncs_is_removed_at_the_rebalance_timeout(tmp_path):
    async def run():
        h = Harness(tmp_path)
        pending = await h.join()
        join = h.join(member_id=pending["member_id"], rebalance=8_000)
        await h.tick(CONFIG.initial_rebalance_delay_ms)
        assert (await join)["generation_id"] == 1
        await h.tick(8_000)
        g = h.groups.groups["g"]
        assert not g.members and g.state.value == "Empty"

    asyncio.run(run())


def test_simple_and_member_commits_follow_the_group_rules(tmp_path):
    async def run():
        h = Harness(tmp_path)
        assert await h.commit({("t", 0): 5}) == {("t", 0): 0}
        assert await h.fetch({"t": [0, 1]}) == {("t", 0): (5, 0), ("t", 1): (-1, 0)}
        assert await h.commit({("t", 0): 1}, generation=3, group="nope") == {("t", 0): 22}
        assert await h.commit({("t", 0): 1}, generation=3, group="nope", version=9) == {
            ("t", 0): 69
        }
        member = (await form_group(h, "c1"))["c1"]
        mid = member["member_id"]
        assert await h.commit({("t", 0): 7}) == {("t", 0): 25}  # simple commit, live group
        assert await h.commit({("t", 0): 7}, mid, 0) == {("t", 0): 22}
        assert await h.commit({("t", 0): 7}, "x", 1) == {("t", 0): 25}
        assert await h.commit({("t", 0): 7}, mid, 1, metadata="m" * 5000) == {("t", 0): 12}
        assert await h.commit({("t", 0): 8, ("u", 2): 3}, mid, 1, metadata="ok") == {
            ("t", 0): 0, ("u", 2): 0,
        }  # fmt: skip
        assert await h.fetch() == {("t", 0): (8, 0), ("u", 2): (3, 0)}
        kinds = [k.kind for k, _ in h.records()]
        assert kinds.count("offset_commit") == 3

    asyncio.run(run())


def test_commit_while_completing_rebalance_is_refused(tmp_path):
    async def run():
        h = Harness(tmp_path)
        pending = await h.join()
        join = h.join(member_id=pending["member_id"])
        await h.tick(CONFIG.initial_rebalance_delay_ms)
        answer = await join
        assert await h.commit({("t", 0): 1}, answer["member_id"], 1) == {("t", 0): 27}

    asyncio.run(run())


def test_offsets_and_groups_come_back_after_a_restart(tmp_path):
    async def run():
        h = Harness(tmp_path)
        member = (await form_group(h, "c1"))["c1"]
        await h.commit({("t", 0): 42}, member["member_id"], 1, metadata="meta")
        await h.commit({("s", 1): 9}, group="simple")
        h.broker.log_manager.close()
        h2 = Harness(tmp_path, h.broker.clock)
        assert load_groups(h2.offsets) > 0
        assert await h2.fetch({"t": [0]}) == {("t", 0): (42, 0)}
        assert await h2.fetch(group="simple") == {("s", 1): (9, 0)}
        g = h2.groups.groups["g"]
        assert g.state.value == "Stable" and g.generation_id == 1
        assert g.members[member["member_id"]].assignment == b"assign-c1"
        assert await h2.heartbeat(member["member_id"], 1) == 0
        await h2.tick(10_001)  # no heartbeat for a session: the loaded member expires
        assert not h2.groups.groups["g"].members

    asyncio.run(run())


def test_describe_and_list_groups(tmp_path):
    async def run():
        h = Harness(tmp_path)
        member = (await form_group(h, "c1"))["c1"]
        await h.commit({("s", 0): 1}, group="simple")
        described = await describe_groups(h.groups, ctx(15, 5), {"groups": ["g", "missing"]})
        g, missing = described["groups"]
        assert (g["group_state"], g["protocol_type"], g["protocol_data"]) == (
            "Stable", "consumer", "range",
        )  # fmt: skip
        assert g["members"][0]["member_id"] == member["member_id"]
        assert g["members"][0]["member_metadata"] == b"meta"
        assert g["members"][0]["member_assignment"] == b"assign-c1"
        assert missing["group_state"] == "Dead" and missing["members"] == []
        listed = await list_groups(h.groups, ctx(16, 4), {"states_filter": []})
        assert {(x["group_id"], x["group_state"]) for x in listed["groups"]} == {
            ("g", "Stable"), ("simple", "Empty"),
        }  # fmt: skip
        stable = await list_groups(h.groups, ctx(16, 4), {"states_filter": ["stable"]})
        assert [x["group_id"] for x in stable["groups"]] == ["g"]

    asyncio.run(run())


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_v8_answers_per_group(tmp_path, version):
    async def run():
        h = Harness(tmp_path)
        await h.commit({("t", 0): 3}, group="a")
        req = {"groups": [{"group_id": "a", "topics": None},
                          {"group_id": "b", "topics": [{"name": "t", "partition_indexes": [0]}]}],
               "require_stable": True}  # fmt: skip
        response = await h.offsets.offset_fetch(ctx(FETCH, version), req)
        a, b = response["groups"]
        assert a["topics"][0]["partitions"][0]["committed_offset"] == 3
        assert b["topics"][0]["partitions"][0]["committed_offset"] == -1

    asyncio.run(run())


def test_offsets_expire_after_retention_and_empty_groups_go_with_them(tmp_path):
    async def run():
        h = Harness(tmp_path)
        member = (await form_group(h, "c1"))["c1"]
        await h.commit({("t", 0): 5}, member["member_id"], 1)
        await h.commit({("s", 0): 1}, group="simple")
        week = CONFIG.offsets_retention_ms
        h.broker.clock.advance(week - 1)
        await h.groups.run_due()  # the silent member expires: the group empties now
        assert h.groups.groups["g"].state.value == "Empty"
        assert await h.offsets.expire_offsets() == 0  # "simple" is a millisecond short
        h.broker.clock.advance(1)
        assert await h.offsets.expire_offsets() == 2  # its offset and the group itself
        assert "simple" not in h.groups.groups and await h.fetch(group="simple") == {}
        assert await h.fetch({"t": [0]}) == {("t", 0): (5, 0)}  # "g" emptied a moment ago
        h.broker.clock.advance(week)
        assert await h.offsets.expire_offsets() == 2
        assert await h.fetch({"t": [0]}) == {("t", 0): (-1, 0)} and "g" not in h.groups.groups
        h.broker.log_manager.close()
        again = Harness(tmp_path, h.broker.clock)
        load_groups(again.offsets)
        assert again.groups.groups == {} and again.offsets.store.offsets == {}

    asyncio.run(run())


def test_a_restarted_static_member_takes_its_place_without_a_rebalance(tmp_path):
    async def run():
        h = Harness(tmp_path)
        a = h.join(client="a", instance="host-a")
        await h.tick(0)
        b = h.join(client="b", instance="host-b")
        for _ in range(2):
            await h.tick(CONFIG.initial_rebalance_delay_ms)
        ja, jb = await a, await b
        assert ja["generation_id"] == jb["generation_id"] == 1
        assert ja["member_id"].startswith("host-a-")
        leader, other = (ja, jb) if ja["leader"] == ja["member_id"] else (jb, ja)
        follower_sync = h.sync(other["member_id"], 1)
        await h.sync(leader["member_id"], 1, [(ja["member_id"], b"A"), (jb["member_id"], b"B")])
        await follower_sync
        restarted = await h.join(client="b", instance="host-b")  # same instance, new process
        assert restarted["error_code"] == 0 and restarted["generation_id"] == 1
        assert restarted["member_id"] != jb["member_id"]
        g = h.groups.groups["g"]
        assert g.state.value == "Stable" and jb["member_id"] not in g.members
        assert g.members[restarted["member_id"]].assignment == b"B"
        assert await h.heartbeat(jb["member_id"], 1) == 25  # the old id is gone
        req = {"group_id": "g", "generation_id": 1, "member_id": jb["member_id"],
               "group_instance_id": "host-b"}  # fmt: skip
        fenced = await h.groups.heartbeat(ctx(HEARTBEAT, 4), req)
        assert fenced["error_code"] == 82  # FENCED_INSTANCE_ID
        sync = await h.sync(restarted["member_id"], 1)
        assert sync["assignment"] == b"B"
        key, record = h.records()[-1]
        stored = decode_consumer_offsets_value(key, record.value).data
        assert {m["groupInstanceId"] for m in stored["members"]} == {"host-a", "host-b"}
        assert restarted["member_id"] in {m["memberId"] for m in stored["members"]}

    asyncio.run(run())


def test_a_damaged_offsets_partition_stops_the_load_with_its_place(tmp_path):
    async def run():
        h = Harness(tmp_path)
        for i in range(5):
            await h.commit({("t", 0): i})
        h.broker.log_manager.close()
        partition = h.groups.log.partition_for("g")
        segment = tmp_path / f"__consumer_offsets-{partition}" / "00000000000000000000.log"
        data = bytearray(segment.read_bytes())
        data[200] ^= 0xFF  # inside the second batch: a CRC mismatch, not a torn tail
        segment.write_bytes(bytes(data))
        again = Harness(tmp_path, h.broker.clock)
        with pytest.raises(CoordinatorLoadError) as caught:
            load_groups(again.offsets)
        error = caught.value
        assert f"__consumer_offsets-{partition}" in str(error) and "crc" in str(error).lower()
        assert error.path == str(segment) and error.offset is not None
        again.broker.log_manager.close()

    asyncio.run(run())


def test_a_repeated_join_answers_the_abandoned_one(tmp_path):
    async def run():
        h = Harness(tmp_path)
        group = await form_group(h, "c1", "c2")
        c1, c2 = group["c1"]["member_id"], group["c2"]["member_id"]
        pending = await h.join(client="c3")
        h.join(member_id=pending["member_id"], client="c3")  # the group starts rebalancing
        abandoned = h.join(member_id=c1, client="c1")  # waits for c2
        await h.tick(0)
        retried = h.join(member_id=c1, client="c1")
        await h.tick(0)
        assert abandoned.done() and (await abandoned)["error_code"] == 27
        assert not retried.done()
        last = h.join(member_id=c2, client="c2")
        assert (await retried)["generation_id"] == (await last)["generation_id"] == 2

    asyncio.run(run())
