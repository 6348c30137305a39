"""Writes to data directories in S3 (docs/object-storage.md, "Writing"), against moto's S3
server on loopback: a write and an append read back as the same writes to a local directory
do; the committed objects copied to a disk are a data directory Kafka's rules accept; a write
that fails, or whose process is killed, leaves nothing a reader sees; a second writer that
started from an older commit is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest
from s3_endpoint import moto_s3

import kafkalog.arrow
from kafkalog.dataset import (
    ConcurrentCommitError,
    OptionError,
    newest_manifest,
    parse_write_options,
)
from kafkalog.dataset.planner import clear_caches
from kafkalog.dataset.writer import TaskWriter, commit_staged, prepare_staging, remove_staging
from kafkalog.log.storage import RemoteStorageError

# Slow: writes, commits and a killed writer against the S3 server (about 36 s).
pytestmark = pytest.mark.slow

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

BUCKET = "kafkalog-writes"
SECRET = "s3cr3t-never-shown"
COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "value"]


@pytest.fixture(scope="module")
def s3():
    """(boto3 client, endpoint): moto's S3 server with an empty bucket, and the environment
    that points the AWS SDK at it."""
    with moto_s3(BUCKET, SECRET) as (client, endpoint):
        yield client, endpoint


def rows(n: int, start: int = 0, *, width: int = 40) -> pa.Table:
    return pa.table({
        "key": [b"k%d" % (i % 97) for i in range(start, start + n)],
        "value": [(b"%07d" % i) * (width // 7 + 1) for i in range(start, start + n)],
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(start, start + n)], pa.int64()),
    })  # fmt: skip


def keys(client, prefix: str) -> dict[str, int]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for o in page.get("Contents", []):
            if not o["Key"].endswith("/"):  # (pyarrow keeps emptied "directories" as markers)
                out[o["Key"][len(prefix) + 1 :]] = o["Size"]
    return out


def read(path) -> pa.Table:
    clear_caches()
    t = kafkalog.arrow.open_data_dir(os.fspath(path)).read_all().select(COLUMNS)
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


def test_write_and_append_read_as_local_writes(s3, tmp_path):
    client, _ = s3
    url = f"s3://{BUCKET}/append"
    local = tmp_path / "local"
    for target in (url, local):
        kafkalog.arrow.write_data_dir(rows(3000), target, topic="t", num_partitions=3,
                                      segment_bytes=64 << 10)  # fmt: skip
        kafkalog.arrow.write_data_dir(rows(2000, 3000), target, topic="t")
        kafkalog.arrow.write_data_dir(rows(50), target, topic="u", num_partitions=1)
    assert read(url).equals(read(local))
    assert read(url).num_rows == 5050
    manifest = newest_manifest(url)
    assert manifest is not None and manifest.commit == 3
    # every object the manifest names is there, and copied to a disk they are a data directory
    present = keys(client, "append")
    assert set(manifest.objects) <= set(present)
    copy = tmp_path / "copy"
    for name in manifest.objects:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        client.download_file(BUCKET, f"append/{name}", str(copy / name))
    from kafkalog.log.verify import verify

    report = verify(copy)
    assert report.ok, str(report)
    assert read(copy).equals(read(local))


def checkpoint_line(tp, entry) -> str:
    return f"{tp.topic} {tp.partition} {entry.log_end_offset}"


def test_checkpoints_follow_the_manifest(s3, tmp_path):
    client, _ = s3
    url = f"s3://{BUCKET}/checkpoints"
    kafkalog.arrow.write_data_dir(rows(500), url, topic="t", num_partitions=2)
    kafkalog.arrow.write_data_dir(rows(500, 500), url, topic="t")
    manifest = newest_manifest(url)
    body = client.get_object(Bucket=BUCKET, Key="checkpoints/recovery-point-offset-checkpoint")
    lines = body["Body"].read().decode().splitlines()
    assert lines[:2] == ["0", "2"]
    assert sorted(lines[2:]) == sorted(checkpoint_line(tp, e) for tp, e in
                                       manifest.partitions.items())  # fmt: skip
    assert sum(e.log_end_offset for e in manifest.partitions.values()) == 1000


def commands(capfd, url: str) -> list[tuple[int, str]]:
    """``kafkalog stats --json`` and ``kafkalog transactions`` of ``url``: (status, stdout)."""
    from kafkalog.cli.main import main

    capfd.readouterr()
    out = []
    for args in (["stats", "--json", "--quiet", url], ["transactions", url]):
        status = main(args)
        out.append((status, capfd.readouterr().out))
    return out


def test_uncommitted_objects_are_not_read(s3, tmp_path, capfd):
    client, _ = s3
    url = f"s3://{BUCKET}/uncommitted"
    kafkalog.arrow.write_data_dir(rows(400), url, topic="t", num_partitions=2)
    before, before_commands = read(url), commands(capfd, url)
    assert [status for status, _ in before_commands] == [0, 0]
    summary = json.loads(before_commands[0][1].splitlines()[-1])
    assert (summary["type"], summary["partitions"], summary["records"]) == ("summary", 2, 400)
    # a write under way: a new segment put in place, its manifest not yet; and a new partition
    local = tmp_path / "more"
    kafkalog.arrow.write_data_dir(rows(400), local, topic="t", num_partitions=3)
    end = newest_manifest(url).partitions
    tp0 = next(tp for tp in end if tp.partition == 0)
    seg = sorted((local / "t-0").glob("*.log"))[0]
    name = f"{end[tp0].log_end_offset:020d}.log"
    client.upload_file(str(seg), BUCKET, f"uncommitted/t-0/{name}")
    client.upload_file(str(seg.with_suffix(".index")), BUCKET,
                       f"uncommitted/t-0/{name[:-4]}.index")  # fmt: skip
    client.upload_file(str(seg), BUCKET, "uncommitted/t-2/00000000000000000000.log")
    after = read(url)
    assert after.equals(before)
    # the command-line readers honour the manifest too: the same answers
    assert commands(capfd, url) == before_commands
    # and verify checks the commit, naming what no commit holds (info, not damage)
    from kafkalog.log.verify import verify

    found = verify(url)
    assert not [f for f in found.findings if f.severity != "info"], found.findings
    assert {(f.code, os.path.basename(f.path)) for f in found.findings} >= {
        ("uncommitted-files", "t-0"),
        ("uncommitted-partition", "t-2"),
    }
    assert sum(p.records for p in found.partitions) == 400
    # the next write starts its segments at the committed end, over the leftovers
    kafkalog.arrow.write_data_dir(rows(100, 400), url, topic="t")
    assert read(url).num_rows == 500


def test_a_failed_write_leaves_nothing_visible(s3, monkeypatch):
    client, _ = s3
    url = f"s3://{BUCKET}/failed"
    kafkalog.arrow.write_data_dir(rows(600), url, topic="t", num_partitions=3)
    before, objects = read(url), keys(client, "failed")
    from kafkalog.dataset import remote_writer

    real, calls = remote_writer.put_file, []

    def failing(target, local):
        calls.append(target)
        if len(calls) == 4:
            raise RemoteStorageError("writing failed: injected", path=target)
        return real(target, local)

    monkeypatch.setattr(remote_writer, "put_file", failing)
    with pytest.raises(RemoteStorageError, match="injected"):
        kafkalog.arrow.write_data_dir(rows(600, 600), url, topic="t")
    assert read(url).equals(before)
    assert keys(client, "failed") == objects  # what was put before the failure is deleted
    # an input that fails while being encoded: nothing is put at all
    monkeypatch.setattr(remote_writer, "put_file", real)

    def broken():
        yield rows(10).to_batches()[0]
        raise ValueError("the input broke")

    with pytest.raises(ValueError, match="the input broke"):
        kafkalog.arrow.write_data_dir(broken(), url, topic="t")
    assert keys(client, "failed") == objects


def test_a_failure_after_the_manifest_is_a_warning(s3, monkeypatch):
    url = f"s3://{BUCKET}/after"
    kafkalog.arrow.write_data_dir(rows(100), url, topic="t", num_partitions=1)
    from kafkalog.dataset import remote_writer

    real = remote_writer.put_file

    def failing(target, local):
        if target.endswith("checkpoint"):
            raise RemoteStorageError("writing failed: injected", path=target)
        return real(target, local)

    monkeypatch.setattr(remote_writer, "put_file", failing)
    with pytest.warns(UserWarning, match="commit 2 of .* is made"):
        kafkalog.arrow.write_data_dir(rows(100, 100), url, topic="t")
    assert read(url).num_rows == 200


WRITER = textwrap.dedent(
    """
    import sys, pyarrow as pa, kafkalog.arrow
    def batches():
        for n in range(400):
            yield pa.record_batch({"value": [b"%06d-%04d" % (n, i) * 30 for i in range(500)]})
    kafkalog.arrow.write_data_dir(batches(), sys.argv[1], topic="t", segment_bytes=1 << 20)
    """
)


def test_a_killed_writer_leaves_nothing_visible(s3):
    """A real writing process, killed (SIGKILL) while its objects are being put: readers see the
    previous commit, exactly; the next write commits over what it left."""
    client, _ = s3
    url = f"s3://{BUCKET}/killed"
    kafkalog.arrow.write_data_dir(rows(300), url, topic="t", num_partitions=4)
    before = read(url)
    committed = set(newest_manifest(url).objects)
    child = subprocess.Popen([sys.executable, "-c", WRITER, url], env=dict(os.environ),
                             stderr=subprocess.PIPE)  # fmt: skip
    leftovers: set[str] = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and child.poll() is None:
            present = keys(client, "killed")
            leftovers = {k for k in present if k not in committed and "manifest" not in k}
            if any(k.endswith(".log") for k in leftovers):
                break
            time.sleep(0.02)
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert leftovers, "the writer was not caught while putting its objects"
    assert newest_manifest(url).commit == 1
    assert read(url).equals(before)
    kafkalog.arrow.write_data_dir(rows(100, 300), url, topic="t")
    after = read(url)
    assert after.num_rows == 400
    assert newest_manifest(url).commit == 2


def test_a_second_writer_from_an_older_commit_is_refused(s3):
    url = f"s3://{BUCKET}/concurrent"
    kafkalog.arrow.write_data_dir(rows(100), url, topic="t", num_partitions=2)
    options = parse_write_options({"path": url, "topic": "t"})
    stagings = [prepare_staging(options, overwrite=False, shared=False) for _ in range(2)]
    staged = []
    for n, staging in enumerate(stagings):
        task = TaskWriter(options, staging)
        task.add(rows(50, 1000 * (n + 1)).to_batches()[0])
        staged.append(task.finish())
    try:
        commit_staged(options, [staged[0]], overwrite=False, staging=stagings[0])
        with pytest.raises(ConcurrentCommitError, match="one writer at a time") as e:
            commit_staged(options, [staged[1]], overwrite=False, staging=stagings[1])
        assert e.value.path == url
    finally:
        for staging in stagings:
            remove_staging(staging)
    assert read(url).num_rows == 150
    assert newest_manifest(url).commit == 2


def test_what_object_storage_refuses(s3, tmp_path):
    client, _ = s3
    url = f"s3://{BUCKET}/refused"
    kafkalog.arrow.write_data_dir(rows(10), url, topic="t", num_partitions=1)
    with pytest.raises(OptionError, match="overwrite is not supported"):
        kafkalog.arrow.write_data_dir(rows(10), url, topic="t", mode="overwrite")
    local = tmp_path / "broker"
    kafkalog.arrow.write_data_dir(rows(10), local, topic="t", num_partitions=1)
    for f in sorted(local.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), BUCKET, f"uploaded/{f.relative_to(local).as_posix()}")
    with pytest.raises(OptionError, match="no kafkalog manifest"):
        kafkalog.arrow.write_data_dir(rows(10), f"s3://{BUCKET}/uploaded", topic="t")
    with pytest.raises(OptionError, match="numPartitions"):
        kafkalog.arrow.write_data_dir(rows(10), f"s3://{BUCKET}/fresh", topic="t")
    with pytest.raises(OptionError, match="already has 1 partitions"):
        kafkalog.arrow.write_data_dir(rows(10), url, topic="t", num_partitions=2)


def test_the_manifest_names_no_credentials(s3):
    client, _ = s3
    url = f"s3://{BUCKET}/secret"
    kafkalog.arrow.write_data_dir(rows(10), url, topic="t", num_partitions=1)
    body = client.get_object(
        Bucket=BUCKET, Key="secret/kafkalog-manifest-00000000000000000001.json"
    )
    text = body["Body"].read().decode()
    assert SECRET not in text and "testing" not in text
    doc = json.loads(text)
    assert doc["partitions"][0]["segments"][0][0] == 0


def test_spark_streaming_sink_refuses_object_storage(s3):
    pytest.importorskip("pyspark")
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafkalog.spark.writer import KafkaLogStreamWriter

    options = parse_write_options({"path": f"s3://{BUCKET}/stream", "topic": "t"})
    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(OptionError, match="batch writes"):
        KafkaLogStreamWriter(options, schema, False)
