"""Dump parity beyond one broker's directory: Kafka's DumpLogSegments and ``kafkalog dump`` on

- every dumpable file of ``../shared/fixtures/kafka-data`` (20 data directories real brokers
  wrote, Kafka 0.10.1 to 4.x: magic 1 and 2, every codec but zstd, KRaft logs and snapshots,
  damaged and missing files), copied to a temporary directory first;
- directories kafkalog wrote: ``kafkalog produce`` (every codec, headers, idempotent and
  transactional producers with COMMIT and ABORT markers and an open transaction, a compacted
  topic after ``kafkalog compact``, and ``__consumer_offsets``/``__transaction_state`` records,
  valid and not) and ``kafkalog.arrow.write_data_dir`` (every codec);

with test_dump_parity.py's flag sets, ``--max-bytes`` cutting files mid-way, and the decoders on
the internal topics. Stdout is compared line by line but for docs/cli.md's deliberate
differences (test_dump_parity.py's normalizers). Both sources sit in one directory and each test
runs one JVM over both (Kafka's start costs more than most of these files); without the
fixtures the kafkalog-written part still runs, and the checks of the fixtures alone skip.

Flags that only change how segments and KRaft snapshots print (``--deep-iteration``,
``--print-data-log``, ``--skip-record-metadata``, ``--max-bytes``: Kafka's tool passes them to
nothing else) run on the fixtures' ``.log``, ``.checkpoint`` and ``.snapshot`` files only: their
indexes are dumped by the flag sets that change how indexes print (none,
``--verify-index-only``, ``--index-sanity-check``), and Kafka's time index check, which reads
the log from each entry's position, takes 10 s of CPU for three of them.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_dump_parity import DECODERS, FLAG_SETS, SUFFIXES, _check, _kafkalog_bin, _split

from shared_fixtures import EXPECTED, KAFKA_DATA, PRESENT, requires_shared_fixtures

pytestmark = pytest.mark.slow

MAX_BYTES = "700"
MORE_FLAG_SETS = {
    **FLAG_SETS,
    "max-bytes": ("--max-bytes", MAX_BYTES),
    "max-bytes-data": ("--deep-iteration", "--print-data-log", "--max-bytes", MAX_BYTES),
}
LOG_ONLY = {"deep", "deep-data", "skip-metadata", "max-bytes", "max-bytes-data"}
INDEXES = (".index", ".timeindex")


def _dumpable(root: Path) -> list[str]:
    """Every file of the data directories under ``root`` (relative to it) that Kafka's tool
    dumps: their partitions' segments, indexes, snapshots and checkpoints, and the root's
    ``bootstrap.checkpoint``."""
    return [
        path.relative_to(root).as_posix()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name.endswith(SUFFIXES)
    ]


def _orphans(root: Path, files: list[str]) -> list[str]:
    """Indexes whose ``.log`` is absent (MISSING.json: too large to obtain): Kafka's tool stops
    with NoSuchFileException on them, kafkalog dumps them and reports that (docs/cli.md item 4)."""
    return [f for f in files if f.endswith(INDEXES) and not (root / f).with_suffix(".log").exists()]


def _topic_files(files: list[str], topic: str) -> list[str]:
    """The segments and KRaft snapshots of ``topic``'s partitions (for ``__cluster_metadata``
    also the data directories' ``bootstrap.checkpoint``)."""
    return [
        f
        for f in files
        if f.endswith((".log", ".checkpoint"))
        and (
            Path(f).parent.name.startswith(topic + "-")
            or (topic == "__cluster_metadata" and Path(f).name == "bootstrap.checkpoint")
        )
    ]


# Directories kafkalog wrote -------------------------------------------------------------------

T0 = 1_767_225_600_000
SMALL = ("--config", "internal.segment.bytes=2048", "--config", "index.interval.bytes=128")


def _lines(n: int, start: int, keyed: bool = False) -> list[dict]:
    rng = random.Random(start)
    out = []
    for i in range(start, start + n):
        rec: dict = {
            "key": None if i % 9 == 0 and not keyed else f"k{i % 13}",
            "value": None if i % 17 == 5 else "v" * rng.randint(0, 60) + f"-{i}-\u00e9",
            "timestamp": T0 + i * 1000,
        }
        if i % 3 == 0:
            rec["headers"] = [{"key": "h", "value": f"x{i}", "valueEncoding": "utf8"}, ["d", None]]
        if i % 11 == 0:
            rec.update(value="AP+A/w==", valueEncoding="base64")  # not UTF-8
        out.append(rec)
    return out


def _produce(data_dir: Path, records: list[dict], *args: str) -> None:
    """``kafkalog produce DATA_DIR --file RECORDS ARGS`` (in this process: 16 runs)."""
    from kafkalog.cli.main import main

    records_file = data_dir.parent / "records.jsonl"
    records_file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    status = main(["produce", str(data_dir), "--quiet", "--file", str(records_file), *args])
    assert status == 0, args


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _coordinator_records() -> tuple[list[dict], list[dict]]:
    """``__consumer_offsets`` and ``__transaction_state`` records: valid ones of several
    versions, tombstones, and keys and values the decoders reject (every record has a key:
    Kafka's tool stops at a keyless one)."""
    from kafkalog.format.internal import consumer_offsets_encode as co
    from kafkalog.format.internal import transaction_state_encode as ts

    def rec(key: bytes, value: bytes | None) -> dict:
        return {
            "key": _b64(key), "keyEncoding": "base64", "timestamp": T0,
            "value": None if value is None else _b64(value), "valueEncoding": "base64",
        }  # fmt: skip

    member = co.GroupMemberRecord(
        member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        rebalance_timeout=300000, session_timeout=45000, subscription=b"\x00\x01junk",
        assignment=b"",
    )  # fmt: skip
    garbage = [b"", b"\x00", b"\x00\x01", b"\x00\x01\xff\xff", b"\x7f\x7f", b"key-1", b"\xff\xfe"]
    offsets = [
        rec(
            co.encode_offset_commit_key("g", "orders", 3),
            co.encode_offset_commit_value(
                offset=42, metadata="m\u00e9", commit_timestamp=T0, leader_epoch=5
            ),
        ),
        rec(
            co.encode_offset_commit_key("g", "orders", 4),
            co.encode_offset_commit_value(
                offset=7, metadata="", commit_timestamp=T0, expire_timestamp=T0 + 1
            ),
        ),
        rec(co.encode_offset_commit_key("g", "orders", 4), None),
        rec(
            co.encode_group_metadata_key("g"),
            co.encode_group_metadata_value(
                protocol_type="consumer",
                generation=3,
                protocol="range",
                leader="m-1",
                current_state_timestamp=T0,
                members=[member],
            ),
        ),
        rec(co.encode_group_metadata_key("g"), None),
        rec(co.encode_offset_commit_key("g", "t", 0), b"\x00\x63\x00"),  # unknown version
        rec(co.encode_offset_commit_key("g", "t", 1), b"\x00\x03\x00"),  # truncated
    ]
    offsets += [rec(k, v) for k in garbage[1:] for v in (b"", b"\x00\x01", b"\x00\x03xyz", None)]
    txns = [
        rec(
            ts.encode_transaction_log_key("tx-1"),
            ts.encode_transaction_log_value(
                producer_id=9,
                producer_epoch=1,
                transaction_timeout_ms=60000,
                transaction_status=1,
                partitions=[("orders", 0), ("orders", 2)],
                last_update_timestamp_ms=T0,
                start_timestamp_ms=T0,
            ),
        ),
        rec(
            ts.encode_transaction_log_key("tx-2"),
            ts.encode_transaction_log_value(
                producer_id=10,
                producer_epoch=0,
                transaction_timeout_ms=60000,
                transaction_status=0,
                partitions=[],
                last_update_timestamp_ms=T0,
                start_timestamp_ms=-1,
            ),
        ),
        rec(ts.encode_transaction_log_key("tx-2"), None),
        rec(ts.encode_transaction_log_key("tx-3"), b"\x00\x05\x00\x00"),
    ]
    txns += [rec(k, v) for k in garbage[1:] for v in (b"", b"\x00\x00", None)]
    return offsets, txns


def _write_with_kafkalog(root: Path) -> None:
    import pyarrow as pa

    import kafkalog.arrow

    root.mkdir(parents=True)
    produced = root / "produced"
    for i, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        create = ("--partitions", "2", *SMALL) if i == 0 else ()
        _produce(produced, _lines(60, i * 100), "--topic", "mixed", *create, "--codec", codec,
                 "--batch-size", "400")  # fmt: skip
    _produce(produced, _lines(60, 0), "--topic", "idem", *SMALL, "--idempotent",
             "--batch-size", "300")  # fmt: skip
    _produce(produced, _lines(60, 100), "--topic", "idem", "--idempotent", "--codec", "zstd",
             "--batch-size", "300")  # fmt: skip
    txn = ("--topic", "txn", "--producer-id")
    _produce(produced, _lines(60, 0), *txn, "7", "--partitions", "2", *SMALL,
             "--transaction", "commit", "--batch-size", "300")  # fmt: skip
    _produce(produced, _lines(60, 100), *txn, "7", "--transaction", "abort", "--codec", "lz4",
             "--batch-size", "300")  # fmt: skip
    _produce(produced, _lines(20, 200), *txn, "8", "--transaction", "abort",
             "--coordinator-epoch", "3")  # fmt: skip
    _produce(produced, _lines(30, 300), *txn, "7", "--transaction", "commit", "--codec", "gzip")
    _produce(produced, _lines(10, 400), *txn, "9", "--transaction", "open")
    _produce(produced, _lines(60, 0, keyed=True), "--topic", "compacted", *SMALL,
             "--config", "cleanup.policy=compact", "--codec", "snappy",
             "--producer-id", "11", "--transaction", "abort")  # fmt: skip
    for codec in ("zstd", "none"):
        _produce(produced, _lines(40, 0, keyed=True), "--topic", "compacted", "--codec", codec,
                 "--producer-id", "11", "--transaction", "commit")  # fmt: skip
    from kafkalog.cli.main import main

    compact = ["compact", str(produced), "--topic", "compacted", "--apply", "--force", "--quiet"]
    assert main(compact) == 0
    offsets, txns = _coordinator_records()
    internal = ("--allow-internal-topics", "--partition", "0", "--batch-size", "200")
    _produce(produced, offsets, "--topic", "__consumer_offsets", "--partitions", "1", *internal)
    _produce(produced, txns, "--topic", "__transaction_state", "--partitions", "1", *internal,
             "--codec", "gzip")  # fmt: skip

    n = 300
    table = pa.table({
        "key": [None if i % 7 == 0 else f"key-{i % 23}".encode() for i in range(n)],
        "value": [
            None if i % 31 == 3 else b"\xff\x00" if i % 13 == 0 else b"value %d " % i * (i % 5)
            for i in range(n)
        ],
        "headers": [
            [{"key": "source", "value": b"shop"}, {"key": "n", "value": str(i).encode()}]
            if i % 4 == 0 else None
            for i in range(n)
        ],
        "partition": [i % 3 for i in range(n)],
        "timestamp": pa.array([T0 + i for i in range(n)], pa.int64()),
    })  # fmt: skip
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for start in range(0, n, 100):  # three appends: segments roll between them
            kafkalog.arrow.write_data_dir(
                table.slice(start, 100), root / "arrow", topic=f"arrow-{codec}",
                num_partitions=3, codec=codec, batch_size=500, segment_bytes=2048,
            )  # fmt: skip


# The files and the tests ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def dump_root(kafka_dist, tmp_path_factory):
    """One directory holding a copy of the fixtures (``kafka-data/``, when present) and the
    directories kafkalog writes (``kafkalog/produced``, ``kafkalog/arrow``): each test runs one
    JVM over both."""
    root = tmp_path_factory.mktemp("dump-parity")
    fixtures: list[str] = []
    if PRESENT:
        shutil.copytree(KAFKA_DATA, root / "kafka-data", symlinks=True)
        fixtures = [f"kafka-data/{f}" for f in _dumpable(root / "kafka-data")]
    _write_with_kafkalog(root / "kafkalog")
    written = [f"kafkalog/{f}" for f in _dumpable(root / "kafkalog")]
    return SimpleNamespace(
        dist=kafka_dist,
        data_dir=root,
        fixtures=fixtures,
        written=written,
        orphans=_orphans(root, fixtures),
    )


@requires_shared_fixtures
def test_fixture_files_are_all_there(dump_root):
    kinds = {Path(f).suffix for f in dump_root.fixtures}
    assert kinds == {".log", ".index", ".timeindex", ".snapshot", ".checkpoint"}, kinds
    assert len(dump_root.fixtures) == 2057, len(dump_root.fixtures)
    assert len(dump_root.orphans) == 6, dump_root.orphans


def test_kafkalog_written_files(dump_root):
    files = dump_root.written
    kinds = {Path(f).suffix for f in files}
    assert kinds == {".log", ".index", ".timeindex", ".snapshot", ".txnindex"}, kinds
    assert {f.split("/")[1] for f in files} == {"produced", "arrow"}
    assert sum(f.endswith(".log") for f in files) >= 50, len(files)


@pytest.mark.parametrize("flags", list(MORE_FLAG_SETS), ids=list(MORE_FLAG_SETS))
def test_dump_matches_kafka(dump_root, flags):
    """Every fixture file (those the flags change) and every kafkalog-written file."""
    fixtures = dump_root.fixtures
    if flags in LOG_ONLY:
        fixtures = [f for f in fixtures if not f.endswith(INDEXES)]
    args = MORE_FLAG_SETS[flags]
    _check(
        dump_root,
        fixtures + dump_root.written,
        args,
        " ".join(args) or "(no flags)",
        kafka_skips=[f for f in dump_root.orphans if f in fixtures],
        problems=bool(fixtures),  # the fixtures' index mismatches: status 1
    )


def _batch_lines(stdout: str) -> dict[str, int]:
    return {
        name: sum(line.startswith("baseOffset: ") for line in lines)
        for name, lines in _split(stdout).items()
    }


@requires_shared_fixtures
def test_fixture_max_bytes_cuts_files(dump_root):
    """``--max-bytes`` stops inside files: fewer batches printed than the files hold."""
    logs = [f for f in dump_root.fixtures if f.endswith(".log")]
    ours = subprocess.run(
        [*_kafkalog_bin(), "dump", "--quiet", "--max-bytes", MAX_BYTES, "--", *logs],
        cwd=dump_root.data_dir, capture_output=True, encoding="utf-8", check=False,
    )  # fmt: skip
    printed = _batch_lines(ours.stdout)
    cut = [f for f in logs if printed[f] < EXPECTED["logs"][f.split("/", 1)[1]]["batches"]]
    assert len(cut) >= 50, len(cut)


DECODER_CASES = {
    **{topic: (flag,) for topic, flag in DECODERS.items()},
    "__consumer_offsets-max-bytes": ("--offsets-decoder", "--max-bytes", MAX_BYTES),
    "__cluster_metadata-max-bytes": ("--cluster-metadata-decoder", "--max-bytes", MAX_BYTES),
}


@pytest.mark.parametrize("case", list(DECODER_CASES), ids=list(DECODER_CASES))
def test_decoders_match_kafka(dump_root, case):
    """The decoders on the fixtures' internal topics and on what kafkalog wrote to
    ``__consumer_offsets`` and ``__transaction_state`` (valid records and rejects); the cluster
    metadata decoder, whose topic kafkalog does not write, on every kafkalog-written segment
    (none of them metadata records: each line an error)."""
    topic = case.removesuffix("-max-bytes")
    files = _topic_files(dump_root.fixtures, topic)
    if PRESENT:
        assert len(files) >= 50, (topic, len(files))
    written = [f for f in dump_root.written if f.endswith(".log")]
    files += written if topic == "__cluster_metadata" else _topic_files(written, topic)
    args = DECODER_CASES[case]
    _check(dump_root, files, args, " ".join(args), problems=True)
