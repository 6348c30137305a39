"""The consumer group protocol of KIP-848 on the wire: ConsumerGroupHeartbeat (join, assignment,
a second member's rebalance with revocation before assignment, leave, fencing, session expiry),
ConsumerGroupDescribe, ListGroups and DescribeGroups, and the offset APIs' member checks."""

from __future__ import annotations

import time

import pytest

from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .wire import WireClient

HEARTBEAT, DESCRIBE, LIST_GROUPS, DESCRIBE_GROUPS, CREATE_TOPICS = 68, 69, 16, 15, 19
OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, API_VERSIONS = 8, 9, 11, 18
NONE, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_ID_NOT_FOUND = 0, 25, 23, 69
INVALID_REQUEST, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 42, 110, 112, 113
SESSION_MS = 1_500


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = ServerConfig(
        [tmp_path_factory.mktemp("kip848") / "data"], port=0, offsets_topic_num_partitions=3,
        extra={"group.consumer.session.timeout.ms": str(SESSION_MS),
               "group.consumer.heartbeat.interval.ms": "500",
               "group.initial.rebalance.delay.ms": "0"},
    )  # fmt: skip
    with BackgroundServer(config) as s:
        client = WireClient("127.0.0.1", s.broker.port)
        created = client.call(CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": n, "replication_factor": 1}
            for name, n in (("orders", 4), ("audit", 2))]})  # fmt: skip
        assert all(t["error_code"] == 0 for t in created["topics"]), created
        s.topic_ids = {t["name"]: t["topic_id"] for t in created["topics"]}
        client.close()
        yield s


@pytest.fixture
def wire(server):
    client = WireClient("127.0.0.1", server.broker.port)
    yield client
    client.close()


def join(wire, group, member_id, topics=("orders",), assignor=None, version=1, instance=None):
    return wire.call(HEARTBEAT, version, {
        "group_id": group, "member_id": member_id, "member_epoch": 0,
        "rebalance_timeout_ms": 30_000, "subscribed_topic_names": list(topics),
        "server_assignor": assignor, "topic_partitions": [], "instance_id": instance})  # fmt: skip


def beat(wire, group, member_id, epoch, owned=None):
    return wire.call(HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch,
        "topic_partitions": None if owned is None else [
            {"topic_id": t, "partitions": sorted(ps)} for t, ps in owned.items()]})  # fmt: skip


def owned(response) -> dict:
    assignment = response["assignment"]
    assert assignment is not None, response
    return {t["topic_id"]: set(t["partitions"]) for t in assignment["topic_partitions"]}


def test_advertised_in_api_versions(wire):
    keys = {k["api_key"]: (k["min_version"], k["max_version"])
            for k in wire.call(API_VERSIONS, 3, {})["api_keys"]}  # fmt: skip
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


def test_join_gets_everything_then_a_second_member_waits_for_the_revocation(server, wire):
    orders = server.topic_ids["orders"]
    a = join(wire, "g1", "member-a")
    assert a["error_code"] == NONE and a["member_id"] == "member-a"
    assert a["member_epoch"] == 2 and a["heartbeat_interval_ms"] == 500  # a new group: epoch 1
    assert owned(a) == {orders: {0, 1, 2, 3}}

    b = join(wire, "g1", "member-b")
    assert b["member_epoch"] == 3
    assert owned(b) == {}  # every partition of its target is still held by member-a
    # member-a is asked to give up two partitions, and stays at its epoch until it has
    a2 = beat(wire, "g1", "member-a", 2, {orders: {0, 1, 2, 3}})
    assert a2["member_epoch"] == 2
    kept = owned(a2)[orders]
    assert len(kept) == 2
    # still reporting them: nothing moves
    b2 = beat(wire, "g1", "member-b", 3, {})
    assert b2["member_epoch"] == 3 and b2["assignment"] is None
    a3 = beat(wire, "g1", "member-a", 2, {orders: kept})
    assert a3["member_epoch"] == 3 and a3["assignment"] is None
    b3 = beat(wire, "g1", "member-b", 3, {})
    assert owned(b3) == {orders: {0, 1, 2, 3} - kept}

    described = wire.call(DESCRIBE, 1, {"group_ids": ["g1", "nope"]})["groups"]
    g1, nope = described
    assert (g1["error_code"], g1["group_state"], g1["group_epoch"], g1["assignment_epoch"],
            g1["assignor_name"]) == (NONE, "Stable", 3, 3, "uniform")  # fmt: skip
    members = {m["member_id"]: m for m in g1["members"]}
    assert members["member-b"]["member_type"] == 1
    parts = members["member-b"]["assignment"]["topic_partitions"]
    assert [(p["topic_name"], set(p["partitions"])) for p in parts] == [
        ("orders", {0, 1, 2, 3} - kept)
    ]
    assert (nope["error_code"], nope["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        "Group nope not found.",
    )

    listed = wire.call(LIST_GROUPS, 5, {"types_filter": ["consumer"]})["groups"]
    assert {"group_id": "g1", "protocol_type": "consumer", "group_state": "Stable",
            "group_type": "consumer"} in listed  # fmt: skip
    assert wire.call(LIST_GROUPS, 5, {"types_filter": ["classic"]})["groups"] == [
        g for g in wire.call(LIST_GROUPS, 5, {})["groups"] if g["group_type"] == "classic"
    ]
    old = wire.call(DESCRIBE_GROUPS, 6, {"groups": ["g1"]})["groups"][0]
    assert (old["error_code"], old["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        "Group g1 is not a classic group.",
    )

    # leaving bumps the group epoch; the other member then gets everything
    left = wire.call(HEARTBEAT, 1, {"group_id": "g1", "member_id": "member-b",
                                    "member_epoch": -1})  # fmt: skip
    assert (left["error_code"], left["member_epoch"]) == (NONE, -1)
    a4 = beat(wire, "g1", "member-a", 3, {orders: kept})
    assert a4["member_epoch"] == 4 and owned(a4) == {orders: {0, 1, 2, 3}}
    wire.call(HEARTBEAT, 1, {"group_id": "g1", "member_id": "member-a", "member_epoch": -1})
    empty = wire.call(DESCRIBE, 1, {"group_ids": ["g1"]})["groups"][0]
    # the last member out leaves an empty target at the new epoch
    assert (empty["group_state"], empty["group_epoch"], empty["assignment_epoch"]) == (
        "Empty",
        5,
        5,
    )


def test_fencing_and_errors(wire):
    first = join(wire, "g2", "m1", topics=("audit",))
    assert first["member_epoch"] == 2
    ahead = beat(wire, "g2", "m1", 5)
    assert ahead["error_code"] == FENCED_MEMBER_EPOCH
    assert beat(wire, "g2", "stranger", 1)["error_code"] == UNKNOWN_MEMBER_ID
    assert beat(wire, "unknown-group", "m1", 1)["error_code"] == UNKNOWN_MEMBER_ID
    bad = wire.call(HEARTBEAT, 1, {"group_id": "g2", "member_id": "", "member_epoch": 0})
    assert (bad["error_code"], bad["error_message"]) == (
        INVALID_REQUEST,
        "MemberId can't be empty.",
    )
    assert join(wire, "g2", "m2", assignor="sticky")["error_code"] == UNSUPPORTED_ASSIGNOR
    # v0: the coordinator names the member
    v0 = join(wire, "g2", "", topics=("audit",), version=0)
    assert v0["error_code"] == NONE and len(v0["member_id"]) == 22
    # a classic member cannot join a group of the other kind
    joined = wire.call(JOIN_GROUP, 7, {
        "group_id": "g2", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
        "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})  # fmt: skip
    assert joined["error_code"] == INCONSISTENT_GROUP_PROTOCOL


def test_offset_commit_and_fetch_check_the_member(wire):
    m = join(wire, "g3", "c1", topics=("audit",))
    epoch = m["member_epoch"]

    def commit(member_id, member_epoch, version=9):
        response = wire.call(
            OFFSET_COMMIT,
            version,
            {
                "group_id": "g3",
                "generation_id_or_member_epoch": member_epoch,
                "member_id": member_id,
                "topics": [
                    {
                        "name": "audit",
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}
                        ],
                    }
                ],
            },
        )
        return response["topics"][0]["partitions"][0]["error_code"]

    def fetch(member_id, member_epoch):
        group = wire.call(
            OFFSET_FETCH,
            9,
            {
                "groups": [
                    {
                        "group_id": "g3",
                        "member_id": member_id,
                        "member_epoch": member_epoch,
                        "topics": [{"name": "audit", "partition_indexes": [0]}],
                    }
                ]
            },
        )["groups"][0]
        return group["error_code"], [p["committed_offset"] for t in group["topics"]
                                     for p in t["partitions"]]  # fmt: skip

    assert commit("c1", epoch + 1) == STALE_MEMBER_EPOCH
    assert commit("nobody", epoch) == UNKNOWN_MEMBER_ID
    assert commit("", -1) == UNKNOWN_MEMBER_ID  # the group has members
    assert commit("c1", epoch, version=8) == 35  # UNSUPPORTED_VERSION
    assert commit("c1", epoch) == NONE
    assert fetch("c1", epoch + 1) == (STALE_MEMBER_EPOCH, [])
    assert fetch("nobody", epoch) == (UNKNOWN_MEMBER_ID, [])
    assert fetch("c1", epoch) == (NONE, [7])
    assert fetch(None, -1) == (NONE, [7])  # an admin's fetch


def test_session_expiry_fences_the_member(wire):
    first = join(wire, "g4", "gone", topics=("audit",))
    assert first["member_epoch"] == 2
    stay = join(wire, "g4", "stays", topics=("audit",))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # "stays" keeps heartbeating, "gone" does not
        response = beat(wire, "g4", "stays", stay["member_epoch"], owned(stay)
                        if stay["assignment"] is not None else {})  # fmt: skip
        assert response["error_code"] == NONE
        if response["assignment"] is not None:
            stay = response
        else:
            stay = {**response, "assignment": stay["assignment"]}
        group = wire.call(DESCRIBE, 0, {"group_ids": ["g4"]})["groups"][0]
        if len(group["members"]) == 1 and sum(len(p["partitions"]) for p in owned_rows(stay)) == 2:
            break
        time.sleep(0.2)
    assert [m["member_id"] for m in group["members"]] == ["stays"]
    assert beat(wire, "g4", "gone", 1)["error_code"] == UNKNOWN_MEMBER_ID


def owned_rows(response) -> list:
    return (response.get("assignment") or {}).get("topic_partitions") or []


def test_an_empty_classic_group_gives_way_and_a_busy_one_does_not(wire):
    commit = wire.call(
        OFFSET_COMMIT,
        9,
        {
            "group_id": "g5",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "audit",
                    "partitions": [
                        {"partition_index": 1, "committed_offset": 3, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    assert commit["topics"][0]["partitions"][0]["error_code"] == NONE  # a "simple" classic group
    assert join(wire, "g5", "x", topics=("audit",))["error_code"] == NONE
    listed = {g["group_id"]: g["group_type"] for g in wire.call(LIST_GROUPS, 5, {})["groups"]}
    assert listed["g5"] == "consumer"


def test_static_member_leaves_for_a_while_and_comes_back(server, wire):
    audit = server.topic_ids["audit"]
    first = join(wire, "g6", "incarnation-1", topics=("audit",), instance="host-a")
    assert owned(first) == {audit: {0, 1}}
    taken = join(wire, "g6", "intruder", topics=("audit",), instance="host-a")
    assert taken["error_code"] == 111  # UNRELEASED_INSTANCE_ID: the first has not left
    left = wire.call(HEARTBEAT, 1, {"group_id": "g6", "member_id": "incarnation-1",
                                    "member_epoch": -2, "instance_id": "host-a"})  # fmt: skip
    assert (left["error_code"], left["member_epoch"]) == (NONE, -2)
    back = join(wire, "g6", "incarnation-2", topics=("audit",), instance="host-a")
    assert back["error_code"] == NONE
    assert back["member_epoch"] == first["member_epoch"]  # no rebalance: same place, same epoch
    assert owned(back) == {audit: {0, 1}}
    group = wire.call(DESCRIBE, 1, {"group_ids": ["g6"]})["groups"][0]
    assert [(m["member_id"], m["instance_id"]) for m in group["members"]] == [
        ("incarnation-2", "host-a")
    ]
    old = wire.call(HEARTBEAT, 1, {"group_id": "g6", "member_id": "incarnation-1",
                                   "member_epoch": first["member_epoch"],
                                   "instance_id": "host-a"})  # fmt: skip
    assert old["error_code"] == 82  # FENCED_INSTANCE_ID


def test_range_assignor_and_a_regex_subscription(server, wire):
    orders, audit = server.topic_ids["orders"], server.topic_ids["audit"]
    a = join(wire, "g7", "a", topics=("orders",), assignor="range")
    a = beat(wire, "g7", "a", a["member_epoch"], owned(a))
    b = wire.call(HEARTBEAT, 1, {
        "group_id": "g7", "member_id": "b", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
        "subscribed_topic_regex": "ord.*|aud.t", "server_assignor": "range",
        "topic_partitions": []})  # fmt: skip
    assert b["error_code"] == NONE
    a = beat(wire, "g7", "a", a["member_epoch"], {orders: {0, 1, 2, 3}})
    assert owned(a) == {orders: {0, 1}}  # range: orders' 4 partitions in two ranges by member id
    a = beat(wire, "g7", "a", a["member_epoch"], {orders: {0, 1}})
    b = beat(wire, "g7", "b", b["member_epoch"], {})
    assert owned(b) == {orders: {2, 3}, audit: {0, 1}}  # audit all to its only subscriber
    described = wire.call(DESCRIBE, 1, {"group_ids": ["g7"]})["groups"][0]
    assert (described["group_state"], described["assignor_name"]) == ("Stable", "range")
    regex = [m["subscribed_topic_regex"] for m in described["members"] if m["member_id"] == "b"]
    assert regex == ["ord.*|aud.t"]
    bad = wire.call(HEARTBEAT, 1, {
        "group_id": "g7", "member_id": "c", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
        "subscribed_topic_regex": "(", "topic_partitions": []})  # fmt: skip
    assert bad["error_code"] == 128  # INVALID_REGULAR_EXPRESSION


def test_a_member_that_does_not_revoke_in_time_is_fenced(server, wire):
    audit = server.topic_ids["audit"]
    slow = wire.call(HEARTBEAT, 1, {
        "group_id": "g8", "member_id": "slow", "member_epoch": 0, "rebalance_timeout_ms": 300,
        "subscribed_topic_names": ["audit"], "topic_partitions": []})  # fmt: skip
    assert owned(slow) == {audit: {0, 1}}
    fast = join(wire, "g8", "fast", topics=("audit",))
    asked = beat(wire, "g8", "slow", slow["member_epoch"], {audit: {0, 1}})
    assert len(owned(asked)[audit]) == 1  # one partition to give up
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fast = beat(wire, "g8", "fast", fast["member_epoch"], {})
        if fast["assignment"] is not None and owned(fast):
            break
        time.sleep(0.1)
    assert owned(fast) == {audit: {0, 1}}  # "slow" was fenced, then "fast" got everything
    again = beat(wire, "g8", "slow", slow["member_epoch"], {audit: {0, 1}})
    assert again["error_code"] == UNKNOWN_MEMBER_ID


def test_a_classic_group_with_members_is_not_a_consumer_group(wire):
    joined = wire.call(JOIN_GROUP, 3, {
        "group_id": "g9", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
        "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]})  # fmt: skip
    assert joined["error_code"] == NONE
    refused = join(wire, "g9", "m")
    assert (refused["error_code"], refused["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        "Group g9 is not a consumer group.",
    )
    described = wire.call(DESCRIBE, 1, {"group_ids": ["g9"]})["groups"][0]
    assert (described["error_code"], described["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        "Group g9 is not a consumer group",
    )
