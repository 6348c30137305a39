"""A new Kafka node boots from a data directory kafkalog wrote: the offline bulk load.

``kafkalog produce`` writes topics into an empty directory (every codec, several segments and
partitions, an empty partition, an idempotent producer, committed and aborted transactions, a
topic config), ``kafkalog make-bootable`` adds meta.properties, the bootstrap records (topics and
partitions with the ids of their partition.metadata) and the high watermarks, and a fresh
single-node KRaft broker is started on it WITHOUT ``kafka-storage format`` (a static
``controller.quorum.voters``, node.id and the directory only). Then:

- Kafka's Java consumer reads exactly the records fed to kafkalog, at read_uncommitted and
  read_committed (offsets, timestamps, keys, values, headers);
- the broker's log shows every partition loaded at the log end offset we wrote, with no stray
  partition, no truncation, no recovery, no WARN or ERROR about our partitions;
- Kafka's producers (plain and idempotent) append after our offsets, and the idempotent one gets a
  producer id above every id kafkalog's producers used;
- the broker restarts on its own metadata log (the bootstrap is only read once) and serves
  everything again;
- ``make-bootable --release-version 4.4`` (the bootstrap snapshot Kafka 4.4's format writes)
  boots too, and the feature records of every release are the bytes ``kafka-storage format
  --release-version`` writes.

Expected records come from the input fed to kafkalog (test_kafka_reads_ours.expected_logs), never
from kafkalog reading its own output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_kafka_reads_ours import (
    CODECS,
    DAY,
    T0,
    Entry,
    Run,
    expected_logs,
    kafkalog_produce,
    make_records,
)

pytestmark = pytest.mark.slow

CONFTEST = Path(__file__).with_name("conftest.py")


def _conftest():
    """The conftest module pytest loaded for this directory (its classes, not a second copy)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(CONFTEST):
            return module
    raise AssertionError(f"{CONFTEST} is not loaded")


def _kafkalog(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("kafkalog")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]
    proc = subprocess.run([*cmd, *args], capture_output=True, encoding="utf-8", check=False)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def _release_for(dist) -> str:
    major = int(dist.version.split(".")[0])
    return "4.0" if major >= 4 else "3.9"


def _new_node(dist, workdir: Path, data_dir: Path, node_id: int, **configs: str):
    """A KafkaBroker that starts kafka.Kafka on ``data_dir`` as it is: no kafka-storage format,
    a static quorum of this one node (no voter records needed in the files)."""
    base = _conftest().KafkaBroker

    class NewNode(base):
        def start(self, timeout: float = 120):
            self.write_config(node_id=node_id, static_quorum=True)  # no kafka-storage format
            return self._launch(timeout)

        @property
        def data_dir(self) -> Path:
            return data_dir

    return NewNode(dist, workdir, configs=dict(configs))


def _rows(records: list[dict]) -> list[tuple]:
    import base64

    unb64 = lambda t: None if t is None else base64.b64decode(t)  # noqa: E731
    return [
        (
            r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"],
            unb64(r["key"]), unb64(r["value"]), tuple((k, unb64(v)) for k, v in r["headers"]),
        )
        for r in records
    ]  # fmt: skip


def _want(logs: dict[tuple[str, int], list[Entry]], committed: bool) -> list[tuple]:
    return [
        (topic, p, e.offset, e.timestamp, "CreateTime", e.key, e.value, e.headers)
        for (topic, p), entries in sorted(logs.items())
        for e in entries
        if not e.marker and not (committed and e.aborted)
    ]


def _compare(got: list[tuple], want: list[tuple]) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"record {i}:\n  Kafka's consumer {g!r}\n  fed to kafkalog  {w!r}"
    assert len(got) == len(want), f"Kafka's consumer read {len(got)} records, we wrote {len(want)}"


def _kafka_lines(topic: str, records) -> list[dict]:
    import base64

    b64 = lambda d: None if d is None else base64.b64encode(d).decode()  # noqa: E731
    return [
        {
            "topic": topic, "partition": r.partition, "timestamp": r.timestamp,
            "key": b64(r.key), "value": b64(r.value),
            "headers": [[k, b64(v)] for k, v in r.headers],
        }
        for r in records
    ]  # fmt: skip


def _log_since(path: Path, start: int) -> list[str]:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", "replace").splitlines()


@dataclass
class Booted:
    dist: object
    data_dir: Path
    broker_log: Path
    made: dict  # make-bootable --json
    made_stdout: str
    runs: list[Run]
    expected: dict[tuple[str, int], list[Entry]]
    partitions: dict[str, int]
    first_log: list[str]
    read_uncommitted: list[dict]
    read_committed: list[dict]
    after: list[Run]
    after_acks: list[dict]
    idempotent_acks: list[dict]
    final: dict[tuple[str, int], list[Entry]]
    restart_log: list[str]
    restart_read_committed: list[dict]


NODE_ID = 3  # not kafkalog's default 0 nor the tests' usual 1: make-bootable must set it


@pytest.fixture(scope="module")
def booted(kafka_dist, tmp_path_factory) -> Booted:
    workdir = tmp_path_factory.mktemp("kafka-boots-ours")
    data_dir = workdir / "data"
    small = ("--config", "internal.segment.bytes=1500", "--config", "index.interval.bytes=256")
    runs: list[Run] = []
    for seed, codec in enumerate(CODECS):
        ts = T0 + seed * DAY
        runs.append(
            Run(f"codec-{codec}", make_records(120, 2, 100 + seed, ts), ts,
                ("--partitions", "2", "--batch-size", "1024", *small), codec=codec,
                header=("codec", codec.encode()))
        )  # fmt: skip
    # Three partitions, the last one left empty.
    runs.append(Run("sparse", make_records(30, 2, 110, T0), T0, ("--partitions", "3"), "lz4"))
    # An idempotent producer over two runs, then transactions (recent timestamps: producer state
    # expires a day after a producer's last batch, in Kafka as in kafkalog).
    now = (time.time_ns() // 1_000_000 // 1000) * 1000 - 3_600_000
    idem = ("--producer-id", "1000", "--partitions", "2", "--batch-size", "2048", *small)
    runs.append(Run("idem", make_records(50, 2, 120, now), now, idem, "snappy", producer_id=1000))
    runs.append(Run("idem", make_records(30, 2, 121, now), now, idem, "zstd", producer_id=1000))
    txn = ("--producer-id", "2000", "--partitions", "2", "--batch-size", "2048")
    for seed, (codec, end) in enumerate((("zstd", "commit"), ("gzip", "abort"), ("lz4", "commit"))):
        runs.append(
            Run("txn", make_records(20, 2, 130 + seed, now), now, (*txn, "--transaction", end),
                codec, producer_id=2000, marker=end.upper())
        )  # fmt: skip
    for run in runs:
        kafkalog_produce(data_dir, run)
    expected = expected_logs(runs)
    partitions = {"sparse": 3}
    for topic, p in expected:
        partitions[topic] = max(partitions.get(topic, 0), p + 1)

    release = _release_for(kafka_dist)
    proc = _kafkalog(
        "make-bootable", str(data_dir), "--node-id", str(NODE_ID), "--release-version", release,
        "--json",
    )  # fmt: skip
    made = json.loads(proc.stdout)
    made_stdout = _kafkalog("make-bootable", str(data_dir), "--release-version", release).stdout

    broker = _new_node(kafka_dist, workdir / "broker", data_dir, NODE_ID)
    dist = kafka_dist
    topics = sorted(partitions)
    try:
        broker.start()
        for topic in topics:
            _wait_for_leaders(broker, topic, partitions[topic], NODE_ID)
        first_log = _log_since(broker.log_file, 0)
        read_uncommitted = dist.consume(broker.bootstrap, topics)
        read_committed = dist.consume(broker.bootstrap, topics, "read_committed")
        ts = T0 + 60 * DAY
        after = [
            Run("codec-gzip", _explicit(make_records(6, 2, 140, ts), ts), ts, via="kafka"),
            Run("sparse", _explicit(make_records(6, 3, 141, ts), ts), ts, via="kafka"),
        ]
        lines = [line for run in after for line in _kafka_lines(run.topic, run.records)]
        after_acks = dist.produce(
            broker.bootstrap, lines, configs={"enable.idempotence": "false", "acks": "1"}
        )
        idem_after = Run("idem", _explicit(make_records(4, 2, 142, now), now), now, via="kafka")
        idempotent_acks = dist.produce(
            broker.bootstrap, _kafka_lines("idem", idem_after.records),
            configs={"enable.idempotence": "true", "acks": "all"},
        )  # fmt: skip
        after.append(idem_after)
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    restart_from = broker.log_file.stat().st_size
    try:
        broker.restart()
        for topic in topics:
            _wait_for_leaders(broker, topic, partitions[topic], NODE_ID)
        restart_read_committed = dist.consume(broker.bootstrap, topics, "read_committed")
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    return Booted(
        dist, data_dir, broker.log_file, made, made_stdout, runs, expected, partitions, first_log,
        read_uncommitted, read_committed, after, after_acks, idempotent_acks,
        expected_logs(runs + after), _log_since(broker.log_file, restart_from),
        restart_read_committed,
    )  # fmt: skip


def _explicit(records, ts: int):
    from test_kafka_reads_ours import Rec

    return [
        Rec(r.partition, ts + i if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


def _wait_for_leaders(broker, name: str, partitions: int, node_id: int) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    deadline = time.monotonic() + 60
    md = None
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if md and md.error is None and len(md.partitions) == partitions:
            if all(p.leader == node_id for p in md.partitions.values()):
                return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} has no leaders after 60 s ({md}):\n{broker.log_tail()}")


# --- the proofs ---------------------------------------------------------------------------------


def test_make_bootable_wrote_every_topic_and_partition(booted):
    made = booted.made
    assert made["nodeId"] == NODE_ID
    assert {t: v["partitions"] for t, v in made["topics"].items()} == booted.partitions
    assert made["createdPartitions"] == []  # `produce --partitions 3` made sparse-2 already
    # The second run (no --node-id) kept what the first one wrote.
    assert f"node.id={NODE_ID} cluster.id={made['clusterId']}" in booted.made_stdout


def test_kafka_consumer_reads_what_kafkalog_wrote(booted):
    """Kafka's Java consumer reads every record fed to kafkalog, at both isolation levels."""
    _compare(_rows(booted.read_uncommitted), _want(booted.expected, False))
    _compare(_rows(booted.read_committed), _want(booted.expected, True))


# What the broker logs when it does not take a log as it is.
BAD = re.compile(r"\] (WARN|ERROR) |[Tt]runcat|Recovering|[Cc]orrupt|[Ii]nvalid|unflushed|[Ss]tray")


def test_broker_loads_our_partitions_as_written(booted):
    """Every partition loaded once at the log end offset we wrote, without recovery (kafkalog's
    clean-shutdown marker), truncation, stray renaming, or a WARN/ERROR naming it."""
    lines = booted.first_log
    text = "\n".join(lines)
    assert "since clean shutdown file was found" in text, text[-3000:]
    assert not [ln for ln in lines if re.search(r"[Ss]tray", ln)], "stray partitions"
    assert not list(booted.data_dir.glob("*-stray")) and not list(booted.data_dir.glob("*-delete"))
    for topic, count in sorted(booted.partitions.items()):
        for p in range(count):
            name = f"{topic}-{p}"
            leo = len(booted.expected.get((topic, p), []))
            loaded = [
                ln for ln in lines if "Completed load of Log(dir=" in ln and f"/{name}," in ln
            ]
            assert len(loaded) == 1, (name, loaded)
            assert f"logEndOffset={leo})" in loaded[0], (name, leo, loaded[0])
            about = [ln for ln in lines if re.search(rf"\b{re.escape(name)}\b", ln)]
            bad = [ln for ln in about if BAD.search(ln)]
            assert not bad, "\n".join(bad)


def test_controller_took_our_bootstrap_records(booted):
    """The controller appended the bootstrap records (topics included) at its first activation."""
    text = "\n".join(booted.first_log)
    m = re.search(r"The metadata log appears to be empty\. Appending (\d+) bootstrap record", text)
    assert m, text[-3000:]
    n_partitions = sum(booted.partitions.values())
    assert int(m.group(1)) >= len(booted.partitions) + n_partitions


def test_kafka_appends_after_our_offsets(booted):
    """Kafka's producers go on after our last offset (markers counted), and its idempotent
    producer's id is above every producer id kafkalog's producers used."""
    n = {tp: len(es) for tp, es in booted.expected.items()}
    got = sorted(
        (a["topic"], a["partition"], a["offset"])
        for a in booted.after_acks + booted.idempotent_acks
    )
    want = sorted(
        (t, p, e.offset)
        for (t, p), es in booted.final.items()
        for e in es
        if e.offset >= n.get((t, p), 0)
    )
    assert got == want
    assert booted.made["nextProducerId"] == 2001  # above the transactional producer 2000


def test_broker_restarts_on_its_own_metadata_log(booted):
    """A second start replays the metadata log (not the bootstrap) and serves everything, Kafka's
    appends included, read_committed."""
    text = "\n".join(booted.restart_log)
    assert "The metadata log appears to be empty" not in text
    _compare(_rows(booted.restart_read_committed), _want(booted.final, True))
    assert not [ln for ln in booted.restart_log if re.search(r"[Ss]tray|[Tt]runcat", ln)]


def test_idempotent_producer_id_from_the_controller_is_above_ours(booted, tmp_path):
    """The controller hands out producer ids from nextProducerId: Kafka's idempotent producer
    wrote with an id >= 2001 (read from its batches with kafka-dump-log)."""
    segments = sorted((booted.data_dir / "idem-0").glob("*.log"))
    out = booted.dist.dump_log_segments("--files", ",".join(str(s) for s in segments)).stdout
    pids = {int(m) for m in re.findall(r"producerId: (-?\d+)", out)}
    assert 1000 in pids and max(pids) >= 2001, pids


# --- the bootstrap snapshot layout, and the bytes kafka-storage format writes -------------------


def test_kafka_44_boots_from_the_bootstrap_snapshot(kafka_dist, tmp_path):
    """``--release-version 4.4`` writes the bootstrap into
    __cluster_metadata-0/00000000000000000000-0000000000.checkpoint, as Kafka 4.4's format does."""
    if tuple(int(x) for x in kafka_dist.version.split(".")[:2]) < (4, 4):
        pytest.skip(f"Kafka {kafka_dist.version} does not read a bootstrap snapshot")
    data_dir = tmp_path / "data"
    ts = T0
    run = Run("snap", make_records(40, 2, 150, ts), ts, ("--partitions", "2"), "zstd")
    kafkalog_produce(data_dir, run)
    _kafkalog("make-bootable", str(data_dir), "--node-id", "1", "--release-version", "4.4")
    assert (
        data_dir / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    ).exists()
    assert not (data_dir / "bootstrap.checkpoint").exists()
    broker = _new_node(kafka_dist, tmp_path / "broker", data_dir, 1)
    try:
        broker.start()
        _wait_for_leaders(broker, "snap", 2, 1)
        got = kafka_dist.consume(broker.bootstrap, ["snap"])
        text = broker.log_file.read_text(errors="replace")
    finally:
        broker.stop()
    _compare(_rows(got), _want(expected_logs([run]), False))
    assert "metadata.version 4.4-IV2" in text, text[-3000:]
    assert "Found stray" not in text


def test_feature_records_are_what_kafka_storage_format_writes(kafka_dist, tmp_path):
    """For each release, the FeatureLevelRecords make-bootable writes are byte for byte the ones
    ``kafka-storage format --release-version`` writes (its bootstrap file, decoded here)."""
    from kafkalog.format.internal import decode_metadata_record
    from kafkalog.log.datadir.bootable import RELEASES, bootstrap_records
    from kafkalog.log.segment.file_records import FileRecords

    major_minor = tuple(int(x) for x in kafka_dist.version.split(".")[:2])
    checked = 0
    for name, release in RELEASES.items():
        if tuple(int(x) for x in name.split(".")) > major_minor:
            continue
        work = tmp_path / name
        (work / "data").mkdir(parents=True)
        props = work / "server.properties"
        props.write_text(
            "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
            "controller.quorum.voters=1@127.0.0.1:9093\n"
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
            f"log.dirs={work / 'data'}\n"
        )
        kafka_dist.run(
            "kafka.tools.StorageTool", "format", "--config", str(props), "--cluster-id",
            "AAAAAAAAAAAAAAAAAAAAAA", "--release-version", name,
        )  # fmt: skip
        files = [work / "data" / "bootstrap.checkpoint"]
        files += [
            work / "data" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
        ]
        kafkas = []
        for f in (f for f in files if f.exists()):
            with FileRecords(str(f)) as records:
                for batch in records.batches():
                    if not batch.is_control:
                        kafkas += [bytes(r.value) for r in batch.records()]
        ours = bootstrap_records(release, [], node_id=1, directory_id=__import__("uuid").uuid4())
        assert kafkas == ours, (name, [decode_metadata_record(v).data for v in kafkas])
        checked += 1
    assert checked >= 1


def test_kafka_wrote_our_bootstrap_records_byte_for_byte(booted):
    """The controller read our bootstrap records into Java objects and wrote them to its metadata
    log: the same bytes, record for record, inside its "Bootstrap records" transaction."""
    from kafkalog.format.internal import decode_metadata_record
    from kafkalog.log.segment.file_records import FileRecords

    def values(path: Path) -> list[bytes]:
        with FileRecords(str(path)) as records:
            return [
                bytes(r.value) for b in records.batches() if not b.is_control for r in b.records()
            ]

    ours = values(Path(booted.made["bootstrapFile"]))
    segment = booted.data_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    kafkas = values(segment)
    kinds = [decode_metadata_record(v).kind for v in kafkas]
    begin = kinds.index("BeginTransaction")
    assert decode_metadata_record(kafkas[begin]).data["name"] == "Bootstrap records"
    end = kinds.index("EndTransaction", begin)
    appended = kafkas[begin + 1 : end]
    # Kafka 4.1+ adds the cluster's min.insync.replicas after them when ELR is enabled.
    assert appended[: len(ours)] == ours, [decode_metadata_record(v).data for v in appended]
    assert all(decode_metadata_record(v).kind == "Config" for v in appended[len(ours) :])
