"""`kafkalog serve` as a drop-in Kafka: Kafka's own command-line tools against a real Kafka broker
and against `kafkalog serve`, step by step, their outputs compared.

Each test is one tool family. Its steps run in order against each broker (the two sequences run
side by side, one thread each); every step's output is normalized (the broker's address, topic
ids, producer ids, times, column padding, and the order of lines where Kafka's own order is a hash
map's) and the serve output must equal Kafka's after the documented differences
(docs/kafka-tests.md, "Kafka's tools against `kafkalog serve`") are applied to Kafka's: each
difference is one named function below, so that the test asserts exactly the documented form.

Both sides get the same topic, group and transactional-id names (unique per run: the Kafka broker
is the session's shared one), so names need no normalizing. The server runs as Kafka's fixture
broker does: node id 1, no auto-creation of topics.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.server.server_process import ServerProcess
from tests.server.wire import WireClient

from kafkalog.protocol import ApiKey

pytestmark = pytest.mark.slow

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"

RUN = uuid.uuid4().hex[:8]
BOOT = "{bootstrap}"  # replaced by each broker's address in a step's arguments


def name(kind: str) -> str:
    return f"cli-{kind}-{RUN}"


# --- Running steps against both brokers ---------------------------------------------------------


@dataclass
class Step:
    """One tool run: ``main`` with ``args`` (``{bootstrap}`` and ``{workdir}`` filled in per
    broker), ``input`` on stdin. ``out`` picks what is compared from (exit status, stdout, stderr)
    and ``sort`` sorts its lines (Kafka prints them in a hash map's order)."""

    main: str
    args: tuple[str, ...]
    input: str | None = None
    out: Callable[[int, str, str], str] | None = None
    sort: bool = False
    label: str = ""

    def text(self, code: int, stdout: str, stderr: str) -> str:
        if self.out is not None:
            return self.out(code, stdout, stderr)
        return f"exit {code}\n{stdout}"


def step(main: str, *args: str, **kw) -> Step:
    return Step(main, args, **kw)


@dataclass
class Side:
    name: str
    bootstrap: str
    workdir: Path


_TOPIC_ID = re.compile(r"(TopicId: ?)[A-Za-z0-9_\-]{22}")
_LOG_NOISE = re.compile(
    r"^(\d{4}-\d\d-\d\dT\S+Z .*|\[\d{4}-.*|.*is deprecated.*|.*KIP-848.*|\s+at .*)$"
)


def normalize(side: Side, text: str, sort: bool) -> str:
    text = text.replace(side.bootstrap, "BROKER").replace(str(side.workdir), "WORKDIR")
    text = _TOPIC_ID.sub(r"\1<id>", text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line and not _LOG_NOISE.match(line)]
    if sort:
        lines.sort()
    return "\n".join(lines)


_CDS_LOCK = threading.Lock()
_CDS_CLAIMED: set[str] = set()


def cds_flags(kafka_dist, main: str) -> list[str]:
    """A class-data-sharing archive per tool (JDK 13+ dynamic AppCDS), kept beside Kafka's cache
    (``~/.cache/kafkalog/cds-VERSION/``): a tool's JVM starts in about half the time with it
    (0.6 s instead of 1.4 s). The first run of a tool writes it (a few seconds more); a stale
    archive (another JDK, changed jars) is ignored by the JVM, silently with ``-Xlog:disable``."""
    cache = kafka_dist.home.parent / f"cds-{kafka_dist.version}"
    archive = cache / f"{main}.jsa"
    if archive.is_file():
        return ["-Xlog:disable", f"-XX:SharedArchiveFile={archive}"]
    with _CDS_LOCK:
        if main in _CDS_CLAIMED:
            return []
        _CDS_CLAIMED.add(main)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return ["-Xlog:disable", f"-XX:ArchiveClassesAtExit={archive}"]


def run_tool(kafka_dist, main: str, args: list[str], input: str | None = None):
    cmd = kafka_dist.command(main, *args)
    cmd[1:1] = cds_flags(kafka_dist, main)
    return subprocess.run(
        cmd, input=input, capture_output=True, encoding="utf-8", timeout=120, check=False
    )


def run_steps(kafka_dist, side: Side, steps: list[Step]) -> list[str]:
    out = []
    for s in steps:
        args = [a.format(bootstrap=side.bootstrap, workdir=side.workdir) for a in s.args]
        proc = run_tool(kafka_dist, s.main, args, s.input)
        out.append(normalize(side, s.text(proc.returncode, proc.stdout, proc.stderr), s.sort))
    return out


@dataclass
class Both:
    kafka_dist: object
    kafka: Side
    serve: Side

    def run(self, steps: list[Step]) -> tuple[list[str], list[str]]:
        with ThreadPoolExecutor(2) as pool:
            k = pool.submit(run_steps, self.kafka_dist, self.kafka, steps)
            s = pool.submit(run_steps, self.kafka_dist, self.serve, steps)
            return k.result(), s.result()

    def produce(self, lines: list[dict], **kw) -> None:
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(self.kafka_dist.produce, side.bootstrap, lines, **kw)
                for side in (self.kafka, self.serve)
            ]
            for f in futures:
                f.result()


def compare(
    steps: list[Step],
    kafka_out: list[str],
    serve_out: list[str],
    known: dict[int, Callable[[str], str]] | None = None,
    serve_view: dict[int, Callable[[str], str]] | None = None,
) -> None:
    """Serve's output of every step must be Kafka's, after the step's documented difference
    (``known``: step index -> function of Kafka's normalized output) when it has one;
    ``serve_view`` picks the part of serve's output that is compared, when not all of it is."""
    problems = []
    for i, (s, k, v) in enumerate(zip(steps, kafka_out, serve_out)):
        expected = (known or {}).get(i, lambda t: t)(k)
        v = (serve_view or {}).get(i, lambda t: t)(v)
        if v != expected:
            what = s.label or f"{s.main.rsplit('.', 1)[-1]} {' '.join(s.args)}"
            problems.append(
                f"step {i} ({what}):\n--- Kafka (documented form)\n{expected}\n"
                f"--- kafkalog serve\n{v}\n"
            )
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def both(kafka_dist, kafka_broker, tmp_path_factory) -> Both:
    data = tmp_path_factory.mktemp("serve-vs-kafka")
    # As the fixture's Kafka broker, whose server.properties sets log.retention.ms=-1.
    serve = ServerProcess(data / "data", "--node-id", "1", "--no-auto-create-topics",
                          "--config", "log.retention.ms=-1")  # fmt: skip
    serve.start()
    try:
        yield Both(
            kafka_dist,
            Side("kafka", kafka_broker.bootstrap, tmp_path_factory.mktemp("kafka-side")),
            Side("serve", serve.bootstrap, tmp_path_factory.mktemp("serve-side")),
        )
    finally:
        assert serve.stop() == 0, serve.log()


# --- Output pickers -----------------------------------------------------------------------------


def stdout_and_errors(code: int, stdout: str, stderr: str) -> str:
    """The exit status, stdout and the error lines of stderr (not the stack traces)."""
    errors = [
        line for line in stderr.splitlines() if re.match(r"^(Error|Exception|.*Exception:)", line)
    ]
    return "\n".join([f"exit {code}", stdout, *errors])


def only_lines(pattern: str) -> Callable[[int, str, str], str]:
    """The exit status and the lines of stdout matching ``pattern`` (a shared broker's listings
    hold other tests' topics and groups)."""

    def pick(code: int, stdout: str, stderr: str) -> str:
        return "\n".join(
            [f"exit {code}", *(x for x in stdout.splitlines() if re.search(pattern, x))]
        )

    return pick


# --- Documented differences (docs/kafka-tests.md) -------------------------------------------------


def no_cluster_min_isr(text: str) -> str:
    """1. Kafka's controller (eligible leader replicas on) sets min.insync.replicas=1 as a
    cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), so `kafka-topics --describe`
    lists it among a topic's configs; serve has no dynamic broker configs."""
    return re.sub(r"Configs: min\.insync\.replicas=1,?", "Configs: ", text).replace(
        "Configs: \n", "Configs:\n"
    )


# --- The tests ----------------------------------------------------------------------------------


def test_kafka_topics(both: Both) -> None:
    """kafka-topics: create (partitions, configs; an existing name), describe, alter --partitions,
    list, delete."""
    t, gone = name("topics"), name("topics-gone")
    mine = only_lines(f"{RUN}$")
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "3",
             "--config", "retention.ms=12345", "--config", "max.message.bytes=4096"),
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", gone),
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, out=stdout_and_errors),
        step(TOPICS, "--bootstrap-server", BOOT, "--describe", "--topic", t),
        step(TOPICS, "--bootstrap-server", BOOT, "--alter", "--topic", t, "--partitions", "5"),
        step(TOPICS, "--bootstrap-server", BOOT, "--describe", "--topic", t),
        step(TOPICS, "--bootstrap-server", BOOT, "--list", "--exclude-internal", out=mine),
        step(TOPICS, "--bootstrap-server", BOOT, "--delete", "--topic", gone),
        step(TOPICS, "--bootstrap-server", BOOT, "--list", out=mine),
        step(TOPICS, "--bootstrap-server", BOOT, "--describe", "--topic", gone,
             out=stdout_and_errors),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve, {3: no_cluster_min_isr, 5: no_cluster_min_isr})


def no_cluster_min_isr_default(text: str) -> str:
    """1. `kafka-configs --entity-type brokers --entity-default --describe` lists Kafka's
    cluster-wide min.insync.replicas=1, which serve does not set."""
    return "\n".join(x for x in text.splitlines() if not x.startswith("min.insync.replicas=1 "))


def all_configs_differences(text: str) -> str:
    """2. The topic configs serve knows are those of Kafka 4.0-4.3: Kafka 4.4's
    max.decompressed.message.bytes, remote.copy.lag.bytes and remote.copy.lag.ms are missing;
    message.downconversion.enable (removed in 4.0, KIP-724) is still listed. And difference 1:
    min.insync.replicas has no cluster-wide dynamic default among its synonyms."""
    new = ("remote.copy.lag.", "max.decompressed.message.bytes=")
    lines = [x for x in text.splitlines() if not x.startswith(new)]
    lines = [x.replace("DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, ", "") for x in lines]
    lines.append("message.downconversion.enable=true sensitive=false synonyms={}")
    return "\n".join(sorted(lines))


def test_kafka_configs(both: Both) -> None:
    """kafka-configs on a topic: --alter --add-config (several at once, a list value),
    --describe, --delete-config, --describe --all, an unknown config."""
    t = name("configs")
    cfg = ("--bootstrap-server", BOOT, "--entity-type", "topics", "--entity-name", t)
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t,
             "--config", "cleanup.policy=compact"),
        step(CONFIGS, *cfg, "--alter", "--add-config",
             "retention.ms=999,max.message.bytes=2000,cleanup.policy=[compact,delete]"),
        step(CONFIGS, *cfg, "--describe", sort=True),
        step(CONFIGS, *cfg, "--alter", "--delete-config", "retention.ms,cleanup.policy"),
        step(CONFIGS, *cfg, "--describe", sort=True),
        step(CONFIGS, *cfg, "--describe", "--all", sort=True),
        step(CONFIGS, *cfg, "--alter", "--add-config", "no.such.config=1", out=stdout_and_errors),
        step(TOPICS, "--bootstrap-server", BOOT, "--describe", "--topic", t),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve, {5: all_configs_differences, 7: no_cluster_min_isr})


def test_kafka_configs_brokers(both: Both) -> None:
    """kafka-configs on the broker: cluster-wide defaults (--entity-default) and this node's
    dynamic configs (--entity-name 1) set, described, seen in a topic's effective configs,
    refused where Kafka refuses them (a static config), deleted again."""
    t = name("broker-defaults")
    default = ("--bootstrap-server", BOOT, "--entity-type", "brokers", "--entity-default")
    node = ("--bootstrap-server", BOOT, "--entity-type", "brokers", "--entity-name", "1")
    topic = ("--bootstrap-server", BOOT, "--entity-type", "topics", "--entity-name", t)
    retention = only_lines(r"^\s*(retention\.ms|segment\.bytes)=")
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t),
        step(CONFIGS, *default, "--alter", "--add-config",
             "log.retention.ms=3600000,log.cleaner.backoff.ms=20000"),
        step(CONFIGS, *default, "--describe", sort=True),
        step(CONFIGS, *node, "--alter", "--add-config", "log.segment.bytes=2000000"),
        step(CONFIGS, *node, "--describe", sort=True),
        step(CONFIGS, *topic, "--describe", "--all", out=retention, sort=True),
        step(CONFIGS, *default, "--alter", "--add-config", "log.dirs=/elsewhere",
             out=stdout_and_errors),
        step(CONFIGS, *default, "--alter", "--delete-config",
             "log.retention.ms,log.cleaner.backoff.ms"),
        step(CONFIGS, *node, "--alter", "--delete-config", "log.segment.bytes"),
        step(CONFIGS, *default, "--describe", sort=True),
        step(CONFIGS, *node, "--describe", sort=True),
        step(CONFIGS, *topic, "--describe", "--all", out=retention, sort=True),
    ]  # fmt: skip
    try:
        kafka, serve = both.run(steps)
    finally:  # the Kafka broker is shared by the session's other tests
        both.run(steps[7:9])
    compare(steps, kafka, serve, {2: no_cluster_min_isr_default, 9: no_cluster_min_isr_default})


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_console_producer_and_consumer(both: Both) -> None:
    """kafka-console-producer with keys and headers (parse.key, parse.headers), once per
    compression codec, then kafka-console-consumer --from-beginning --max-messages printing
    partition, offset, key and headers; and a second consumer in a group reading one partition's
    records."""
    t = name("console")
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "2")
    ]
    for codec in CODECS:
        lines = (
            f"h1:{codec},h2:é ✓\tkey-{codec}\tvalue {codec} 1\n"
            f"h1:x\tkey-{codec}\tvalue {codec} 2\n"
            f'h3:\tother-{codec}\t{{"json": "{codec}"}}\n'
        )
        produce = ("--topic", t, "--compression-codec", codec)
        parse = ("--reader-property", "parse.key=true", "--reader-property", "parse.headers=true")
        steps.append(step(PRODUCER, "--bootstrap-server", BOOT, *produce, *parse, input=lines))
    steps.append(
        step(CONSUMER, "--bootstrap-server", BOOT, "--topic", t, "--from-beginning",
             "--max-messages", str(3 * len(CODECS)), "--timeout-ms", "30000",
             "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
             "--formatter-property", "print.offset=true",
             "--formatter-property", "print.partition=true", out=stdout_and_errors, sort=True)
    )  # fmt: skip
    steps.append(
        step(CONSUMER, "--bootstrap-server", BOOT, "--topic", t, "--partition", "1",
             "--offset", "2", "--max-messages", "3", "--timeout-ms", "30000",
             "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
             out=stdout_and_errors)
    )  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve)


def test_consumer_groups(both: Both) -> None:
    """kafka-consumer-groups: a console consumer in a group commits, then --list, --describe
    (offsets, --state, --members), --reset-offsets --to-earliest --execute, --delete."""
    t, g = name("groups"), name("group")
    grp = ("--bootstrap-server", BOOT, "--group", g)
    mine = only_lines(f"{RUN}$")
    lines = "".join(f"k{i}\tv{i}\n" for i in range(10))
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "2"),
        step(PRODUCER, "--bootstrap-server", BOOT, "--topic", t,
             "--reader-property", "parse.key=true", input=lines),
        step(CONSUMER, "--bootstrap-server", BOOT, "--topic", t, "--group", g, "--from-beginning",
             "--max-messages", "10", "--timeout-ms", "30000", "--formatter-property",
             "print.key=true", sort=True),
        step(GROUPS, "--bootstrap-server", BOOT, "--list", out=mine),
        step(GROUPS, *grp, "--describe", sort=True),
        step(GROUPS, *grp, "--describe", "--state"),
        step(GROUPS, *grp, "--describe", "--members"),
        step(GROUPS, *grp, "--describe", "--offsets", "--verbose", sort=True),
        step(GROUPS, *grp, "--reset-offsets", "--to-earliest", "--execute", "--topic", t,
             sort=True),
        step(GROUPS, *grp, "--reset-offsets", "--to-offset", "3", "--dry-run",
             "--topic", f"{t}:1", sort=True),
        step(GROUPS, *grp, "--describe", sort=True),
        step(GROUPS, *grp, "--delete"),
        step(GROUPS, "--bootstrap-server", BOOT, "--list", out=mine),
        step(GROUPS, *grp, "--describe", out=stdout_and_errors),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve, {})


def test_consumer_groups_delete_offsets(both: Both) -> None:
    """kafka-consumer-groups --delete-offsets of one partition of an Empty group."""
    t, g = name("delete-offsets"), name("delete-offsets-group")
    grp = ("--bootstrap-server", BOOT, "--group", g)
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "2"),
        step(GROUPS, *grp, "--reset-offsets", "--to-earliest", "--execute", "--topic", t,
             sort=True),
        step(GROUPS, *grp, "--delete-offsets", "--topic", f"{t}:1", out=stdout_and_errors),
        step(GROUPS, *grp, "--describe", sort=True),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve)


T0 = 1_767_225_600_000  # 2026-01-01


def test_get_offsets_and_delete_records(both: Both) -> None:
    """kafka-get-offsets (GetOffsetShell: --time -1, -2, -3 and a timestamp) before and after
    kafka-delete-records with a JSON offsets file (an offset inside partition 0, -1 for
    partition 1). The records have explicit timestamps, the largest twice in partition 0, so the
    max-timestamp answer is the same on both brokers."""
    t = name("offsets")
    stamps = {0: [5, 1, 9, 9, 3, 2], 1: [4, 4, 8, 1]}
    lines = [
        {"topic": t, "partition": p, "key": None, "value": "dg==", "headers": [],
         "timestamp": T0 + s * 1000}
        for p, ts in stamps.items() for s in ts
    ]  # fmt: skip
    offsets = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": 0, "offset": 3},
                {"topic": t, "partition": 1, "offset": -1},
            ],
        }
    )
    shell = ("--bootstrap-server", BOOT, "--topic", t)
    setup = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "2")
    ]
    both.run(setup)
    both.produce(lines)
    for side in (both.kafka, both.serve):
        (side.workdir / "offsets.json").write_text(offsets)
    steps = [
        step(GET_OFFSETS, *shell, "--time", "-1"),
        step(GET_OFFSETS, *shell, "--time", "-2"),
        step(GET_OFFSETS, *shell, "--time", "-3"),
        step(GET_OFFSETS, *shell, "--time", str(T0 + 4000)),
        step(GET_OFFSETS, *shell, "--time", str(T0 + 99000)),
        step(GET_OFFSETS, "--bootstrap-server", BOOT, "--topic-partitions", f"{t}:1"),
        step(DELETE_RECORDS, "--bootstrap-server", BOOT, "--offset-json-file",
             "{workdir}/offsets.json", sort=True),
        step(GET_OFFSETS, *shell, "--time", "-2"),
        step(GET_OFFSETS, *shell, "--time", "-3"),
        step(GET_OFFSETS, *shell, "--time", str(T0 + 1000)),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve, {8: lambda text: deleted_segment_gone(text, f"{t}:1:")})


def deleted_segment_gone(text: str, partition: str) -> str:
    """3. Max timestamp (-3) after DeleteRecords up to the high watermark: Kafka keeps the
    segment below the new log start until its next retention pass and still answers the offset
    of its largest timestamp (below the log start); serve deletes such segments at once
    (docs/server.md), so the partition has no record and no answer (the tool prints no line)."""
    return "\n".join(x for x in text.splitlines() if not x.startswith(partition))


def times_and_ids(text: str) -> str:
    """kafka-transactions describe: the producer id, start time and duration differ run to run
    (the columns: coordinator, id, producer id, epoch, state, timeout, start, duration, ...)."""
    lines = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[2].isdigit():
            f[2], f[6], f[7] = "<pid>", "<start>", "<duration>"
        lines.append(" ".join(f))
    return "\n".join(lines)


def epoch_not_bumped(text: str) -> str:
    """4. Transactions: Kafka 4 finalizes transaction.version=2 (KIP-890), whose coordinator
    bumps the producer epoch at the end of every transaction (the epoch is 1 after the first);
    serve advertises no transaction version, so the client runs version 1 transactions and the
    epoch stays 0."""
    f = text.splitlines()
    return "\n".join(re.sub(r"^(\d+ \S+ <pid> )1 ", r"\g<1>0 ", line) for line in f)


def test_transactions(both: Both) -> None:
    """kafka-transactions list and describe: a committed transaction, one whose producer closed
    in the middle of it (the coordinator aborts it), an unknown transactional id."""
    t, done, hanging = name("txn"), name("txn-done"), name("txn-hanging")
    both.run([step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t,
                   "--partitions", "2")])  # fmt: skip
    record = {"topic": t, "partition": 0, "key": None, "value": "dg==", "headers": []}
    both.produce([{"op": "begin"}, record, {"op": "commit"}], transactional_id=done)
    both.produce([{"op": "begin"}, record, {"op": "flush"}], transactional_id=hanging)
    out = lambda code, stdout, stderr: times_and_ids(  # noqa: E731
        stdout_and_errors(code, stdout, stderr)
    )
    mine = only_lines(f"{RUN}")
    listed = lambda *a: re.sub(r"(?m)^(\S+\s+\d+\s+)\d+", r"\1<pid>", mine(*a))  # noqa: E731
    steps = [
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "list", out=listed, sort=True),
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "describe", "--transactional-id", done,
             out=out),
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "describe", "--transactional-id",
             hanging, out=out),
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "describe", "--transactional-id",
             name("txn-unknown"), out=stdout_and_errors),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve, {1: epoch_not_bumped, 2: epoch_not_bumped})


def producers_table(code: int, stdout: str, stderr: str) -> str:
    """kafka-transactions describe-producers: the producer id and last timestamp differ run to
    run (the columns: producer id, epoch, coordinator epoch, last sequence, last timestamp,
    current transaction start offset)."""
    lines = [f"exit {code}"]
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 6 and f[0].isdigit():
            f[0], f[4] = "<pid>", "<time>"
        lines.append(" ".join(f))
    errors = [x for x in stderr.splitlines() if re.match(r"^(Error|Exception|.*Exception:)", x)]
    return "\n".join(lines + errors)


def test_transactions_find_hanging_and_abort(both: Both) -> None:
    """kafka-transactions describe-producers, find-hanging and abort (DescribeProducers and
    WriteTxnMarkers): a transaction left open by its producer is listed with its start offset,
    is not hanging while its coordinator knows it, and is aborted by hand from its partition's
    start offset; the producer then has no open transaction and read_committed consumers pass it."""
    t, open_txn = name("txn-abort"), name("txn-open")
    both.run([step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t,
                   "--partitions", "1")])  # fmt: skip
    record = {"topic": t, "partition": 0, "key": None, "value": "dg==", "headers": []}
    both.produce([{"op": "begin"}, record, record, {"op": "halt"}], transactional_id=open_txn)
    both.produce([record], transactional_id=None)
    describe = step(TRANSACTIONS, "--bootstrap-server", BOOT, "describe-producers", "--topic", t,
                    "--partition", "0", out=producers_table, sort=True)  # fmt: skip
    steps = [
        describe,
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "find-hanging", "--topic", t,
             "--max-transaction-timeout", "0", out=stdout_and_errors),
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "abort", "--topic", t, "--partition", "0",
             "--start-offset", "0", out=stdout_and_errors),
        describe,
        step(CONSUMER, "--bootstrap-server", BOOT, "--topic", t, "--from-beginning",
             "--isolation-level", "read_committed", "--timeout-ms", "5000",
             "--property", "print.offset=true", out=stdout_and_errors),
        step(TRANSACTIONS, "--bootstrap-server", BOOT, "abort", "--topic", t, "--partition", "0",
             "--start-offset", "7", out=stdout_and_errors),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve)


def verifiable_summary(code: int, stdout: str, stderr: str) -> str:
    """VerifiableProducer/VerifiableConsumer print JSON events with times: their counts, the
    offsets acknowledged or consumed per partition, the last offsets committed."""
    events = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    kinds = Counter(e["name"] for e in events)
    acked = Counter()
    consumed: dict[str, list[int]] = {}
    committed: dict[str, int] = {}
    summary = []
    for e in events:
        if e["name"] == "producer_send_success":
            acked[f"{e['topic']}-{e['partition']}"] += 1
        elif e["name"] == "tool_data":
            summary.append(f"sent {e['sent']} acked {e['acked']}")
        elif e["name"] == "records_consumed":
            for p in e["partitions"]:
                tp = f"{p['topic']}-{p['partition']}"
                consumed.setdefault(tp, []).append((p["minOffset"], p["maxOffset"], p["count"]))
        elif e["name"] == "offsets_committed" and e["success"]:
            for p in e["offsets"]:
                committed[f"{p['topic']}-{p['partition']}"] = p["offset"]
    ranges = {tp: (min(r[0] for r in rs), max(r[1] for r in rs), sum(r[2] for r in rs))
              for tp, rs in consumed.items()}  # fmt: skip
    summary += [f"acked {tp}: {n}" for tp, n in sorted(acked.items())]
    summary += [f"consumed {tp}: {r}" for tp, r in sorted(ranges.items())]
    summary += [f"committed {tp}: {o}" for tp, o in sorted(committed.items())]
    summary += [f"events {k}" for k in sorted(kinds) if k != "records_consumed"]
    return "\n".join([f"exit {code}", *summary])


def test_verifiable_producer_and_consumer(both: Both) -> None:
    """kafka-verifiable-producer (acks=all, 300 records, keys) and kafka-verifiable-consumer
    (a group reading them all and committing), compared by their summary counts; then the
    group's committed offsets."""
    t, g = name("verifiable"), name("verifiable-group")
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "3"),
        step(VERIFIABLE_PRODUCER, "--bootstrap-server", BOOT, "--topic", t, "--max-messages",
             "300", "--acks", "-1", "--repeating-keys", "7", out=verifiable_summary),
        step(VERIFIABLE_CONSUMER, "--bootstrap-server", BOOT, "--topic", t, "--group-id", g,
             "--max-messages", "300", "--reset-policy", "earliest", out=verifiable_summary),
        step(GROUPS, "--bootstrap-server", BOOT, "--group", g, "--describe", sort=True),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    compare(steps, kafka, serve)


PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


def records_sent(code: int, stdout: str, stderr: str) -> str:
    """kafka-producer-perf-test's closing line without its rates and latencies: how many records
    were sent (acknowledged) in all."""
    totals = [x.split(",")[0] for x in stdout.splitlines() if re.match(r"^\d+ records sent,", x)]
    return "\n".join([f"exit {code}", *totals[-1:]] if totals else [f"exit {code}", stderr])


def data_consumed(code: int, stdout: str, stderr: str) -> str:
    """kafka-consumer-perf-test's result row without its times and rates: the megabytes and
    records consumed."""
    rows = [x.split(", ") for x in stdout.splitlines()]
    header = next((r for r in rows if "data.consumed.in.nMsg" in r), None)
    if header is None:
        return f"exit {code}\nno result row\n{stdout}\n{stderr}"
    picked = [header.index("data.consumed.in.MB"), header.index("data.consumed.in.nMsg")]
    last = rows[-1] if len(rows[-1]) == len(header) and rows[-1] != header else []
    return "\n".join([f"exit {code}", *(f"{header[i]} {last[i]}" for i in picked if last)])


def test_producer_and_consumer_perf_test(both: Both) -> None:
    """kafka-producer-perf-test (5,000 records of 100 bytes, acks=all, lz4 batches) and
    kafka-consumer-perf-test (a group reading them all), compared by their counts; then the
    partition's end offset and the group's committed offset (one partition: the producer's
    sticky partitioner spreads keyless records by timing)."""
    t, g = name("perf"), name("perf-group")
    steps = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "1"),
        step(PRODUCER_PERF, "--topic", t, "--num-records", "5000", "--record-size", "100",
             "--throughput", "-1", "--command-property", f"bootstrap.servers={BOOT}", "acks=all",
             "compression.type=lz4", out=records_sent),
        step(GET_OFFSETS, "--bootstrap-server", BOOT, "--topic", t, sort=True),
        step(CONSUMER_PERF, "--bootstrap-server", BOOT, "--topic", t, "--group", g,
             "--num-records", "5000", "--timeout", "60000", out=data_consumed),
        step(GROUPS, "--bootstrap-server", BOOT, "--group", g, "--describe", sort=True),
    ]  # fmt: skip
    kafka, serve = both.run(steps)
    assert kafka[1] == "exit 0\n5000 records sent", kafka[1]
    assert kafka[3].endswith("data.consumed.in.nMsg 5000"), kafka[3]
    compare(steps, kafka, serve)


# --- Log directories and the cluster (DescribeLogDirs, DescribeCluster) --------------------------

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
CLUSTER = "org.apache.kafka.tools.ClusterTool"


def log_dirs_table(code: int, stdout: str, stderr: str) -> str:
    """kafka-log-dirs --describe prints one JSON document: a line per log directory (its path
    differs between the brokers: only that it is absolute is kept) and a line per partition,
    sorted (Kafka lists them in a hash map's order)."""
    doc = next((json.loads(x) for x in stdout.splitlines() if x.startswith("{")), None)
    if doc is None:
        return f"exit {code}\n{stdout}\n{stderr}"
    lines = [f"exit {code}", f"version {doc['version']}"]
    for broker in doc["brokers"]:
        for d in broker["logDirs"]:
            where = "absolute" if d["logDir"].startswith("/") else d["logDir"]
            lines.append(f"broker {broker['broker']} logDir {where} error {d['error']}")
            lines += sorted(f"{p['partition']} size {p['size']} offsetLag {p['offsetLag']} "
                            f"isFuture {p['isFuture']}" for p in d["partitions"])  # fmt: skip
    return "\n".join(lines)


def cluster_id(code: int, stdout: str, stderr: str) -> str:
    """kafka-cluster cluster-id: each broker's own id (22 characters of base64, as Kafka's
    Uuid prints)."""
    return re.sub(
        r"(Cluster ID: )[A-Za-z0-9_-]{22}$", r"\1<id>", f"exit {code}\n{stdout}", flags=re.M
    )


def endpoints(code: int, stdout: str, stderr: str) -> str:
    """kafka-cluster list-endpoints: each broker's port."""
    return re.sub(r"(?m)^(\d+\s+\S+\s+)\d+", r"\1<port>", f"exit {code}\n{stdout}")


def zstd_frames_end_in_an_empty_block(text: str, partition: str, batches: int) -> str:
    """5. A topic with compression.type=zstd given uncompressed batches: both brokers
    recompress each batch, and Kafka's zstd-jni stream, ended by its close(), writes the data in
    a block that is not the last and then an empty last block (a 3-byte block header, 01 00 00);
    kafkalog's frame marks its data block the last. So each such batch is 3 bytes shorter on
    serve and the partition's size 3 bytes per batch smaller; both frames decode to the same
    records (gzip, recompressed alike, comes out byte for byte the same size)."""

    def smaller(m: re.Match) -> str:
        return f"{m.group(1)}{int(m.group(2)) - 3 * batches} "

    return re.sub(rf"(?m)^({re.escape(partition)} size )(\d+) ", smaller, text)


def one_batch_each(topic: str, partitions: int, n: int) -> list[dict]:
    """``n`` records over ``partitions``, each flushed alone: one batch each, so that both
    brokers get the same batches whatever the producer's timing."""
    lines: list[dict] = []
    for i in range(n):
        value = base64.b64encode(b"value %d " % i * (i % 5 + 1)).decode()
        lines.append({"topic": topic, "partition": i % partitions, "key": "aw==", "value": value,
                      "headers": [["h", "dg=="]], "timestamp": T0 + i})  # fmt: skip
        lines.append({"op": "flush"})
    return lines


def test_log_dirs_and_cluster(both: Both) -> None:
    """kafka-log-dirs --describe (DescribeLogDirs): the sizes of partitions written alike, with
    batches the producer compressed (stored as sent) and batches each broker recompressed for
    its topic's gzip or zstd; kafka-cluster cluster-id and list-endpoints (DescribeCluster); and
    kafka-topics --describe paged a partition per DescribeTopicPartitions response."""
    t, gz, zs = name("log-dirs"), name("log-dirs-gzip"), name("log-dirs-zstd")
    setup = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "3"),
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", gz,
             "--config", "compression.type=gzip"),
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", zs,
             "--config", "compression.type=zstd"),
    ]  # fmt: skip
    kafka, serve = both.run(setup)
    compare(setup, kafka, serve)
    both.produce(one_batch_each(t, 2, 40), configs={"compression.type": "lz4"})
    both.produce(one_batch_each(gz, 1, 30) + one_batch_each(zs, 1, 30))
    describe = ("--bootstrap-server", BOOT, "--describe")
    steps = [
        step(LOG_DIRS, *describe, "--topic-list", f"{t},{gz},{zs}", out=log_dirs_table),
        step(LOG_DIRS, *describe, "--topic-list", t, "--broker-list", "1", out=log_dirs_table),
        step(LOG_DIRS, *describe, "--topic-list", name("log-dirs-none"), out=log_dirs_table),
        step(CLUSTER, "cluster-id", "--bootstrap-server", BOOT, out=cluster_id),
        step(CLUSTER, "list-endpoints", "--bootstrap-server", BOOT, out=endpoints),
        step(TOPICS, *describe, "--topic", t, "--partition-size-limit-per-response", "1"),
    ]
    kafka, serve = both.run(steps)
    assert re.search(rf"^{t}-0 size [1-9]", kafka[0], re.M), kafka[0]
    assert "Cluster ID: <id>" in kafka[3], kafka[3]
    zstd = lambda text: zstd_frames_end_in_an_empty_block(text, f"{zs}-0", 30)  # noqa: E731
    compare(steps, kafka, serve, {0: zstd, 5: no_cluster_min_isr})


def _wire_view(value: object, key: str = "") -> object:
    """An answer with what differs between any two brokers named instead of given: the
    cluster id, ports, topic ids (the zero id kept), log directory paths and the volume's free
    bytes; DescribeLogDirs' topics and partitions sorted (Kafka's are in a hash map's order)."""
    if isinstance(value, dict):
        return {k: _wire_view(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [_wire_view(v) for v in value]
        if key in ("topics", "partitions") and items and "partition_size" in str(items):
            items.sort(key=lambda x: json.dumps(x, sort_keys=True, default=str))
        return items
    if key in ("cluster_id", "port", "log_dir") and value is not None:
        return f"<{key}>"
    if key == "usable_bytes":
        return "positive" if isinstance(value, int) and value > 0 else value
    if isinstance(value, uuid.UUID) and value.int != 0:
        return "<topic id>"
    return value


def test_describe_apis_on_the_wire(both: Both) -> None:
    """DescribeTopicPartitions (pages, cursors, unknown and invalid names, a cursor refused),
    DescribeCluster (each version, the endpoint types), DescribeLogDirs (v1, v4, v5) and
    Metadata's authorized operations, sent alike to both brokers: serve's answers must be
    Kafka's but for what differs between any two brokers (:func:`_wire_view`)."""
    a, b = name("wire-a"), name("wire-b")
    both.run([
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", a, "--partitions", "2"),
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", b, "--partitions", "5"),
    ])  # fmt: skip
    both.produce(one_batch_each(a, 2, 6) + one_batch_each(b, 5, 10))

    def topics(*names: str) -> list[dict]:
        return [{"name": n} for n in names]

    dtp, cluster, dirs = (
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_LOG_DIRS,
    )  # fmt: skip
    wanted = [{"topic": a, "partitions": [0, 1, 7]}, {"topic": b, "partitions": [4]},
              {"topic": name("wire-none"), "partitions": [0]}]  # fmt: skip
    requests = [
        (dtp, 0, {"topics": topics(b, a, name("wire-none"), "bad/name", a)}),
        (dtp, 0, {"topics": topics(a, b), "response_partition_limit": 3}),
        (dtp, 0, {"topics": topics(a, b), "response_partition_limit": 2}),
        (dtp, 0, {"topics": topics(a, name("zz")), "response_partition_limit": 2}),
        (dtp, 0, {"topics": topics(a, b), "response_partition_limit": 0}),
        (dtp, 0, {"topics": topics(a, b), "response_partition_limit": 1,
                  "cursor": {"topic_name": b, "partition_index": 3}}),
        (dtp, 0, {"topics": topics(a, b), "cursor": {"topic_name": b, "partition_index": 9}}),
        (dtp, 0, {"topics": topics(a, b), "cursor": {"topic_name": "x", "partition_index": 0}}),
        (dtp, 0, {"topics": topics(a, b), "cursor": {"topic_name": b, "partition_index": -1}}),
        (cluster, 0, {}),
        (cluster, 1, {"endpoint_type": 2}),
        (cluster, 1, {"endpoint_type": 0}),
        (cluster, 2, {"include_cluster_authorized_operations": True,
                      "include_fenced_brokers": True}),
        (dirs, 1, {"topics": wanted}),
        (dirs, 4, {"topics": wanted}),
        (dirs, 5, {"topics": wanted}),
        (dirs, 5, {"topics": [{"topic": name("wire-none"), "partitions": [0]}]}),
        (ApiKey.METADATA, 10, {"topics": topics(a), "include_cluster_authorized_operations": True,
                               "include_topic_authorized_operations": True}),
        (ApiKey.METADATA, 12, {"topics": [{"topic_id": uuid.uuid4(), "name": None}],
                               "include_topic_authorized_operations": True}),
        (ApiKey.METADATA, 12, {"topics": topics(a, name("wire-none")),
                               "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": True}),
    ]  # fmt: skip

    def ask(side: Side) -> list[object]:
        host, port = side.bootstrap.rsplit(":", 1)
        client = WireClient(host, int(port))
        try:
            return [_wire_view(client.call(k, v, body)) for k, v, body in requests]
        finally:
            client.close()

    kafka, serve = ask(both.kafka), ask(both.serve)
    problems = [
        f"request {i} {requests[i]}:\n--- Kafka\n{k}\n--- kafkalog serve\n{s}"
        for i, (k, s) in enumerate(zip(kafka, serve))
        if k != s
    ]
    assert not problems, "\n".join(problems)


# --- The consumer group protocol (KIP-848) ------------------------------------------------------

_MEMBER_ID = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")


def consumed_and_committed(stdout: str) -> tuple[set[str], dict[str, int], dict[str, int]]:
    """A verifiable consumer's assigned partitions (the last assignment event's, plus the
    ones added since), the highest offset it consumed and the last it committed, by partition."""
    assigned: set[str] = set()
    consumed: dict[str, int] = {}
    committed: dict[str, int] = {}
    for e in (json.loads(x) for x in stdout.splitlines() if x.startswith("{")):
        parts = {f"{p['topic']}-{p['partition']}" for p in e.get("partitions") or []}
        if e["name"] == "partitions_assigned":
            assigned |= parts
        elif e["name"] == "partitions_revoked":
            assigned -= parts
        elif e["name"] == "records_consumed":
            for p in e["partitions"]:
                tp = f"{p['topic']}-{p['partition']}"
                consumed[tp] = max(consumed.get(tp, -1), p["maxOffset"])
        elif e["name"] == "offsets_committed" and e["success"]:
            for p in e["offsets"]:
                committed[f"{p['topic']}-{p['partition']}"] = p["offset"]
    return assigned, consumed, committed


def two_consumers(kafka_dist, side: Side, topic: str, group: str) -> list[str]:
    """Two kafka-verifiable-consumers with ``--group-protocol consumer`` in one group: the
    first reads everything, the second joins and the server-side assignor gives it a partition
    the first revokes; kafka-consumer-groups --describe --members while both run, then both
    stop (leaving the group) and the group's offsets, type, state and epochs are described."""
    groups = ("--bootstrap-server", side.bootstrap, "--group", group)
    consumer = [*cds_flags(kafka_dist, VERIFIABLE_CONSUMER)]
    args = ["--bootstrap-server", side.bootstrap, "--topic", topic, "--group-id", group,
            "--group-protocol", "consumer", "--reset-policy", "earliest"]  # fmt: skip
    out: list[str] = []
    procs: list[subprocess.Popen] = []
    files = [side.workdir / f"{group}-{i}.out" for i in range(2)]

    def events(i: int) -> tuple[set[str], dict[str, int], dict[str, int]]:
        return consumed_and_committed(files[i].read_text())

    def wait_for(check: Callable[[], bool], what: str) -> None:
        for _ in range(600):
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"{side.name}: no {what}: {[f.read_text() for f in files]}")

    try:
        for i in range(2):
            cmd = kafka_dist.command(VERIFIABLE_CONSUMER, *args)
            cmd[1:1] = consumer
            with files[i].open("w") as f:
                procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL))
            if i == 0:
                wait_for(lambda: sum(events(0)[2].values()) == 300, "commit of all 300 records")
        wait_for(lambda: len(events(0)[0]) == 2 and len(events(1)[0]) == 1, "rebalance to 2+1")
        members = run_tool(kafka_dist, GROUPS, [*groups, "--describe", "--members", "--verbose"])
        out.append(_MEMBER_ID.sub("<member>", f"exit {members.returncode}\n{members.stdout}"))
        out.append("\n".join(f"consumer {i} owns {sorted(events(i)[0])}" for i in range(2)))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
    first, second = events(0), events(1)
    committed = {**first[2], **{tp: o for tp, o in second[2].items() if o >= first[2].get(tp, 0)}}
    out.append("\n".join(f"committed {tp}: {o}" for tp, o in sorted(committed.items())))
    for extra in (["--describe"], ["--describe", "--state", "--verbose"]):
        proc = run_tool(kafka_dist, GROUPS, [*groups, *extra])
        out.append(f"exit {proc.returncode}\n{proc.stdout}")
    listed = run_tool(kafka_dist, GROUPS, ["--bootstrap-server", side.bootstrap, "--list",
                                           "--type"])  # fmt: skip
    out.append("\n".join(x for x in listed.stdout.splitlines() if group in x))
    return [normalize(side, text, sort=True) for text in out]


def test_consumer_group_protocol(both: Both) -> None:
    """The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe):
    two verifiable consumers with --group-protocol consumer share a topic of 3 partitions (the
    uniform assignor: 2 and 1, sticky), with the group described while both run and after."""
    t, g = name("kip848"), name("kip848-group")
    setup = [
        step(TOPICS, "--bootstrap-server", BOOT, "--create", "--topic", t, "--partitions", "3"),
        step(VERIFIABLE_PRODUCER, "--bootstrap-server", BOOT, "--topic", t, "--max-messages",
             "300", "--acks", "-1", "--repeating-keys", "7", out=verifiable_summary),
    ]  # fmt: skip
    kafka, serve = both.run(setup)
    compare(setup, kafka, serve)
    with ThreadPoolExecutor(2) as pool:
        k = pool.submit(two_consumers, both.kafka_dist, both.kafka, t, g)
        s = pool.submit(two_consumers, both.kafka_dist, both.serve, t, g)
        kafka, serve = k.result(), s.result()
    assert "Consumer" in kafka[-1] and "<member>" in kafka[0], kafka
    assert serve == kafka
