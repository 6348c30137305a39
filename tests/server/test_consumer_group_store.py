"""A consumer group change the log refuses to store is not made: the member hears an error and
the group stays as the log has it (the next heartbeat is judged against the stored state)."""

from __future__ import annotations

import pytest

from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .wire import WireClient

HEARTBEAT, DESCRIBE, CREATE_TOPICS = 68, 69, 19
NONE = 0


@pytest.fixture
def server(tmp_path):
    config = ServerConfig([tmp_path / "data"], port=0, offsets_topic_num_partitions=1)
    with BackgroundServer(config) as s:
        yield s


def join(wire, member_id):
    return wire.call(HEARTBEAT, 1, {
        "group_id": "g", "member_id": member_id, "member_epoch": 0,
        "rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["orders"],
        "topic_partitions": []})  # fmt: skip


def test_a_refused_write_leaves_the_group_as_it_was(server):
    wire = WireClient("127.0.0.1", server.broker.port)
    created = wire.call(CREATE_TOPICS, 7, {"topics": [
        {"name": "orders", "num_partitions": 2, "replication_factor": 1}]})  # fmt: skip
    assert created["topics"][0]["error_code"] == NONE
    first = join(wire, "m-1")
    assert first["error_code"] == NONE and first["member_epoch"] == 2, first
    before = wire.call(DESCRIBE, 0, {"group_ids": ["g"]})["groups"][0]

    log = server.broker.coordinators.groups.log
    append = log.append

    async def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    log.append = refuse
    try:
        refused = join(wire, "m-2")
    finally:
        log.append = append
    assert refused["error_code"] != NONE, refused
    assert wire.call(DESCRIBE, 0, {"group_ids": ["g"]})["groups"][0] == before
    second = join(wire, "m-2")
    assert second["error_code"] == NONE and second["member_epoch"] == 3, second
    wire.close()
