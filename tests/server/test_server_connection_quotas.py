"""Connection quotas changed while serving, through librdkafka's admin client as an operator
would (``kafka-configs --entity-type brokers``): max.connections.per.ip and its overrides,
max.connections and max.connection.creation.rate apply to the next connection accepted, are
described as Kafka describes them, refused with Kafka's rule when bad, and survive a restart."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from kafkalog.errors import KafkalogError
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig
from kafkalog.server.connection_quotas import ConnectionQuotas, CreationRate

from .server_process import SMALL

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 4, 5


def alter(bootstrap: str, node: str, **configs: str | None) -> None:
    """IncrementalAlterConfigs on this node's broker resource (SET, or DELETE for None)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None
                    else AlterConfigOpType.SET)
        for k, v in configs.items()
    ]  # fmt: skip
    resource = ConfigResource("BROKER", node, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(10)


def describe(bootstrap: str, node: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("BROKER", node)
    return admin.describe_configs([resource])[resource].result(10)


def accepted(port: int, timeout: float = 2.0) -> bool:
    """Whether the server keeps a new connection open (a refused one is closed at once)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.settimeout(0.5)
        try:
            return sock.recv(1) != b""
        except TimeoutError:
            return True
        except ConnectionResetError:
            return False
    finally:
        sock.close()


def hold(port: int, count: int) -> list[socket.socket]:
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
    time.sleep(0.3)  # accepted and counted
    return held


def settle(server: BackgroundServer, connections: int = 0) -> None:
    """Wait until the server counts at most ``connections`` (closed ones are let go of
    asynchronously)."""
    deadline = time.monotonic() + 10
    while server.broker.stats.connections_open > connections:
        assert time.monotonic() < deadline, "connections not released"
        time.sleep(0.05)


def config(data: Path, **extra: str) -> ServerConfig:
    return ServerConfig([data], port=0, extra=extra, **SMALL)


def test_per_ip_limit_and_overrides_apply_to_the_next_connection_and_survive_a_restart(
    tmp_path,
):
    data = tmp_path / "data"
    with BackgroundServer(config(data)) as s:
        node, port = str(s.broker.node_id), s.broker.port
        entries = describe(s.bootstrap, node)
        per_ip = entries["max.connections.per.ip"]
        assert (per_ip.value, per_ip.source, per_ip.is_read_only) == (
            "1000",
            STATIC_BROKER_CONFIG,
            False,
        )
        # (librdkafka keeps one synonym a name: the last, Kafka's default)
        assert [(x.value, x.source) for x in per_ip.synonyms.values()] == [
            ("2147483647", DEFAULT_CONFIG)
        ]
        alter(s.bootstrap, node, **{"max.connections.per.ip": "2"})
        settle(s)
        held = hold(port, 2)
        try:
            assert not accepted(port)  # the third from 127.0.0.1
        finally:
            for sock in held:
                sock.close()
        settle(s)
        alter(s.bootstrap, node, **{"max.connections.per.ip.overrides": "127.0.0.1:4"})
        settle(s)
        held = hold(port, 3)
        try:
            assert accepted(port)  # the fourth: the override
        finally:
            for sock in held:
                sock.close()
        entry = describe(s.bootstrap, node)["max.connections.per.ip"]
        assert (entry.value, entry.source) == ("2", DYNAMIC_BROKER_CONFIG)
    with BackgroundServer(config(data)) as s:  # kept in the data directory
        node, port = str(s.broker.node_id), s.broker.port
        assert s.broker.connection_quotas.max_connections_per_ip == 2
        assert s.broker.connection_quotas.per_ip_limit("127.0.0.1") == 4
        alter(s.bootstrap, node, **{"max.connections.per.ip": None,
                                    "max.connections.per.ip.overrides": None})  # fmt: skip
        assert s.broker.connection_quotas.per_ip_limit("127.0.0.1") == 1000


def test_max_connections_and_creation_rate_while_serving(tmp_path):
    with BackgroundServer(config(tmp_path / "data")) as s:
        node, port = str(s.broker.node_id), s.broker.port
        alter(s.bootstrap, node, **{"max.connections": "2"})
        settle(s)
        held = hold(port, 2)
        try:
            assert not accepted(port)
        finally:
            for sock in held:
                sock.close()
        settle(s)
        alter(s.bootstrap, node, **{"max.connections": None,
                                    "max.connection.creation.rate": "0"})  # fmt: skip
        settle(s)
        assert not accepted(port)  # a rate of 0 lets no new connection in
        # Operators can still undo it through a connection made before: here, none is left,
        # so the setting is changed the way a restart would pick it up.
        s.broker.dynamic_configs.replace(node, {})
    with BackgroundServer(config(tmp_path / "data")) as s:
        assert accepted(s.broker.port)


def test_bad_values_are_refused_with_kafkas_rule(tmp_path):
    with BackgroundServer(config(tmp_path / "data")) as s:
        node = str(s.broker.node_id)
        with pytest.raises(ck.KafkaException, match="can be set to zero only if"):
            alter(s.bootstrap, node, **{"max.connections.per.ip": "0"})
        with pytest.raises(ck.KafkaException, match="invalid addresses"):
            alter(
                s.bootstrap, node, **{"max.connections.per.ip.overrides": "no.such.host.invalid:3"}
            )
        with pytest.raises(ck.KafkaException, match=r"max\.connections"):
            alter(s.bootstrap, node, **{"max.connections": "-1"})
        assert s.broker.connection_quotas == ConnectionQuotas()  # nothing applied
        overrides = "[::1]:5,127.0.0.1:7"
        alter(s.bootstrap, node, **{"max.connections.per.ip": "0",
                                    "max.connections.per.ip.overrides": overrides})  # fmt: skip
        quotas = s.broker.connection_quotas
        assert (quotas.per_ip_limit("::1"), quotas.per_ip_limit("127.0.0.1")) == (5, 7)
        assert quotas.per_ip_limit("10.1.2.3") == 0
    with pytest.raises(KafkalogError, match=r"max\.connections\.per\.ip can be set to zero"):
        ConnectionQuotas.from_config(config(tmp_path, **{"max.connections.per.ip": "0"}))


def test_creation_rate_is_a_bucket_of_one_seconds_worth():
    now = [100.0]
    rate = CreationRate(clock=lambda: now[0])
    assert [rate.delay(2) for _ in range(3)] == [0.0, 0.0, 0.5]
    now[0] += 1.5  # 3 tokens' worth refilled, at most 2 kept: -1 + 3 = 2
    assert [rate.delay(2) for _ in range(2)] == [0.0, 0.0]
    assert rate.delay(2) == 0.5
    assert rate.delay(2**31 - 1) == 0.0 and rate.delay(0) is None
