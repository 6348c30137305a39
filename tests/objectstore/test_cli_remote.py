"""The read-only commands on object-storage URLs (docs/object-storage.md): dump, verify, stats
and transactions print for ``s3://bucket/prefix`` what they print for a local copy of the same
bytes (the URL where the path was), damaged bytes included; the commands that write refuse a URL
as a usage error and never create a local ``s3:`` directory. Against moto's S3 server."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from remote_reads import damage_second_batch
from s3_endpoint import Proxy, moto_s3, upload

import shared_fixtures
from arrow.arrow_data import write_topics, write_transactions  # the Arrow API tests' data
from kafkalog.cli.main import main

# Slow: the commands' output compared with the local one, object by object (about 35 s).
pytestmark = pytest.mark.slow

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

BUCKET = "kafkalog-cli"
SECRET = "s3cr3t-never-shown"
CLICKS = "written/clicks-0"
SEGMENT = f"{CLICKS}/00000000000000000000"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(boto3 client, local root): moto serving a bucket that holds the directories under root,
    uploaded under the same names: a kafkalog-written data directory and a damaged copy."""
    with moto_s3(BUCKET, SECRET, KAFKALOG_PROGRESS="never") as (client, _):
        root = tmp_path_factory.mktemp("local")
        write_topics(root / "written", {"clicks": 2, "views": 1}, 40)
        write_transactions(root / "written")
        # Without kafkalog's topics file: the topic configs are Kafka's defaults locally too.
        no_configs = shutil.ignore_patterns("kafkalog-topics.json")
        shutil.copytree(root / "written", root / "plain", ignore=no_configs)
        shutil.copytree(root / "written", root / "damaged", ignore=no_configs)
        damage_second_batch(root / "damaged" / "clicks-0" / "00000000000000000000.log")
        # A prefix as long as the local root, so that tables padded to their longest path line
        # up alike and the outputs compare byte for byte.
        _base[0] = f"s3://{BUCKET}/" + "p" * (len(str(root)) - len(f"s3://{BUCKET}/"))
        for name in ("written", "plain", "damaged"):
            upload(client, BUCKET, root / name, f"{url()[len(f's3://{BUCKET}/') :]}/{name}")
        yield client, root


_base = [f"s3://{BUCKET}"]


def url(*parts: str) -> str:
    """The URL of ``parts`` under the uploaded root (as long as the local root's path)."""
    return "/".join([_base[0], *parts])


def run(capfd, *args: str) -> tuple[int, str, str]:
    status = main([*args])
    out, err = capfd.readouterr()
    return status, out, err


def same_as_local(capfd, root: Path, command: list[str], *relative: str) -> tuple[int, str, str]:
    """Run ``command`` on the local ``relative`` paths, then on their URLs: the same status and
    the same output, the URL where the local path was. The remote run's (status, out, err)."""
    local = run(capfd, *command, *(str(root / r) for r in relative))
    remote = run(capfd, *command, *(url(r) for r in relative))
    shown = tuple(
        part.replace(url(), str(root)) if isinstance(part, str) else part for part in remote
    )
    assert shown == local
    assert "Traceback" not in remote[2] and SECRET not in remote[1] + remote[2]
    return remote


DUMP_FLAGS = [
    [],
    ["--deep-iteration"],
    ["--print-data-log"],
    ["--skip-record-metadata", "--print-data-log"],
    ["--value-decoder", "hex", "--key-decoder", "utf8"],
    ["--max-bytes", "300"],
    ["--json", "--deep-iteration"],
    ["--verify-index-only"],
    ["--index-sanity-check"],
]


@pytest.mark.parametrize("flags", DUMP_FLAGS, ids=lambda f: " ".join(f) or "plain")
def test_dump_every_kind_of_file(s3, capfd, flags):
    _, root = s3
    files = [f"{SEGMENT}{suffix}" for suffix in (".log", ".index", ".timeindex")]
    files += [f"{CLICKS}/00000000000000000040.snapshot"]
    tx = sorted(p.name for p in (root / "written" / "tx-0").iterdir())
    files += [f"written/tx-0/{n}" for n in tx if n.endswith((".log", ".txnindex", ".snapshot"))]
    status, out, _ = same_as_local(capfd, root, ["dump", *flags], *files)
    assert (status == 0 and url(SEGMENT) in out) or "--json" in flags


def test_dump_files_option_and_unknown_files(s3, capfd):
    _, root = s3
    joined = ",".join(str(root / f"{SEGMENT}{s}") for s in (".log", ".timeindex"))
    local = run(capfd, "dump", "--files", joined, str(root / "written" / "meta.properties"))
    remote = run(capfd, "dump", "--files", joined.replace(str(root), url()),
                 url("written", "meta.properties"))  # fmt: skip
    assert tuple(p.replace(url(), str(root)) if isinstance(p, str) else p for p in remote) == local


def test_dump_damage_is_reported_as_locally(s3, capfd):
    _, root = s3
    for flags in ([], ["--deep-iteration", "--json"]):
        status, out, err = same_as_local(
            capfd, root, ["dump", *flags], "damaged/clicks-0/00000000000000000000.log"
        )
        assert status == 1
        text = err if not flags else out
        assert f"{url('damaged', 'clicks-0', '00000000000000000000.log')}" in text + out


def test_dump_refuses_a_prefix_and_a_missing_object(s3, capfd):
    _, root = s3
    status, _, err = same_as_local(capfd, root, ["dump"], CLICKS)
    assert status == 2 and "is a directory" in err
    status, _, err = run(capfd, "dump", url(CLICKS, "00000000000000000099.log"))
    assert status == 3 and url(CLICKS, "00000000000000000099.log") in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "target", ["written", CLICKS, "damaged", f"{SEGMENT}.log", f"{SEGMENT}.index"]
)
@pytest.mark.parametrize("flags", [[], ["--json"], ["--no-deep", "--quiet"]], ids=str)
def test_verify(s3, capfd, target, flags):
    _, root = s3
    status, _, _ = same_as_local(capfd, root, ["verify", *flags], target)
    assert status == (1 if target == "damaged" else 0)


@pytest.mark.parametrize("target", ["plain", "plain/clicks-0", "damaged"])
@pytest.mark.parametrize("flags", [[], ["--json"], ["--topic", "clicks", "--no-deep"]], ids=str)
def test_stats(s3, capfd, target, flags):
    _, root = s3
    status, out, _ = same_as_local(capfd, root, ["stats", *flags], target)
    assert status == (1 if target == "damaged" else 0) and "clicks-0" in out


def test_stats_reads_recorded_topic_configs(s3, capfd):
    _, root = s3
    same_as_local(capfd, root, ["stats"], "written")


@pytest.mark.parametrize("target", ["written", "written/tx-0"])
@pytest.mark.parametrize(
    "flags", [[], ["--json", "--all"], ["--topic", "tx", "--timeout-ms", "1", "--now-ms", "0"]],
    ids=str,
)  # fmt: skip
def test_transactions(s3, capfd, target, flags):
    _, root = s3
    same_as_local(capfd, root, ["transactions", *flags], target)


@pytest.mark.parametrize(
    "command",
    [["dump", f"{SEGMENT}.log"], ["verify", CLICKS], ["stats", CLICKS], ["transactions", CLICKS]],
    ids=lambda c: c[0],
)
def test_a_failed_read_names_the_object_and_position(s3, capfd, monkeypatch, command):
    """Every ranged read answered short, whatever the retries: an I/O error (exit 3) naming
    the object and the byte position, in bounded time, never a traceback."""
    host, port = os.environ["AWS_ENDPOINT_URL"].rsplit("//", 1)[1].split(":")
    proxy = Proxy((host, int(port)))
    proxy.drop, proxy.drop_status = -1, b"HTTP/1.1 206"
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setattr("kafkalog.log.storage.remote_storage.ATTEMPTS", 1)  # the SDK's only
    try:
        started = time.monotonic()
        status, out, err = run(capfd, command[0], url(command[1]))
    finally:
        proxy.close()
    assert time.monotonic() - started < 60
    assert "Traceback" not in err and SECRET not in out + err
    found = re.search(re.escape(url("written")) + r"/\S+(, | \(|: ERROR io-error \()position \d+",
                      out + err)  # fmt: skip
    assert found and "reading" in out + err, (status, out, err)
    assert status in (1, 3)


def test_missing_prefix_is_named(s3, capfd):
    for command in ("verify", "stats", "transactions"):
        status, _, err = run(capfd, command, url("nowhere"))
        assert status == 3 and url("nowhere") in err and "Traceback" not in err


def test_credentials_in_a_url_are_refused(s3, capfd):
    leaky = f"s3://testing:{SECRET}@{BUCKET}/written"
    for command in (["dump", f"{leaky}/clicks-0/00000000000000000000.log"], ["verify", leaky],
                    ["stats", leaky], ["transactions", leaky]):  # fmt: skip
        status, out, err = run(capfd, *command)
        assert status == 2 and "credentials" in err, (command, err)
        assert SECRET not in out + err


@pytest.mark.parametrize(
    "command",
    [
        ["recover"],
        ["recover", "--apply"],
        ["rebuild-index", "--apply"],
        ["compact", "--apply"],
        ["retention", "--apply"],
        ["make-bootable"],
    ],
    ids=lambda c: " ".join(c),
)
def test_writing_commands_refuse_a_url(s3, capfd, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capfd, *command, url("written"))
    assert status == 2 and "only reads object storage" in err and "Traceback" not in err
    assert not Path("s3:").exists() and os.listdir(tmp_path) == []


def test_produce_refuses_a_url(s3, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", open(os.devnull))
    status, _, err = run(capfd, "produce", url("new"), "--topic", "t")
    assert status == 2 and "only reads object storage" in err
    assert os.listdir(tmp_path) == []


def test_export_to_a_url_is_refused(s3, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capfd, "export", url("written"), "--to", "jsonl", url("out.jsonl"))
    assert status == 2 and "only reads object storage" in err
    assert os.listdir(tmp_path) == []


def test_dry_runs_of_compact_and_retention(s3, capfd):
    """Read-only: the logs opened from their objects, plans printed as for the local copy."""
    _, root = s3
    for command in (["compact"], ["retention", "--now-ms", "0"], ["retention", "--json"]):
        status, _, _ = same_as_local(capfd, root, command, "plain")
        assert status == 0


def test_consume_read_committed_on_a_url(s3, capfd):
    """The check for ABORT markers without a .txnindex reads local files only: not run on a URL
    (and nothing is missing there)."""
    _, root = s3
    args = ["consume", "--topic", "tx", "--isolation-level", "read_committed", "--json"]
    status, _, err = same_as_local(capfd, root, args, "written")
    assert status == 0 and "warning" not in err


@shared_fixtures.requires_shared_fixtures
@pytest.mark.parametrize(
    ("pattern", "decoder"), [("*-0", []), ("__consumer_offsets-*", ["--offsets-decoder"])]
)
def test_real_broker_partition(s3, capfd, tmp_path, pattern, decoder):
    """A partition a real broker wrote (the first with records in ../shared/fixtures that
    ``pattern`` names), alone in a directory both locally and in the bucket."""
    client, _ = s3
    found = next(
        p for p in sorted(shared_fixtures.KAFKA_DATA.rglob(pattern))
        if p.is_dir() and any(f.stat().st_size for f in p.glob("*.log"))
    )  # fmt: skip
    partition = tmp_path / found.name
    shutil.copytree(found, partition)
    prefix = url()[len(f"s3://{BUCKET}/") :]
    upload(client, BUCKET, partition, f"{prefix}/{tmp_path.name}/{partition.name}")
    local_root = partition.parent
    remote_root = url(tmp_path.name)
    log = next(f.name for f in sorted(partition.glob("*.log")) if f.stat().st_size)
    for command in (
        ["verify", partition.name],
        ["stats", "--json", partition.name],
        ["transactions", "--all", partition.name],
        ["dump", "--deep-iteration", *decoder, f"{partition.name}/{log}"],
        ["dump", "--json", f"{partition.name}/{log[:20]}.index"],
    ):
        local = run(capfd, *command[:-1], str(local_root / command[-1]))
        remote = run(capfd, *command[:-1], f"{remote_root}/{command[-1]}")
        shown = tuple(p.replace(remote_root, str(local_root)) if isinstance(p, str) else p
                      for p in remote)  # fmt: skip
        assert shown == local, command
