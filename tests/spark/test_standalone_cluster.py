"""The kafkalog source on a real Spark standalone cluster: a master and two workers (one core,
512 MB each) started from the installed pyspark distribution, and a driver submitted to it with
``spark-submit --master spark://...`` (tests/spark/cluster_app.py). The executors are separate
JVMs with their own Python workers, started by the workers in their own directories, so
nothing reaches them but the installed package and what Spark ships.

What the driver got is compared with independent truth: the records written with kafkalog's log
layer (tests/spark/helpers.py) and kafka-python's decoding of what the cluster wrote, and the real
brokers' data directories of ../shared/fixtures with EXPECTED.json's per-file digests. Where the
work ran is read from /proc: every task's Python worker descends from an executor JVM
(``CoarseGrainedExecutorBackend``) whose parent is one of the two workers, not from the driver.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import shared_fixtures
from objectstore.s3_endpoint import moto_s3, upload
from shared_fixtures import KAFKA_DATA, MISSING, requires_shared_fixtures

from .cluster import (
    JVM_OPTIONS,
    Process,
    kafka_python_partitions,
    process_tree_pids,
    spark_home,
    standalone_cluster,
)
from .helpers import write_dir

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("cluster_app.py")
TOPICS = {"a": 3, "b": 3}
PER_PARTITION = 200
WRITE_ROWS = 3000
BUCKET = "kafkalog-cluster"
SECRET = "cluster-s3cr3t-key"  # must appear in no log of the driver, the workers or executors
AWS_SETTINGS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED")  # fmt: skip


def _fixture_dirs() -> list[str]:
    """Real broker directories whose every record is plain to compare per file with EXPECTED.json:
    no missing .log, no control batch, no log start offset above 0, no mixed magics; at most ten
    partitions of non-internal topics (what a read of the directory returns), to keep the
    number of tasks small."""
    if not shared_fixtures.PRESENT:
        return []
    logs = shared_fixtures.EXPECTED.get("logs", {})
    chosen = []
    for name in shared_fixtures.DATA_DIRS:
        if any(f.endswith(".log") for f in MISSING.get(name, [])):
            continue
        files = {
            rel: e for rel, e in logs.items()
            if rel.startswith(f"{name}/") and rel.endswith(".log")
            and not rel.split("/")[1].startswith("__")
        }  # fmt: skip
        partitions = {rel.split("/")[1] for rel in files}
        checkpoint = KAFKA_DATA / name / "log-start-offset-checkpoint"
        starts = checkpoint.read_text().splitlines()[2:] if checkpoint.is_file() else []
        plain = all(
            e["control_batches"] == 0 and len(e["magics"]) <= 1 for e in files.values()
        ) and all(line.split()[0].startswith("__") or line.split()[2] == "0" for line in starts)
        if plain and 0 < len(partitions) <= 10 and sum(e["records"] for e in files.values()):
            chosen.append(name)
    return chosen


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = spark_home()
    before = process_tree_pids()
    with standalone_cluster(home, tmp_path_factory.mktemp("cluster")) as running:
        yield running
    left = process_tree_pids() - before
    assert not left, f"processes left after the cluster stopped: {sorted(left)}"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from dataset.written_logs import SEGMENT, extents, write_log

    base = tmp_path_factory.mktemp("cluster-data")
    written = write_dir(base / "data", TOPICS, PER_PARTITION, batch=25, compression="lz4")
    clean = write_log(base / "damaged")
    pos, _size = extents(clean)[4]
    damaged = bytearray(clean)
    damaged[pos + 80] ^= 0x55  # a record byte: the batch's CRC no longer matches
    (base / "damaged" / "t-0" / f"{SEGMENT}.log").write_bytes(bytes(damaged))
    return {"base": base, "written": written, "clean": clean, "damaged_at": pos}


@pytest.fixture(scope="module")
def s3(data):
    """moto's S3 server on loopback holding the data directory (``uploaded/``); the AWS SDK's
    settings that point the driver and the executors at it (``spark.executorEnv``)."""
    pytest.importorskip("moto.server")
    import os

    with moto_s3(BUCKET, SECRET) as (client, _endpoint):
        upload(client, BUCKET, data["base"] / "data", "uploaded")
        yield {name: os.environ[name] for name in AWS_SETTINGS}


@pytest.fixture(scope="module")
def app(cluster, data, s3):
    """The driver's results: one spark-submit of cluster_app.py to the cluster."""
    base = data["base"]
    fixtures = _fixture_dirs()
    request = {
        "executors": len(cluster.workers),
        "scenarios": ["read", "damaged", "write", "stream", "s3"]
        + (["fixtures"] if fixtures else []),
        "s3_data": f"s3://{BUCKET}/uploaded",
        "s3_out": f"s3://{BUCKET}/copied",
        "data": str(base / "data"),
        "damaged": str(base / "damaged"),
        "loss_log": str(base / "loss"),
        "fixtures": [[name, str(KAFKA_DATA / name)] for name in fixtures],
        "write_out": str(base / "written"),
        "write_rows": WRITE_ROWS,
        "stream_out": str(base / "streamed"),
        "checkpoint": str(base / "checkpoint"),
        "max_per_trigger": 600,
    }
    (base / "request.json").write_text(json.dumps(request))
    command = [
        str(cluster.home / "bin" / "spark-submit"),
        "--master", cluster.url,
        "--driver-java-options", JVM_OPTIONS,
        "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=2",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.ui.showConsoleProgress=false",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.shuffle.partitions=4",
        *(a for name, value in s3.items() for a in ("--conf", f"spark.executorEnv.{name}={value}")),
        str(APP), str(base / "request.json"), str(base / "result.json"),
    ]  # fmt: skip
    env = {**cluster.env, **s3}
    driver = Process.start("spark-submit", command, env, base / "driver.log", base)
    try:
        code = driver.popen.wait(timeout=240)
    except subprocess.TimeoutExpired:
        driver.stop()
        pytest.fail(f"the application did not finish within 240 s:\n{driver.tail(80)}")
    assert code == 0, f"spark-submit failed ({code}):\n{driver.tail(80)}"
    return json.loads((base / "result.json").read_text())


def _ok(result: dict, name: str) -> dict:
    outcome = result[name]
    if "error" in outcome:
        pytest.fail(f"the {name} scenario failed in the driver:\n{outcome['error']}")
    return outcome


def test_two_workers_registered_with_one_core_and_512m_each(cluster):
    state = cluster.state()
    assert state["status"] == "ALIVE" and state["aliveworkers"] == 2
    assert [(w["cores"], w["memory"]) for w in state["workers"]] == [(1, 512), (1, 512)]


def test_read_runs_in_the_executors_and_returns_every_record(app, cluster, data):
    got = _ok(app, "read")
    expected = sorted(
        [topic, p, i, None if r["key"] is None else r["key"].hex(), r["value"].hex(),
         r["timestamp"] / 1000, [[k, v.hex()] for k, v in r["headers"]]]
        for (topic, p), rows in data["written"].items() for i, r in enumerate(rows)
    )  # fmt: skip
    assert got["rows"] == expected

    driver = app["driver"]
    assert driver["master"] == cluster.url
    assert len(driver["executors"]) == 3  # the driver's block manager and two executors
    tasks = got["tasks"]
    assert sum(t["rows"] for t in tasks) == len(expected)
    worker_pids = {w.pid for w in cluster.workers}
    for task in tasks:
        executor = task["executor"]
        assert executor is not None, f"a task's Python worker is no executor's child: {task}"
        assert executor["jvm_parent"] in worker_pids
        assert executor["jvm_pid"] != driver["jvm_pid"]
        assert task["python_pid"] != driver["python_pid"]
        assert task["python"] == sys.executable
        # the executor's own directory under its worker's, not the driver's
        assert any(Path(task["cwd"]).is_relative_to(w) for w in cluster.work_dirs)
        assert task["kafkalog"].endswith("kafkalog/__init__.py")
    assert {t["executor"]["executor_id"] for t in tasks} == {"0", "1"}  # both executors
    assert len({t["executor"]["jvm_parent"] for t in tasks}) == 2  # on both workers


def test_damage_is_met_by_the_executors_task(app, cluster, data):
    from dataset.written_logs import extents, kafka_python_records

    got = _ok(app, "damaged")
    clean, pos = data["clean"], data["damaged_at"]
    size = dict(extents(clean))[pos]
    skipped = {r[0] for r in kafka_python_records(clean[pos : pos + size])}
    assert got["offsets"] == [r[0] for r in kafka_python_records(clean) if r[0] not in skipped]
    (owner,) = got["files"].values()  # one task met it and wrote its line
    assert owner["executor"] is not None, "the dataLossLog line was not written by an executor"
    assert owner["executor"]["jvm_parent"] in {w.pid for w in cluster.workers}
    assert owner["pid"] != app["driver"]["python_pid"]


@requires_shared_fixtures
def test_real_broker_directories_match_expected_json(app):
    got = _ok(app, "fixtures")
    logs = shared_fixtures.EXPECTED["logs"]
    assert len(got) >= 3, f"too few fixture directories qualified: {sorted(got)}"
    for name, rows in got.items():
        per_file = defaultdict(list)
        bases: dict[tuple[str, int], list[int]] = {}
        for topic, partition, offset, ts, key, value, n_headers in rows:
            directory = KAFKA_DATA / name / f"{topic}-{partition}"
            if (topic, partition) not in bases:
                bases[(topic, partition)] = sorted(int(p.stem) for p in directory.glob("*.log"))
            base = max(b for b in bases[(topic, partition)] if b <= offset)
            per_file[f"{name}/{topic}-{partition}/{base:020d}.log"].append(
                (offset, ts, key, value, n_headers)
            )
        expected_files = {
            rel: e for rel, e in logs.items()
            if rel.startswith(f"{name}/") and rel.endswith(".log") and e["records"]
            and not rel.split("/")[1].startswith("__")
        }  # fmt: skip
        assert set(per_file) == set(expected_files), name
        for rel, records in per_file.items():
            exp = expected_files[rel]
            no_ts = set(exp["magics"]) == {"0"}
            lines = "".join(
                f"{o},{'N' if no_ts else ts},{'N' if k is None else k},{'N' if v is None else v},"
                f"{h}\n"
                for o, ts, k, v, h in records
            )
            assert len(records) == exp["records"], rel
            assert hashlib.sha256(lines.encode()).hexdigest() == exp["record_digest"], rel


def test_write_on_the_cluster_is_what_kafka_python_decodes(app, data):
    from kafka.partitioner.default import murmur2

    got = _ok(app, "write")
    decoded = kafka_python_partitions(data["base"] / "written")
    assert set(decoded) == {("written", 0), ("written", 1), ("written", 2)}
    rows = sorted(
        [p, offset, key.hex(), value.hex()]
        for (_t, p), records in decoded.items() for offset, key, value, _h in records
    )  # fmt: skip
    assert got["rows"] == rows  # the cluster reads back what kafka-python decodes
    values = Counter()
    for (_t, p), records in decoded.items():
        assert [r[0] for r in records] == list(range(len(records)))
        for _offset, key, value, headers in records:
            assert p == (murmur2(key) & 0x7FFFFFFF) % 3  # Kafka's default partitioner
            assert key == b"k%d" % (int(value[1:]) % 97) and headers == ()
            values[value] += 1
    assert values == Counter(b"v%d" % i for i in range(WRITE_ROWS))


def test_available_now_stream_on_the_cluster_copies_every_record_once(app, data):
    got = _ok(app, "stream")
    total = sum(TOPICS.values()) * PER_PARTITION
    assert got["input_rows"] == total
    assert got["batches"] == -(-total // 600)  # maxOffsetsPerTrigger=600
    decoded = kafka_python_partitions(data["base"] / "streamed")
    copied = Counter((key, value) for rows in decoded.values() for _o, key, value, _h in rows)
    written = Counter((r["key"], r["value"]) for rows in data["written"].values() for r in rows)
    assert copied == written


def test_s3_directory_is_read_and_written_by_the_executors(app, cluster, data):
    """The S3 copy of the data directory reads in the executors with the rows the local
    directory holds; the executors' write to S3 reads back whole; the secret key is in no log
    (the driver's, the master's and workers', the executors' stdout and stderr)."""
    got = _ok(app, "s3")
    expected = sorted(
        [topic, p, i, None if r["key"] is None else r["key"].hex(), r["value"].hex()]
        for (topic, p), rows in data["written"].items() for i, r in enumerate(rows)
    )  # fmt: skip
    assert got["rows"] == expected
    assert got["copied"] == sorted(([k, v] for _t, _p, _o, k, v in expected), key=repr)
    worker_pids = {w.pid for w in cluster.workers}
    assert got["tasks"] and all(
        executor is not None and executor["jvm_parent"] in worker_pids
        for _pid, executor in got["tasks"]
    ), got["tasks"]
    logs = [data["base"] / "driver.log", *cluster.work_dirs[0].parent.glob("*.log"),
            *(p for d in cluster.work_dirs for p in d.rglob("std*"))]  # fmt: skip
    leaked = [str(p) for p in logs if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert not leaked, f"the secret key was written to {leaked}"
