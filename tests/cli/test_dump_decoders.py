"""``kafkalog dump`` decoders: --key-decoder/--value-decoder, --offsets-decoder,
--transaction-log-decoder, --cluster-metadata-decoder.

Expected texts are built from kafka-python's protocol types (an independent reader of Kafka's
schemas) formatted as kafka-dump-log 4.1+ prints them, never from kafkalog's decoders.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import pytest
from kafka.protocol.old.types import Array, Bytes, Int8, Int16, Int32, Int64, Schema, String
from kafka.record import MemoryRecords as KpMemoryRecords

from kafkalog.cli.dump.kafka_json import java_json
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .dump_testing import (
    Flexible,
    json_lines,
    kp_v2_batch,
    run_dump,
)

STR = String("utf-8")


def segment(tmp_path: Path, records: list[tuple[bytes | None, bytes | None]], base: int = 0):
    data = kp_v2_batch(
        base, [(1_700_000_000_000 + i, key, value) for i, (key, value) in enumerate(records)]
    )
    path = tmp_path / f"{base:020d}.log"
    path.write_bytes(data)
    return path


def record_lines(out: str) -> list[str]:
    return [line for line in out.split("\n") if line.startswith("|")]


def test_key_and_value_decoders(tmp_path: Path) -> None:
    values = [{"n": i, "name": "ü"} for i in range(3)]
    path = segment(
        tmp_path,
        [(struct.pack(">q", 10 + i), json.dumps(v).encode()) for i, v in enumerate(values)],
    )
    status, out, err = run_dump("--key-decoder", "int64", "--value-decoder", "json", str(path))
    assert status == 0, err
    lines = record_lines(out)
    for i, line in enumerate(lines):
        compact = json.dumps(values[i], ensure_ascii=False, separators=(",", ":"))
        assert line.endswith(f" key: {10 + i} payload: {compact}")  # re-serialized compactly
    objs = [o for o in json_lines(run_dump("--json", "--key-decoder", "int64", str(path))[1])]
    records = [o for o in objs if o["type"] == "record"]
    assert [r["decodedKey"] for r in records] == [10, 11, 12]
    # The other side keeps kafka-dump-log's default, UTF-8 text.
    assert [json.loads(r["decodedValue"]) for r in records] == values
    assert all(r["decodeError"] is None for r in records)


@pytest.mark.parametrize(
    ("name", "show"),
    [
        ("hex", lambda b: b.hex()),
        ("base64", lambda b: base64.b64encode(b).decode()),
        ("utf8", lambda b: b.decode()),
    ],
)
def test_byte_decoders(tmp_path: Path, name: str, show) -> None:
    pairs = [(b"k1", b"v\x00one"), (None, b"two"), (b"k3", None)]
    path = segment(tmp_path, pairs)
    status, out, _ = run_dump("--key-decoder", name, "--value-decoder", name, str(path))
    assert status == 0
    for line, (key, value) in zip(record_lines(out), pairs):
        tail = ""
        if key is not None:
            tail += f" key: {show(key)}"
        if value is not None:
            tail += f" payload: {show(value)}"
        assert line.endswith(f"headerKeys: []{tail}")


def test_bytes_that_do_not_fit_a_decoder_are_reported(tmp_path: Path) -> None:
    path = segment(tmp_path, [(b"abc", b"\x00\x00\x00\x07")])
    status, out, err = run_dump("--key-decoder", "int32", "--value-decoder", "int32", str(path))
    assert status == 1
    assert record_lines(out)[0].endswith("headerKeys: [] payload: 7")
    assert "offset 0" in err and "key does not decode as int32" in err
    objs = json_lines(run_dump("--json", "--key-decoder", "int32", str(path))[1])
    record = next(o for o in objs if o["type"] == "record")
    assert record["decodedKey"] is None and "int32 needs 4 bytes" in record["decodeError"]
    assert any(o["type"] == "error" and o["offset"] == 0 for o in objs)


def test_internal_decoders_exclude_each_other_and_key_value_decoders(tmp_path: Path) -> None:
    path = segment(tmp_path, [(b"k", b"v")])
    with pytest.raises(SystemExit) as exit_info:
        run_dump("--offsets-decoder", "--cluster-metadata-decoder", str(path))
    assert exit_info.value.code == 2
    assert run_dump("--offsets-decoder", "--value-decoder", "hex", str(path))[0] == 2


# -- __consumer_offsets, read with kafka-python's types -----------------------------------------


def _read(schema, data: bytes, pos: int = 0) -> tuple:
    stream = io.BytesIO(data)
    stream.seek(pos)
    return schema.decode(stream), stream.tell()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


_SUBSCRIPTION = {
    0: Schema(("topics", Array(STR)), ("userData", Bytes)),
    1: Schema(
        ("topics", Array(STR)),
        ("userData", Bytes),
        ("ownedPartitions", Array(("topic", STR), ("partitions", Array(Int32)))),
    ),
    2: Schema(
        ("topics", Array(STR)),
        ("userData", Bytes),
        ("ownedPartitions", Array(("topic", STR), ("partitions", Array(Int32)))),
        ("generationId", Int32),
    ),
    3: Schema(
        ("topics", Array(STR)),
        ("userData", Bytes),
        ("ownedPartitions", Array(("topic", STR), ("partitions", Array(Int32)))),
        ("generationId", Int32),
        ("rackId", STR),
    ),
}
_ASSIGNMENT = Schema(
    ("assignedPartitions", Array(("topic", STR), ("partitions", Array(Int32)))),
    ("userData", Bytes),
)


def _subscription_json(blob: bytes) -> object:
    (version,) = struct.unpack_from(">h", blob)
    if version not in _SUBSCRIPTION:
        return _b64(blob)
    fields, _ = _read(_SUBSCRIPTION[version], blob, 2)
    out: dict = {"topics": list(fields[0]), "userData": _b64(fields[1])}
    if version >= 1:
        out["ownedPartitions"] = [{"topic": t, "partitions": list(p)} for t, p in fields[2]]
    if version >= 2:
        out["generationId"] = fields[3]
    if version >= 3:
        out["rackId"] = fields[4]
    return out


def _assignment_json(blob: bytes) -> object:
    (version,) = struct.unpack_from(">h", blob)
    if not 0 <= version <= 3:
        return _b64(blob)
    (partitions, user_data), _ = _read(_ASSIGNMENT, blob, 2)
    return {
        "assignedPartitions": [{"topic": t, "partitions": list(p)} for t, p in partitions],
        "userData": _b64(user_data),
    }


def _group_value(version: int, data: bytes) -> dict:
    (protocol_type, generation, protocol, leader), pos = _read(
        Schema(("a", STR), ("b", Int32), ("c", STR), ("d", STR)), data, 2
    )
    out: dict = {
        "protocolType": protocol_type,
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
    }
    if version >= 2:
        (out["currentStateTimestamp"],), pos = _read(Schema(("t", Int64)), data, pos)
    member = [("memberId", STR)]
    if version >= 3:
        member.append(("groupInstanceId", STR))
    member += [("clientId", STR), ("clientHost", STR)]
    if version >= 1:
        member.append(("rebalanceTimeout", Int32))
    member += [("sessionTimeout", Int32), ("subscription", Bytes), ("assignment", Bytes)]
    (members,), _ = _read(Schema(("members", Array(*member))), data, pos)
    out["members"] = []
    for values in members:
        m = dict(zip([name for name, _ in member], values))
        if protocol_type == "consumer":
            m["subscription"] = _subscription_json(m["subscription"])
            m["assignment"] = _assignment_json(m["assignment"])
        else:
            m["subscription"], m["assignment"] = _b64(m["subscription"]), _b64(m["assignment"])
        out["members"].append(m)
    return out


def _offset_value(version: int, data: bytes) -> dict:
    if version == 4:
        r = Flexible(data)
        r.pos = 2
        out = {"offset": r.fixed(">q"), "leaderEpoch": r.fixed(">i"), "metadata": r.string()}
        out["commitTimestamp"] = r.fixed(">q")
        return out
    names = {
        0: ["offset", "metadata", "commitTimestamp"],
        1: ["offset", "metadata", "commitTimestamp", "expireTimestamp"],
        2: ["offset", "metadata", "commitTimestamp"],
        3: ["offset", "leaderEpoch", "metadata", "commitTimestamp"],
    }[version]
    types = {"offset": Int64, "leaderEpoch": Int32, "metadata": STR}
    schema = Schema(*[(n, types.get(n, Int64)) for n in names])
    values, _ = _read(schema, data, 2)
    return dict(zip(names, values))


def offsets_texts(key: bytes, value: bytes | None) -> tuple[str, str]:
    """kafka-dump-log's ``key:`` and ``payload:`` texts for a __consumer_offsets record."""
    (record_type,) = struct.unpack_from(">h", key)
    if record_type in (0, 1):
        (group, topic, partition), _ = _read(Schema(("g", STR), ("t", STR), ("p", Int32)), key, 2)
        key_json = {"group": group, "topic": topic, "partition": partition}
    else:
        (group,), _ = _read(
            Schema(
                ("g", STR),
            ),
            key,
            2,
        )
        key_json = {"group": group}
    key_text = json.dumps({"type": str(record_type), "data": key_json}, separators=(",", ":"))
    if value is None:
        return key_text, "<DELETE>"
    (version,) = struct.unpack_from(">h", value)
    data = _offset_value(version, value) if record_type < 2 else _group_value(version, value)
    body = {"version": str(version), "data": data}
    return key_text, json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _offsets_logs() -> list[Path]:
    chosen = {}
    for path in sorted(KAFKA_DATA.glob("*/__consumer_offsets-*/*.log")):
        size = path.stat().st_size
        if size and size < 200_000:
            fixture = path.parts[-3]
            if fixture not in chosen or size > chosen[fixture].stat().st_size:
                chosen[fixture] = path  # the largest small log of each fixture
    # and every one of a Kafka 4 broker's (value version 4, flexible)
    kafka4 = KAFKA_DATA.glob("ronem123+rupia-transaction-service/__consumer_offsets-*/*.log")
    return sorted(set(chosen.values()) | {p for p in kafka4 if p.stat().st_size})


@requires_shared_fixtures
def test_offsets_decoder_matches_kafka_dump_log_on_fixtures() -> None:
    paths = _offsets_logs()
    assert len(paths) >= 8
    seen_versions = set()
    for path in paths:
        status, out, err = run_dump("--offsets-decoder", str(path))
        assert status == 0, (path, err)
        got = record_lines(out)
        want = []
        records = KpMemoryRecords(path.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if getattr(batch, "is_control_batch", False):
                want += [None for _ in batch]
                continue
            for r in batch:
                key_text, value_text = offsets_texts(r.key, r.value)
                want.append(f" key: {key_text} payload: {value_text}")
                if r.value is not None:
                    seen_versions.add(struct.unpack_from(">h", r.value)[0])
        assert len(got) == len(want), path
        for line, tail in zip(got, want):
            if tail is not None:
                assert line.endswith(tail), (path, line, tail)
    assert seen_versions >= {1, 2, 3, 4}


def test_offsets_decoder_tombstones_and_undecodable_keys(tmp_path: Path) -> None:
    key = struct.pack(">h", 2) + STR.encode("g1")
    path = segment(
        tmp_path, [(key, None), (struct.pack(">h", 99) + b"x", b"\x00\x00"), (b"\x00", b"")]
    )
    status, out, err = run_dump("--offsets-decoder", str(path))
    lines = record_lines(out)
    assert lines[0].endswith(' key: {"type":"2","data":{"group":"g1"}} payload: <DELETE>')
    assert lines[1].endswith(" key: Unknown record type 99 at offset 1, skipping.")
    assert " key: Error at offset 2, skipping. " in lines[2]
    assert status == 1 and "offset 2" in err


# -- __transaction_state -------------------------------------------------------------------------

_TXN_VALUE_V0 = Schema(
    ("producerId", Int64),
    ("producerEpoch", Int16),
    ("transactionTimeoutMs", Int32),
    ("transactionStatus", Int8),
    ("transactionPartitions", Array(("topic", STR), ("partitionIds", Array(Int32)))),
    ("transactionLastUpdateTimestampMs", Int64),
    ("transactionStartTimestampMs", Int64),
)


def test_transaction_log_decoder(tmp_path: Path) -> None:
    fields = (4000, 3, 60000, 1, [("orders", [0, 2]), ("audit", [1])], 1_700_000_000_500, 1_700_000)
    key = struct.pack(">h", 0) + STR.encode("tx-1")
    value = struct.pack(">h", 0) + _TXN_VALUE_V0.encode(fields)
    path = segment(tmp_path, [(key, value), (key, None)])
    status, out, err = run_dump("--transaction-log-decoder", str(path))
    assert status == 0, err
    names = [
        "producerId",
        "producerEpoch",
        "transactionTimeoutMs",
        "transactionStatus",
        "transactionPartitions",
        "transactionLastUpdateTimestampMs",
        "transactionStartTimestampMs",
    ]
    data = dict(zip(names, fields))
    data["transactionPartitions"] = [
        {"topic": t, "partitionIds": p} for t, p in data["transactionPartitions"]
    ]
    data["transactionStatus"] = "Ongoing"  # status 1, by name as Kafka 4.4 prints it
    key_text = '{"type":"0","data":{"transactionalId":"tx-1"}}'
    value_text = json.dumps({"version": "0", "data": data}, separators=(",", ":"))
    lines = record_lines(out)
    assert lines[0].endswith(f" key: {key_text} payload: {value_text}")
    assert lines[1].endswith(f" key: {key_text} payload: <DELETE>")
    objs = json_lines(run_dump("--json", "--transaction-log-decoder", str(path))[1])
    record = next(o for o in objs if o["type"] == "record")
    assert record["decodedKey"] == json.loads(key_text)
    assert record["decodedValue"] == json.loads(value_text)


# -- __cluster_metadata ----------------------------------------------------------------------------


def test_cluster_metadata_decoder_reports_bad_values(tmp_path: Path) -> None:
    topic = bytes([1, 2, 0, 4]) + b"abc" + bytes(16) + bytes([0])  # frame 1, TopicRecord v0
    unknown = bytes([1, 120, 0])  # an apiKey this version does not know
    broken = bytes([1, 2, 0, 9]) + b"ab"  # a name longer than the bytes left
    path = segment(tmp_path, [(None, topic), (None, unknown), (None, broken)])
    status, out, err = run_dump("--cluster-metadata-decoder", str(path))
    lines = record_lines(out)
    assert lines[0].endswith(
        ' payload: {"type":"TOPIC_RECORD","version":0,'
        '"data":{"name":"abc","topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}'
    )
    assert " payload: Error at 1, skipping. unknown metadata record type 120" in lines[1]
    assert " payload: Error at 2, skipping. " in lines[2]
    assert status == 1 and "offset 2" in err and "offset 1" not in err


# -- Jackson's text --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0e7, "1.0E7"),
        (1234567.5, "1234567.5"),
        (0.001, "0.001"),
        (1.0e-4, "1.0E-4"),
        (-2.5e-10, "-2.5E-10"),
        (100.0, "100.0"),
        (0.0, "0.0"),
        ('a\u0001b\n\u00e9"\\', '"a\\u0001b\\n\u00e9\\"\\\\"'),
        ("\u001f", '"\\u001F"'),
        ({"b": [True, None], "a": 1}, '{"b":[true,null],"a":1}'),
    ],
)
def test_java_json_writes_what_jackson_writes(value: object, text: str) -> None:
    # Java's Double.toString and Jackson's escapes (upper-case hex), from their documentation.
    assert java_json(value) == text


def _uvarint(n: int) -> bytes:
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([n & 0x7F | 0x80])
        n >>= 7


def _compact_string(text: str) -> bytes:
    return _uvarint(len(text) + 1) + text.encode()


def test_transaction_log_decoder_flexible_value_with_tagged_fields(tmp_path: Path) -> None:
    # TransactionLogValue v1 laid out from Kafka's TransactionLogValue.json: tagged fields
    # previousProducerId (tag 0) and clientTransactionVersion (tag 2) set, the others default.
    partitions = _uvarint(2) + _compact_string("orders") + _uvarint(3) + struct.pack(">ii", 0, 4)
    partitions += _uvarint(0)  # the partition struct's tagged fields
    tagged = _uvarint(2) + _uvarint(0) + _uvarint(8) + struct.pack(">q", 3999)
    tagged += _uvarint(2) + _uvarint(2) + struct.pack(">h", 2)
    value = struct.pack(">hqhib", 1, 4000, 5, 60000, 4) + partitions
    value += struct.pack(">qq", 1_700_000_000_900, 1_700_000_000_100) + tagged
    key = struct.pack(">h", 0) + STR.encode("tx-2")
    path = segment(tmp_path, [(key, value)])
    status, out, err = run_dump("--transaction-log-decoder", str(path))
    assert status == 0, err
    data = {
        "producerId": 4000,
        "previousProducerId": 3999,
        "producerEpoch": 5,
        "transactionTimeoutMs": 60000,
        "transactionStatus": "CompleteCommit",  # Kafka 4.4 prints the name
        "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 4]}],
        "transactionLastUpdateTimestampMs": 1_700_000_000_900,
        "transactionStartTimestampMs": 1_700_000_000_100,
        "clientTransactionVersion": 2,
    }
    value_text = json.dumps({"version": "1", "data": data}, separators=(",", ":"))
    assert record_lines(out)[0].endswith(f" payload: {value_text}")
