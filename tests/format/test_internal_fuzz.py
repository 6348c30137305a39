"""Any bytes into any internal-record decoder: a DecodedMessage back, fast, never an exception."""

from __future__ import annotations

import struct
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.format.internal import (
    DecodedMessage,
    decode_consumer_offsets_key,
    decode_consumer_offsets_value,
    decode_consumer_protocol_assignment,
    decode_consumer_protocol_subscription,
    decode_control_key,
    decode_control_value,
    decode_metadata_record,
    decode_transaction_log_key,
    decode_transaction_log_value,
    to_json_safe,
)

FUZZ = settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])


def check(result: DecodedMessage, given_bytes: bytes | None) -> None:
    assert isinstance(result, DecodedMessage)
    if result.error is not None:
        assert result.data is None
        assert result.raw == given_bytes
    if result.raw is not None:
        assert result.data is None
    to_json_safe(result)


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


# Valid seeds to mutate: a prefix of Kafka's layout reaches the deep parts of each schema.
SEEDS = {
    "offsets_value": (
        struct.pack(">h", 2),
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
        + struct.pack(">qi", 0, 1) + s16("m") + s16("c") + s16("h") + struct.pack(">ii", 1, 1)
        + struct.pack(">i", 6) + struct.pack(">hi", 0, 1) + b"\x00" + struct.pack(">i", 0),
    ),
    "metadata": b"\x01\x03\x02" + bytes(20) + b"\x02\x00\x00\x00\x01" * 4 + bytes(12) + b"\x00",
    "txn_value": struct.pack(">hqhib", 1, 1, 0, 1, 1) + b"\x02\x02a\x02\x00\x00\x00\x01\x00"
    + bytes(16) + b"\x01\x00\x08" + bytes(8),
}  # fmt: skip


def mutate(seed: bytes, data: st.DataObject) -> bytes:
    out = bytearray(seed)
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and out:
            i = data.draw(st.integers(0, len(out) - 1))
            out[i] = data.draw(st.integers(0, 255))
        elif op == "cut" and out:
            del out[data.draw(st.integers(0, len(out) - 1)) :]
        else:
            i = data.draw(st.integers(0, len(out)))
            out[i:i] = data.draw(st.binary(max_size=6))
    return bytes(out)


@FUZZ
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=128)))
def test_consumer_offsets_random_bytes(key, value):
    decoded_key = decode_consumer_offsets_key(key)
    check(decoded_key, key)
    check(decode_consumer_offsets_value(decoded_key, value), value)


@FUZZ
@given(st.integers(-3, 30), st.data())
def test_consumer_offsets_mutated_values(record_type, data):
    key = decode_consumer_offsets_key(struct.pack(">h", record_type) + s16("g") + s16("m"))
    seed = SEEDS["offsets_value"][1] if record_type == 2 else struct.pack(">h", 0) + bytes(24)
    value = mutate(seed, data)
    check(decode_consumer_offsets_value(key, value), value)


@FUZZ
@given(st.binary(max_size=64))
def test_consumer_protocol_random_bytes(blob):
    check(decode_consumer_protocol_subscription(blob), blob)
    check(decode_consumer_protocol_assignment(blob), blob)


@FUZZ
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=96)), st.data())
def test_transaction_log_random_and_mutated_bytes(key, value, data):
    check(decode_transaction_log_key(key), key)
    check(decode_transaction_log_value(value), value)
    mutated = mutate(SEEDS["txn_value"], data)
    check(decode_transaction_log_value(mutated), mutated)


@FUZZ
@given(st.binary(max_size=16), st.integers(-5, 12), st.one_of(st.none(), st.binary(max_size=96)))
def test_control_random_bytes(key, control_type, value):
    check(decode_control_key(key), key)
    check(decode_control_value(control_type, value), value)


@FUZZ
@given(st.binary(max_size=128), st.data())
def test_metadata_random_and_mutated_bytes(value, data):
    check(decode_metadata_record(value), value)
    mutated = mutate(SEEDS["metadata"], data)
    check(decode_metadata_record(mutated), mutated)


@FUZZ
@given(st.integers(0, 29), st.integers(0, 4), st.binary(max_size=96))
def test_metadata_every_api_key_and_version(api_key, version, body):
    value = bytes([1, api_key, version]) + body
    check(decode_metadata_record(value), value)


def test_absurd_counts_in_small_inputs_return_quickly():
    huge = struct.pack(">i", 0x7FFFFFFF)
    cases = [
        lambda: decode_metadata_record(b"\x01\x03\x00" + bytes(20) + b"\xff\xff\xff\xff\x07"),
        lambda: decode_metadata_record(b"\x01\x00\x00" + bytes(28) + b"\xfe\xff\xff\xff\x0f"),
        lambda: decode_transaction_log_value(struct.pack(">hqhib", 0, 1, 0, 1, 1) + huge),
        lambda: decode_control_value(6, struct.pack(">h", 0) + b"\xff\xff\xff\xff\x07" + bytes(13)),
        lambda: decode_consumer_protocol_subscription(struct.pack(">h", 0) + huge + bytes(14)),
        lambda: decode_consumer_offsets_value(
            decode_consumer_offsets_key(struct.pack(">h", 4) + s16("g")),
            struct.pack(">h", 0) + b"\xff\xff\xff\xff\x07" + bytes(13),
        ),
    ]
    for case in cases:
        started = time.perf_counter()
        result = case()
        assert result.error and result.data is None
        assert time.perf_counter() - started < 0.1
