"""Writing internal-topic records: byte layouts by hand, real broker bytes re-encoded, round trips.

Expected bytes are built from Kafka's JSON schemas by hand (``struct.pack``) or are records real
brokers wrote (../shared/fixtures, read with kafka-python's record reader): re-encoding the
decoded fields at the same version must give the broker's bytes back.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.format.internal import _group_schemas as g
from kafkalog.format.internal import (
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_transaction_log_key,
    decode_transaction_log_value,
)
from kafkalog.format.internal.consumer_offsets import _TYPES
from kafkalog.format.internal.consumer_offsets_encode import (
    GroupMemberRecord,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalog.format.internal.transaction_state import TRANSACTION_LOG_VALUE
from kafkalog.format.internal.transaction_state_encode import (
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from kafkalog.format.message import read_message, write_message
from shared_fixtures import KAFKA_DATA, requires_shared_fixtures


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_layout():
    assert encode_offset_commit_key("g", "orders", 7) == (
        struct.pack(">h", 1) + s16("g") + s16("orders") + struct.pack(">i", 7)
    )


def test_offset_commit_value_v3_layout():
    value = encode_offset_commit_value(
        offset=42, metadata="m", commit_timestamp=1_700_000_000_000, leader_epoch=5
    )
    assert value == struct.pack(">hqi", 3, 42, 5) + s16("m") + struct.pack(">q", 1_700_000_000_000)


def test_offset_commit_value_with_expiry_is_v1():
    value = encode_offset_commit_value(
        offset=1, metadata="", commit_timestamp=10, expire_timestamp=20
    )
    assert value == struct.pack(">hq", 1, 1) + s16("") + struct.pack(">qq", 10, 20)


def test_group_metadata_layout():
    member = GroupMemberRecord(
        member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        rebalance_timeout=300_000, session_timeout=45_000, subscription=b"\x00\x01",
        assignment=b"\x02",
    )  # fmt: skip
    assert encode_group_metadata_key("grp") == struct.pack(">h", 2) + s16("grp")
    value = encode_group_metadata_value(
        protocol_type="consumer", generation=3, protocol="range", leader="m-1",
        current_state_timestamp=99, members=[member],
    )  # fmt: skip
    assert value == (
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range")
        + s16("m-1") + struct.pack(">q", 99) + struct.pack(">i", 1)
        + s16("m-1") + s16(None) + s16("c") + s16("/127.0.0.1")
        + struct.pack(">ii", 300_000, 45_000) + b32(b"\x00\x01") + b32(b"\x02")
    )  # fmt: skip
    decoded = decode_consumer_offsets_value(decode_consumer_offsets_key(b"\x00\x02" + s16("g")),
                                            value)  # fmt: skip
    assert decoded.error is None and decoded.data["members"][0]["memberId"] == "m-1"


def test_empty_group_metadata_has_null_protocol_and_leader():
    value = encode_group_metadata_value(
        protocol_type="", generation=0, protocol=None, leader=None,
        current_state_timestamp=5, members=[],
    )  # fmt: skip
    assert value == (
        struct.pack(">h", 3) + s16("") + struct.pack(">i", 0) + s16(None) + s16(None)
        + struct.pack(">qi", 5, 0)
    )  # fmt: skip


def test_transaction_log_layouts():
    assert encode_transaction_log_key("t") == struct.pack(">h", 0) + s16("t")
    value = encode_transaction_log_value(
        producer_id=4000, producer_epoch=3, transaction_timeout_ms=60_000, transaction_status=1,
        partitions=[("orders", 5), ("payments", 1), ("orders", 0)],
        last_update_timestamp_ms=1_700_000_000_500, start_timestamp_ms=1_700_000_000_000,
    )  # fmt: skip
    assert value == (
        struct.pack(">h", 0) + struct.pack(">qhib", 4000, 3, 60_000, 1) + struct.pack(">i", 2)
        + s16("orders") + struct.pack(">iii", 2, 0, 5) + s16("payments") + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)
    )  # fmt: skip
    decoded = decode_transaction_log_value(value)
    assert decoded.error is None and decoded.data["transactionStatus"] == 1


def test_empty_transaction_writes_null_partitions_and_refuses_partitions():
    value = encode_transaction_log_value(
        producer_id=1, producer_epoch=0, transaction_timeout_ms=1, transaction_status=0,
        partitions=[], last_update_timestamp_ms=2, start_timestamp_ms=-1,
    )  # fmt: skip
    assert value[2 + 15 : 2 + 19] == struct.pack(">i", -1)
    assert decode_transaction_log_value(value).data["transactionPartitions"] is None
    with pytest.raises(ValueError, match="Empty"):
        encode_transaction_log_value(
            producer_id=1, producer_epoch=0, transaction_timeout_ms=1, transaction_status=0,
            partitions=[("t", 0)], last_update_timestamp_ms=2, start_timestamp_ms=-1,
        )  # fmt: skip


def test_writer_refuses_what_the_version_cannot_hold():
    with pytest.raises(ValueError, match="leaderEpoch"):
        write_message(g.OFFSET_COMMIT_VALUE, {"offset": 1, "leaderEpoch": 4}, 1)
    with pytest.raises(ValueError, match="not nullable"):
        write_message(g.OFFSET_COMMIT_VALUE, {"offset": 1, "metadata": None}, 3)
    with pytest.raises(ValueError, match="no version"):
        write_message(g.OFFSET_COMMIT_VALUE, {}, 9)


def test_flexible_tagged_fields_only_when_not_default():
    data = {"producerId": 1, "producerEpoch": 2, "transactionTimeoutMs": 3,
            "transactionStatus": 1, "transactionPartitions": [], "nextProducerId": 77}  # fmt: skip
    raw = write_message(TRANSACTION_LOG_VALUE, data, 1)
    back, end = read_message(TRANSACTION_LOG_VALUE, raw, 0, len(raw), 1)
    assert end == len(raw) and back["nextProducerId"] == 77 and back["previousProducerId"] == -1
    assert raw.endswith(b"\x01\x01\x08" + struct.pack(">q", 77))  # one tag: 1, size 8


PER_FILE = 300  # kinds and versions repeat; the first records of each file cover them


@functools.cache
def _fixture_records() -> list[tuple[Path, bytes, bytes | None]]:
    """Distinct (key, value) pairs of real __consumer_offsets logs, the first PER_FILE of each."""
    from kafka.record import MemoryRecords

    found, seen = [], set()
    for path in sorted(KAFKA_DATA.glob("*/__consumer_offsets-*/*.log")):
        batches, count = MemoryRecords(path.read_bytes()), 0
        while count < PER_FILE and (batch := batches.next_batch()) is not None:
            if getattr(batch, "is_control_batch", False):
                continue
            for record in batch:
                value = None if record.value is None else bytes(record.value)
                if (bytes(record.key), value) not in seen:
                    seen.add((bytes(record.key), value))
                    found.append((path, bytes(record.key), value))
                    count += 1
    return found


@requires_shared_fixtures
def test_real_consumer_offsets_records_reencode_to_the_same_bytes():
    records = _fixture_records()
    seen = set()
    for path, key, value in records:
        (record_type,) = struct.unpack_from(">h", key)
        rt = _TYPES[record_type]
        data, _ = read_message(rt.key, key, 2, len(key), 0)
        assert struct.pack(">h", record_type) + write_message(rt.key, data, 0) == key, path
        if value is None:
            continue
        (version,) = struct.unpack_from(">h", value)
        data, end = read_message(rt.value, value, 2, len(value), version)
        assert end == len(value)
        assert struct.pack(">h", version) + write_message(rt.value, data, version) == value, path
        seen.add((record_type, version))
    assert {(1, 3), (1, 4), (2, 3)} <= seen, seen


@requires_shared_fixtures
def test_real_offset_commits_match_our_encoder():
    records = _fixture_records()
    checked = 0
    for _, key, value in records:
        decoded_key = decode_consumer_offsets_key(key)
        if decoded_key.kind != "offset_commit" or value is None:
            continue
        decoded = decode_consumer_offsets_value(decoded_key, value)
        if decoded.version != 3:
            continue
        k, v = decoded_key.data, decoded.data
        assert encode_offset_commit_key(k["group"], k["topic"], k["partition"]) == key
        assert encode_offset_commit_value(
            offset=v["offset"], metadata=v["metadata"], commit_timestamp=v["commitTimestamp"],
            leader_epoch=v["leaderEpoch"],
        ) == value  # fmt: skip
        checked += 1
    assert checked > 0


names = st.text(max_size=20)
ints = st.integers(-(2**31), 2**31 - 1)


@given(
    offset=st.integers(-1, 2**63 - 1), metadata=names, ts=st.integers(0, 2**62), epoch=ints,
    group=names, topic=names, partition=ints,
)  # fmt: skip
def test_offset_commit_round_trip(offset, metadata, ts, epoch, group, topic, partition):
    key = decode_consumer_offsets_key(encode_offset_commit_key(group, topic, partition))
    assert key.data == {"group": group, "topic": topic, "partition": partition}
    value = encode_offset_commit_value(
        offset=offset, metadata=metadata, commit_timestamp=ts, leader_epoch=epoch
    )
    decoded = decode_consumer_offsets_value(key, value)
    assert (decoded.data["offset"], decoded.data["metadata"]) == (offset, metadata)
    assert (decoded.data["commitTimestamp"], decoded.data["leaderEpoch"]) == (ts, epoch)


@given(
    status=st.integers(1, 7),
    partitions=st.sets(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 100))),
    pid=st.integers(0, 2**63 - 1), epoch=st.integers(0, 32767), txn=names,
)  # fmt: skip
def test_transaction_log_round_trip(status, partitions, pid, epoch, txn):
    assert decode_transaction_log_key(encode_transaction_log_key(txn)).data == {
        "transactionalId": txn
    }
    value = encode_transaction_log_value(
        producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=60_000,
        transaction_status=status, partitions=partitions, last_update_timestamp_ms=5,
        start_timestamp_ms=4,
    )  # fmt: skip
    data = decode_transaction_log_value(value).data
    got = {(t["topic"], p) for t in data["transactionPartitions"] for p in t["partitionIds"]}
    assert got == set(partitions) and (data["producerId"], data["producerEpoch"]) == (pid, epoch)
