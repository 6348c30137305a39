"""Kafka writes, kafkalog reads: records produced through a real broker (Kafka's Java producer
with every codec, plain, idempotent and transactional, a LogAppendTime topic, and librdkafka's
producer), the broker stopped cleanly, then ``kafkalog consume`` and
``kafkalog.arrow.open_data_dir`` on its data directory return exactly what Kafka's Java consumer
read from the broker before it stopped, at read_uncommitted and read_committed; ``kafkalog
verify`` finds nothing wrong with the directory."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

KAFKALOG = [sys.executable, "-m", "kafkalog.cli.main"]
LEVELS = ("read_uncommitted", "read_committed")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _kafkalog_bin() -> list[str]:
    exe = Path(sys.executable).with_name("kafkalog")
    return [str(exe)] if exe.exists() else KAFKALOG


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


def _java_rows(records: list[dict]) -> list[tuple]:
    return [
        (
            r["topic"],
            r["partition"],
            r["offset"],
            r["timestamp"],
            r["timestampType"],
            _bytes(r["key"]),
            _bytes(r["value"]),
            tuple((k, _bytes(v)) for k, v in r["headers"]),
        )
        for r in records
    ]


def _shown(value, encoding: str | None) -> bytes | None:
    if value is None:
        return None
    if encoding == "base64":
        return base64.b64decode(value)
    assert encoding == "utf8", encoding
    return value.encode("utf-8")


def _consume_rows(lines: list[dict]) -> list[tuple]:
    return [
        (
            r["topic"],
            r["partition"],
            r["offset"],
            r["timestamp"],
            r["timestampType"],
            _shown(r["key"], r["keyEncoding"]),
            _shown(r["value"], r["valueEncoding"]),
            tuple((h["key"], _shown(h["value"], h["valueEncoding"])) for h in r["headers"]),
        )
        for r in lines
    ]


def _first_difference(got: list[tuple], want: list[tuple]) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"record {i}: kafkalog {g!r}\n          kafka    {w!r}"
    return f"kafkalog has {len(got)} records, Kafka's consumer {len(want)}"


def test_kafka_wrote_what_was_asked(kafka_written):
    """The scenario itself: every topic has records, the aborted transaction is visible only at
    read_uncommitted, and the broker shut down by itself on SIGTERM."""
    exp = kafka_written.expected
    topics_seen = {r["topic"] for r in exp["read_uncommitted"]}
    assert topics_seen == set(kafka_written.topics)
    txn = [len([r for r in exp[level] if r["topic"] == "txn"]) for level in LEVELS]
    assert txn == [30 + 25 + 20 + 10, 30 + 20 + 10], (txn, kafka_written.acks["txn"])
    assert all(
        r["timestampType"] == "LogAppendTime"
        for r in exp["read_uncommitted"]
        if r["topic"] == "log-append-time"
    )
    assert kafka_written.stop_status in (0, 143), kafka_written.stop_status
    assert (kafka_written.data_dir / ".kafka_cleanshutdown").exists() or any(
        kafka_written.data_dir.glob("*/*.snapshot")
    )


@pytest.mark.parametrize("level", LEVELS)
def test_consume_matches_kafka_consumer(kafka_written, level):
    proc = subprocess.run(
        [
            *_kafkalog_bin(),
            "consume",
            str(kafka_written.data_dir),
            "--json",
            "--quiet",
            "--isolation-level",
            level,
            *[arg for t in kafka_written.topics for arg in ("--topic", t)],
        ],
        capture_output=True,
        encoding="utf-8",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.split("\n") if line]
    got = sorted(_consume_rows(lines), key=lambda r: (r[0], r[1], r[2]))
    want = _java_rows(kafka_written.expected[level])
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("level", LEVELS)
def test_open_data_dir_matches_kafka_consumer(kafka_written, level):
    from kafkalog.arrow import open_data_dir

    table = open_data_dir(
        kafka_written.data_dir,
        topics=kafka_written.topics,
        isolation_level=level,
        include_headers=True,
    ).read_all()
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    got = sorted(
        (
            r["topic"],
            r["partition"],
            r["offset"],
            (r["timestamp"] - epoch) // dt.timedelta(milliseconds=1),
            TIMESTAMP_TYPES[r["timestampType"]],
            r["key"],
            r["value"],
            tuple((h["key"], h["value"]) for h in r["headers"] or ()),
        )
        for r in table.to_pylist()
    )
    want = _java_rows(kafka_written.expected[level])
    assert got == want, _first_difference(got, want)


def test_verify_finds_nothing_wrong(kafka_written):
    proc = subprocess.run(
        [*_kafkalog_bin(), "verify", "--json", "--quiet", str(kafka_written.data_dir)],
        capture_output=True,
        encoding="utf-8",
        check=False,
    )
    problems = [
        line
        for line in proc.stdout.splitlines()
        if json.loads(line).get("severity") in ("error", "warning")
    ]
    assert proc.returncode == 0 and not problems, (proc.returncode, problems, proc.stderr[-2000:])
