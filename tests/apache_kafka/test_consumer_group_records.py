"""Consumer groups of KIP-848 in ``__consumer_offsets``: `kafkalog serve` writes the records a Kafka
4.x broker writes (ConsumerGroupMetadata, MemberMetadata, TargetAssignmentMetadata,
TargetAssignmentMember, CurrentMemberAssignment, and their tombstones), in the same bytes, and a
Java consumer of the consumer group protocol carries on across a crash of the server.

- Kafka's own records (a real broker, two kafka-verifiable-consumers joining, rebalancing with
  revocation, leaving) are encoded again from their decoded content by the server's encoders:
  byte for byte the same, and replayed they give the group Kafka describes.
- The same sequence (one consumer joins, consumes, leaves) against Kafka and against serve:
  Kafka's kafka-dump-log --offsets-decoder prints the same records for both, ids and times
  normalized; for two consumers it decodes every record serve wrote, with Kafka's fields.
- A verifiable consumer in the consumer protocol keeps its member id, epoch and partitions when
  serve is killed (SIGKILL) and started again on its data directory: no revocation, the group's
  epoch unchanged, kafka-consumer-groups --describe --state Stable, then Empty once it leaves.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.server.server_process import ServerProcess

from kafkalog.format import iter_batches
from kafkalog.format.internal import decode_consumer_offsets_key, decode_consumer_offsets_value
from kafkalog.server.groups.consumer_records import group_records, snapshot
from kafkalog.server.groups.consumer_replay import ConsumerGroupReplay

pytestmark = pytest.mark.slow

TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
GROUP_TYPES = {"3", "4", "5", "6", "7", "8"}
RECORDS = 30


class Consumer:
    """A kafka-verifiable-consumer with ``--group-protocol consumer``, its events in a file."""

    def __init__(self, dist, bootstrap: str, topic: str, group: str, out: Path) -> None:
        self.out = out
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
                "--group-protocol", "consumer", "--reset-policy", "earliest"]  # fmt: skip
        with out.open("w") as f:
            self.proc = subprocess.Popen(
                dist.command(VERIFIABLE_CONSUMER, *args), stdout=f, stderr=subprocess.DEVNULL
            )

    def events(self) -> list[dict]:
        lines = self.out.read_text().splitlines()
        return [json.loads(x) for x in lines if x.startswith("{") and x.endswith("}")]

    def assigned(self) -> set[str]:
        owned: set[str] = set()
        for e in self.events():
            parts = {f"{p['topic']}-{p['partition']}" for p in e.get("partitions") or []}
            if e["name"] == "partitions_assigned":
                owned |= parts
            elif e["name"] == "partitions_revoked":
                owned -= parts
        return owned

    def committed(self) -> int:
        done: dict[str, int] = {}
        for e in self.events():
            if e["name"] == "offsets_committed" and e["success"]:
                for p in e["offsets"]:
                    done[f"{p['topic']}-{p['partition']}"] = p["offset"]
        return sum(done.values())

    def stop(self) -> None:
        """SIGTERM: the consumer closes, leaving the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout} s")


def prepare(dist, bootstrap: str, topic: str) -> None:
    proc = dist.run(TOPICS, "--bootstrap-server", bootstrap, "--create", "--topic", topic,
                    "--partitions", "3")  # fmt: skip
    assert "Created topic" in proc.stdout, proc.stdout
    lines = [{"topic": topic, "partition": i % 3, "key": None, "value": "YQ=="}
             for i in range(RECORDS)]  # fmt: skip
    dist.produce(bootstrap, lines)


def one_consumer(dist, bootstrap: str, topic: str, group: str, workdir: Path) -> None:
    """One consumer joins, reads everything, commits, and leaves."""
    c = Consumer(dist, bootstrap, topic, group, workdir / f"{group}.out")
    try:
        wait_for(lambda: c.committed() == RECORDS, f"commit of {RECORDS} records by {group}")
    finally:
        c.stop()


def two_consumers(dist, bootstrap: str, topic: str, group: str, workdir: Path) -> None:
    """A second consumer joins (the first revokes a partition for it), then both leave."""
    first = Consumer(dist, bootstrap, topic, group, workdir / f"{group}-1.out")
    second = None
    try:
        wait_for(lambda: len(first.assigned()) == 3, "assignment of 3 partitions")
        second = Consumer(dist, bootstrap, topic, group, workdir / f"{group}-2.out")
        wait_for(lambda: len(first.assigned()) == 2 and len(second.assigned()) == 1,
                 "rebalance to 2 + 1")  # fmt: skip
    finally:
        for c in (second, first):
            if c is not None:
                c.stop()


def dumped(dist, data_dir: Path, group: str) -> list[tuple[dict, str]]:
    """kafka-dump-log --offsets-decoder over every ``__consumer_offsets`` segment: the group's
    records of the consumer group types, as (key, payload text), in log order."""
    out = []
    for segment in sorted(data_dir.glob("__consumer_offsets-*/*.log")):
        proc = dist.dump_log_segments("--files", str(segment), "--print-data-log",
                                      "--offsets-decoder")  # fmt: skip
        assert "Error" not in proc.stdout and "Exception" not in proc.stderr, proc.stdout
        for line in proc.stdout.splitlines():
            if " key: " not in line:
                continue
            key_text, payload = line.split(" key: ", 1)[1].split(" payload: ", 1)
            key = json.loads(key_text)
            if key["type"] in GROUP_TYPES and key["data"].get("groupId") == group:
                out.append((key, payload))
    return out


_ID = re.compile(r'"(memberId|topicId)":"([A-Za-z0-9_-]{22})"')


def normalized(records: list[tuple[dict, str]]) -> list[str]:
    """Member and topic ids by order of appearance, times and hashes as placeholders."""
    names: dict[str, str] = {}

    def name(m: re.Match) -> str:
        label = names.setdefault(m.group(2), f"{m.group(1)[0].upper()}{len(names)}")
        return f'"{m.group(1)}":"{label}"'

    out = []
    for key, payload in records:
        text = _ID.sub(name, json.dumps(key, separators=(",", ":")) + " " + payload)
        text = re.sub(r'"assignmentTimestamp":\d+', '"assignmentTimestamp":TS', text)
        text = re.sub(r'"metadataHash":-?\d+', '"metadataHash":HASH', text)
        out.append(text)
    return out


@pytest.fixture(scope="module")
def kafka_side(kafka_dist, kafka_broker, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kip848-kafka")
    run = workdir.name[-6:].replace("_", "")
    topic, g1, g2 = f"kip848-records-{run}", f"single-{run}", f"pair-{run}"
    prepare(kafka_dist, kafka_broker.bootstrap, topic)
    one_consumer(kafka_dist, kafka_broker.bootstrap, topic, g1, workdir)
    two_consumers(kafka_dist, kafka_broker.bootstrap, topic, g2, workdir)
    return kafka_broker, topic, g1, g2


@pytest.fixture(scope="module")
def serve_side(kafka_dist, kafka_side, tmp_path_factory):
    _, topic, g1, g2 = kafka_side
    workdir = tmp_path_factory.mktemp("kip848-serve")
    server = ServerProcess(workdir / "data", "--node-id", "1", "--no-auto-create-topics").start()
    try:
        prepare(kafka_dist, server.bootstrap, topic)
        one_consumer(kafka_dist, server.bootstrap, topic, g1, workdir)
        two_consumers(kafka_dist, server.bootstrap, topic, g2, workdir)
    finally:
        assert server.stop() == 0, server.log()
    return workdir / "data"


def _batches(data_dir: Path, group: str):
    """The group's consumer group records, one list of (decoded key, key, value) per batch."""
    for segment in sorted(data_dir.glob("__consumer_offsets-*/*.log")):
        for batch in iter_batches(segment.read_bytes()):
            records = []
            for record in batch.records():
                key = decode_consumer_offsets_key(bytes(record.key))
                if key.api_key in range(3, 9) and key.data["groupId"] == group:
                    value = None if record.value is None else bytes(record.value)
                    records.append((key, bytes(record.key), value))
            if records:
                yield records


def test_kafka_records_encode_again_byte_for_byte(kafka_side):
    """Replaying Kafka's records of a two-consumer group batch by batch, the records the
    server writes for the change each batch makes are Kafka's, byte for byte, tombstones
    included (per key, the last of the batch: Kafka may write two operations in one batch)."""
    broker, _, _, g2 = kafka_side
    replay = ConsumerGroupReplay()
    previous = None
    compared = 0
    for batch in _batches(broker.data_dir, g2):
        for key, _, value in batch:
            replay.apply(key.kind, key.data, decode_consumer_offsets_value(key, value).data)
        group = replay.groups(0).get(g2)
        kafka = {raw: value for _, raw, value in batch}
        ours = dict(group_records(g2, previous, group))
        assert ours == kafka, f"Kafka wrote {kafka}\nthe server would write {ours}"
        compared += len(kafka)
        previous = snapshot(group)
    assert compared >= 10, compared


def test_kafka_group_replayed_as_kafka_describes_it(kafka_dist, kafka_side):
    broker, _, _, g2 = kafka_side
    replay = ConsumerGroupReplay()
    for batch in _batches(broker.data_dir, g2):
        for key, _, value in batch:
            replay.apply(key.kind, key.data, decode_consumer_offsets_value(key, value).data)
    group = replay.groups(0)[g2]
    proc = kafka_dist.run(GROUPS, "--bootstrap-server", broker.bootstrap, "--group", g2,
                          "--describe", "--state", "--verbose")  # fmt: skip
    row = next(x.split() for x in proc.stdout.splitlines() if x.startswith(g2))
    # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
    assert row[4:] == [group.state.value, str(group.group_epoch), str(group.assignment_epoch),
                       str(len(group.members))], proc.stdout  # fmt: skip


def test_serve_writes_what_kafka_writes(kafka_dist, kafka_side, serve_side):
    """One consumer joins, reads, commits and leaves: the group's records as Kafka's
    kafka-dump-log decodes them are the same on both sides."""
    broker, _, g1, _ = kafka_side
    kafka = normalized(dumped(kafka_dist, broker.data_dir, g1))
    serve = normalized(dumped(kafka_dist, serve_side, g1))
    assert len(kafka) >= 10, kafka
    assert serve == kafka


def test_kafka_decodes_every_record_serve_wrote(kafka_dist, kafka_side, serve_side):
    """Two consumers with a revocation: every record serve wrote decodes with Kafka's tool and
    shows the fields Kafka's records of the same type show."""
    broker, _, _, g2 = kafka_side

    def fields(records) -> dict[str, set]:
        out: dict[str, set] = {}
        for key, payload in records:
            shown = "DELETE" if payload == "<DELETE>" else tuple(json.loads(payload)["data"])
            out.setdefault(key["type"], set()).add(shown)
        return out

    serve = dumped(kafka_dist, serve_side, g2)
    kafka = dumped(kafka_dist, broker.data_dir, g2)
    assert {"3", "5", "6", "7", "8"} <= {k["type"] for k, _ in serve}, serve
    assert fields(serve) == fields(kafka)


def test_java_consumer_carries_on_across_a_crash(kafka_dist, tmp_path):
    topic, group = "restarted", "survivor"
    data = tmp_path / "data"
    args = ("--node-id", "1", "--no-auto-create-topics")
    server = ServerProcess(data, *args).start()
    consumer = None
    try:
        prepare(kafka_dist, server.bootstrap, topic)
        consumer = Consumer(kafka_dist, server.bootstrap, topic, group, tmp_path / "c.out")
        described, state, events_before = settled(kafka_dist, server.bootstrap, consumer, group)
        server.kill()
        server = ServerProcess(data, *args, port=server.port).start()
        # Heartbeats go on (every 5 s) and records keep coming: the member is still the same.
        kafka_dist.produce(server.bootstrap, [{"topic": topic, "partition": p, "key": None,
                                               "value": "Yg=="} for p in range(3)])  # fmt: skip
        wait_for(lambda: consumer.committed() == RECORDS + 3, "commits after the restart")
        time.sleep(6)  # at least one more heartbeat after the restart
        after = consumer.events()[events_before:]
        kinds = {e["name"] for e in after}
        assert not kinds & {"partitions_revoked", "partitions_assigned"}, after
        assert describe_members(kafka_dist, server.bootstrap, group) == described
        assert describe_state(kafka_dist, server.bootstrap, group) == state
        consumer.stop()
        assert describe_state(kafka_dist, server.bootstrap, group)[0] == "Empty"
    finally:
        if consumer is not None:
            consumer.stop()
        server.stop()


def settled(
    dist, bootstrap: str, consumer: Consumer, group: str
) -> tuple[list[list[str]], list[str], int]:
    """Once ``consumer`` committed every record and its group is Stable: the group's members and
    state as described, and how many events the consumer had printed by then."""
    wait_for(lambda: consumer.committed() == RECORDS, "the first commits")
    members = describe_members(dist, bootstrap, group)
    state = describe_state(dist, bootstrap, group)
    assert state[0] == "Stable", state
    return members, state, len(consumer.events())


def describe_members(dist, bootstrap: str, group: str) -> list[list[str]]:
    """kafka-consumer-groups --describe --members --verbose: member id, epoch, assignment."""
    proc = dist.run(GROUPS, "--bootstrap-server", bootstrap, "--group", group, "--describe",
                    "--members", "--verbose")  # fmt: skip
    return sorted(x.split() for x in proc.stdout.splitlines() if x.startswith(group))


def describe_state(dist, bootstrap: str, group: str) -> list[str]:
    """kafka-consumer-groups --describe --state: state, group epoch, target epoch, members."""
    proc = dist.run(GROUPS, "--bootstrap-server", bootstrap, "--group", group, "--describe",
                    "--state", "--verbose")  # fmt: skip
    row = next(x.split() for x in proc.stdout.splitlines() if x.startswith(group))
    return row[4:]


def test_kafkalog_dump_prints_what_kafka_dump_log_prints(kafka_dist, serve_side):
    """`kafkalog dump --offsets-decoder` of the segments serve wrote is kafka-dump-log's text."""
    segments = sorted(serve_side.glob("__consumer_offsets-*/*.log"))
    assert segments
    for segment in segments:
        kafka = kafka_dist.dump_log_segments("--files", str(segment), "--print-data-log",
                                             "--offsets-decoder").stdout  # fmt: skip
        ours = subprocess.run(
            [sys.executable, "-m", "kafkalog.cli.main", "dump", "--offsets-decoder",
             "--print-data-log", str(segment)],
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout  # fmt: skip
        assert '"type":"8"' in kafka
        assert ours == kafka


def _kafka_node_at(dist, workdir: Path, data_dir: Path, port: int, **configs: str):
    """A Kafka broker (node 1, static quorum, no kafka-storage format) started on ``data_dir``
    as it is, listening on ``port``: the address serve had, so that its clients reconnect."""
    path = str(Path(__file__).with_name("conftest.py"))  # the module pytest loaded, not a copy
    conftest = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path)

    class Node(conftest.KafkaBroker):
        def start(self, timeout: float = 120):
            config = self.write_config(node_id=1, static_quorum=True)
            text = config.read_text().replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{port}")
            config.write_text(text)
            self.port = port
            return self._launch(timeout)

        @property
        def data_dir(self) -> Path:
            return data_dir

    return Node(dist, workdir, configs=dict(configs)).start()


def test_kafka_takes_over_a_group_serve_ran(kafka_dist, tmp_path):
    """A Java consumer is in a group on serve; serve stops, `kafkalog make-bootable` turns the
    directory into a Kafka node's and Kafka starts on it at serve's address: Kafka loads the
    group from serve's records (same state, epochs, member and assignment) and the consumer
    carries on without a rebalance (the metadata hash serve wrote is the one Kafka computes)."""
    topic, group = "taken-over", "moving"
    data = tmp_path / "data"
    server = ServerProcess(data, "--node-id", "1", "--no-auto-create-topics").start()
    consumer = broker = None
    try:
        prepare(kafka_dist, server.bootstrap, topic)
        consumer = Consumer(kafka_dist, server.bootstrap, topic, group, tmp_path / "c.out")
        members, state, events_before = settled(kafka_dist, server.bootstrap, consumer, group)
        assert server.stop() == 0, server.log()
        made = subprocess.run(
            [sys.executable, "-m", "kafkalog.cli.main", "make-bootable", str(data), "--node-id",
             "1", "--release-version", "4.0"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        broker = _kafka_node_at(kafka_dist, tmp_path / "kafka", data, server.port,
                                **{"offsets.topic.num.partitions": "1"})  # fmt: skip
        assert describe_members(kafka_dist, broker.bootstrap, group) == members
        assert describe_state(kafka_dist, broker.bootstrap, group) == state
        kafka_dist.produce(broker.bootstrap, [{"topic": topic, "partition": p, "key": None,
                                               "value": "Yg=="} for p in range(3)])  # fmt: skip
        wait_for(lambda: consumer.committed() == RECORDS + 3, "commits to Kafka", timeout=120)
        time.sleep(6)  # heartbeats to Kafka
        after = consumer.events()[events_before:]
        assert not {e["name"] for e in after} & {"partitions_revoked", "partitions_assigned"}
        assert describe_members(kafka_dist, broker.bootstrap, group) == members
        assert describe_state(kafka_dist, broker.bootstrap, group) == state
    finally:
        if consumer is not None:
            consumer.stop()
        if broker is not None:
            broker.stop()
        if server.proc.poll() is None:
            server.stop()
