"""``kafkalog consume``: records as a consumer sees them, checked against kafka-python's decoding
of the same files; round trips through ``produce``; ``--follow`` against a live writer."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.log.datadir.manager import LogManager

from .records_cli_helpers import (
    T0,
    cli,
    json_lines,
    kafkalog_exe,
    kp_records,
    main_in_process,
)


def _bytes(shown, encoding):
    if shown is None:
        return None
    return {"utf8": str.encode, "base64": base64.b64decode}[encoding](shown)


def _input_line(key, value, headers, ts) -> str:
    def enc(b):
        return None if b is None else base64.b64encode(b).decode()

    return json.dumps({
        "key": enc(key), "keyEncoding": None if key is None else "base64",
        "value": enc(value), "valueEncoding": None if value is None else "base64",
        "timestamp": ts,
        "headers": [{"key": k, "value": enc(v), "valueEncoding": None if v is None else "base64"}
                    for k, v in headers],
    })  # fmt: skip


blobs = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=10).map(str.encode))
headers = st.lists(st.tuples(st.text(max_size=6), blobs), max_size=3)
record = st.tuples(blobs, blobs, headers, st.integers(-1, T0))  # no future: Kafka refuses it


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(recs=st.lists(record, min_size=1, max_size=12), codec=st.sampled_from(["none", "lz4"]))
def test_produce_then_consume_round_trips(capsysbinary, recs, codec):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text("".join(_input_line(*r) + "\n" for r in recs))
        first, second = Path(tmp) / "a", Path(tmp) / "b"
        main_in_process(capsysbinary, "produce", first, "-t", "t", "--codec", codec,
                        "--file", src, "--quiet")  # fmt: skip
        out = main_in_process(capsysbinary, "consume", first, "--json").stdout
        got = json_lines(out)
        assert [r["offset"] for r in got] == list(range(len(recs)))
        for line, (key, value, hs, ts) in zip(got, recs, strict=True):
            assert _bytes(line["key"], line["keyEncoding"]) == key
            assert _bytes(line["value"], line["valueEncoding"]) == value
            assert [(h["key"], _bytes(h["value"], h["valueEncoding"])) for h in line["headers"]] \
                == list(hs)  # fmt: skip
            assert line["timestamp"] == ts and line["timestampType"] == "CreateTime"
        # what consume --json wrote, produce reads back exactly
        src.write_bytes(out)
        main_in_process(capsysbinary, "produce", second, "--file", src, "--quiet")
        assert main_in_process(capsysbinary, "consume", second, "--json").stdout == out


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from arrow.arrow_data import write_topics, write_transactions

    root = tmp_path_factory.mktemp("consume") / "data"
    write_topics(root, {"orders": 2}, 20)
    write_transactions(root)
    return root


def _kp_values(root, topic, partition, **kw) -> list[bytes]:
    return [r.value for r in kp_records(root / f"{topic}-{partition}", **kw)]


def test_offsets_partitions_and_limits(data_dir, capsysbinary):
    out = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "-p", "1",
                          "--offset", "15", "--json").stdout  # fmt: skip
    recs = kp_records(data_dir / "orders-1")[15:]
    assert [(r["partition"], r["offset"], r["value"]) for r in json_lines(out)] == [
        (1, r.offset, r.value.decode()) for r in recs
    ]
    out = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--max-records",
                          "23", "--json").stdout  # fmt: skip
    lines = json_lines(out)
    assert [(r["partition"], r["offset"]) for r in lines] == [(0, o) for o in range(20)] + [
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    out = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--offset", "latest")
    assert out.stdout == b""


def test_timestamps(data_dir, capsysbinary):
    # records of orders-p are stamped T0 + i seconds
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((T0 + 12_000) / 1000)) + "Z"
    for start in (str(T0 + 11_500), iso):
        out = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "-p", "0",
                              "--timestamp", start, "--json").stdout  # fmt: skip
        assert [r["offset"] for r in json_lines(out)] == list(range(12, 20))
    late = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders",
                           "--timestamp", str(T0 + 10**9))  # fmt: skip
    assert late.stdout == b""  # nothing that late: start at the end, as a consumer would
    main_in_process(capsysbinary, "consume", data_dir, "--timestamp", "yesterday", status=2)


def test_isolation_levels(data_dir, capsysbinary):
    for level, committed in (("read_uncommitted", False), ("read_committed", True)):
        out = main_in_process(capsysbinary, "consume", data_dir, "-t", "tx",
                              "--isolation-level", level).stdout  # fmt: skip
        want = _kp_values(data_dir, "tx", 0, read_committed=committed)
        assert out.splitlines() == want
    assert b"b-0" in _kp_values(data_dir, "tx", 0)  # the aborted records are in the log


def test_text_layout_is_kafka_console_consumers(data_dir, capsysbinary):
    out = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "-p", "0",
                          "--max-records", "4", "--print-timestamp", "--print-partition",
                          "--print-offset", "--print-headers", "--print-key").stdout  # fmt: skip
    recs = kp_records(data_dir / "orders-0")[:4]
    want = []
    for r in recs:
        hs = b",".join(k.encode() + b":" + (b"null" if v is None else v) for k, v in r.headers)
        key = b"null" if r.key is None else r.key
        fields = [b"CreateTime:%d" % r.timestamp, b"Partition:0", b"Offset:%d" % r.offset]
        want.append(b"\t".join([*fields, hs or b"NO_HEADERS", key, r.value]))
    assert out.splitlines() == want


def test_decoders(tmp_path, capsysbinary):
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"key": 7, "keyEncoding": "int32", "value": {"a": [1, 2]}}\n'
        '{"key": "00ff", "keyEncoding": "hex", "value": "x"}\n'
    )
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "-t", "d", "--file", src)
    out = main_in_process(capsysbinary, "consume", data, "--max-records", "1", "--key-decoder",
                          "int32", "--value-decoder", "json", "--json").stdout  # fmt: skip
    (line,) = json_lines(out)
    assert (line["key"], line["keyEncoding"], line["value"], line["valueEncoding"]) == (
        7, "int32", {"a": [1, 2]}, "json",
    )  # fmt: skip
    text = main_in_process(capsysbinary, "consume", data, "--print-key", "--key-decoder", "hex")
    assert text.stdout.splitlines() == [b'00000007\t{"a":[1,2]}', b"00ff\tx"]
    text = main_in_process(capsysbinary, "consume", data, "--max-records", "1",
                           "--value-decoder", "json")  # fmt: skip
    assert text.stdout == b'{"a":[1,2]}\n'  # decoded JSON is printed compact, as --json is
    bad = main_in_process(capsysbinary, "consume", data, "--print-key", "--key-decoder",
                          "int64", status=1)  # fmt: skip
    assert "d-0 offset 0: key: int64 needs 8 bytes, found 4" in bad.stderr


def test_errors(tmp_path, data_dir, capsysbinary):
    r = main_in_process(capsysbinary, "consume", tmp_path / "nope", status=3)
    assert "nope" in r.stderr
    r = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--offset", "99",
                        status=1)  # fmt: skip
    assert "past the log end offset" in r.stderr
    r = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--offset", "99",
                        "--no-fail-on-data-loss")  # fmt: skip
    assert r.stdout == b"" and "warning:" in r.stderr
    main_in_process(capsysbinary, "consume", data_dir, "--offset", "soon", status=2)


def _read_lines(proc, n: int, timeout: float = 60) -> list[dict]:
    lines = []
    deadline = time.monotonic() + timeout
    while len(lines) < n:
        assert time.monotonic() < deadline, f"only {len(lines)} of {n} lines arrived"
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()
        lines.append(json.loads(line))
    return lines


def test_follow_tails_a_live_writer_and_stops_on_sigint(tmp_path):
    data = tmp_path / "data"
    cli("produce", data, "-t", "live", stdin=b'{"value": "first"}\n')
    consumer = subprocess.Popen(
        [*kafkalog_exe(), "consume", data, "--follow", "--json", "--poll-interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    writer = subprocess.Popen([*kafkalog_exe(), "produce", data, "-t", "live", "--quiet"],
                              stdin=subprocess.PIPE)  # fmt: skip
    try:
        assert [r["value"] for r in _read_lines(consumer, 1)] == ["first"]
        for i in range(3):  # each line is appended when the writer's input pauses
            writer.stdin.write(b'{"value": "live-%d"}\n' % i)
            writer.stdin.flush()
            assert [r["value"] for r in _read_lines(consumer, 1)] == [f"live-{i}"]
        writer.stdin.close()
        assert writer.wait(60) == 0
        consumer.send_signal(signal.SIGINT)
        assert consumer.wait(60) == 0
        assert consumer.stdout.read() == b""  # nothing half-written after the last line
    finally:
        for proc in (writer, consumer):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with LogManager(data) as manager:  # the writer left a cleanly shut down directory
        assert sum(log.log_end_offset for log in manager.logs.values()) == 4


def test_follow_timeout_and_sigterm(tmp_path):
    data = tmp_path / "data"
    cli("produce", data, "-t", "t", stdin=b'{"value": "only"}\n')
    start = time.monotonic()
    done = cli("consume", data, "--follow", "--timeout-ms", "300", "--poll-interval", "0.05")
    assert done.stdout == b"only\n" and time.monotonic() - start < 60
    consumer = subprocess.Popen([*kafkalog_exe(), "consume", data, "-f"], stdout=subprocess.PIPE)
    try:
        assert consumer.stdout.readline() == b"only\n"
        os.kill(consumer.pid, signal.SIGTERM)
        assert consumer.wait(60) == 0
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()


def test_corrupt_batch_is_reported_with_file_and_position(data_dir, tmp_path, capsysbinary):
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    segment = copy / "orders-1" / "00000000000000000000.log"
    raw = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(raw[8:12], "big")  # where the second batch starts
    raw[second + 57 : second + 61] = (999).to_bytes(4, "big")  # it claims 999 records
    segment.write_bytes(bytes(raw))
    r = main_in_process(capsysbinary, "consume", copy, "-t", "orders", "--json", status=1)
    assert str(segment) in r.stderr and f"position {second}" in r.stderr, r.stderr
    offsets = [(x["partition"], x["offset"]) for x in json_lines(r.stdout)]
    assert offsets[:20] == [(0, o) for o in range(20)]  # what came before was written


def test_read_committed_warns_when_a_txnindex_is_missing(data_dir, tmp_path, capsysbinary):
    import shutil

    from .records_cli_helpers import kp_batches

    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    log = copy / "tx-0" / "00000000000000000000.log"
    aborts = [
        b.base_offset
        for b in kp_batches(copy / "tx-0")
        if b.control and b.records[0][2][2:4] == b"\x00\x00"  # control key type 0: ABORT
    ]
    assert len(aborts) == 1
    # With the index: nothing to say.
    r = main_in_process(capsysbinary, "consume", copy, "-t", "tx", "--isolation-level",
                        "read_committed")  # fmt: skip
    assert "warning" not in r.stderr
    log.with_suffix(".txnindex").unlink()
    r = main_in_process(capsysbinary, "consume", copy, "-t", "tx", "--isolation-level",
                        "read_committed")  # fmt: skip
    assert b"b-0" in r.stdout.splitlines()  # as Kafka: the broker only reads the index
    warning = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1
    assert str(log) in warning[0] and f"offset {aborts[0]}" in warning[0]
    assert ".txnindex is missing" in warning[0]
    r = main_in_process(capsysbinary, "consume", copy, "-t", "tx")  # read_uncommitted: silent
    assert "warning" not in r.stderr


def test_data_loss_messages_name_the_command_line_flag(data_dir, capsysbinary):
    r = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--offset", "99",
                        status=1)  # fmt: skip
    assert "--no-fail-on-data-loss" in r.stderr and "failOnDataLoss" not in r.stderr
    r = main_in_process(capsysbinary, "consume", data_dir, "-t", "orders", "--offset", "99",
                        "--no-fail-on-data-loss")  # fmt: skip
    assert "failOnDataLoss" not in r.stderr
