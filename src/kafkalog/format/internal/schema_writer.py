"""The writer twin of :mod:`.schema`: a message's fields (a dict) to bytes at one version.

Coordinators keep their state in internal topics in Kafka's own schemas, so what kafkalog writes
must be what Kafka's generated ``write`` methods produce, byte for byte (checked against records
real brokers wrote). The rules mirror the reader's and Kafka's MessageDataGenerator:

- A field absent at the version written is skipped, which is only allowed when its value is the
  default (or missing): anything else would be lost, so it is refused, as Kafka's generated code
  refuses a non-ignorable field at a version that cannot hold it.
- A tagged field is written only when its value differs from its default, as Kafka does.
- Tagged fields, known ones by ascending tag then the ``_unknownTaggedFields`` kept by the reader,
  are written after the in-place fields of every struct of a flexible version.
- Null is accepted only where the field is nullable at the version written.

Caller bugs raise ValueError with the field's name; nothing here reads bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from ..varint import encode_unsigned_varint
from .schema import _ARRAY_CODES, _FIXED, MAX_STRING_LENGTH, Field, Message, StructSpec

__all__ = ["write_message"]

_I16 = _FIXED["int16"][0]
_I32 = _FIXED["int32"][0]


def _length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    """A length or count: compact uvarint(n + 1) (0 = null for n = -1), else i32 or i16."""
    if flexible:
        out += encode_unsigned_varint(n + 1)
    else:
        out += (_I32 if wide else _I16).pack(n)


def _null(out: bytearray, f: Field, version: int, flexible: bool, wide: bool) -> None:
    if version not in f.nullable:
        raise ValueError(f"field {f.name} is not nullable at version {version}")
    _length(out, -1, flexible, wide)


def _write_string(out: bytearray, name: str, value: str, flexible: bool) -> None:
    data = value.encode("utf-8")
    if len(data) > MAX_STRING_LENGTH:
        raise ValueError(f"string field {name} is {len(data)} bytes, over {MAX_STRING_LENGTH}")
    _length(out, len(data), flexible, False)
    out += data


def _write_value(
    out: bytearray, f: Field, value: object, version: int, flexible: bool, tagged: bool
) -> None:
    t = f.type
    if f.is_array:
        _write_array(out, f, value, version, flexible)
    elif value is None and t in ("string", "bytes"):
        _null(out, f, version, flexible, t == "bytes")
    elif t in _FIXED:
        fmt = _FIXED[t][0]
        try:
            out += fmt.pack(int(bool(value)) if t == "bool" else value)
        except struct.error as e:
            raise ValueError(f"field {f.name}: {value!r} is not a valid {t}: {e}") from None
    elif t == "string":
        _write_string(out, f.name, value, flexible)  # type: ignore[arg-type]
    elif t == "uuid":
        if not isinstance(value, uuid.UUID):
            raise ValueError(f"field {f.name}: {value!r} is not a uuid.UUID")
        out += value.bytes
    elif t == "bytes":
        data = bytes(value)  # type: ignore[arg-type]
        _length(out, len(data), flexible, True)
        out += data
    else:
        assert f.struct_spec is not None
        if version in f.nullable:
            if tagged:
                out += encode_unsigned_varint(0 if value is None else 1)
            else:
                out += struct.pack(">b", -1 if value is None else 1)
            if value is None:
                return
        elif value is None:
            raise ValueError(f"struct field {f.name} is not nullable at version {version}")
        _write_struct(out, f.struct_spec, value, version, flexible)  # type: ignore[arg-type]


def _write_array(out: bytearray, f: Field, value: object, version: int, flexible: bool) -> None:
    if value is None:
        _null(out, f, version, flexible, True)
        return
    items = list(value)  # type: ignore[call-overload]
    _length(out, len(items), flexible, True)
    t = f.type
    code = _ARRAY_CODES.get(t)
    if code is not None:
        try:
            out += struct.pack(f">{len(items)}{code}", *items)
        except struct.error as e:
            raise ValueError(f"array {f.name}: {e}") from None
        return
    for item in items:
        if t == "struct":
            assert f.struct_spec is not None
            _write_struct(out, f.struct_spec, item, version, flexible)
        elif t == "string":
            _write_string(out, f.name, item, flexible)
        else:
            element = Field(f.name, t, False, f.versions, f.nullable, None, f.tagged, "", None)
            _write_value(out, element, item, -1, flexible, False)


def _write_struct(
    out: bytearray, spec: StructSpec, data: Mapping, version: int, flexible: bool
) -> None:
    plan = spec.plan(version)
    tagged: list[tuple[int, Field, object]] = []
    for f, here in plan.in_place:
        default = f.default_value()
        value = data.get(f.name, default)
        if here:
            _write_value(out, f, value, version, flexible, False)
        elif f.tag is not None and f.tag in plan.tagged:
            if value != default:
                tagged.append((f.tag, f, value))
        elif value != default:
            raise ValueError(
                f"field {f.name} cannot be written at version {version} (it exists in "
                f"versions {f.versions}) and {value!r} is not its default"
            )
    if not flexible:
        return
    unknown = list(data.get("_unknownTaggedFields", ()))
    out += encode_unsigned_varint(len(tagged) + len(unknown))
    for tag, f, value in sorted(tagged, key=lambda item: item[0]):
        body = bytearray()
        _write_value(body, f, value, version, True, True)
        out += encode_unsigned_varint(tag)
        out += encode_unsigned_varint(len(body))
        out += body
    for entry in sorted(unknown, key=lambda e: e["tag"]):
        out += encode_unsigned_varint(entry["tag"])
        out += encode_unsigned_varint(len(entry["data"]))
        out += entry["data"]


def write_message(msg: Message, data: Mapping, version: int) -> bytes:
    """``data`` (by Kafka's camelCase names; missing fields at defaults) as ``msg`` at ``version``.

    The inverse of :func:`.schema.read_message` for every message the schema tables hold.
    """
    if version not in msg.valid:
        raise ValueError(f"{msg.name} has no version {version} (valid: {msg.valid})")
    out = bytearray()
    _write_struct(out, msg.struct, data, version, version in msg.flexible)
    return bytes(out)
