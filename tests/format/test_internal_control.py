"""Control record keys and values, built byte by byte (ControlRecordType, EndTxnMarker, raft)."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkalog.format.internal import decode_control_key, decode_control_value


def uv(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(text: str) -> bytes:
    b = text.encode()
    return uv(len(b) + 1) + b


DIR_ID = uuid.UUID("c98b8cac-5455-4154-97d1-5550a5c312ac")


@pytest.mark.parametrize(
    ("control_type", "name"),
    [
        (0, "ABORT"),
        (1, "COMMIT"),
        (2, "LEADER_CHANGE"),
        (3, "SNAPSHOT_HEADER"),
        (4, "SNAPSHOT_FOOTER"),
        (5, "KRAFT_VERSION"),
        (6, "KRAFT_VOTERS"),
    ],
)
def test_key_names_every_type(control_type, name):
    key = decode_control_key(struct.pack(">hh", 0, control_type))
    assert (key.kind, key.version, key.api_key) == (name, 0, control_type)
    assert key.data == {"version": 0, "type": control_type}


def test_unknown_key_type_keeps_its_number():
    key = decode_control_key(struct.pack(">hh", 0, 42))
    assert (key.kind, key.api_key, key.data, key.error) == (
        "UNKNOWN", 42, {"version": 0, "type": 42}, None,
    )  # fmt: skip


def test_newer_key_version_is_read_as_version_0():
    key = decode_control_key(struct.pack(">hh", 3, 1) + b"future")
    assert (key.kind, key.version, key.data) == ("COMMIT", 3, {"version": 3, "type": 1})


@pytest.mark.parametrize(
    "raw", [b"", b"\x00\x00\x00", struct.pack(">hh", -1, 0), struct.pack(">hh", 0, 1) + b"x"]
)
def test_bad_keys_are_errors(raw):
    key = decode_control_key(raw)
    assert key.error and key.data is None and key.raw == raw


@pytest.mark.parametrize(("control_type", "kind"), [(0, "ABORT"), (1, "COMMIT")])
def test_end_transaction_marker(control_type, kind):
    value = decode_control_value(control_type, struct.pack(">hi", 0, 17))
    assert (value.kind, value.version, value.api_key) == (kind, 0, control_type)
    assert value.data == {"version": 0, "coordinatorEpoch": 17}


def test_end_transaction_marker_newer_version_ignores_extra_bytes():
    value = decode_control_value(1, struct.pack(">hi", 1, 5) + b"\x01\x02")
    assert value.data == {"version": 1, "coordinatorEpoch": 5} and value.error is None


@pytest.mark.parametrize(
    "raw", [b"", b"\x00", struct.pack(">hh", 0, 0), struct.pack(">hi", -1, 0), b"\x00" * 7]
)
def test_bad_end_transaction_markers_are_errors(raw):
    value = decode_control_value(0, raw)
    assert value.error and value.data is None and value.raw == raw


def test_leader_change_message():
    voter = struct.pack(">i", 1) + uv(0)
    body = struct.pack(">hi", 0, 1) + uv(2) + voter + uv(3) + voter + struct.pack(">i", 2) + uv(0)
    value = decode_control_value(2, body + uv(0))
    assert value.error is None, value.error
    assert (value.kind, value.version) == ("LEADER_CHANGE", 0)
    zero = uuid.UUID(int=0)
    assert value.data == {
        "version": 0,
        "leaderId": 1,
        "voters": [{"voterId": 1, "voterDirectoryId": zero}],
        "grantingVoters": [
            {"voterId": 1, "voterDirectoryId": zero},
            {"voterId": 2, "voterDirectoryId": zero},
        ],
    }


def test_snapshot_header_and_footer():
    header = decode_control_value(3, struct.pack(">hq", 0, 1_692_277_637_380) + uv(0))
    assert header.data == {"version": 0, "lastContainedLogTimestamp": 1_692_277_637_380}
    footer = decode_control_value(4, struct.pack(">h", 0) + uv(0))
    assert (footer.kind, footer.data) == ("SNAPSHOT_FOOTER", {"version": 0})


def test_kraft_version_record():
    value = decode_control_value(5, struct.pack(">hh", 0, 1) + uv(0))
    assert (value.kind, value.data) == ("KRAFT_VERSION", {"version": 0, "kRaftVersion": 1})


def test_voters_record():
    endpoint = cstr("CONTROLLER") + cstr("localhost") + struct.pack(">H", 9093) + uv(0)
    voter = (
        struct.pack(">i", 1) + DIR_ID.bytes
        + uv(2) + endpoint
        + struct.pack(">hh", 0, 1) + uv(0)  # kRaftVersionFeature and its tag section
        + uv(0)
    )  # fmt: skip
    value = decode_control_value(6, struct.pack(">h", 0) + uv(2) + voter + uv(0))
    assert value.error is None, value.error
    assert value.data == {
        "version": 0,
        "voters": [
            {
                "voterId": 1,
                "voterDirectoryId": DIR_ID,
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
            }
        ],
    }


def test_unknown_control_type_value_is_raw():
    value = decode_control_value(9, b"\x00\x01abc")
    assert (value.kind, value.api_key, value.data, value.raw, value.error) == (
        "UNKNOWN", 9, None, b"\x00\x01abc", None,
    )  # fmt: skip


def test_null_value_of_a_known_type_is_an_error():
    value = decode_control_value(1, None)
    assert value.error and value.data is None


def test_truncated_quorum_record_is_an_error():
    value = decode_control_value(3, struct.pack(">hq", 0, 5))  # no tag section
    assert value.error and "tagged fields" in value.error and value.raw is not None
