"""The generic schema reader, on hand-built bytes laid out by Kafka's serialization rules."""

from __future__ import annotations

import struct
import time
import uuid

import pytest

from kafkalog.errors import CorruptRecordError
from kafkalog.format.message import Message, Versions, read_message


def uv(n: int) -> bytes:
    """Unsigned varint, written out here independently of the code under test."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def s16(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def cstr(text: str) -> bytes:
    b = text.encode()
    return uv(len(b) + 1) + b


def read(msg, data: bytes, version: int) -> dict:
    fields, end = read_message(msg, data, 0, len(data), version)
    assert end == len(data)
    return fields


ALL_TYPES = Message(
    "AllTypes",
    "0-1",
    "1+",
    """
a int8
b int16
c uint16
d int32
e uint32
f int64
g float64
h bool
i uuid
j string
k string ? =""
l bytes
m bytes ? =""
n [int32]
o [string]
p []
  x int16
  y string
q [int64] ? =[]
""",
)

UUID_BYTES = bytes(range(16))


def test_versions_parse_kafka_notation():
    assert 5 in Versions.parse("0+") and 0 in Versions.parse("0+")
    assert 2 in Versions.parse("1-3") and 4 not in Versions.parse("1-3")
    assert 2 in Versions.parse("2") and 3 not in Versions.parse("2")
    assert 0 not in Versions.parse("none")


def test_non_flexible_encoding_of_every_type():
    data = (
        struct.pack(">bhHiIqd?", -2, -300, 65535, -70000, 4000000000, -(2**40), 1.5, True)
        + UUID_BYTES
        + s16("héllo")
        + struct.pack(">h", -1)  # null string
        + struct.pack(">i", 3)
        + b"xyz"
        + struct.pack(">i", -1)  # null bytes
        + struct.pack(">iii", 2, 7, -8)
        + struct.pack(">i", 2)
        + s16("a")
        + s16("")
        + struct.pack(">i", 1)
        + struct.pack(">h", 9)
        + s16("z")
        + struct.pack(">i", -1)  # null int64 array
    )
    assert read(ALL_TYPES, data, 0) == {
        "a": -2,
        "b": -300,
        "c": 65535,
        "d": -70000,
        "e": 4000000000,
        "f": -(2**40),
        "g": 1.5,
        "h": True,
        "i": uuid.UUID(bytes=UUID_BYTES),
        "j": "héllo",
        "k": None,
        "l": b"xyz",
        "m": None,
        "n": [7, -8],
        "o": ["a", ""],
        "p": [{"x": 9, "y": "z"}],
        "q": None,
    }


def test_flexible_encoding_uses_compact_lengths_and_tag_sections():
    data = (
        struct.pack(">bhHiIqd?", 1, 2, 3, 4, 5, 6, 0.25, False)
        + UUID_BYTES
        + cstr("s")
        + b"\x00"  # null compact string
        + uv(3)
        + b"xy"
        + b"\x00"  # null compact bytes
        + uv(2)
        + struct.pack(">i", 42)
        + uv(1)  # empty string array
        + uv(2)
        + struct.pack(">h", 1)
        + cstr("q")
        + b"\x00"  # struct's tag section
        + uv(2)
        + struct.pack(">q", 11)
        + b"\x00"  # message's tag section
    )
    got = read(ALL_TYPES, data, 1)
    assert got["j"] == "s" and got["k"] is None and got["l"] == b"xy" and got["m"] is None
    assert got["n"] == [42] and got["o"] == [] and got["p"] == [{"x": 1, "y": "q"}]
    assert got["q"] == [11]


TAGGED = Message(
    "Tagged",
    "0-2",
    "1+",
    """
id int32
name string 2+ =anon
epoch int32 1+ tag=0 =-1
note string 1+ ? tag=1 =null
extra {} 1+ ? tag=2 ={}
  v int16
box {} ? ={}
  w int8
later int64 2+ tag=3 =7
""",
)


def test_absent_fields_take_kafka_defaults():
    # v0: not flexible; "name" absent (default "anon"), box present (int8 marker 1).
    data = struct.pack(">ib", 5, 1) + struct.pack(">b", 3)
    assert read(TAGGED, data, 0) == {
        "id": 5,
        "name": "anon",
        "epoch": -1,
        "note": None,
        "extra": {"v": 0},
        "box": {"w": 3},
        "later": 7,
    }


def test_tagged_fields_in_any_order_and_unknown_tags_kept():
    tags = (
        uv(4)
        + uv(1)
        + uv(3)
        + cstr("hi")  # note
        + uv(0)
        + uv(4)
        + struct.pack(">i", 99)  # epoch
        + uv(2)
        + uv(4)
        + uv(1)
        + struct.pack(">h", -5)
        + b"\x00"  # extra: present marker, struct, its tags
        + uv(40)
        + uv(2)
        + b"\xab\xcd"  # unknown tag 40
    )
    data = struct.pack(">i", 1) + struct.pack(">b", -1) + tags  # box null (int8 -1)
    got = read(TAGGED, data, 1)
    assert got["epoch"] == 99 and got["note"] == "hi" and got["extra"] == {"v": -5}
    assert got["box"] is None and got["later"] == 7
    assert got["_unknownTaggedFields"] == [{"tag": 40, "data": b"\xab\xcd"}]


def test_tagged_nullable_struct_null_is_a_zero_varint():
    data = struct.pack(">i", 1) + struct.pack(">b", -1) + uv(1) + uv(2) + uv(1) + uv(0)
    assert read(TAGGED, data, 1)["extra"] is None


def test_known_tag_outside_its_tagged_versions_is_corrupt():
    data = struct.pack(">i", 1) + struct.pack(">b", -1) + uv(1) + uv(3) + uv(8) + bytes(8)
    with pytest.raises(CorruptRecordError, match="tag 3 is not valid for version 1"):
        read_message(TAGGED, data, 0, len(data), 1)


def test_tagged_value_must_fill_its_declared_size():
    data = struct.pack(">i", 1) + struct.pack(">b", -1) + uv(1) + uv(0) + uv(5) + bytes(5)
    with pytest.raises(CorruptRecordError, match="declares 5 bytes"):
        read_message(TAGGED, data, 0, len(data), 1)


def test_null_in_a_non_nullable_field_is_corrupt():
    data = struct.pack(">bhHiIqd?", 0, 0, 0, 0, 0, 0, 0, 0) + UUID_BYTES + struct.pack(">h", -1)
    with pytest.raises(CorruptRecordError, match="non-nullable field j"):
        read_message(ALL_TYPES, data, 0, len(data), 0)


ARRAYS = Message(
    "Arrays",
    "0-1",
    "1+",
    """
ints [int32]
items []
  s string
blob bytes
""",
)


@pytest.mark.parametrize(
    ("data", "version", "rule"),
    [
        (struct.pack(">i", 2**31 - 1) + bytes(16), 0, "claims 2147483647 elements"),
        (struct.pack(">i", 0) + struct.pack(">i", 2**31 - 1) + bytes(12), 0, "claims"),
        (struct.pack(">i", 0) + struct.pack(">i", 1) + struct.pack(">h", 0x7FFF), 0, "needs"),
        (struct.pack(">ii", 0, 1) + struct.pack(">h", -2), 0, "non-nullable field s"),
        (struct.pack(">iii", 0, 0, 2**31 - 1) + b"abc", 0, "needs 2147483647 bytes"),
        (uv(2**32 - 1) + bytes(16), 1, "serialized as null"),
        (uv(1) + uv(2) + uv(0x8000 + 1) + bytes(8), 1, "invalid length 32768"),
        (b"\xff\xff\xff\xff\xff\xff", 1, "longer than 5 bytes"),
        (uv(1) + uv(1) + uv(1) + uv(2**31), 1, "tagged fields cannot fit"),
        (uv(1) + uv(1) + uv(1) + uv(1) + uv(9) + uv(100) + b"x", 1, "needs 100 bytes"),
    ],
)
def test_hostile_lengths_fail_fast_without_allocating(data, version, rule):
    started = time.perf_counter()
    with pytest.raises(CorruptRecordError, match=rule) as info:
        read_message(ARRAYS, data, 0, len(data), version)
    assert time.perf_counter() - started < 0.5
    assert info.value.position is not None and 0 <= info.value.position <= len(data)


def test_reader_never_reads_past_the_given_end():
    data = struct.pack(">i", 1) + struct.pack(">i", 5) + b"trailing"
    with pytest.raises(CorruptRecordError, match="claims 1 elements but only 0 bytes remain"):
        read_message(ARRAYS, data, 0, 4, 0)


def test_invalid_utf8_is_replaced_as_java_does():
    data = struct.pack(">i", 0) + struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xff\xfe"
    data += struct.pack(">i", 0)
    assert read(ARRAYS, data, 0)["items"] == [{"s": "\ufffd\ufffd"}]
