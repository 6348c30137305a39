"""``kafkalog export``: Parquet, CSV and JSON lines, read back with pyarrow and compared with
kafka-python's decoding of the data directory (never with kafkalog's own reader)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from arrow.arrow_data import write_topics, write_transactions  # the Arrow API tests' data

from .records_cli_helpers import T0, json_lines, kp_records, main_in_process

PER_PARTITION = 30


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("export") / "data"
    write_topics(root, {"orders": 2, "users": 1}, PER_PARTITION)
    write_transactions(root)
    return root


def kp_rows(root, topic, partition, *, lo=0, hi=None, read_committed=False) -> list[tuple]:
    return [
        (topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers)
        for r in kp_records(root / f"{topic}-{partition}", read_committed=read_committed)
        if r.offset >= lo and (hi is None or r.offset < hi)
    ]


def table_rows(table) -> list[tuple]:
    d = table.to_pydict()
    out = []
    for i in range(table.num_rows):
        headers = [(h["key"], h["value"]) for h in d["headers"][i] or []]
        ms = int(d["timestamp"][i].timestamp() * 1000)
        out.append((d["topic"][i], d["partition"][i], d["offset"][i], ms, d["key"][i],
                    d["value"][i], headers))  # fmt: skip
    return out


def test_parquet(data_dir, tmp_path, capsysbinary):
    out = tmp_path / "all.parquet"
    r = main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", out,
                        "--include-headers", "--compression", "zstd")  # fmt: skip
    assert "records of 4 partitions written" in r.stderr
    table = pq.read_table(out)
    assert table.schema.names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    want = kp_rows(data_dir, "orders", 0) + kp_rows(data_dir, "orders", 1)
    want += kp_rows(data_dir, "tx", 0) + kp_rows(data_dir, "users", 0)
    assert table_rows(table) == want
    assert set(table.column("timestampType").to_pylist()) == {0}
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed


def test_ranges_and_isolation(data_dir, tmp_path, capsysbinary):
    out = tmp_path / "part.parquet"
    main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", out, "-t", "orders",
                    "--starting-offsets", '{"orders":{"1":12}}', "--ending-offsets", "20",
                    "--include-headers")  # fmt: skip
    want = kp_rows(data_dir, "orders", 0, hi=20) + kp_rows(data_dir, "orders", 1, lo=12, hi=20)
    assert table_rows(pq.read_table(out)) == want
    start = time_iso(T0 + 5_000)
    main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", out, "-t", "users",
                    "--starting-timestamp", start, "--ending-timestamp", str(T0 + 9_000),
                    "--include-headers")  # fmt: skip
    assert table_rows(pq.read_table(out)) == kp_rows(data_dir, "users", 0, lo=5, hi=9)
    main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", out, "-t", "tx",
                    "--isolation-level", "read_committed", "--include-headers")  # fmt: skip
    assert table_rows(pq.read_table(out)) == kp_rows(data_dir, "tx", 0, read_committed=True)
    main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", out, "-t", "orders",
                    "-p", "1", "--option", "maxRecordsPerPartition=7",
                    "--include-headers")  # fmt: skip
    assert table_rows(pq.read_table(out)) == kp_rows(data_dir, "orders", 1)


def time_iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()


def test_csv(data_dir, tmp_path, capsysbinary):
    out = tmp_path / "users.csv"
    main_in_process(capsysbinary, "export", data_dir, "--to", "csv", out, "-t", "users",
                    "--include-headers", "--key-decoder", "utf8")  # fmt: skip
    table = pacsv.read_csv(out, convert_options=pacsv.ConvertOptions(
        column_types={"key": "string", "value": "string", "headers": "string"},
        strings_can_be_null=True,
    ))  # fmt: skip
    d = table.to_pydict()
    got = [
        (d["offset"][i], d["key"][i], base64.b64decode(d["value"][i]),
         [(k, None if v is None else base64.b64decode(v))
          for k, v in json.loads(d["headers"][i] or "[]")])
        for i in range(table.num_rows)
    ]  # fmt: skip
    want = [(r[2], None if r[4] is None else r[4].decode(), r[5], r[6])
            for r in kp_rows(data_dir, "users", 0)]  # fmt: skip
    assert got == want


def test_jsonl_loads_back_with_produce(data_dir, tmp_path, capsysbinary):
    out = tmp_path / "orders.jsonl"
    main_in_process(capsysbinary, "export", data_dir, "--to", "jsonl", out, "-t", "orders",
                    "--include-headers", "--quiet")  # fmt: skip
    copy = tmp_path / "copy"
    main_in_process(capsysbinary, "produce", copy, "--file", out, "--partitions", "2", "--quiet")
    again = main_in_process(capsysbinary, "export", copy, "--to", "jsonl", "-", "-t", "orders",
                            "--include-headers")  # fmt: skip
    assert json_lines(again.stdout) == json_lines(out.read_bytes())
    assert len(json_lines(again.stdout)) == 2 * PER_PARTITION
    consumed = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--json")
    assert json_lines(consumed.stdout) == json_lines(out.read_bytes())  # consume --json's objects


def test_failures(data_dir, tmp_path, capsysbinary):
    out = tmp_path / "x.parquet"
    main_in_process(capsysbinary, "export", data_dir, "--to", "parquet", "-", status=2)
    main_in_process(capsysbinary, "export", data_dir, "--to", "xml", out, status=2)
    r = main_in_process(capsysbinary, "export", data_dir, "--to", "csv", out, "--option",
                        "startingOffsets=latest", status=2)  # fmt: skip
    assert "startingOffsets cannot be 'latest'" in r.stderr
    r = main_in_process(capsysbinary, "export", data_dir, "--to", "csv", out, "-t", "orders",
                        "--value-decoder", "int32", status=1)  # fmt: skip
    assert "orders-0 offset 0: value: int32 needs 4 bytes" in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".*"))  # nothing half-written left
    main_in_process(capsysbinary, "export", data_dir, "--to", "csv", tmp_path / "no" / "x.csv",
                    status=3)  # fmt: skip


def test_progress_bar_on_a_terminal_only(data_dir, tmp_path):
    """With stderr on a pseudo-terminal and the size threshold lowered, export and consume draw
    a bar there; standard output is the same as with stderr on a pipe."""
    import os
    import subprocess

    from .console import kafkalog_exe, run_on_terminal

    env = {**os.environ, "KAFKALOG_PROGRESS_THRESHOLD": "1"}
    env.pop("KAFKALOG_PROGRESS", None)
    for args in (["export", data_dir, "--to", "jsonl", "-"], ["consume", data_dir, "--json"]):
        out, terminal, status = run_on_terminal(args, env)
        assert status == 0
        assert b"%|" in terminal, (args, terminal[-500:])  # tqdm's bar
        piped = subprocess.run([*kafkalog_exe(), *map(str, args)], capture_output=True, env=env,
                               check=True, timeout=120)  # fmt: skip
        assert piped.stdout == out and b"%|" not in piped.stderr


def test_read_committed_warns_when_a_txnindex_is_missing(data_dir, tmp_path, capsysbinary):
    import shutil

    copy = Path(shutil.copytree(data_dir, tmp_path / "copy"))
    (copy / "tx-0" / "00000000000000000000.txnindex").unlink()
    r = main_in_process(capsysbinary, "export", copy, "--to", "jsonl", "-", "--topic", "tx",
                        "--isolation-level", "read_committed")  # fmt: skip
    assert "b-0" in {row["value"] for row in json_lines(r.stdout)}  # as Kafka would return it
    assert "00000000000000000000.log" in r.stderr and ".txnindex is missing" in r.stderr
    r = main_in_process(capsysbinary, "export", copy, "--to", "jsonl", "-", "--topic", "tx")
    assert "warning" not in r.stderr  # read_uncommitted returns aborted records anyway


def test_data_loss_message_names_the_command_line_flag(data_dir, capsysbinary):
    r = main_in_process(capsysbinary, "export", data_dir, "--to", "jsonl", "-", "--topic",
                        "orders", "--starting-offsets", "999", status=1)  # fmt: skip
    assert "--no-fail-on-data-loss" in r.stderr and "failOnDataLoss" not in r.stderr
