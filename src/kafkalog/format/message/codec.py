"""Kafka's message serialization, both ways, compiled per version from a schema table.

The byte rules, once for the wire protocol and the internal topics, as Kafka's generator writes
them (generator/.../MessageDataGenerator.java):

- Fixed-width fields are big-endian: int8, int16, uint16, int32, uint32, int64, float64 (IEEE),
  bool (one byte, non-zero is true), uuid (16 bytes, most significant half first).
- In non-flexible versions a string is ``i16 length | UTF-8``, bytes/records ``i32 length | data``,
  an array ``i32 count | elements``; a negative length is null. In flexible versions (KIP-482)
  each length is an unsigned varint holding length+1 (0 means null), read as a signed 32-bit int
  like Java does.
- Strings longer than 0x7fff bytes are invalid; array counts above the remaining bytes are
  invalid (checked before allocating); null where the field is not nullable is invalid.
- A nullable struct field is preceded by an int8 presence marker (negative = null); when tagged,
  by an unsigned varint (0 = null).
- In flexible versions every struct ends with tagged fields: ``uvarint count`` then per field
  ``uvarint tag | uvarint size | value``; a known field's value must fill its size. Tagged fields
  are written only when they differ from their default, known ones by ascending tag, then the
  unknown ones a reader kept.
- A field absent at a version takes its default (:meth:`.schema.Field.default_for`).

What differs between the two sides is a :class:`Dialect`: the error type bad bytes raise and how it
names the byte, how invalid UTF-8 is read, whether unknown tags are kept (a known tag outside its
versions is then invalid, as in Kafka's generated readers) and whether writing refuses values a
version cannot hold. Records values may be windows of segment files (anything with
``size_in_bytes()``): they become separate parts of :class:`Encoded`, for ``sendfile``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import CorruptRecordError, KafkalogError
from ..varint import decode_unsigned_varint, encode_unsigned_varint

__all__ = ["RECORDS", "Dialect", "Encoded", "Reader", "compile_struct"]

MAX_STRING_LENGTH = 0x7FFF
_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_ARRAY_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q"}
_I8, _I16, _I32 = _FIXED["int8"], _FIXED["int16"], _FIXED["int32"]
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one side of kafkalog uses the shared byte rules (see the module docstring)."""

    error: type[KafkalogError]  # raised for bad bytes, with ``position``
    where: str  # appended to an error's message: "" or e.g. " (at byte {at})"
    utf8_errors: str  # "replace" (as Java's String does) or "strict"
    keep_unknown_tags: bool  # under "_unknownTaggedFields", written back by the writer
    strict_writes: bool  # refuse null where not nullable and non-defaults a version cannot hold


# Internal-topic records: read like Kafka's generated classes, written byte-exact or refused.
RECORDS = Dialect(CorruptRecordError, " (at byte {at})", "replace", True, True)


class Reader:
    """A cursor over ``buf[pos:end]`` that never reads past ``end`` and raises the dialect's error,
    naming the byte and the rule."""

    __slots__ = ("buf", "dialect", "end", "pos")

    def __init__(self, buf, pos: int = 0, end: int | None = None, dialect: Dialect = RECORDS):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos, self.dialect = pos, dialect
        self.end = len(buf) if end is None else end

    def fail(self, rule: str, at: int | None = None) -> KafkalogError:
        at = self.pos if at is None else at
        return self.dialect.error(rule + self.dialect.where.format(at=at), position=at)

    def need(self, n: int, what: str) -> None:
        if self.end - self.pos < n:
            raise self.fail(f"{what} needs {n} bytes but only {self.end - self.pos} remain")

    def take(self, n: int, what: str = "data") -> memoryview:
        """``n`` bytes: a slice of the buffer."""
        start = self.pos
        if self.end - start < n:
            self.need(n, what)
        self.pos = start + n
        return self.buf[start : self.pos]

    def unpack(self, s: struct.Struct, what: str) -> Any:
        pos = self.pos
        if self.end - pos < s.size:
            self.need(s.size, what)
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)[0]

    def uvarint(self, what: str = "unsigned varint") -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos, self.end)
        except CorruptRecordError as e:
            raise self.dialect.error(f"{what}: {e.message}", position=e.position) from None
        return value

    def length(self, flexible: bool, wide: bool, label: str) -> int:
        """A length or count prefix (``label``: "length of ..."): compact uvarint-1, else i32
        (``wide``) or i16."""
        if flexible:
            n = self.uvarint(label)
            return (n - (1 << 32) if n >= 1 << 31 else n) - 1  # Java's readUnsignedVarint
        return self.unpack(_I32 if wide else _I16, label)


class Encoded:
    """An encoded message: bytes, with file windows (records to ``sendfile``) as separate parts."""

    __slots__ = ("buf", "parts", "size")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list = []
        self.size = 0  # bytes in finished parts

    def region(self, obj: Any, length: int) -> None:
        self.parts.append(self.buf)
        self.parts.append(obj)
        self.size += len(self.buf) + length
        self.buf = bytearray()

    def finish(self) -> list:
        """The parts in order: ``bytearray`` chunks and windows with ``size_in_bytes()``."""
        parts = [p for p in (*self.parts, self.buf) if not isinstance(p, bytearray) or p]
        self.parts, self.buf = [], bytearray()
        return parts

    def total_size(self) -> int:
        return self.size + len(self.buf)


def _write_length(out: Encoded, n: int, flexible: bool, wide: bool) -> None:
    """A length or count: compact uvarint(n + 1) (0 = null for n = -1), else i32 or i16."""
    if flexible:
        out.buf += encode_unsigned_varint(n + 1)
    else:
        out.buf += (_I32 if wide else _I16).pack(n)


def copy_default(value: Any) -> Any:
    """A fresh copy of a default, so that callers may change what they were given."""
    if isinstance(value, dict):
        return {k: copy_default(v) for k, v in value.items()}
    if isinstance(value, list):
        return []
    return value


def _at(e: KafkalogError, name: str) -> KafkalogError:
    """Build the failing field's path (``topics.partitions.records``) as the error unwinds."""
    path = getattr(e, "field_path", None)
    e.field_path = name if path is None else f"{name}.{path}"  # type: ignore[attr-defined]
    return e


def fail_prefix(e: KafkalogError, what: str) -> KafkalogError:
    """Name the message (and the field path the error collected) in its text."""
    where = getattr(e, "field_path", None)
    e.message = f"{what}" + (f" {where}" if where else "") + f": {e.message}"
    e.args = (e.message,)
    return e


Decode = Callable[[Reader], Any]
Encode = Callable[[Any, Encoded], None]


def _null_or_fail(r: Reader, name: str, nullable: bool, start: int) -> None:
    if nullable:
        return None
    raise r.fail(f"non-nullable field {name} was serialized as null", start)


def _not_nullable(name: str, v: int) -> ValueError:
    return ValueError(f"field {name} is not nullable at version {v}")


def _none_value(
    out: Encoded,
    empty: Any,
    name: str,
    v: int,
    nullable: bool,
    flexible: bool,
    wide: bool,
    d: Dialect,
) -> Any:
    """What a None is written as: None once the null length of a nullable field is written; else
    ``empty`` (the field's empty value) unless the dialect writes strictly."""
    if nullable:
        _write_length(out, -1, flexible, wide)
        return None
    if d.strict_writes:
        raise _not_nullable(name, v)
    return empty


def _scalar_codec(
    type_: str, name: str, v: int, flexible: bool, nullable: bool, d: Dialect
) -> tuple[Decode, Encode]:
    """A primitive field (or array element, never nullable)."""
    s = _FIXED.get(type_)
    if s is not None:
        what = f"{type_} {name}"

        def dec_fixed(r: Reader) -> Any:
            return r.unpack(s, what)

        def enc_fixed(value, out: Encoded) -> None:
            try:
                out.buf += s.pack(value)
            except struct.error as e:
                raise ValueError(f"field {name}: {value!r} is not a valid {type_}: {e}") from None

        return dec_fixed, enc_fixed
    if type_ == "bool":
        return (lambda r: r.take(1, f"bool {name}")[0] != 0), (
            lambda value, out: out.buf.append(1 if value else 0)
        )
    if type_ == "uuid":

        def dec_uuid(r: Reader) -> uuid.UUID:
            return uuid.UUID(bytes=bytes(r.take(16, f"uuid {name}")))

        def enc_uuid(value, out: Encoded) -> None:
            if value is None and not d.strict_writes:
                value = _ZERO_UUID
            if not isinstance(value, uuid.UUID):
                raise ValueError(f"field {name}: {value!r} is not a uuid.UUID")
            out.buf += value.bytes

        return dec_uuid, enc_uuid
    if type_ == "string":
        what = f"string {name}"
        label = f"length of {what}"
        errors = d.utf8_errors

        def dec_string(r: Reader) -> str | None:
            start = r.pos
            n = r.length(flexible, False, label)
            if n < 0:
                return _null_or_fail(r, name, nullable, start)
            if n > MAX_STRING_LENGTH:
                raise r.fail(f"string field {name} had invalid length {n}", start)
            data = r.take(n, what)
            try:
                return str(data, "utf-8", errors)
            except UnicodeDecodeError as e:
                raise r.fail(f"string {name} is not UTF-8: {e.reason}", r.pos - n) from None

        def enc_string(value, out: Encoded) -> None:
            if value is None:  # null, or (lenient writes) the empty value
                value = _none_value(out, "", name, v, nullable, flexible, False, d)
                if value is None:
                    return
            data = value.encode("utf-8")
            if len(data) > MAX_STRING_LENGTH:
                raise ValueError(
                    f"string field {name} is {len(data)} bytes, over {MAX_STRING_LENGTH}"
                )
            _write_length(out, len(data), flexible, False)
            out.buf += data

        return dec_string, enc_string
    # bytes and records: records stay a slice of the buffer (a memoryview of the request)
    what = f"{type_} {name}"
    label = f"length of {what}"
    as_bytes = type_ == "bytes"

    def dec_bytes(r: Reader) -> Any:
        start = r.pos
        n = r.length(flexible, True, label)
        if n < 0:
            return _null_or_fail(r, name, nullable, start)
        data = r.take(n, what)
        return bytes(data) if as_bytes else data

    def enc_bytes(value, out: Encoded) -> None:
        if value is None:  # null, or (lenient writes) the empty value
            value = _none_value(out, b"", name, v, nullable, flexible, True, d)
            if value is None:
                return
        if not isinstance(value, (bytes, bytearray, memoryview)) and hasattr(
            value, "size_in_bytes"
        ):
            n = value.size_in_bytes()
            _write_length(out, n, flexible, True)
            if n:
                out.region(value, n)
            return
        n = value.nbytes if isinstance(value, memoryview) else len(value)
        _write_length(out, n, flexible, True)
        out.buf += value

    return dec_bytes, enc_bytes


def _array_codec(
    f, v: int, flexible: bool, nullable: bool, item: tuple[Decode, Encode] | None, d: Dialect
) -> tuple[Decode, Encode]:
    name = f.name
    label = f"length of array {name}"
    code = _ARRAY_CODES.get(f.type[1:-1]) if item is None else None
    if item is None:
        item = _scalar_codec(f.type[1:-1], name, v, flexible, False, d)
    item_dec, item_enc = item
    size = _FIXED[f.type[1:-1]].size if code is not None else 0

    def decode(r: Reader) -> list | None:
        start = r.pos
        count = r.length(flexible, True, label)
        if count < 0:
            return _null_or_fail(r, name, nullable, start)
        remaining = r.end - r.pos
        if count > remaining:  # every element takes at least one byte
            raise r.fail(
                f"array {name} claims {count} elements but only {remaining} bytes remain; "
                "they cannot fit",
                start,
            )
        if code is not None:
            r.need(size * count, f"{count} x {f.type[1:-1]} of {name}")
            values = list(struct.unpack_from(f">{count}{code}", r.buf, r.pos))
            r.pos += size * count
            return values
        return [item_dec(r) for _ in range(count)]

    def encode(value, out: Encoded) -> None:
        if value is None:  # null, or (lenient writes) the empty value
            value = _none_value(out, [], name, v, nullable, flexible, True, d)
            if value is None:
                return
        _write_length(out, len(value), flexible, True)
        if code is not None:
            try:
                out.buf += struct.pack(f">{len(value)}{code}", *value)
            except struct.error as e:
                raise ValueError(f"array {name}: {e}") from None
            return
        for element in value:
            item_enc(element, out)

    return decode, encode


def _nullable_struct(
    name: str, v: int, tagged: bool, codec: tuple[Decode, Encode]
) -> tuple[Decode, Encode]:
    """A nullable struct: a presence marker, int8 (negative = null) or, tagged, a uvarint."""
    struct_dec, struct_enc = codec

    def decode(r: Reader) -> dict | None:
        if tagged:
            n = r.uvarint(f"presence of {name}")
            present = 0 < n < 1 << 31
        else:
            present = r.unpack(_I8, f"int8 presence of {name}") >= 0
        return struct_dec(r) if present else None

    def encode(value, out: Encoded) -> None:
        if tagged:
            out.buf += encode_unsigned_varint(0 if value is None else 1)
        else:
            out.buf += _I8.pack(-1 if value is None else 1)
        if value is not None:
            struct_enc(value, out)

    return decode, encode


def _field_codec(f, v: int, flexible: bool, d: Dialect) -> tuple[Decode, Encode]:
    nullable = f.nullable_in(v)
    if f.type == "{}":
        codec = compile_struct(f.fields, v, flexible, d)
        if nullable:
            return _nullable_struct(f.name, v, f.tag is not None, codec)
        struct_dec, struct_enc = codec

        def enc_struct(value, out: Encoded) -> None:
            if value is None:
                raise ValueError(f"struct field {f.name} is not nullable at version {v}")
            struct_enc(value, out)

        return struct_dec, enc_struct
    if f.type == "[]":
        return _array_codec(f, v, flexible, nullable, compile_struct(f.fields, v, flexible, d), d)
    if f.type.startswith("["):
        return _array_codec(f, v, flexible, nullable, None, d)
    return _scalar_codec(f.type, f.name, v, flexible, nullable, d)


_MISSING = object()


def compile_struct(fields: list, v: int, flexible: bool, d: Dialect) -> tuple[Decode, Encode]:
    """Decoder and encoder of a struct (a list of :class:`.schema.Field`) at version ``v``."""
    # (name, decode or None when absent or tagged, encode, default, field) in schema order
    steps: list[tuple[str, Decode | None, Encode | None, Any, Any]] = []
    tagged: dict[int, tuple[str, Decode, Encode, Any]] = {}
    all_tags = frozenset(f.tag for f in fields if f.tag is not None)
    for f in fields:
        default = f.default_for(v)
        if not f.in_version(v) or (f.tag is not None and not flexible):
            steps.append((f.name, None, None, default, f))
            continue
        dec, enc = _field_codec(f, v, flexible, d)
        if f.tag is not None:
            tagged[f.tag] = (f.name, dec, enc, default)
            steps.append((f.name, None, None, default, None))
        else:
            steps.append((f.name, dec, enc, default, None))
    tags = sorted(tagged.items())
    template = {name: default for name, _, _, default, _ in steps}
    fresh = [(n, df) for n, dec, _, df, _ in steps if dec is None and isinstance(df, (dict, list))]
    plain = [(name, dec) for name, dec, _, _, _ in steps if dec is not None]
    keep_unknown = d.keep_unknown_tags

    def read_tagged_fields(r: Reader, out: dict) -> None:
        start = r.pos
        count = r.uvarint("number of tagged fields")
        if count > (r.end - r.pos) // 2:  # each takes at least a tag byte and a size byte
            raise r.fail(f"{count} tagged fields cannot fit in {r.end - r.pos} bytes", start)
        unknown = []
        for _ in range(count):
            tag_at = r.pos
            tag = r.uvarint("tag")
            size = r.uvarint(f"size of tagged field {tag}")
            r.need(size, f"tagged field {tag}")
            known = tagged.get(tag)
            if known is None:
                if not keep_unknown:  # skipped, as Kafka's request readers do
                    r.pos += size
                    continue
                if tag in all_tags:
                    raise r.fail(f"tag {tag} is not valid for version {v}", tag_at)
                unknown.append({"tag": tag, "data": bytes(r.take(size))})
                continue
            name, dec = known[0], known[1]
            value_end = r.pos + size
            outer_end, r.end = r.end, value_end
            try:
                out[name] = dec(r)
            except KafkalogError as e:
                raise _at(e, name) from None
            finally:
                r.end = outer_end
            if r.pos != value_end:
                raise r.fail(
                    f"tagged field {name} (tag {tag}) declares {size} bytes but its value "
                    f"takes {r.pos - (value_end - size)}",
                    tag_at,
                )
        if unknown:
            out["_unknownTaggedFields"] = unknown

    def decode(r: Reader) -> dict:
        out = template.copy()  # schema order; absent and tagged fields at their defaults
        for name, default in fresh:
            out[name] = copy_default(default)
        for name, dec in plain:
            try:
                out[name] = dec(r)
            except KafkalogError as e:
                raise _at(e, name) from None
        if flexible:
            read_tagged_fields(r, out)
        return out

    written = [(name, enc, default) for name, _, enc, default, _ in steps if enc is not None]
    # fields this version cannot hold: refused unless at their default, when writes are strict
    refused = [(n, df, f) for n, _, _, df, f in steps if f is not None and d.strict_writes]

    def encode(value: dict, out: Encoded) -> None:
        get = value.get
        for name, enc, default in written:
            item = get(name, _MISSING)
            enc(copy_default(default) if item is _MISSING else item, out)
        for name, default, f in refused:
            item = get(name, default)
            if item != default:
                raise ValueError(
                    f"field {name} cannot be written at version {v} (it exists in "
                    f"versions {f.versions}) and {item!r} is not its default"
                )
        if not flexible:
            return
        present = []
        for tag, (name, _, enc, default) in tags:
            item = get(name, _MISSING)
            if item is _MISSING or item == default:
                continue
            sub = Encoded()
            enc(item, sub)
            present.append((tag, sub.buf))
        unknown = get("_unknownTaggedFields")
        if unknown:  # kept by a reader: after the known ones, by tag
            present += sorted((e["tag"], e["data"]) for e in unknown)
        out.buf += encode_unsigned_varint(len(present))
        for tag, data in present:
            out.buf += encode_unsigned_varint(tag)
            out.buf += encode_unsigned_varint(len(data))
            out.buf += data

    return decode, encode
