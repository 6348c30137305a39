"""A consumer group of KIP-848 survives a restart of `kafkalog serve`: the server process is
killed (SIGKILL) or stopped, and started again on the same data directory, and the members' next
heartbeats carry on with their ids and epochs, the group's epoch, target and assignments what
they were; members that left stay gone, a static member that left for a while keeps its place,
and a deleted group stays deleted."""

from __future__ import annotations

import pytest

from .server_process import ServerProcess
from .wire import WireClient

pytestmark = pytest.mark.slow

HEARTBEAT, DESCRIBE, LIST_GROUPS, CREATE_TOPICS, DELETE_GROUPS = 68, 69, 16, 19, 42
NONE, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND = 0, 25, 69


def join(wire, group, member_id, topics, instance=None):
    return wire.call(HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": 0, "instance_id": instance,
        "rebalance_timeout_ms": 30_000, "subscribed_topic_names": list(topics),
        "topic_partitions": []})  # fmt: skip


def beat(wire, group, member_id, epoch, owned, instance=None):
    return wire.call(HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
        "topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                             for t, ps in owned.items()]})  # fmt: skip


def owned(response, before=None) -> dict:
    if response.get("assignment") is None:
        return before
    return {t["topic_id"]: set(t["partitions"]) for t in response["assignment"]["topic_partitions"]}


def describe(wire, *groups) -> list[dict]:
    described = wire.call(DESCRIBE, 0, {"group_ids": list(groups)})["groups"]
    for g in described:
        g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
        for m in g["members"]:  # a set: Kafka stores it sorted
            m["subscribed_topic_names"] = sorted(m["subscribed_topic_names"])
    return described


def settle(wire, group, members: dict) -> None:
    """Heartbeat every member (id -> [epoch, owned, instance]) until none changes."""
    for _ in range(10):
        changed = False
        for member_id, state in members.items():
            r = beat(wire, group, member_id, state[0], state[1], state[2])
            assert r["error_code"] == NONE, r
            new = [r["member_epoch"], owned(r, state[1]), state[2]]
            changed |= new != state
            members[member_id] = new
        if not changed:
            return
    raise AssertionError(f"group {group} did not settle: {members}")


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_members_carry_on_after_a_restart(tmp_path, how):
    data = tmp_path / "data"
    args = ("--config", "group.consumer.session.timeout.ms=60000")
    first = ServerProcess(data, *args).start()
    try:
        wire = WireClient("127.0.0.1", first.port)
        created = wire.call(CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": n, "replication_factor": 1}
            for name, n in (("orders", 5), ("audit", 2))]})  # fmt: skip
        assert all(t["error_code"] == NONE for t in created["topics"]), created
        members: dict = {}
        for member_id, instance in (("m-one", None), ("m-two", None), ("m-static", "i-1")):
            r = join(wire, "g", member_id, ("orders", "audit"), instance)
            assert r["error_code"] == NONE, r
            members[member_id] = [r["member_epoch"], owned(r, {}), instance]
            settle(wire, "g", members)
        r = join(wire, "leaving", "m-gone", ("audit",))
        assert wire.call(HEARTBEAT, 1, {"group_id": "leaving", "member_id": "m-gone",
                                        "member_epoch": -1})["error_code"] == NONE  # fmt: skip
        r = join(wire, "deleted", "m-del", ("audit",))
        beat(wire, "deleted", "m-del", -1, {})
        assert wire.call(DELETE_GROUPS, 2, {"groups_names": ["deleted"]})["results"][0][
            "error_code"] == NONE  # fmt: skip
        r = join(wire, "static", "m-away", ("orders",), "away")
        away = owned(r, {})
        assert sum(len(ps) for ps in away.values()) == 5, r
        r = beat(wire, "static", "m-away", -2, away, "away")
        assert r["error_code"] == NONE and r["member_epoch"] == -2, r
        before = describe(wire, "g", "leaving", "static")
        assert before[0]["group_state"] == "Stable" and len(before[0]["members"]) == 3, before
        wire.close()
    finally:
        if how == "kill":
            first.kill()
        else:
            assert first.stop() == 0, first.log()

    second = ServerProcess(data, *args, port=first.port).start()
    try:
        wire = WireClient("127.0.0.1", second.port)
        assert describe(wire, "g", "leaving", "static") == before
        for member_id, (epoch, parts, instance) in members.items():
            r = beat(wire, "g", member_id, epoch, parts, instance)
            assert r["error_code"] == NONE, r
            assert r["member_epoch"] == epoch and r["member_id"] == member_id, r
        assert describe(wire, "g")[0] == before[0]
        gone = beat(wire, "leaving", "m-gone", 1, {})
        assert gone["error_code"] == UNKNOWN_MEMBER_ID, gone
        deleted = describe(wire, "deleted")[0]
        assert deleted["error_code"] == GROUP_ID_NOT_FOUND, deleted
        back = join(wire, "static", "m-back", ("orders",), "away")
        assert back["error_code"] == NONE, back
        assert owned(back) == away, back  # the new incarnation takes its place and partitions
        listed = {g["group_id"]: g["group_state"]
                  for g in wire.call(LIST_GROUPS, 5, {})["groups"]}  # fmt: skip
        assert listed["g"] == "Stable" and listed["leaving"] == "Empty", listed
        wire.close()
    finally:
        assert second.stop() == 0, second.log()


def test_compaction_keeps_the_state(tmp_path):
    """What the log cleaner leaves (each key's newest record; after the delete horizon no
    tombstones) replays to the same groups as the whole log."""
    from kafkalog.format import iter_batches
    from kafkalog.format.internal import (
        decode_consumer_offsets_key,
        decode_consumer_offsets_value,
    )
    from kafkalog.server.groups.consumer_replay import ConsumerGroupReplay

    test_members_carry_on_after_a_restart(tmp_path, "stop")
    records = []
    for segment in sorted((tmp_path / "data").glob("__consumer_offsets-*/*.log")):
        for batch in iter_batches(segment.read_bytes()):
            records += [(bytes(r.key), None if r.value is None else bytes(r.value))
                        for r in batch.records()]  # fmt: skip
    newest = {key: value for key, value in records}
    compacted = [(k, v) for k, v in records if newest[k] == v and v is not None]
    compacted = list(dict.fromkeys(compacted))  # one record per key

    def replayed(log):
        replay = ConsumerGroupReplay()
        for key, value in log:
            decoded = decode_consumer_offsets_key(key)
            if decoded.api_key in range(3, 9):
                data = decode_consumer_offsets_value(decoded, value).data
                replay.apply(decoded.kind, decoded.data, data)
        return {g: (group.group_epoch, group.assignment_epoch, group.metadata_hash,
                    group.members, group.target)
                for g, group in replay.groups(0).items()}  # fmt: skip

    full = replayed(records)
    assert set(full) == {"g", "leaving", "static"}, full
    assert replayed(compacted) == full
