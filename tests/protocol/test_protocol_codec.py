"""The protocol codec against kafka-python's own message classes (an independent implementation of
Kafka's schemas), plus round trips, truncation and framing."""

from __future__ import annotations

import importlib
import pkgutil
import struct
import uuid

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kafkalog.format.message import Field, Message
from kafkalog.protocol import (
    MESSAGES,
    ApiKey,
    FrameBuffer,
    FrameTooLargeError,
    InvalidRequestError,
    ProtocolError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

kafka_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith(("generate_stubs", "sasl")):
            continue
        importlib.import_module(info.name)
    found = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        json = getattr(cls, "_json", None)
        if json and getattr(cls, "_class_version", None) is None:
            found.setdefault((json["apiKey"], json["type"]), cls)
    return found


KP = _kafka_python_classes()
ALL_CASES = [
    (key, kind, message)
    for key, pair in MESSAGES.items()
    for kind, message in zip(("request", "response"), pair)
]
# kafka-python 3.0.12 has no class for the consumer group protocol of KIP-848: those messages
# are checked against Kafka's own Java client and tools instead
# (tests/apache_kafka/test_serve_vs_kafka_cli.py::test_consumer_group_protocol, and the
# wire-level tests of tests/server/test_consumer_group_protocol.py).
NOT_IN_KAFKA_PYTHON = {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
CASES = [case for case in ALL_CASES if case[0] not in NOT_IN_KAFKA_PYTHON]


def test_kafka_python_covers_every_other_message():
    """Every message but those of NOT_IN_KAFKA_PYTHON has kafka-python's class to be compared
    with (a new message without one must say how else it is checked)."""
    missing = {key for key, kind, _ in ALL_CASES if (key, kind) not in KP}
    assert missing == NOT_IN_KAFKA_PYTHON


_INT = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _in(f: Field, v: int, flexible: bool) -> bool:
    return f.in_version(v) and (f.tag is None or flexible)


def _primitive(type_: str) -> st.SearchStrategy:
    if type_ in _INT:
        return st.integers(*_INT[type_])
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "bool":
        return st.booleans()
    if type_ == "uuid":
        return st.uuids()
    if type_ == "string":
        return st.text(max_size=8)
    return st.binary(max_size=8)


def _value(f: Field, v: int, flexible: bool) -> st.SearchStrategy:
    if f.type == "{}":
        base = _struct(f.fields, v, flexible)
    elif f.type == "[]":
        base = st.lists(_struct(f.fields, v, flexible), max_size=2)
    elif f.type.startswith("["):
        base = st.lists(_primitive(f.type[1:-1]), max_size=3)
    else:
        base = _primitive(f.type)
    return st.one_of(st.none(), base) if f.nullable_in(v) else base


def _struct(fields: list[Field], v: int, flexible: bool) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {f.name: _value(f, v, flexible) for f in fields if _in(f, v, flexible)}
    )


def _project(fields: list[Field], v: int, flexible: bool, value: dict) -> dict:
    """Only the fields a version carries, records as bytes: what both sides must agree on."""
    out = {}
    for f in fields:
        if not _in(f, v, flexible):
            continue
        item = value[f.name]
        if f.type == "{}" and item is not None:
            item = _project(f.fields, v, flexible, item)
        elif f.type == "[]" and item is not None:
            item = [_project(f.fields, v, flexible, x) for x in item]
        elif isinstance(item, memoryview):
            item = bytes(item)
        out[f.name] = item
    return out


def _from_kafka_python(obj, v: int, flexible: bool) -> list:
    """kafka-python's decoded values in wire order (it renames a few fields, so not by name)."""
    out = []
    for f in obj._struct._fields:
        if not f.for_version_q(v) or (f.tag is not None and not flexible):
            continue
        item = getattr(obj, f.name)
        if f.is_struct() and item is not None:
            item = _from_kafka_python(item, v, flexible)
        elif f.is_struct_array() and item is not None:
            item = [_from_kafka_python(x, v, flexible) for x in item]
        elif isinstance(item, (bytearray, memoryview)):
            item = bytes(item)
        elif f.type_str == "bitfield":  # kafka-python's sets of bits: back to the wire's int32
            item = -(2**31) if item is None else sum(1 << b for b in item)
            item = item - (1 << 32) if item >= 1 << 31 else item
        out.append(item)
    return out


def _in_order(fields: list[Field], v: int, flexible: bool, value: dict) -> list:
    out = []
    for f in fields:
        if not _in(f, v, flexible):
            continue
        item = value[f.name]
        if f.type == "{}" and item is not None:
            item = _in_order(f.fields, v, flexible, item)
        elif f.type == "[]" and item is not None:
            item = [_in_order(f.fields, v, flexible, x) for x in item]
        elif isinstance(item, memoryview):
            item = bytes(item)
        out.append(item)
    return out


@pytest.mark.parametrize(("key", "kind", "message"), CASES, ids=[f"{m.name}" for _, _, m in CASES])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.generate],  # whole-schema values shrink slowly; the failing draw is printed
)
@given(data=st.data())
def test_every_version_agrees_with_kafka_python(key, kind, message: Message, data):
    kp = KP[(key, kind)]
    lo, hi = message.versions
    for v in range(lo, hi + 1):
        flexible = message.is_flexible(v)
        assert flexible == kp.flexible_version_q(v), f"{message.name} v{v} flexibility"
        value = data.draw(_struct(message.fields, v, flexible), label=f"v{v}")
        if (key, kind) == (ApiKey.API_VERSIONS, "response"):
            value["error_code"] = 0  # kafka-python reads an error answer as v0, as Kafka sends it
        ours = bytes(message.encode(value, v).buf)
        theirs = kp.decode(ours, version=v)
        theirs._header = None
        filled = _fill(message, v, value)
        assert _from_kafka_python(theirs, v, flexible) == _in_order(
            message.fields, v, flexible, filled
        )
        assert theirs.encode(version=v) == ours
        decoded = message.decode(ours, v)
        assert _project(message.fields, v, flexible, decoded) == _project(
            message.fields, v, flexible, {**filled, **value}
        )


def _fill(message: Message, v: int, value: dict) -> dict:
    """What decoding our own encoding yields: the drawn value with defaults for the rest."""
    return message.decode(bytes(message.encode(value, v).buf), v)


@pytest.mark.parametrize(
    ("key", "kind", "message"), ALL_CASES, ids=[m.name for _, _, m in ALL_CASES]
)
def test_defaults_fill_what_a_handler_leaves_out(key, kind, message: Message):
    lo, hi = message.versions
    for v in range(lo, hi + 1):
        encoded = bytes(message.encode({}, v).buf)
        assert message.decode(encoded, v) == message.default(v)
        if key in NOT_IN_KAFKA_PYTHON:
            continue
        theirs = KP[(key, kind)].decode(encoded, version=v)
        theirs._header = None
        assert theirs.encode(version=v) == encoded


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_truncation_is_a_clear_error(data):
    _, _, message = data.draw(st.sampled_from(CASES))
    v = data.draw(st.integers(*message.versions))
    value = data.draw(_struct(message.fields, v, message.is_flexible(v)))
    encoded = bytes(message.encode(value, v).buf)
    for cut in range(len(encoded)):
        with pytest.raises(InvalidRequestError) as info:
            message.decode(encoded[:cut], v)
        assert message.name in str(info.value)
        assert "position" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(frame=st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_protocol_error(frame):
    try:
        decode_request(frame)
    except ProtocolError:
        pass


def test_huge_array_count_is_rejected_without_allocating():
    body = struct.pack(">hhi", ApiKey.METADATA, 4, 7) + struct.pack(">h", -1)
    body += struct.pack(">i", 2**31 - 1)  # topics: two billion entries, none present
    with pytest.raises(InvalidRequestError, match="cannot fit"):
        decode_request(body)


def test_error_names_the_field_path():
    frame = encode_request(
        ApiKey.PRODUCE,
        7,
        1,
        "c",
        {"acks": 1, "topic_data": [{"name": "t", "partition_data": [{"records": b"x" * 9}]}]},
    )
    with pytest.raises(InvalidRequestError) as info:
        decode_request(frame[4:-3])
    assert "ProduceRequest v7 topic_data.partition_data.records" in str(info.value)


@pytest.mark.parametrize("api_key", [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA])
def test_request_headers_from_kafka_python(api_key):
    req_message = MESSAGES[api_key][0]
    kp = KP[(api_key, "request")]
    for v in (req_message.versions[0], req_message.versions[1]):
        obj = kp(version=v)
        obj.with_header(correlation_id=42, client_id="kp-client")
        frame = obj.encode(header=True, framed=True)
        request = decode_request(frame[4:])
        assert request.header.api_key == api_key
        assert request.header.api_version == v
        assert request.header.correlation_id == 42
        assert request.header.client_id == "kp-client"


@pytest.mark.parametrize("api_key", [ApiKey.PRODUCE, ApiKey.API_VERSIONS, ApiKey.FETCH])
def test_response_headers_read_by_kafka_python(api_key):
    resp_message = MESSAGES[api_key][1]
    kp = KP[(api_key, "response")]
    for v in (resp_message.versions[0], resp_message.versions[1]):
        parts = encode_response(api_key, v, 99, {})
        frame = b"".join(bytes(p) for p in parts)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        obj = kp.decode(frame, version=v, header=True, framed=True)
        assert obj.header.correlation_id == 99
        assert decode_response(api_key, v, frame[4:])[0] == 99


def test_records_windows_become_separate_parts():
    class Window:
        def size_in_bytes(self) -> int:
            return 5

    window = Window()
    body = {"responses": [{"topic_id": uuid.uuid4(), "partitions": [{"records": window}]}]}
    parts = encode_response(ApiKey.FETCH, 16, 1, body)
    assert window in parts
    total = sum(5 if p is window else len(p) for p in parts)
    assert struct.unpack(">i", bytes(parts[0][:4]))[0] == total - 4


def test_unsupported_versions_and_keys_are_named():
    with pytest.raises(UnsupportedVersionError, match=r"Produce v2 is not supported"):
        decode_request(struct.pack(">hhih", 0, 2, 1, -1))
    with pytest.raises(UnsupportedVersionError, match="unknown api key 999"):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_frame_buffer_fed_byte_by_byte():
    frames = [encode_request(ApiKey.API_VERSIONS, v, v, "x", {}) for v in (0, 3)]
    buf = FrameBuffer()
    got = []
    for byte in b"".join(frames):
        buf.feed(bytes([byte]))
        frame = buf.next_frame()
        if frame is not None:
            got.append(frame)
    assert got == [f[4:] for f in frames]
    assert buf.buffered == 0


def test_frame_buffer_rejects_oversized_and_negative_sizes_at_the_prefix():
    buf = FrameBuffer(max_size=1000)
    buf.feed(struct.pack(">i", 1001))
    with pytest.raises(FrameTooLargeError, match="1001 bytes is larger than the limit of 1000"):
        buf.next_frame()
    buf = FrameBuffer()
    buf.feed(struct.pack(">i", -5))
    with pytest.raises(InvalidRequestError, match="negative frame size -5"):
        buf.next_frame()


def test_bytes_after_a_request_body_are_ignored_as_kafka_does():
    # librdkafka's Metadata v12 "all topics": a 4-byte placeholder count (00 00 00 00) of
    # which Kafka reads one byte as a null array; the other three trail the body.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    request = decode_request(frame)
    assert request.body["topics"] is None
    assert request.body["allow_auto_topic_creation"] is False
    with pytest.raises(InvalidRequestError, match="3 unexpected bytes"):
        MESSAGES[ApiKey.METADATA][0].decode(frame[18:], 12, strict=True)
