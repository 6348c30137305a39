"""Data directories in S3 (docs/object-storage.md), against a real S3-compatible server (moto's,
on loopback) with the directories uploaded at the start: kafkalog-written ones and the real
broker fixtures. Every read gives what the local read of the same directory gives; planning
reads by ranges; dropped connections and 503 SlowDown answers are retried, and a failure that
persists is the typed error naming the object and position, in bounded time."""

from __future__ import annotations

import re
import shutil
import time
import warnings
from pathlib import Path

import pyarrow as pa
import pytest
from remote_reads import READ_OPTIONS, digest, read_as_locally, table
from s3_endpoint import Proxy, moto_s3, upload

import kafkalog.arrow
import shared_fixtures
from arrow.arrow_data import write_topics, write_transactions  # the Arrow API tests' data
from kafkalog.dataset import OptionError
from kafkalog.errors import CorruptRecordError, KafkalogError
from kafkalog.log.storage import RemoteStorageError, fetched_bytes
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

BUCKET = "kafkalog-tests"
SECRET = "s3cr3t-never-shown"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(boto3 client, moto's endpoint, local root): moto serving a bucket holding the local
    directories under root, uploaded under the same names."""
    with moto_s3(BUCKET, SECRET) as (client, endpoint):
        root = tmp_path_factory.mktemp("local")
        write_topics(root / "written", {"clicks": 3, "views": 1}, 60)
        write_transactions(root / "written")
        big = pa.table({"value": [(b"%06d" % i) * 80 for i in range(12_000)]})
        kafkalog.arrow.write_data_dir(big, root / "big", topic="big", num_partitions=1)
        for name in ("written", "big"):
            upload(client, BUCKET, root / name, name)
        yield client, endpoint, root


def url(*parts: str) -> str:
    return "/".join([f"s3://{BUCKET}", *parts])


@pytest.mark.parametrize("kwargs", READ_OPTIONS)
def test_written_dir_reads_as_locally(s3, kwargs):
    _, _, root = s3
    local = table(root / "written", **kwargs)
    remote = table(url("written"), **kwargs)
    assert remote.num_rows == local.num_rows > 0
    assert digest(remote) == digest(local)


def test_plan_names_objects_never_credentials(s3):
    _, _, root = s3
    scan = kafkalog.arrow.plan_scan(url("written"), topics="clicks")
    local = kafkalog.arrow.plan_scan(root / "written", topics="clicks")
    assert scan.ranges == local.ranges and scan.total_bytes == local.total_bytes
    shown = repr(scan) + "".join(repr(p) + str(vars(p)) for p in scan.parts)
    assert f"s3://{BUCKET}/written/clicks-0/00000000000000000000.log" in str(
        [vars(p) for p in scan.parts]
    )
    assert SECRET not in shown and "testing" not in shown


def test_credentials_in_a_url_are_refused(s3):
    with pytest.raises(OptionError, match="credentials") as e:
        kafkalog.arrow.open_data_dir(f"s3://testing:{SECRET}@{BUCKET}/written")
    assert SECRET not in str(e.value)


def test_writing_to_an_uploaded_copy_is_refused(s3):
    # writes to object storage: tests/objectstore/test_s3_writes.py; a copy uploaded as it is on
    # a disk has no manifest to commit after, and is refused
    with pytest.raises(OptionError, match="no kafkalog manifest"):
        kafkalog.arrow.write_data_dir(pa.table({"value": [b"x"]}), url("written"), topic="clicks")
    assert not Path("s3:").exists()


def test_missing_prefix_is_named(s3):
    with pytest.raises(FileNotFoundError, match=f"s3://{BUCKET}/nowhere"):
        kafkalog.arrow.open_data_dir(url("nowhere"))


def test_ranged_reads_fetch_a_small_part_of_a_big_segment(s3):
    _, endpoint, root = s3
    segment = root / "big" / "big-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    assert size > 900_000
    proxy = Proxy(_host_port(endpoint))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
            before = fetched_bytes()[0]
            remote = table(url("big"), starting_offsets=6000, ending_offsets=6100)
            fetched = fetched_bytes()[0] - before
    finally:
        proxy.close()
    local = table(root / "big", starting_offsets=6000, ending_offsets=6100)
    assert digest(remote) == digest(local) and remote.num_rows == 100
    # Index entries, a few headers and the chosen batches: a few percent of the segment.
    assert fetched < size // 10, (fetched, size)
    assert proxy.answered < size // 10, (proxy.answered, size)


def _host_port(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.rsplit("//", 1)[1].split(":")
    return host, int(port)


@pytest.mark.parametrize("failure", ["drop", "slow_down"])
def test_transient_failures_are_retried(s3, failure):
    _, endpoint, root = s3
    proxy = Proxy(_host_port(endpoint))
    setattr(proxy, failure, 3)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
            remote = table(url("written"), topics="clicks")
    finally:
        proxy.close()
    assert (proxy.dropped if failure == "drop" else proxy.slowed) == 3
    assert digest(remote) == digest(table(root / "written", topics="clicks"))


def test_a_persistent_failure_names_the_object_and_position(s3):
    _, endpoint, _ = s3
    # Planned while healthy; failOnDataLoss=false skips damaged data, never a failed read.
    scan = kafkalog.arrow.plan_scan(url("written"), topics="views", fail_on_data_loss=False)
    proxy = Proxy(_host_port(endpoint))
    proxy.drop, proxy.drop_status = -1, b"HTTP/1.1 206"  # every ranged read is cut short
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
            started = time.monotonic()
            with pytest.raises(RemoteStorageError) as e:
                for _ in scan.batches():
                    pass
            elapsed = time.monotonic() - started
    finally:
        proxy.close()
    error = e.value
    assert isinstance(error, OSError) and not isinstance(error, KafkalogError)
    assert error.path == url("written", "views-0", "00000000000000000000.log")
    assert error.position == 0
    assert str(error).startswith(f"{error.path}, position 0: reading")
    assert SECRET not in str(error)
    assert elapsed < 30


def test_torn_tail_and_damage_as_for_a_local_read(s3, tmp_path):
    client, _, root = s3
    torn = tmp_path / "torn"
    shutil.copytree(root / "written", torn)
    log = torn / "views-0" / "00000000000000000000.log"
    data = log.read_bytes()
    log.write_bytes(data[:-7])  # an incomplete last batch
    upload(client, BUCKET, torn, "torn")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        remote = table(url("torn"), topics="views")
        local = table(torn, topics="views")
    assert any("incomplete last batch" in str(w.message) for w in seen)
    assert any(f"{url('torn', 'views-0')}/00000000000000000000.log, position" in str(w.message)
               for w in seen)  # fmt: skip
    assert digest(remote) == digest(local)

    damaged = tmp_path / "damaged"
    shutil.copytree(root / "written", damaged)
    log = damaged / "views-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    upload(client, BUCKET, damaged, "damaged")
    errors = []
    for path in (damaged, url("damaged")):
        with pytest.raises(CorruptRecordError) as e:
            table(path, topics="views")
        errors.append(e.value)
    assert errors[1].position == errors[0].position is not None
    assert errors[1].path == url("damaged", "views-0", "00000000000000000000.log")
    assert errors[1].message == errors[0].message


@requires_shared_fixtures
@pytest.mark.slow
def test_real_broker_data_dirs_read_as_locally(s3):
    client, _, _ = s3
    expected = shared_fixtures.EXPECTED.get("logs", {})
    for name in shared_fixtures.DATA_DIRS:
        upload(client, BUCKET, KAFKA_DATA / name, f"fixtures/{name}")
    checked = 0
    for name in shared_fixtures.DATA_DIRS:
        checked += read_as_locally(KAFKA_DATA / name, url("fixtures", name), expected)
    assert checked > 10


def test_the_docs_example_runs(s3, capsys):
    doc = Path(__file__).resolve().parents[2] / "docs" / "object-storage.md"
    code = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)[0]
    code = code.replace("my-bucket/backups/broker-1/kafka-logs", f"{BUCKET}/written")
    code = code.replace("orders", "clicks").replace("1_000", "10").replace("1_100", "20")
    exec(compile(code, "object-storage.md example", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip() == "10"


def test_segment_files_read_by_ranges_as_locally(s3):
    """The log layer's seam: FileRecords and the indexes of an object, read-only."""
    from kafkalog.log.segment import FileRecords, OffsetIndex, TimeIndex, TransactionIndex

    _, _, root = s3
    local_dir, remote_dir = root / "written" / "tx-0", url("written", "tx-0")
    name = "00000000000000000000"
    local, remote = FileRecords(local_dir / f"{name}.log"), FileRecords(f"{remote_dir}/{name}.log")
    assert (
        type(remote).__name__ == "RemoteRecords" and remote.size_in_bytes() == local.size_in_bytes()
    )
    assert [(b.base_offset, b.position) for b in remote] == [
        (b.base_offset, b.position) for b in local
    ]
    with pytest.raises(PermissionError):
        FileRecords(f"{remote_dir}/{name}.log", writable=True)
    for kind, suffix in ((OffsetIndex, "index"), (TimeIndex, "timeindex")):
        a, b = kind(local_dir / f"{name}.{suffix}", 0), kind(f"{remote_dir}/{name}.{suffix}", 0)
        assert list(a) == list(b)
    txn = TransactionIndex(f"{remote_dir}/{name}.txnindex", 0)
    assert list(txn) == list(TransactionIndex(local_dir / f"{name}.txnindex", 0)) != []
