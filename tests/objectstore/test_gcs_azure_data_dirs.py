"""Data directories in Google Cloud Storage (``gs://``) and Azure Blob Storage (``abfss://``),
docs/object-storage.md, against real emulators on loopback: fake-gcs-server and Azurite
(tests/objectstore/gcs_azure_endpoints.py installs and starts them). The directories are
uploaded as a copy of a disk is (objects only, no directory markers): kafkalog-written ones
(records made by kafka-python) and the real brokers' fixtures. Every read, through the Arrow
reader and the read-only commands, gives what the local read of the same directory gives;
damage and missing objects are errors naming the object's URL and the byte position."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pytest
from gcs_azure_endpoints import AZURITE_KEY, azurite, fake_gcs, upload
from remote_reads import READ_OPTIONS, damage_second_batch, digest, read_as_locally, table

import kafkalog.arrow
import shared_fixtures
from arrow.arrow_data import T0, write_topics, write_transactions  # the Arrow API tests' data
from kafkalog.cli.main import main
from kafkalog.dataset import OptionError
from kafkalog.errors import CorruptRecordError
from kafkalog.log.storage import RemoteStorageError, fetched_bytes, filesystem_for
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

# Slow: each emulator is installed once per machine (a minute or two), then started per module.
pytestmark = pytest.mark.slow

BUCKET = "kafkalog-tests"
CLICKS = "written/clicks-0"
SEGMENT = f"{CLICKS}/00000000000000000000"
SAMPLE_DATA_DIRS = ["SharaWeil+kafka-0.11.0", "VolodymyrZee+kafka@7712094", "LanXuage+dspider",
                    "xpxwo100+bullShit", "aviramcohenwork+Pizza-Project-MS"]  # fmt: skip


class Stored:
    """A store holding the local directories under ``root`` under ``base`` (a URL exactly as
    long as ``root``'s path, so that tables padded to their longest path line up alike)."""

    def __init__(self, store, root: Path, base: str) -> None:
        self.store, self.root, self.base = store, root, base
        self.scheme = store.scheme

    def url(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def upload(self, local: Path, name: str) -> None:
        upload(self.store, local, f"{self.base[len(self.store.url()) + 1 :]}/{name}")


@pytest.fixture(scope="module", params=["gs", "abfss"])
def stored(request, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"{request.param}-server")
    serve = fake_gcs if request.param == "gs" else azurite
    with serve(BUCKET, workdir, KAFKALOG_PROGRESS="never") as store:
        top = tmp_path_factory.mktemp("local")
        root = top / ("d" * max(1, len(store.url()) + 12 - len(str(top))))
        write_topics(root / "written", {"clicks": 3, "views": 1}, 60)
        write_transactions(root / "written")
        # Without kafkalog's topics file: the topic configs are Kafka's defaults locally too.
        no_configs = shutil.ignore_patterns("kafkalog-topics.json")
        shutil.copytree(root / "written", root / "plain", ignore=no_configs)
        shutil.copytree(root / "written", root / "damaged", ignore=no_configs)
        damage_second_batch(root / "damaged" / "clicks-0" / "00000000000000000000.log")
        big = pa.table({"value": [(b"%06d" % i) * 80 for i in range(12_000)]})
        kafkalog.arrow.write_data_dir(big, root / "big", topic="big", num_partitions=1)
        base = store.url("p" * (len(str(root)) - len(store.url()) - 1))
        assert len(base) == len(str(root))
        result = Stored(store, root, base)
        for name in ("written", "plain", "damaged", "big"):
            result.upload(root / name, name)
        yield result


# -- the Arrow reader --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", READ_OPTIONS)
def test_written_dir_reads_as_locally(stored, kwargs):
    local = table(stored.root / "written", **kwargs)
    remote = table(stored.url("written"), **kwargs)
    assert remote.num_rows == local.num_rows > 0
    assert digest(remote) == digest(local)


def test_plan_names_objects_never_credentials(stored):
    scan = kafkalog.arrow.plan_scan(stored.url("written"), topics="clicks")
    local = kafkalog.arrow.plan_scan(stored.root / "written", topics="clicks")
    assert scan.ranges == local.ranges and scan.total_bytes == local.total_bytes
    parts = str([vars(p) for p in scan.parts])
    assert stored.url("written", "clicks-0", "00000000000000000000.log") in parts
    assert AZURITE_KEY not in repr(scan) + parts


def test_credentials_in_a_url_are_refused(stored):
    leaky = {
        "gs": f"gs://key:{AZURITE_KEY}@{BUCKET}/written",
        "abfss": f"abfss://{BUCKET}:{AZURITE_KEY}@devstoreaccount1.dfs.core.windows.net/written",
    }[stored.scheme]
    with pytest.raises(OptionError, match="credentials") as e:
        kafkalog.arrow.open_data_dir(leaky)
    assert AZURITE_KEY not in str(e.value)


def test_missing_prefix_is_named(stored):
    with pytest.raises(FileNotFoundError, match=stored.url("nowhere")):
        kafkalog.arrow.open_data_dir(stored.url("nowhere"))


def test_a_damaged_segment_is_named_with_its_position(stored):
    errors = []
    for path in (stored.root / "damaged", stored.url("damaged")):
        with pytest.raises(CorruptRecordError) as e:
            table(path, topics="clicks")
        errors.append(e.value)
    assert errors[1].path == stored.url("damaged", "clicks-0", "00000000000000000000.log")
    assert errors[1].position == errors[0].position is not None
    assert errors[1].offset == errors[0].offset and errors[1].message == errors[0].message


def test_a_torn_tail_is_reported_as_locally(stored, tmp_path):
    torn = tmp_path / "torn"
    shutil.copytree(stored.root / "written", torn)
    log = torn / "views-0" / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-7])  # an incomplete last batch
    stored.upload(torn, f"torn-{tmp_path.name}")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        remote = table(stored.url(f"torn-{tmp_path.name}"), topics="views")
        local = table(torn, topics="views")
    named = f"{stored.url(f'torn-{tmp_path.name}', 'views-0')}/00000000000000000000.log, position"
    assert any("incomplete last batch" in str(w.message) for w in seen)
    assert any(named in str(w.message) for w in seen)
    assert digest(remote) == digest(local)


def test_ranged_reads_fetch_a_small_part_of_a_big_segment(stored):
    size = (stored.root / "big" / "big-0" / "00000000000000000000.log").stat().st_size
    assert size > 900_000
    before = fetched_bytes()[0]
    remote = table(stored.url("big"), starting_offsets=6000, ending_offsets=6100)
    fetched = fetched_bytes()[0] - before
    local = table(stored.root / "big", starting_offsets=6000, ending_offsets=6100)
    assert digest(remote) == digest(local) and remote.num_rows == 100
    assert fetched < size // 10, (fetched, size)


def test_a_refused_credential_is_named_and_not_retried(stored, monkeypatch):
    """A wrong key (Azure) or a missing bucket (GCS): an I/O error naming the URL at once,
    without the key."""
    if stored.scheme == "abfss":
        wrong = AZURITE_KEY[:-8] + "AAAAAAA="
        connection = os.environ["AZURE_STORAGE_CONNECTION_STRING"].replace(AZURITE_KEY, wrong)
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
        url = stored.url("written")
    else:
        url = "gs://no-such-bucket-here/written"
    with pytest.raises((RemoteStorageError, FileNotFoundError)) as e:
        table(url)
    assert url in str(e.value) and AZURITE_KEY[:20] not in str(e.value)
    assert "after" not in str(e.value)  # not tried again


def test_filesystems_follow_the_environment(stored, monkeypatch):
    """A filesystem is built from the environment it was asked in: a changed endpoint or key
    gives a new one. GCS: the emulator as ``host:port`` (as Google's clients take it) and
    google-cloud-cpp's own variable work too; Azure: a connection string naming only the
    endpoint, with the key in ``AZURE_STORAGE_ACCOUNT_KEY`` (a wrong one: refused)."""
    url = stored.url("written")
    expected = digest(table(stored.root / "written", topics="clicks"))
    first = filesystem_for(url)[0]
    assert filesystem_for(url)[0] is first
    if stored.scheme == "gs":
        endpoint = os.environ["STORAGE_EMULATOR_HOST"]
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.removeprefix("http://"))
        assert filesystem_for(url)[0] is not first
        assert digest(table(url, topics="clicks")) == expected
        monkeypatch.delenv("STORAGE_EMULATOR_HOST")
        monkeypatch.setenv("CLOUD_STORAGE_EMULATOR_ENDPOINT", endpoint)
    else:
        key_only = os.environ["AZURE_STORAGE_CONNECTION_STRING"].replace(
            f"AccountKey={AZURITE_KEY};", ""
        )
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", key_only)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
        assert filesystem_for(url)[0] is first  # the same account, endpoint and key
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY[:-8] + "AAAAAAA=")
        assert filesystem_for(url)[0] is not first
        with pytest.raises(RemoteStorageError, match="AuthorizationFailure"):
            table(url, topics="clicks")
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    assert digest(table(url, topics="clicks")) == expected


@requires_shared_fixtures
def test_real_broker_data_dirs_read_as_locally(stored):
    """Real brokers' data directories, uploaded: the same records as the local read, and each
    clean segment's record count as EXPECTED.json gives it (facts independent of us). A sample
    of five brokers' directories (500 objects) keeps the uploads short; test_s3_data_dirs.py
    reads every one from S3 through the same readers."""
    expected = shared_fixtures.EXPECTED.get("logs", {})
    checked = 0
    for name in SAMPLE_DATA_DIRS:
        stored.upload(KAFKA_DATA / name, f"fixtures/{name}")
        checked += read_as_locally(KAFKA_DATA / name, stored.url("fixtures", name), expected)
    assert checked > 10


def test_a_write_and_an_append_read_as_local_writes(stored, tmp_path, capfd):
    """write_data_dir to the store: the records of the same writes to a local directory (and
    the input's keys and values, in Kafka's partitions), and ``verify`` finds nothing wrong."""
    columns = ["topic", "partition", "offset", "timestamp", "key", "value"]

    def rows(n: int, start: int) -> pa.Table:
        return pa.table({
            "key": [b"k%d" % (i % 97) for i in range(start, start + n)],
            "value": [b"%07d" % i for i in range(start, start + n)],
            "timestamp": pa.array([T0 + i for i in range(start, start + n)], pa.int64()),
        })  # fmt: skip

    def read(path) -> pa.Table:
        t = table(path).select(columns)
        return t.sort_by([("partition", "ascending"), ("offset", "ascending")])

    url = stored.url(f"copies-{tmp_path.name}")
    for target in (url, tmp_path / "local"):
        kafkalog.arrow.write_data_dir(rows(3000, 0), target, topic="t", num_partitions=3,
                                      codec="lz4", segment_bytes=32 << 10)  # fmt: skip
        kafkalog.arrow.write_data_dir(rows(1000, 3000), target, topic="t", codec="zstd")
    remote = read(url)
    assert remote.equals(read(tmp_path / "local"))
    assert sorted(remote["value"].to_pylist()) == [b"%07d" % i for i in range(4000)]
    assert run(capfd, "verify", "--quiet", url)[0] == 0


# -- the read-only commands --------------------------------------------------------------------


def run(capfd, *args: str) -> tuple[int, str, str]:
    status = main([*args])
    out, err = capfd.readouterr()
    return status, out, err


def same_as_local(capfd, stored: Stored, command: list[str], *relative: str):
    """``command`` on the local ``relative`` paths, then on their URLs: the same status and
    output, the URL where the local path was. The remote run's (status, out, err)."""
    local = run(capfd, *command, *(str(stored.root / r) for r in relative))
    remote = run(capfd, *command, *(stored.url(r) for r in relative))
    shown = tuple(p.replace(stored.base, str(stored.root)) if isinstance(p, str) else p
                  for p in remote)  # fmt: skip
    assert shown == local
    assert "Traceback" not in remote[2] and AZURITE_KEY not in remote[1] + remote[2]
    return remote


@pytest.mark.parametrize(
    "flags",
    [[], ["--deep-iteration", "--print-data-log"], ["--json", "--deep-iteration"],
     ["--index-sanity-check"]],
    ids=lambda f: " ".join(f) or "plain",
)  # fmt: skip
def test_dump(stored, capfd, flags):
    files = [f"{SEGMENT}{suffix}" for suffix in (".log", ".index", ".timeindex")]
    tx = sorted(p.name for p in (stored.root / "written" / "tx-0").iterdir())
    files += [f"written/tx-0/{n}" for n in tx if n.endswith((".log", ".txnindex", ".snapshot"))]
    status, out, _ = same_as_local(capfd, stored, ["dump", *flags], *files)
    assert status == 0 and stored.url(SEGMENT) in out


def test_dump_names_damage_and_a_missing_object(stored, capfd):
    damaged = "damaged/clicks-0/00000000000000000000.log"
    status, out, err = same_as_local(capfd, stored, ["dump", "--deep-iteration"], damaged)
    assert status == 1 and f"{stored.url(damaged)} at position" in out + err
    missing = stored.url(CLICKS, "00000000000000000099.log")
    status, _, err = run(capfd, "dump", missing)
    assert status == 3 and missing in err and "Traceback" not in err


@pytest.mark.parametrize("target", ["written", CLICKS, "damaged", f"{SEGMENT}.log"])
@pytest.mark.parametrize("flags", [[], ["--json"]], ids=str)
def test_verify(stored, capfd, target, flags):
    status, _, _ = same_as_local(capfd, stored, ["verify", *flags], target)
    assert status == (1 if target == "damaged" else 0)


@pytest.mark.parametrize("target", ["plain", "plain/clicks-0", "damaged", "written"])
def test_stats(stored, capfd, target):
    status, out, _ = same_as_local(capfd, stored, ["stats", "--json"], target)
    assert status == (1 if target == "damaged" else 0) and "clicks-0" in out


@pytest.mark.parametrize(
    "args",
    [["--topic", "clicks", "--json"], ["--topic", "tx", "--isolation-level", "read_committed",
     "--json"], ["--topic", "views", "--offset", "10", "--max-records", "5",
     "--print-offset", "--print-key"]],
    ids=lambda a: " ".join(a),
)  # fmt: skip
def test_consume(stored, capfd, args):
    status, out, _ = same_as_local(capfd, stored, ["consume", *args], "written")
    assert status == 0 and out.strip()


def test_missing_prefix_is_named_by_the_commands(stored, capfd):
    for command in ("verify", "stats", "transactions"):
        status, _, err = run(capfd, command, stored.url("nowhere"))
        assert status == 3 and stored.url("nowhere") in err and "Traceback" not in err
