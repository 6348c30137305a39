"""``kafkalog produce``: what it writes, read back by kafka-python (an independent decoder).

Inputs are built here; expected records are the inputs themselves, and the batches' fields
(codec, producer id, epoch, sequences, transaction flags, control markers) are read with
kafka-python's record classes, never with kafkalog's.
"""

from __future__ import annotations

import base64
import json
import random
import string
import struct

import pytest
from kafka.partitioner.default import murmur2 as kp_murmur2

from kafkalog.log.datadir.manager import LogManager

from .records_cli_helpers import T0, cli, json_lines, kp_batches, main_in_process

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def records(n: int, *, topic: str | None = None) -> list[dict]:
    out = []
    for i in range(n):
        rec = {
            "key": None if i % 4 == 0 else f"key-{i % 5}",
            "value": base64.b64encode(bytes([i % 256]) * (i % 40)).decode(),
            "valueEncoding": "base64",
            "timestamp": T0 + i,
            "headers": [{"key": "n", "value": str(i)}] if i % 3 else [],
        }
        if topic:
            rec["topic"] = topic
        out.append(rec)
    return out


def write_input(tmp_path, recs: list[dict], name: str = "in.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def expected_rows(recs: list[dict]) -> list[tuple]:
    out = []
    for r in recs:
        key = None if r["key"] is None else r["key"].encode()
        value = base64.b64decode(r["value"])
        headers = [(h["key"], h["value"].encode()) for h in r["headers"]]
        out.append((r["timestamp"], key, value, headers))
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_every_codec_reads_back_with_kafka_python(tmp_path, capsysbinary, codec):
    recs = records(60)
    src = write_input(tmp_path, recs)
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "--topic", "t", "--partition", "0",
                    "--codec", codec, "--batch-size", "400", "--file", src)  # fmt: skip
    batches = kp_batches(data / "t-0")
    assert len(batches) > 2  # --batch-size cut the input into several batches
    assert all(b.magic == 2 and b.codec == CODECS[codec] and b.crc_ok for b in batches)
    assert all(b.producer_id == -1 and not b.transactional for b in batches)
    got = [r for b in batches for r in b.records]
    assert [r[0] for r in got] == list(range(60))
    assert [(ts, k, v, h) for _, ts, k, v, h in got] == expected_rows(recs)


def test_compression_level(tmp_path, capsysbinary):
    """Text of a few hundred words, where zstd's level 19 beats level 1 by a few percent (on a
    run of one repeated string the two differ by a byte either way); fixed timestamps."""
    rng = random.Random(5)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(300)]
    values = [" ".join(rng.choices(words, k=300)) for _ in range(20)]
    src = write_input(tmp_path, [{"value": v, "timestamp": T0 + i} for i, v in enumerate(values)])
    for level in ("1", "19"):
        main_in_process(capsysbinary, "produce", tmp_path / level, "-t", "z", "--codec", "zstd",
                        "--compression-level", level, "--file", src)  # fmt: skip
    low = (tmp_path / "1" / "z-0" / "00000000000000000000.log").stat().st_size
    high = (tmp_path / "19" / "z-0" / "00000000000000000000.log").stat().st_size
    assert high < 0.98 * low
    got = [r[3] for b in kp_batches(tmp_path / "19" / "z-0") for r in b.records]
    assert got == [v.encode() for v in values]


def test_keys_go_where_kafkas_partitioner_sends_them(tmp_path, capsysbinary):
    keys = [f"user-{i}" for i in range(40)]
    src = write_input(tmp_path, [{"key": k, "value": "v"} for k in keys] + [{"value": "x"}] * 7)
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "-t", "p", "--partitions", "3", "--file", src)
    seen = {}
    null_keys = 0
    for p in range(3):
        for b in kp_batches(data / f"p-{p}"):
            for _, _, key, _, _ in b.records:
                if key is None:
                    null_keys += 1
                else:
                    seen[key.decode()] = p
    assert null_keys == 7
    assert seen == {k: (kp_murmur2(k.encode()) & 0x7FFFFFFF) % 3 for k in keys}


def test_partition_and_topic_from_the_input(tmp_path, capsysbinary):
    recs = [{"topic": "a", "partition": 1, "value": "one"}, {"topic": "b", "value": "two"}]
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "--partitions", "2",
                    "--file", write_input(tmp_path, recs))  # fmt: skip
    assert [b.records[0][3] for b in kp_batches(data / "a-1")] == [b"one"]
    assert kp_batches(data / "a-0") == []
    assert sum(len(kp_batches(data / f"b-{p}")) for p in range(2)) == 1


def test_idempotent_sequences_continue_across_runs(tmp_path, capsysbinary):
    data = tmp_path / "data"
    # no timestamps in the input: records stamped now, so the producer does not expire
    # (producer.id.expiration.ms counts from the last record's timestamp, as in Kafka)
    src = write_input(tmp_path, [{k: v for k, v in r.items() if k != "timestamp"}
                                 for r in records(5)])  # fmt: skip
    for _ in range(2):
        main_in_process(capsysbinary, "produce", data, "-t", "i", "--producer-id", "7",
                        "--producer-epoch", "3", "--batch-size", "100", "--file", src)  # fmt: skip
    batches = kp_batches(data / "i-0")
    assert all(b.producer_id == 7 and b.producer_epoch == 3 for b in batches)
    expected_seq = 0
    for b in batches:
        assert b.base_sequence == expected_seq
        expected_seq += len(b.records)
    assert expected_seq == 10
    # without --producer-id: a fresh id from 2^62 up (ids a KRaft controller never hands out),
    # above every id already there in that range
    for expected in (1 << 62, (1 << 62) + 1):
        main_in_process(capsysbinary, "produce", data, "-t", "i", "--idempotent", "--file", src)
        assert kp_batches(data / "i-0")[-1].producer_id == expected


def _control_types(batches) -> list[tuple[int, int]]:
    return [
        (b.producer_id, struct.unpack(">hh", bytes(b.records[0][2]))[1])
        for b in batches
        if b.control
    ]


def test_transactions(tmp_path, capsysbinary):
    data = tmp_path / "data"
    src = write_input(tmp_path, records(6))
    run = ("produce", data, "-t", "x", "--partitions", "2", "--file", src)
    main_in_process(capsysbinary, *run, "--producer-id", "10", "--transaction", "commit")
    main_in_process(capsysbinary, *run, "--producer-id", "11", "--transaction", "abort")
    main_in_process(capsysbinary, *run, "--producer-id", "12", "--transaction", "open")
    for p in range(2):
        batches = kp_batches(data / f"x-{p}")
        data_batches = [b for b in batches if not b.control]
        assert data_batches and all(b.transactional for b in data_batches)
        assert _control_types(batches) == [(10, 1), (11, 0)]  # COMMIT, then ABORT
        # one aborted transaction: one 34-byte entry (old timestamps roll segments often)
        assert sum(f.stat().st_size for f in (data / f"x-{p}").glob("*.txnindex")) == 34
    # a later run with the open transaction's id ends it, without new records
    empty = write_input(tmp_path, [], "empty.jsonl")
    main_in_process(capsysbinary, "produce", data, "--producer-id", "12",
                    "--transaction", "abort", "--file", empty)  # fmt: skip
    for p in range(2):
        assert _control_types(kp_batches(data / f"x-{p}"))[-1] == (12, 0)


def test_text_lines(tmp_path, capsysbinary):
    src = tmp_path / "in.txt"
    src.write_bytes(b"k1:v1\nk2:a:b\nNULL:v3\nk4:NULL\r\n")
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "-t", "t", "--format", "text",
                    "--separator", ":", "--null-marker", "NULL", "--header", "src=file",
                    "--timestamp", str(T0), "--file", src)  # fmt: skip
    got = [r for b in kp_batches(data / "t-0") for r in b.records]
    assert [(ts, k, v, h) for _, ts, k, v, h in got] == [
        (T0, b"k1", b"v1", [("src", b"file")]),
        (T0, b"k2", b"a:b", [("src", b"file")]),
        (T0, None, b"v3", [("src", b"file")]),
        (T0, b"k4", None, [("src", b"file")]),
    ]


def test_bad_line_stops_with_its_number_and_keeps_earlier_records(tmp_path, capsysbinary):
    src = tmp_path / "in.jsonl"
    src.write_text('{"value":"a"}\n{"value":"b"}\n{"value":"c", "valueEncoding":"hex"}\n{}\n')
    data = tmp_path / "data"
    result = main_in_process(capsysbinary, "produce", data, "-t", "t", "--file", src, status=1)
    assert f"{src} line 3: value: not hex" in result.stderr
    assert [r[3] for b in kp_batches(data / "t-0") for r in b.records] == [b"a", b"b"]


def test_bad_line_aborts_the_transaction(tmp_path, capsysbinary):
    src = tmp_path / "in.jsonl"
    src.write_text('{"value":"a"}\n[1]\n')
    data = tmp_path / "data"
    result = main_in_process(capsysbinary, "produce", data, "-t", "t", "--file", src,
                             "--transaction", "commit", status=1)  # fmt: skip
    assert "line 2: a record must be a JSON object" in result.stderr
    assert _control_types(kp_batches(data / "t-0")) == [(1 << 62, 0)]  # ABORT


def test_usage_and_io_errors(tmp_path, capsysbinary):
    data = tmp_path / "data"
    src = write_input(tmp_path, records(1))
    r = main_in_process(capsysbinary, "produce", data, "-t", "t", "--separator", ",", status=2)
    assert "--separator applies to --format text" in r.stderr
    main_in_process(capsysbinary, "produce", data, "-t", "t", "--partitions", "0", status=2)
    main_in_process(capsysbinary, "produce", data, "--file", src, status=1)  # no topic anywhere
    r = main_in_process(capsysbinary, "produce", data, "-t", "t", "--file", tmp_path / "nope",
                        status=3)  # fmt: skip
    assert "nope" in r.stderr
    with LogManager(data, writable=True, create=True):  # another writer holds the .lock
        r = main_in_process(capsysbinary, "produce", data, "-t", "t", "--file", src, status=3)
    assert "lock" in r.stderr


def test_topic_creation_and_configs(tmp_path, capsysbinary):
    data = tmp_path / "data"
    src = write_input(tmp_path, [{"key": "k", "value": "v"}])
    r = main_in_process(capsysbinary, "produce", data, "-t", "c", "--partitions", "2",
                        "--config", "cleanup.policy=compact", "--file",
                        write_input(tmp_path, [{"value": "no key"}], "nokey.jsonl"),
                        status=1)  # fmt: skip
    assert "Compacted topic cannot accept message without key" in r.stderr
    main_in_process(capsysbinary, "produce", data, "-t", "c", "--partitions", "2",
                    "--config", "cleanup.policy=compact", "--file", src)  # fmt: skip
    topics = json.loads((data / "kafkalog-topics.json").read_text())
    assert topics["topics"]["c"]["configs"] == {"cleanup.policy": "compact"}
    for p in range(2):
        assert (data / f"c-{p}" / "partition.metadata").read_text().startswith("version: 0\n")
    cli("verify", data, status=0)


def test_console_script_reads_a_pipe_and_round_trips_consume_json(tmp_path):
    recs = records(30, topic="orders")
    lines = "".join(json.dumps(r) + "\n" for r in recs).encode()
    first, second = tmp_path / "first", tmp_path / "second"
    cli("produce", first, "--partitions", "3", "--codec", "lz4", stdin=lines)
    out = cli("consume", first, "--json").stdout
    cli("produce", second, "--partitions", "3", stdin=out)  # each line names its partition
    again = cli("consume", second, "--json").stdout
    assert json_lines(again) == json_lines(out)
    got = sorted((r["timestamp"], _bytes(r["key"], r["keyEncoding"]), _bytes(r["value"],
                  r["valueEncoding"])) for r in json_lines(out))  # fmt: skip
    want = sorted((ts, k, v) for ts, k, v, _ in expected_rows(recs))
    assert got == want


def _bytes(shown, encoding):
    if shown is None:
        return None
    return shown.encode() if encoding == "utf8" else base64.b64decode(shown)


def test_a_partition_the_topic_lacks_is_refused(tmp_path, capsysbinary):
    # Kafka's broker answers UNKNOWN_TOPIC_OR_PARTITION; the topic must not grow.
    data = tmp_path / "data"
    main_in_process(capsysbinary, "produce", data, "-t", "t",
                    "--file", write_input(tmp_path, [{"value": "first"}], "a.jsonl"))  # fmt: skip
    lines = [{"value": "ok", "partition": 0}, {"value": "bad", "partition": 5}]
    r = main_in_process(capsysbinary, "produce", data, "-t", "t",
                        "--file", write_input(tmp_path, lines, "b.jsonl"), status=1)  # fmt: skip
    assert "line 2" in r.stderr and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["t-0"]
    assert [b.records[0][3] for b in kp_batches(data / "t-0")] == [b"first", b"ok"]
    # Keyed records after it still go by murmur2 over the topic's one partition.
    keyed = [{"key": f"k{i}", "value": "v"} for i in range(20)]
    main_in_process(capsysbinary, "produce", data, "-t", "t",
                    "--file", write_input(tmp_path, keyed, "c.jsonl"))  # fmt: skip
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["t-0"]
    # --partition beyond a new topic's --partitions: nothing is created for the topic.
    main_in_process(capsysbinary, "produce", data, "-t", "new", "--partition", "2",
                    "--file", write_input(tmp_path, [{"value": "x"}], "d.jsonl"),
                    status=1)  # fmt: skip
    assert not any(p.name.startswith("new-") for p in data.iterdir())


def test_a_bad_config_is_a_usage_error_before_anything_is_made(tmp_path):
    data = tmp_path / "data"
    proc = cli("produce", data, "-t", "t", "--config", "segment.bytes=65536",
               stdin=b'{"value":"v"}\n', status=2)  # fmt: skip
    err = proc.stderr.decode()
    assert "segment.bytes" in err and "line" not in err
    assert not data.exists()
