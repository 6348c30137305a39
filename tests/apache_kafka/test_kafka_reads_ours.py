"""kafkalog writes, Apache Kafka reads: the other direction of test_kafka_writes_kafkalog_reads.

1. Kafka's DumpLogSegments reads a data directory that ``kafkalog produce`` (every codec, several
   segments, headers, null and empty keys and values, idempotent and transactional producers:
   commit and abort) and the Python API (``LogManager`` + ``Log.append_as_leader`` of
   ``MemoryRecordsBuilder`` batches, an idempotent producer, a codec per batch) wrote: every batch
   valid (CRC), every record's offset, timestamp, key, value (through kafka-it's Base64Decoder, so
   bytes and not text are compared), header keys, sequence and batch fields what the test fed to
   kafkalog; transaction markers and the ``.txnindex`` entry of the abort where they belong; the
   producer ``.snapshot`` files readable with each producer's last sequence; no index problem under
   ``--verify-index-only`` and ``--index-sanity-check``.
2. A real KRaft broker adopts kafkalog's data: a broker creates two topics and Kafka's producer
   writes a few records, the broker is stopped cleanly; kafkalog appends records to one topic in
   the broker's own data directory (``kafkalog produce`` on it: codecs, idempotent, committed and
   aborted transactions, several segments), and the other topic's segment files are replaced by
   ones kafkalog wrote elsewhere; the broker is started again, and Kafka's Java consumer reads
   exactly the records fed to kafkalog (offsets, timestamps, keys, values, headers) at
   read_uncommitted and read_committed; then Kafka's producer appends more and their offsets
   continue after ours.

Every expected record, offset and marker comes from the input the test gave kafkalog (offsets by
counting, per partition, in input order), never from kafkalog reading its own output.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
B64 = "kafkalog.it.Base64Decoder"


def _kafkalog_bin() -> list[str]:
    exe = Path(sys.executable).with_name("kafkalog")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkalog.cli.main"]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


# --- What the test feeds kafkalog, and what that must give -------------------------------------


@dataclass(frozen=True)
class Rec:
    """One input record; ``timestamp`` None leaves it to the run's ``--timestamp``."""

    partition: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def make_records(n: int, partitions: int, seed: int, base_ts: int) -> list[Rec]:
    """Records of every shape: null, empty, binary and text keys and values (some large and
    compressible), headers (none, repeated keys, null and binary values, a non-ASCII key),
    explicit timestamps (some going back) and timestamps left to the run."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 7
        key = None if kind == 0 else b"" if kind == 1 else f"key-{i % 13}".encode()
        if kind == 4:
            key = bytes([0, 255, seed % 256, i % 256])
        if kind == 2:
            value = None
        elif kind == 3:
            value = b""
        elif kind == 4:
            value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
        else:
            value = (f"value {i} seed {seed} é ✓ " * rnd.randrange(1, 30)).encode()
        if i % 3 == 1:
            headers = (("trace", f"t-{i}".encode()), ("empty", b""))
        elif i % 3 == 2:
            headers = (("dup", b"a"), ("dup", None), ("ключ", bytes([0, 255, i % 256])))
        else:
            headers = ()
        timestamp = None if i % 9 == 4 else base_ts + i * 7 - (300 if i % 11 == 0 else 0)
        out.append(Rec(i % partitions, timestamp, key, value, headers))
    return out


def _json_line(r: Rec) -> str:
    """The record as ``kafkalog produce`` reads it (docs/cli-data.md), bytes in base64."""
    obj: dict = {"partition": r.partition}
    for name, data in (("key", r.key), ("value", r.value)):
        obj[name] = _b64(data)
        if data is not None:
            obj[f"{name}Encoding"] = "base64"
    obj["headers"] = [
        {"key": k, "value": _b64(v), "valueEncoding": "base64"} if v is not None else [k, None]
        for k, v in r.headers
    ]
    if r.timestamp is not None:
        obj["timestamp"] = r.timestamp
    return json.dumps(obj) + "\n"


@dataclass
class Run:
    """One ``kafkalog produce`` run (or one writer of another kind: ``via``): its records, and
    what it makes of them (a ``--header`` added to each, producer id, transaction marker)."""

    topic: str
    records: list[Rec]
    default_ts: int
    options: tuple[str, ...] = ()
    codec: str = "none"
    header: tuple[str, bytes] | None = None
    producer_id: int = -1
    marker: str | None = None  # "COMMIT" or "ABORT": a transaction ended so
    via: str = "cli"  # "cli", "api" (written by the test itself), "kafka" (Kafka's producer)


@dataclass(frozen=True)
class Entry:
    """One offset of a partition as the writer must have left it."""

    offset: int
    marker: str | None = None  # a control record: COMMIT or ABORT
    timestamp: int = -1
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = -1
    producer_id: int = -1
    transactional: bool = False
    aborted: bool = False
    codec: str = "none"


def expected_logs(runs: list[Run]) -> dict[tuple[str, int], list[Entry]]:
    """Every partition's entries after ``runs``: offsets counted per partition in input order,
    one control record per partition a transaction touched, sequences per producer."""
    logs: dict[tuple[str, int], list[Entry]] = defaultdict(list)
    sequences: dict[tuple[str, int, int], int] = defaultdict(int)
    for run in runs:
        touched: list[tuple[str, int]] = []
        for r in run.records:
            tp = (run.topic, r.partition)
            seq = -1
            if run.producer_id >= 0:
                seq = sequences[(*tp, run.producer_id)]
                sequences[(*tp, run.producer_id)] += 1
            headers = r.headers + ((run.header,) if run.header else ())
            logs[tp].append(
                Entry(
                    offset=len(logs[tp]),
                    timestamp=run.default_ts if r.timestamp is None else r.timestamp,
                    key=r.key, value=r.value, headers=headers, sequence=seq,
                    producer_id=run.producer_id, transactional=run.marker is not None,
                    aborted=run.marker == "ABORT", codec=run.codec,
                )
            )  # fmt: skip
            if tp not in touched:
                touched.append(tp)
        if run.marker:
            for tp in sorted(touched):
                logs[tp].append(
                    Entry(
                        offset=len(logs[tp]), marker=run.marker, producer_id=run.producer_id,
                        transactional=True,
                    )
                )  # fmt: skip
    return dict(logs)


def kafkalog_produce(data_dir: Path, run: Run) -> str:
    cmd = [*_kafkalog_bin(), "produce", str(data_dir), "--topic", run.topic, "--quiet"]
    cmd += ["--timestamp", str(run.default_ts), "--codec", run.codec, *run.options]
    if run.header:
        cmd += ["--header", f"{run.header[0]}={run.header[1].decode()}"]
    text = "".join(_json_line(r) for r in run.records)
    proc = subprocess.run(cmd, input=text, capture_output=True, encoding="utf-8", check=False)
    assert proc.returncode == 0, (cmd, proc.stderr[-3000:])
    return proc.stderr


def api_write(data_dir: Path, run: Run, configs: dict[str, str], batch_records: int) -> None:
    """The Python API: a topic made by ``LogManager``, batches built by ``MemoryRecordsBuilder``
    (the codec cycling through all five, an idempotent producer's sequences) and appended with
    ``Log.append_as_leader``, then a clean close."""
    from kafkalog.format.builder import MemoryRecordsBuilder
    from kafkalog.log.datadir.manager import LogManager
    from kafkalog.log.datadir.naming import TopicPartition

    partitions = 1 + max(r.partition for r in run.records)
    with LogManager(data_dir, writable=True, create=True) as logs:
        logs.create_topic(run.topic, partitions, configs)
        by_partition: dict[int, list[Rec]] = defaultdict(list)
        for r in run.records:
            by_partition[r.partition].append(r)
        for p, recs in sorted(by_partition.items()):
            log = logs.get_log(TopicPartition(run.topic, p))
            for i in range(0, len(recs), batch_records):
                builder = MemoryRecordsBuilder(
                    compression=api_codec(i // batch_records), producer_id=run.producer_id,
                    producer_epoch=0, base_sequence=i,
                )  # fmt: skip
                for r in recs[i : i + batch_records]:
                    ts = run.default_ts if r.timestamp is None else r.timestamp
                    builder.append(timestamp=ts, key=r.key, value=r.value, headers=r.headers)
                log.append_as_leader(builder.build())


def api_codec(batch_index: int) -> str:
    return CODECS[batch_index % len(CODECS)]


# --- Kafka's DumpLogSegments over what kafkalog wrote ------------------------------------------

BATCH_FIELD = re.compile(r"(\w+): (\S+)")
RECORD_LINE = re.compile(
    r"\| offset: (?P<offset>\d+) (?P<tstype>CreateTime|LogAppendTime|NoTimestampType): "
    r"(?P<ts>-?\d+) keySize: (?P<keySize>-?\d+) valueSize: (?P<valueSize>-?\d+) "
    r"sequence: (?P<sequence>-?\d+) headerKeys: \[(?P<headerKeys>.*)\]"
    r"(?: key: (?P<key>\S*))?(?: payload: (?P<payload>\S*))?"
    r"(?: endTxnMarker: (?P<marker>\w+) coordinatorEpoch: (?P<coordinatorEpoch>-?\d+))?"
)


def _split_dump(stdout: str) -> dict[str, list[str]]:
    per_file: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            current = per_file.setdefault(line[len("Dumping ") :], [])
        elif current is not None:
            current.append(line)
    return per_file


def _dump_files(data_dir: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(
        f for f in data_dir.glob("*-*/*") if f.is_file() and f.name.endswith(suffixes)
    )  # fmt: skip


@dataclass
class OursWritten:
    """A data directory kafkalog wrote, what was fed to it, and Kafka's dumps of it."""

    data_dir: Path
    runs: list[Run]
    expected: dict[tuple[str, int], list[Entry]]
    deep: dict[str, list[str]] = field(default_factory=dict)
    verify: str = ""
    sanity: str = ""


@pytest.fixture(scope="module")
def ours_written(kafka_dist, tmp_path_factory) -> OursWritten:
    data_dir = tmp_path_factory.mktemp("kafkalog-wrote") / "data"
    small = ("--config", "internal.segment.bytes=1500", "--config", "index.interval.bytes=256")
    runs: list[Run] = []
    for seed, codec in enumerate(CODECS):
        runs.append(
            Run(
                f"codec-{codec}", make_records(150, 2, seed, T0 + seed * DAY), T0 + seed * DAY,
                ("--partitions", "2", "--batch-size", "1024", *small), codec=codec,
                header=("codec", codec.encode()),
            )
        )  # fmt: skip
    # An idempotent producer over two runs (its sequences go on), then transactions. Their
    # timestamps are recent: producer state expires (producer.id.expiration.ms, a day) counted
    # from a producer's last batch timestamp, in kafkalog as in Kafka, and an expired producer's
    # next run would start its sequences again at 0.
    now = (time.time_ns() // 1_000_000 // 1000) * 1000 - 3_600_000
    idem = ("--producer-id", "1000", "--partitions", "2", "--batch-size", "2048", *small)
    runs.append(Run("idem", make_records(60, 2, 10, now), now, idem, "snappy", producer_id=1000))
    runs.append(Run("idem", make_records(40, 2, 11, now), now, idem, "lz4", producer_id=1000))
    txn = ("--producer-id", "2000", "--partitions", "2", "--batch-size", "2048", *small)
    for seed, (codec, end) in enumerate((("zstd", "commit"), ("gzip", "abort"), ("lz4", "commit"))):
        records = make_records(30 - 5 * seed, 2, 20 + seed, now)
        runs.append(
            Run(
                "txn", records, now, (*txn, "--transaction", end), codec,
                producer_id=2000, marker=end.upper(),
            )
        )  # fmt: skip
    runs.append(Run("txn", make_records(10, 2, 23, T0 + 3 * DAY), T0 + 3 * DAY, (), "snappy"))
    for run in runs:
        kafkalog_produce(data_dir, run)
    api = Run("api", make_records(90, 2, 30, now), now, producer_id=3000, via="api")
    api_configs = {"internal.segment.bytes": "2000", "index.interval.bytes": "200"}
    api_write(data_dir, api, api_configs, batch_records=6)
    runs.append(api)

    expected = expected_logs(runs)
    # The Python API's batches cycle through the codecs: the expected codec per record.
    for (topic, p), entries in expected.items():
        if topic == "api":
            expected[(topic, p)] = [
                Entry(**{**e.__dict__, "codec": api_codec(i // 6)}) for i, e in enumerate(entries)
            ]

    written = OursWritten(data_dir, runs, expected)
    rel = lambda files: ",".join(str(f) for f in files)  # noqa: E731
    deep_files = _dump_files(data_dir, (".log", ".index", ".timeindex", ".txnindex", ".snapshot"))
    deep = kafka_dist.dump_log_segments(
        "--deep-iteration", "--print-data-log", "--key-decoder-class", B64,
        "--value-decoder-class", B64, "--files", rel(deep_files),
    )  # fmt: skip
    written.deep = _split_dump(deep.stdout)
    indexes = rel(_dump_files(data_dir, (".index", ".timeindex")))
    written.verify = kafka_dist.dump_log_segments("--verify-index-only", "--files", indexes).stdout
    written.sanity = kafka_dist.dump_log_segments("--index-sanity-check", "--files", indexes).stdout
    return written


def _parse_log_dump(lines: list[str]) -> tuple[list[dict], list[dict]]:
    """Batches (their fields) and records (their fields plus their batch's) of one .log dump."""
    batches, records = [], []
    batch: dict | None = None
    for line in lines:
        if line.startswith("baseOffset:"):
            batch = dict(BATCH_FIELD.findall(line))
            batches.append(batch)
        elif line.startswith("| offset:"):
            m = RECORD_LINE.fullmatch(line)
            assert m, f"a record line not understood: {line!r}"
            records.append({**m.groupdict(), "batch": batch})
    return batches, records


def _partition_dumps(written: OursWritten) -> dict[tuple[str, int], list[tuple[str, list[str]]]]:
    """Each partition's .log dumps in segment order, as (file name, lines)."""
    out: dict[tuple[str, int], list[tuple[str, list[str]]]] = defaultdict(list)
    for name, lines in sorted(written.deep.items()):
        path = Path(name)
        if path.suffix == ".log":
            topic, _, p = path.parent.name.rpartition("-")
            out[(topic, int(p))].append((path.name, lines))
    return out


def _dumped(r: dict) -> tuple:
    b = r["batch"]
    key = None if r["key"] is None else base64.b64decode(r["key"])
    value = None if r["payload"] is None else base64.b64decode(r["payload"])
    header_keys = tuple(r["headerKeys"].split(",")) if r["headerKeys"] else ()
    return (
        int(r["offset"]), r["marker"], r["tstype"] if not r["marker"] else None,
        int(r["ts"]) if not r["marker"] else None, int(r["keySize"]) if not r["marker"] else None,
        int(r["valueSize"]) if not r["marker"] else None, header_keys, key, value,
        int(r["sequence"]), int(b["producerId"]), b["isTransactional"] == "true",
        b["isControl"] == "true", b["compresscodec"],
    )  # fmt: skip


def _expected_dump(e: Entry) -> tuple:
    if e.marker:
        return (
            e.offset, e.marker, None, None, None, None, (), None, None, -1, e.producer_id, True,
            True, "none",
        )  # fmt: skip
    return (
        e.offset, None, "CreateTime", e.timestamp, -1 if e.key is None else len(e.key),
        -1 if e.value is None else len(e.value), tuple(k for k, _ in e.headers), e.key, e.value,
        e.sequence, e.producer_id, e.transactional, False, e.codec,
    )  # fmt: skip


def test_kafka_dump_reads_every_record_we_wrote(ours_written):
    """DumpLogSegments --deep-iteration reads, segment after segment, exactly the records fed to
    kafkalog: offsets, timestamps, keys and values (bytes), header keys, sequences, producer
    ids, transactional flags, markers and codecs."""
    dumps = _partition_dumps(ours_written)
    assert set(dumps) == set(ours_written.expected)
    for tp, expected in sorted(ours_written.expected.items()):
        got = []
        for _name, lines in dumps[tp]:
            got += [_dumped(r) for r in _parse_log_dump(lines)[1]]
        want = [_expected_dump(e) for e in expected]
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{tp} record {i}:\n  Kafka read {g!r}\n  we wrote  {w!r}"
        assert len(got) == len(want), (tp, len(got), len(want))


def test_kafka_finds_every_batch_valid_and_segments_consistent(ours_written):
    """Every batch: magic 2, ``isvalid: true`` (Kafka's CRC check), leader epoch 0, offsets and
    positions contiguous across the segments of a partition, each segment starting at its file's
    base offset; small segment sizes gave several segments."""
    for tp, segments in sorted(_partition_dumps(ours_written).items()):
        next_offset = 0
        if tp[0].startswith(("codec-", "api")):
            assert len(segments) >= 3, (tp, [name for name, _ in segments])
        for name, lines in segments:
            base = int(name.split(".")[0])
            assert base == next_offset, (tp, name, next_offset)
            assert f"Log starting offset: {base}" in lines, (tp, name, lines[:2])
            position = 0
            for b in _parse_log_dump(lines)[0]:
                where = f"{tp} {name} batch at {b['baseOffset']}"
                assert b["isvalid"] == "true" and b["magic"] == "2", (where, b)
                assert b["partitionLeaderEpoch"] == "0", (where, b)
                assert int(b["baseOffset"]) == next_offset, (where, next_offset)
                assert int(b["position"]) == position, (where, position)
                count = int(b["lastOffset"]) - int(b["baseOffset"]) + 1
                assert int(b["count"]) == count, (where, b)
                next_offset = int(b["lastOffset"]) + 1
                position += int(b["size"])
            size = (ours_written.data_dir / f"{tp[0]}-{tp[1]}" / name).stat().st_size
            assert position == size, f"{tp} {name}: batches end at {position}, file has {size}"
        assert next_offset == len(ours_written.expected[tp]), tp


def test_kafka_finds_no_index_problem(ours_written):
    """--verify-index-only (each .index and .timeindex entry against the .log) reports nothing,
    --index-sanity-check passes every index; the indexes are not empty; and every .index entry
    points at the position of a batch ending at that offset (from the deep dump)."""
    problems = re.compile(r"mismatch|out of order|not found|exception|error|corrupt|fail", re.I)
    bad = [line for line in ours_written.verify.splitlines() if problems.search(line)]
    assert not bad, "\n".join(bad[:20])
    indexes = _dump_files(ours_written.data_dir, (".index", ".timeindex"))
    for f in indexes:
        name = str(f)
        sane = f"{name} passed sanity check." in ours_written.sanity
        assert sane or f"{name} is empty." in ours_written.sanity, (name, ours_written.sanity)
    entries = 0
    for f in _dump_files(ours_written.data_dir, (".index",)):
        log_lines = ours_written.deep[str(f.with_suffix(".log"))]
        batch_at = {int(b["position"]): int(b["lastOffset"]) for b in _parse_log_dump(log_lines)[0]}
        for line in ours_written.deep[str(f)]:
            m = re.fullmatch(r"offset: (\d+) position: (\d+)", line)
            if m:
                entries += 1
                assert batch_at.get(int(m[2])) == int(m[1]), (str(f), line)
    assert entries >= 50, f"only {entries} .index entries: index.interval.bytes not honoured?"
    time_entries = sum(
        1
        for f in _dump_files(ours_written.data_dir, (".timeindex",))
        for line in ours_written.deep[str(f)]
        if line.startswith("timestamp: ")
    )
    assert time_entries >= 50, time_entries


def test_kafka_reads_our_transaction_index_and_producer_snapshots(ours_written):
    """The abort's ``.txnindex`` entry (producer, first offset, the ABORT marker's offset, last
    stable offset after it) and, in each partition's newest producer snapshot, every producer's
    epoch, last sequence and the offset of its last data batch as fed."""
    expected = ours_written.expected
    for p in (0, 1):
        entries = expected[("txn", p)]
        aborted = [e.offset for e in entries if e.aborted]
        abort_marker = next(e.offset for e in entries if e.marker == "ABORT")
        lines = [
            line
            for name, dump in ours_written.deep.items()
            if name.startswith(f"{ours_written.data_dir}/txn-{p}/") and name.endswith(".txnindex")
            for line in dump
        ]
        want = (
            f"version: 0 producerId: 2000 firstOffset: {aborted[0]} lastOffset: {abort_marker} "
            f"lastStableOffset: {abort_marker + 1}"
        )
        assert lines == [want], (p, lines)
    for topic, pid in (("idem", 1000), ("txn", 2000), ("api", 3000)):
        for p in (0, 1):
            entries = [e for e in expected[(topic, p)] if e.producer_id == pid and not e.marker]
            snapshots = sorted(ours_written.data_dir.glob(f"{topic}-{p}/*.snapshot"))
            assert snapshots, (topic, p)
            lines = ours_written.deep[str(snapshots[-1])]
            line = next((ln for ln in lines if ln.startswith(f"producerId: {pid} ")), None)
            assert line is not None, (topic, p, lines)
            fields = dict(BATCH_FIELD.findall(line))
            assert fields["producerEpoch"] == "0", line
            assert int(fields["lastSequence"]) == entries[-1].sequence, line
            # A marker leaves the producer's last batch as it was (Kafka's appendEndTxnMarker).
            assert int(fields["lastOffset"]) == entries[-1].offset, line


# --- A real broker adopts what kafkalog wrote --------------------------------------------------


def _kafka_lines(topic: str, records: list[Rec]) -> list[dict]:
    """Records for kafka-it's RefProducer."""
    return [
        {
            "topic": topic, "partition": r.partition, "timestamp": r.timestamp,
            "key": _b64(r.key), "value": _b64(r.value),
            "headers": [[k, _b64(v)] for k, v in r.headers],
        }
        for r in records
    ]  # fmt: skip


def _explicit(records: list[Rec], ts: int) -> list[Rec]:
    """The records with a timestamp each (Kafka's producer would take the time of sending)."""
    return [
        Rec(r.partition, ts + i if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


@dataclass
class Adoption:
    broker_log: Path
    restart_from: int  # server.log's length when the broker was started again
    runs: list[Run]
    after: list[Run]
    expected: dict[tuple[str, int], list[Entry]]
    final: dict[tuple[str, int], list[Entry]]
    before_acks: list[dict]
    after_acks: list[dict]
    read_uncommitted: list[dict]
    final_read_committed: list[dict]
    marker_before: str
    marker_after_kafkalog: str
    clash_expected: dict[tuple[str, int], list[Entry]]
    clash_proc: subprocess.CompletedProcess
    clash_read: list[dict]


@pytest.fixture(scope="module")
def adoption(broker_factory, tmp_path_factory) -> Adoption:
    workdir = tmp_path_factory.mktemp("kafka-adopts")
    broker = broker_factory(workdir / "broker")
    dist = broker.dist
    try:
        broker.create_topic("adopted", partitions=2)
        broker.create_topic("replaced", partitions=1)
        broker.create_topic("clash", partitions=1)
        # Kafka's own records first, from a producer without idempotence: the controller hands
        # out no producer id before kafkalog writes (see test_..._producer_ids_do_not_clash).
        before = Run("adopted", _explicit(make_records(10, 2, 40, T0), T0), T0, via="kafka")
        plain = {"enable.idempotence": "false", "acks": "1"}
        lines = _kafka_lines("adopted", before.records)
        before_acks = dist.produce(broker.bootstrap, lines, configs=plain)
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    data_dir = broker.data_dir
    marker = data_dir / ".kafka_cleanshutdown"
    marker_before = marker.read_text()

    # An idempotent run with kafkalog's default producer id (the first kafkalog run: no
    # producer id in the directory yet, so 0) and recent timestamps (its producer
    # state does not expire before the broker starts again).
    now = (time.time_ns() // 1_000_000 // 1000) * 1000 - 3_600_000
    clash = Run("clash", make_records(3, 1, 90, now), now, ("--idempotent",), producer_id=0)
    kafkalog_produce(data_dir, clash)

    # kafkalog appends to the broker's own data directory while the broker is down. Each run's
    # timestamps lie 8 days after the last one's: segment.ms (7 days) rolls a segment per run,
    # in kafkalog as in Kafka.
    runs: list[Run] = [before]
    for k, codec in enumerate(CODECS):
        ts = T0 + (k + 1) * 8 * DAY
        runs.append(
            Run("adopted", make_records(16, 2, 50 + k, ts), ts, codec=codec,
                header=("writer", b"kafkalog"))
        )  # fmt: skip
    ts = T0 + 48 * DAY
    runs.append(Run("adopted", make_records(12, 2, 60, ts), ts, ("--producer-id", "77"), "lz4",
                    producer_id=77))  # fmt: skip
    for seed, end in enumerate(("commit", "abort", "commit")):
        opts = ("--producer-id", "78", "--transaction", end)
        records = make_records(8, 2, 61 + seed, ts + 1000)
        runs.append(Run("adopted", records, ts, opts, "zstd", producer_id=78, marker=end.upper()))
    runs.append(Run("adopted", make_records(6, 2, 64, ts + 2000), ts, (), "gzip"))
    for run in runs[1:]:
        kafkalog_produce(data_dir, run)
    marker_after = marker.read_text() if marker.exists() else "(missing)"

    # The other topic: kafkalog writes it in a directory of its own (small segments), and its
    # .log/.index/.timeindex files replace the broker's (partition.metadata, the leader epoch
    # checkpoint and the directory's checkpoints stay the broker's).
    elsewhere = workdir / "elsewhere"
    replaced = Run(
        "replaced", make_records(60, 1, 70, T0 + DAY), T0 + DAY,
        ("--config", "internal.segment.bytes=2048", "--config", "index.interval.bytes=128",
         "--batch-size", "1024"),
        "snappy", header=("writer", b"kafkalog"),
    )  # fmt: skip
    kafkalog_produce(elsewhere, replaced)
    target = data_dir / "replaced-0"
    for f in target.iterdir():
        if f.suffix in (".log", ".index", ".timeindex"):
            f.unlink()
    copied = [f for f in (elsewhere / "replaced-0").iterdir()]
    copied = [f for f in copied if f.suffix in (".log", ".index", ".timeindex")]
    assert len([f for f in copied if f.suffix == ".log"]) >= 3, copied
    for f in copied:
        shutil.copy2(f, target / f.name)
    runs.append(replaced)
    expected = expected_logs(runs)

    restart_from = broker.log_file.stat().st_size
    try:
        broker.restart()
        broker.wait_for_leaders("adopted", 2)
        broker.wait_for_leaders("replaced", 1)
        read_uncommitted = dist.consume(broker.bootstrap, ["adopted", "replaced"])
        # The first idempotent producer the broker has seen: three records in one batch.
        clash_after = Run("clash", _explicit(make_records(3, 1, 91, now), now), now, via="kafka")
        lines = [*_kafka_lines("clash", clash_after.records), {"op": "flush"}]
        clash_proc = dist.run(
            "kafkalog.it.RefProducer", "--bootstrap-server", broker.bootstrap,
            "--config", "linger.ms=1000", input="".join(json.dumps(x) + "\n" for x in lines),
            check=False,
        )  # fmt: skip
        # Kafka's producer goes on after our records.
        ts = T0 + 60 * DAY
        after = [
            Run("adopted", _explicit(make_records(6, 2, 80, ts), ts), ts, via="kafka"),
            Run("replaced", _explicit(make_records(3, 1, 81, ts), ts), ts, via="kafka"),
        ]
        lines = [line for run in after for line in _kafka_lines(run.topic, run.records)]
        after_acks = dist.produce(broker.bootstrap, lines)
        final_rc = dist.consume(broker.bootstrap, ["adopted", "replaced"], "read_committed")
        clash_read = dist.consume(broker.bootstrap, ["clash"])
    except BaseException:
        broker.stop(kill=True)
        raise
    broker.stop()
    return Adoption(
        broker.log_file, restart_from, runs, after, expected, expected_logs(runs + after),
        before_acks, after_acks, read_uncommitted, final_rc, marker_before, marker_after,
        expected_logs([clash, clash_after]), clash_proc, clash_read,
    )  # fmt: skip


def _consumer_rows(records: list[dict]) -> list[tuple]:
    return [
        (
            r["topic"], r["partition"], r["offset"], r["timestamp"], r["timestampType"],
            _unb64(r["key"]), _unb64(r["value"]), tuple((k, _unb64(v)) for k, v in r["headers"]),
        )
        for r in records
    ]  # fmt: skip


def _expected_rows(logs: dict[tuple[str, int], list[Entry]], committed: bool) -> list[tuple]:
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


def test_broker_took_kafkas_records_first(adoption):
    """The scenario: Kafka's producer wrote offsets 0..4 of each partition before kafkalog."""
    got = sorted((a["partition"], a["offset"]) for a in adoption.before_acks)
    want = sorted(
        (p, e.offset) for (t, p), es in adoption.expected.items() if t == "adopted" for e in es[:5]
    )
    assert got == want


def test_broker_consumer_reads_what_kafkalog_wrote(adoption):
    """After the restart Kafka's Java consumer (read_uncommitted) reads Kafka's records, then
    every record kafkalog appended in the broker's directory, and every record of the replaced
    segments: offsets, timestamps, keys, values and headers as fed."""
    _compare(_consumer_rows(adoption.read_uncommitted), _expected_rows(adoption.expected, False))


def test_broker_appends_after_ours_and_reads_committed(adoption):
    """Kafka's producer appends after our last offset (markers included: offsets continue), and
    a read_committed consumer then reads everything but the aborted transaction."""
    acks = sorted((a["topic"], a["partition"], a["offset"]) for a in adoption.after_acks)
    n = {tp: len(es) for tp, es in adoption.expected.items()}
    want = sorted(
        (t, p, e.offset)
        for (t, p), es in adoption.final.items()
        for e in es
        if e.offset >= n.get((t, p), 0)
    )
    assert acks == want
    got = _consumer_rows(adoption.final_read_committed)
    _compare(got, _expected_rows(adoption.final, True))


def _restart_log(adoption: Adoption) -> list[str]:
    with open(adoption.broker_log, "rb") as f:
        f.seek(adoption.restart_from)
        return f.read().decode("utf-8", "replace").splitlines()


# What the broker logs when it does not take a log as it is (recovery of unflushed segments,
# truncation, invalid or corrupt bytes), or any warning and error naming the partition.
BAD_LOAD = re.compile(r"\] (WARN|ERROR) |[Tt]runcat|Recovering|[Cc]orrupt|[Ii]nvalid|unflushed")


def test_broker_loads_our_logs_without_recovery_or_truncation(adoption):
    """Kafka loads each of our partitions as written: no recovery (clean shutdown marker), no
    truncation, the log end offset we wrote, kafkalog's producer snapshot loaded; no WARN or
    ERROR about our partitions."""
    lines = _restart_log(adoption)
    text = "\n".join(lines)
    assert "since clean shutdown file was found" in text, text[-3000:]
    for (topic, p), entries in sorted(adoption.expected.items()):
        name = f"{topic}-{p}"
        loaded = [ln for ln in lines if "Completed load of Log(dir=" in ln and f"/{name}," in ln]
        assert len(loaded) == 1, (name, loaded)
        assert f"logEndOffset={len(entries)})" in loaded[0], (name, len(entries), loaded[0])
        about = [ln for ln in lines if re.search(rf"\b{re.escape(name)}\b", ln)]
        bad = [ln for ln in about if BAD_LOAD.search(ln)]
        assert not bad, "\n".join(bad)
    for p in (0, 1):
        leo = len(adoption.expected[("adopted", p)])
        snapshot = f"/adopted-{p}/{leo:020d}.snapshot"
        assert any("Loading producer state from snapshot file" in ln and snapshot in ln
                   for ln in lines), (p, snapshot)  # fmt: skip


def test_broker_restart_after_kafkalog_counts_as_clean(adoption):
    """kafkalog keeps the broker epoch of the clean-shutdown marker it found, so that the
    controller sees the restart as a clean one (KIP-966) and elects leaders cleanly."""
    assert adoption.marker_before.startswith('{"version":0,"brokerEpoch":'), adoption.marker_before
    lines = _restart_log(adoption)
    unclean = [
        ln for ln in lines if "handleBrokerUncleanShutdown" in ln or "unclean election" in ln
    ]
    assert adoption.marker_after_kafkalog == adoption.marker_before and not unclean, (
        adoption.marker_after_kafkalog,
        unclean[:3],
    )


def test_broker_producer_ids_do_not_clash_with_ours(adoption):
    """kafkalog's default idempotent producer id is not one the KRaft controller hands out later:
    the broker's first idempotent producer after the restart appends its records after ours."""
    proc = adoption.clash_proc
    assert proc.returncode == 0, proc.stderr[-2000:]
    acks = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [a["offset"] for a in acks] == [3, 4, 5], acks
    _compare(_consumer_rows(adoption.clash_read), _expected_rows(adoption.clash_expected, False))
