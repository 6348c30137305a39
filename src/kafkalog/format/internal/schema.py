"""Kafka's message-schema type system, written compactly, and one reader for all of it.

Every internal-topic record (``__consumer_offsets``, ``__transaction_state``, KRaft metadata and
control records) is a message of Kafka's JSON schema language, serialized by generated Java code.
Rather than hand-writing a parser per record we describe each schema as data and walk it here, so
the byte rules live in one place and match the generator (generator/.../MessageDataGenerator.java):

- Fixed-width fields are big-endian: int8, int16, uint16, int32, uint32, int64, float64 (IEEE),
  bool (one byte, non-zero is true), uuid (16 bytes, most significant half first).
- In non-flexible versions a string is ``i16 length | UTF-8``, bytes ``i32 length | data``, an
  array ``i32 count | elements``; length -1 means null. In flexible versions each length is an
  unsigned varint holding length+1 (0 means null), read as a signed 32-bit int like Java does.
- Strings longer than 0x7fff bytes are corrupt; array counts above the remaining bytes are corrupt
  (checked before allocating); null in a version where the field is not nullable is corrupt.
- A nullable struct field is preceded by an int8 presence marker (negative = null); when tagged,
  by an unsigned varint (0 = null).
- In flexible versions every struct ends with tagged fields: ``uvarint count`` then per field
  ``uvarint tag | uvarint size | value``. Unknown tags are kept as raw bytes under
  ``_unknownTaggedFields``; a known tag outside its taggedVersions is corrupt, as in Kafka.
- A field absent at the version read (or an absent tagged field) takes its default: the schema's
  ``default`` text, else 0 / false / "" / empty bytes / empty list / zero uuid / a struct of
  defaults (a JSON ``null`` default counts as unset, exactly as Kafka's generator reads it).

Field notation, one string per field: ``"name type versions [?nullable] [#tag@tagged] [=default]"``,
for example ``"leaderEpoch int32 3+ =-1"`` or ``"isr []int32 0+ ?0+ #0@0+ =null"``. Names are
Kafka's camelCase names (first letter lowered, as Kafka's JSON converters print them). A struct
or struct-array field is a pair ``(spec, (subfield, ...))``. Versions read ``"0+"``, ``"1-3"``,
``"2"`` or ``"none"``.

Decoded values: ints, float, bool, str, ``bytes``, ``uuid.UUID``, lists and dicts keyed by field
name in schema order; every field of a struct is present, absent ones at their default.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import CorruptRecordError
from ..varint import decode_unsigned_varint

__all__ = ["Field", "Message", "StructSpec", "Versions", "message", "read_message"]

MAX_VERSION = 0x7FFF
MAX_STRING_LENGTH = 0x7FFF

# Fixed-width types: (struct format, size).
_FIXED: dict[str, tuple[struct.Struct, int]] = {
    "int8": (struct.Struct(">b"), 1),
    "int16": (struct.Struct(">h"), 2),
    "uint16": (struct.Struct(">H"), 2),
    "int32": (struct.Struct(">i"), 4),
    "uint32": (struct.Struct(">I"), 4),
    "int64": (struct.Struct(">q"), 8),
    "float64": (struct.Struct(">d"), 8),
    "bool": (struct.Struct(">B"), 1),
}
_ARRAY_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q"}
_INTEGERS = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
_PRIMITIVES = frozenset(_FIXED) | {"string", "bytes", "uuid"}
_I16 = _FIXED["int16"][0]
_I32 = _FIXED["int32"][0]


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``lo > hi`` is the empty range ("none")."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


_NONE = Versions(1, 0)


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field. ``type`` is the element type for arrays, ``"struct"`` for structs."""

    name: str
    type: str
    is_array: bool
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    default: str
    struct_spec: StructSpec | None  # the fields of a struct or struct-array field

    def default_value(self) -> object:
        """The value Kafka's generated classes hold when the field is not read."""
        d = self.default
        if d == "null":
            return None
        if self.is_array:
            return []
        t = self.type
        if t in _INTEGERS:
            return int(d, 16) if d.startswith("0x") else int(d or "0")
        if t == "bool":
            return d.lower() == "true"
        if t == "float64":
            return float(d or "0")
        if t == "string":
            return d
        if t == "bytes":
            return b""
        if t == "uuid":
            return uuid.UUID(int=0)
        assert self.struct_spec is not None
        return {f.name: f.default_value() for f in self.struct_spec.fields}


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to do with each field at one version: read it in place, or take its default."""

    in_place: tuple[tuple[Field, bool], ...]  # (field, read here?) in schema order
    tagged: dict[int, Field]  # tag -> field, for tags valid at this version


@dataclass(frozen=True, slots=True)
class StructSpec:
    fields: tuple[Field, ...]
    all_tags: frozenset[int]
    _plans: dict[int, _Plan] = field(default_factory=dict, compare=False, repr=False)

    def plan(self, version: int) -> _Plan:
        plan = self._plans.get(version)
        if plan is None:
            in_place = tuple(
                (f, version in f.versions and version not in f.tagged) for f in self.fields
            )
            tagged = {
                f.tag: f
                for f in self.fields
                if f.tag is not None and version in f.tagged and version in f.versions
            }
            plan = self._plans[version] = _Plan(in_place, tagged)
        return plan


@dataclass(frozen=True, slots=True)
class Message:
    name: str
    valid: Versions
    flexible: Versions
    struct: StructSpec


FieldDef = str | tuple[str, Sequence["FieldDef"]]


def _parse_field(definition: FieldDef) -> Field:
    if isinstance(definition, tuple):
        spec, sub = definition
        sub_struct: StructSpec | None = _struct(sub)
    else:
        spec, sub_struct = definition, None
    name, type_text, versions_text, *flags = spec.split()
    is_array = type_text.startswith("[]")
    base = type_text[2:] if is_array else type_text
    if base not in _PRIMITIVES:
        if sub_struct is None:
            raise ValueError(f"schema field {name}: struct type {base} needs its fields")
        base = "struct"
    nullable, tag, tagged, default = _NONE, None, _NONE, ""
    for flag in flags:
        if flag[0] == "?":
            nullable = Versions.parse(flag[1:])
        elif flag[0] == "#":
            tag_text, _, tagged_text = flag[1:].partition("@")
            tag, tagged = int(tag_text), Versions.parse(tagged_text)
        elif flag[0] == "=":
            default = flag[1:]
        else:
            raise ValueError(f"schema field {name}: unknown flag {flag!r}")
    return Field(
        name, base, is_array, Versions.parse(versions_text), nullable, tag, tagged, default,
        sub_struct,
    )  # fmt: skip


def _struct(fields: Sequence[FieldDef]) -> StructSpec:
    parsed = tuple(_parse_field(f) for f in fields)
    return StructSpec(parsed, frozenset(f.tag for f in parsed if f.tag is not None))


def message(name: str, valid: str, *, flexible: str, fields: Sequence[FieldDef]) -> Message:
    """A message schema from its name, validVersions, flexibleVersions and field definitions."""
    return Message(name, Versions.parse(valid), Versions.parse(flexible), _struct(fields))


class _Reader:
    """A cursor over ``buf[pos:end]`` that raises CorruptRecordError, never reads past ``end``."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def fail(self, what: str, at: int | None = None) -> CorruptRecordError:
        at = self.pos if at is None else at
        return CorruptRecordError(f"{what} (at byte {at})", position=at)

    def need(self, n: int, what: str) -> None:
        if self.end - self.pos < n:
            raise self.fail(f"{what} needs {n} bytes but only {self.end - self.pos} remain")

    def fixed(self, type_name: str, what: str) -> object:
        fmt, size = _FIXED[type_name]
        self.need(size, f"{type_name} {what}")
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += size
        return value != 0 if type_name == "bool" else value

    def uvarint(self, what: str) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos, self.end)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{what}: {e.message}", position=e.position) from None
        return value

    def signed_uvarint(self, what: str) -> int:
        """An unsigned varint as Java's readUnsignedVarint returns it: a signed 32-bit int."""
        value = self.uvarint(what)
        return value - (1 << 32) if value >= 1 << 31 else value

    def length(self, flexible: bool, wide: bool, what: str) -> int:
        """A length or count prefix: compact uvarint-1, else i32 (``wide``) or i16."""
        if flexible:
            return self.signed_uvarint(f"length of {what}") - 1
        fmt, size = (_I32, 4) if wide else (_I16, 2)
        self.need(size, f"length of {what}")
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += size
        return value

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        start = self.pos
        self.pos += n
        return bytes(self.buf[start : self.pos])


def _null(r: _Reader, name: str, nullable: bool, start: int) -> None:
    if nullable:
        return None
    raise r.fail(f"non-nullable field {name} was serialized as null", start)


def _read_string(r: _Reader, name: str, flexible: bool, nullable: bool) -> str | None:
    start = r.pos
    n = r.length(flexible, False, f"string {name}")
    if n < 0:
        return _null(r, name, nullable, start)
    if n > MAX_STRING_LENGTH:
        raise r.fail(f"string field {name} had invalid length {n}", start)
    return r.take(n, f"string {name}").decode("utf-8", "replace")


def _read_value(r: _Reader, f: Field, version: int, flexible: bool, tagged: bool) -> object:
    t = f.type
    if f.is_array:
        return _read_array(r, f, version, flexible)
    if t in _FIXED:
        return r.fixed(t, f.name)
    if t == "string":
        return _read_string(r, f.name, flexible, version in f.nullable)
    if t == "uuid":
        return uuid.UUID(bytes=r.take(16, f"uuid {f.name}"))
    if t == "bytes":
        start = r.pos
        n = r.length(flexible, True, f"bytes {f.name}")
        if n < 0:
            return _null(r, f.name, version in f.nullable, start)
        return r.take(n, f"bytes {f.name}")
    assert f.struct_spec is not None
    if version in f.nullable:
        if tagged:
            present = r.signed_uvarint(f"presence of {f.name}") > 0
        else:
            present = r.fixed("int8", f"presence of {f.name}") >= 0  # type: ignore[operator]
        if not present:
            return None
    return _read_struct(r, f.struct_spec, version, flexible)


def _read_array(r: _Reader, f: Field, version: int, flexible: bool) -> list | None:
    start = r.pos
    count = r.length(flexible, True, f"array {f.name}")
    if count < 0:
        return _null(r, f.name, version in f.nullable, start)
    remaining = r.end - r.pos
    if count > remaining:
        raise r.fail(
            f"array {f.name} claims {count} elements but only {remaining} bytes remain", start
        )
    t = f.type
    code = _ARRAY_CODES.get(t)
    if code is not None:
        size = _FIXED[t][1] * count
        r.need(size, f"{count} x {t} of {f.name}")
        values = list(struct.unpack_from(f">{count}{code}", r.buf, r.pos))
        r.pos += size
        return values
    if t == "string":
        return [_read_string(r, f.name, flexible, False) for _ in range(count)]
    if t == "struct":
        assert f.struct_spec is not None
        return [_read_struct(r, f.struct_spec, version, flexible) for _ in range(count)]
    element = Field(f.name, t, False, f.versions, _NONE, None, _NONE, "", None)
    return [_read_value(r, element, -1, flexible, False) for _ in range(count)]


def _read_struct(r: _Reader, spec: StructSpec, version: int, flexible: bool) -> dict:
    plan = spec.plan(version)
    out: dict = {}
    for f, here in plan.in_place:
        out[f.name] = _read_value(r, f, version, flexible, False) if here else f.default_value()
    if flexible:
        _read_tagged_fields(r, spec, plan, version, out)
    return out


def _read_tagged_fields(r: _Reader, spec: StructSpec, plan: _Plan, version: int, out: dict) -> None:
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
        value_end = r.pos + size
        f = plan.tagged.get(tag)
        if f is None:
            if tag in spec.all_tags:
                raise r.fail(f"tag {tag} is not valid for version {version}", tag_at)
            unknown.append({"tag": tag, "data": r.take(size, f"tagged field {tag}")})
            continue
        outer_end, r.end = r.end, value_end
        try:
            out[f.name] = _read_value(r, f, version, True, True)
        finally:
            r.end = outer_end
        if r.pos != value_end:
            raise r.fail(
                f"tagged field {f.name} (tag {tag}) declares {size} bytes but its value "
                f"takes {r.pos - (value_end - size)}",
                tag_at,
            )
    if unknown:
        out["_unknownTaggedFields"] = unknown


def read_message(msg: Message, buf: bytes, pos: int, end: int, version: int) -> tuple[dict, int]:
    """Read ``msg`` at ``version`` from ``buf[pos:end]``; return the fields and the end position.

    The caller checks ``version in msg.valid`` (an unknown version is not corruption); bad bytes
    raise CorruptRecordError with the byte position.
    """
    r = _Reader(buf, pos, end)
    data = _read_struct(r, msg.struct, version, version in msg.flexible)
    return data, r.pos
