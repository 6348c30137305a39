"""Message schemas as compact tables, compiled per version into decoders and encoders.

A schema is an indented text table, one field a line::

    name type [versions] [?nullable-versions] [tag=N] [=default]

``type`` is a primitive (int8, int16, int32, int64, uint16, float64, bool, string, bytes,
records, uuid), ``[prim]`` for an array of primitives, ``[]`` for an array of structs or ``{}``
for a struct (their fields follow, indented by two spaces). Versions are ``N+`` or ``N-M`` and
default to the message's whole range. Kafka's JSON message names are kept in snake_case.

Flexible versions (KIP-482) change every string, bytes, records and array length to an unsigned
varint of length+1 (0 meaning null) and end every struct with a tagged-field section; the same
table describes both encodings, so a field is written once.

Decoding returns plain dicts with every field of the schema present (fields absent from the
version get their defaults), so a handler reads ``request["transactional_id"]`` at any version.
Encoding fills whatever a handler leaves out with the field's default. Records may be given as
any object with ``size_in_bytes()`` (a window of a segment file): the encoder then emits it as a
separate part, so the connection can send it with ``sendfile`` instead of copying it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptRecordError
from ..format.varint import decode_unsigned_varint, encode_unsigned_varint
from .errors import InvalidRequestError, ProtocolError

__all__ = ["ZERO_UUID", "Encoded", "Field", "Message", "Reader"]

ZERO_UUID = uuid.UUID(int=0)
_MAX_VERSION = 0x7FFF

_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_I16, _I32 = _FIXED["int16"], _FIXED["int32"]
_PRIMITIVES = frozenset(_FIXED) | {"bool", "string", "bytes", "records", "uuid"}


@dataclass
class Field:
    """One line of a schema table."""

    name: str
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    default: Any = None
    has_default: bool = False
    fields: list[Field] = field(default_factory=list)

    def in_version(self, v: int) -> bool:
        return self.versions[0] <= v <= self.versions[1]

    def nullable_in(self, v: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= v <= self.nullable[1]

    def default_for(self, v: int) -> Any:
        """Kafka's default: the declared one, else None where nullable, else zero/empty."""
        if self.has_default:
            return self.default
        if self.nullable_in(v):
            return None
        if self.type == "{}":
            return {f.name: f.default_for(v) for f in self.fields}
        if self.type.startswith("["):
            return []
        return _ZEROS.get(self.type, 0)


_ZEROS = {"string": "", "bytes": b"", "records": b"", "bool": False, "uuid": ZERO_UUID}


def _versions(token: str, whole: tuple[int, int]) -> tuple[int, int]:
    if not token:
        return whole
    if token.endswith("+"):
        return int(token[:-1]), whole[1]
    lo, _, hi = token.partition("-")
    return int(lo), int(hi or lo)


def _parse_default(text: str, type_: str) -> Any:
    if text == "null":
        return None
    if type_ == "bool":
        return text == "true"
    if type_ == "string":
        return text
    return int(text, 0)


def parse_table(text: str, whole: tuple[int, int]) -> list[Field]:
    """Parse an indented schema table into fields (nested by indentation)."""
    root: list[Field] = []
    stack: list[tuple[int, list[Field], tuple[int, int]]] = [(-1, root, whole)]
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        tokens = line.split()
        while indent <= stack[-1][0]:
            stack.pop()
        _, siblings, parent_versions = stack[-1]
        name, type_, rest = tokens[0], tokens[1], tokens[2:]
        if type_ not in _PRIMITIVES and type_ not in ("[]", "{}"):
            if not (type_.startswith("[") and type_[1:-1] in _PRIMITIVES):
                raise ValueError(f"schema line {lineno}: unknown type {type_!r}")
        f = Field(name, type_, parent_versions)
        for tok in rest:
            if tok[0].isdigit():
                f.versions = _versions(tok, parent_versions)
            elif tok.startswith("?"):
                f.nullable = _versions(tok[1:], f.versions)
            elif tok.startswith("tag="):
                f.tag = int(tok[4:])
            elif tok.startswith("="):
                f.default, f.has_default = _parse_default(tok[1:], type_), True
            else:
                raise ValueError(f"schema line {lineno}: cannot read {tok!r}")
        siblings.append(f)
        if type_ in ("[]", "{}"):
            stack.append((indent, f.fields, f.versions))
    return root


class Reader:
    """A bounded cursor over a request body; running short raises, naming the position."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > self.end:
            raise InvalidRequestError(
                f"needs {n} bytes at position {self.pos}, {self.end - self.pos} left",
                position=self.pos,
            )
        start = self.pos
        self.pos += n
        return self.buf[start : self.pos]

    def fixed(self, s: struct.Struct) -> Any:
        if self.pos + s.size > self.end:
            raise InvalidRequestError(
                f"needs {s.size} bytes at position {self.pos}, {self.end - self.pos} left",
                position=self.pos,
            )
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return value

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos, self.end)
        except CorruptRecordError as e:
            raise InvalidRequestError(e.message, position=self.pos) from None
        return value


# -- per-version compiled codecs ------------------------------------------------------------------
Decode = Callable[[Reader], Any]
Encode = Callable[[Any, "Encoded"], None]


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


def _length(r: Reader, flexible: bool, what: str) -> int:
    """A length prefix: -1 is null; anything else negative is an error."""
    n = r.uvarint() - 1 if flexible else r.fixed(_I16 if what == "string" else _I32)
    if n < -1:
        raise InvalidRequestError(f"negative {what} length {n}", position=r.pos)
    return n


def _write_length(out: Encoded, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        out.buf += encode_unsigned_varint(n + 1)
    else:
        out.buf += (_I32 if wide else _I16).pack(n)


def _primitive_codec(type_: str, flexible: bool, nullable: bool) -> tuple[Decode, Encode]:
    if type_ in _FIXED:
        s = _FIXED[type_]
        return (lambda r: r.fixed(s)), (lambda v, out: out.buf.extend(s.pack(v)))
    if type_ == "bool":
        return (lambda r: r.take(1)[0] != 0), (lambda v, out: out.buf.append(1 if v else 0))
    if type_ == "uuid":

        def dec_uuid(r: Reader) -> uuid.UUID:
            return uuid.UUID(bytes=bytes(r.take(16)))

        def enc_uuid(v, out: Encoded) -> None:
            out.buf += (v or ZERO_UUID).bytes

        return dec_uuid, enc_uuid
    wide = type_ != "string"

    def decode(r: Reader) -> Any:
        n = _length(r, flexible, "string" if not wide else type_)
        if n == -1:
            if not nullable:
                raise InvalidRequestError(f"null in non-nullable {type_}", position=r.pos)
            return None
        data = r.take(n)
        if type_ == "string":
            try:
                return str(data, "utf-8")
            except UnicodeDecodeError as e:
                raise InvalidRequestError(
                    f"string is not UTF-8: {e.reason}", position=r.pos - n
                ) from None
        return data if type_ == "records" else bytes(data)

    def encode(v, out: Encoded) -> None:
        if v is None:
            if nullable:
                _write_length(out, -1, flexible, wide)
                return
            v = "" if type_ == "string" else b""
        if type_ == "string":
            data = v.encode("utf-8")
        elif not isinstance(v, (bytes, bytearray, memoryview)) and hasattr(v, "size_in_bytes"):
            n = v.size_in_bytes()
            _write_length(out, n, flexible, wide)
            if n:
                out.region(v, n)
            return
        else:
            data = v
        _write_length(out, len(data), flexible, wide)
        out.buf += data

    return decode, encode


def _array_codec(item_dec: Decode, item_enc: Encode, flexible: bool, nullable: bool):
    def decode(r: Reader) -> list | None:
        n = _length(r, flexible, "array")
        if n == -1:
            if not nullable:
                raise InvalidRequestError("null in non-nullable array", position=r.pos)
            return None
        if n > r.end - r.pos:  # every element takes at least one byte
            raise InvalidRequestError(
                f"array of {n} elements cannot fit in {r.end - r.pos} bytes", position=r.pos
            )
        return [item_dec(r) for _ in range(n)]

    def encode(v, out: Encoded) -> None:
        if v is None:
            if nullable:
                _write_length(out, -1, flexible, True)
                return
            v = []
        _write_length(out, len(v), flexible, True)
        for item in v:
            item_enc(item, out)

    return decode, encode


def compile_struct(fields: list[Field], v: int, flexible: bool, path: str) -> tuple[Decode, Encode]:
    """Decoder and encoder of a struct (a list of fields) at version ``v``."""
    plain: list[tuple[str, Decode, Encode, Callable[[], Any]]] = []
    tagged: dict[int, tuple[str, Decode, Encode, Callable[[], Any]]] = {}
    absent: list[tuple[str, Callable[[], Any]]] = []
    for f in fields:
        default = f.default_for(v)

        def make_default(d: Any = default) -> Any:
            return _copy(d)

        if not f.in_version(v) or (f.tag is not None and not flexible):
            absent.append((f.name, make_default))
            continue
        dec, enc = _field_codec(f, v, flexible, f"{path}.{f.name}" if path else f.name)
        if f.tag is not None:
            tagged[f.tag] = (f.name, dec, enc, make_default)
        else:
            plain.append((f.name, dec, enc, make_default))
    tags = sorted(tagged.items())

    def decode(r: Reader) -> dict:
        out = {}
        for name, dec, _, _ in plain:
            try:
                out[name] = dec(r)
            except ProtocolError as e:
                raise _at(e, name) from None
        if flexible:
            for name, _, _, make in tagged.values():
                out[name] = make()
            count = r.uvarint()
            for _ in range(count):
                tag, size = r.uvarint(), r.uvarint()
                r.take(size)  # bounds-checked; an unknown tag is skipped, as Kafka's readers do
                known = tagged.get(tag)
                if known is not None:
                    sub = Reader(r.buf, r.pos - size, r.pos)
                    try:
                        out[known[0]] = known[1](sub)
                    except ProtocolError as e:
                        raise _at(e, known[0]) from None
        for name, make in absent:
            out[name] = make()
        return out

    def encode(value: dict, out: Encoded) -> None:
        get = value.get
        for name, _, enc, make in plain:
            item = get(name, _MISSING)
            enc(make() if item is _MISSING else item, out)
        if flexible:
            present = []
            for tag, (name, _, enc, make) in tags:
                item = get(name, _MISSING)
                if item is _MISSING or item == make():
                    continue
                sub = Encoded()
                enc(item, sub)
                present.append((tag, bytes(sub.buf)))
            out.buf += encode_unsigned_varint(len(present))
            for tag, data in present:
                out.buf += encode_unsigned_varint(tag)
                out.buf += encode_unsigned_varint(len(data))
                out.buf += data

    return decode, encode


_MISSING = object()


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return []
    return value


def _at(e: ProtocolError, name: str) -> ProtocolError:
    """Build the failing field's path (``topics.partitions.records``) as the error unwinds."""
    path = getattr(e, "field_path", None)
    e.field_path = name if path is None else f"{name}.{path}"
    return e


def _field_codec(f: Field, v: int, flexible: bool, path: str) -> tuple[Decode, Encode]:
    nullable = f.nullable_in(v)
    if f.type == "{}":
        return compile_struct(f.fields, v, flexible, path)
    if f.type == "[]":
        dec, enc = compile_struct(f.fields, v, flexible, path)
        return _array_codec(dec, enc, flexible, nullable)
    if f.type.startswith("["):
        dec, enc = _primitive_codec(f.type[1:-1], flexible, False)
        return _array_codec(dec, enc, flexible, nullable)
    return _primitive_codec(f.type, flexible, nullable)


class Message:
    """One request or response schema: api key, name, versions served, first flexible version."""

    def __init__(
        self,
        api_key: int,
        name: str,
        versions: tuple[int, int],
        flexible_from: int | None,
        table: str,
    ) -> None:
        self.api_key = api_key
        self.name = name
        self.versions = versions
        self.flexible_from = _MAX_VERSION + 1 if flexible_from is None else flexible_from
        self.fields = parse_table(table, versions)
        self._codecs: dict[int, tuple[Decode, Encode]] = {}

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def _codec(self, version: int) -> tuple[Decode, Encode]:
        codec = self._codecs.get(version)
        if codec is None:
            if not self.versions[0] <= version <= self.versions[1]:
                raise ValueError(f"{self.name} has no version {version}")
            codec = compile_struct(self.fields, version, self.is_flexible(version), "")
            self._codecs[version] = codec
        return codec

    def decode(self, buf, version: int, pos: int = 0, *, strict: bool = True) -> dict:
        """Decode a body; with ``strict``, bytes after it are an error.

        Kafka's request parser ignores bytes after the body, and a client relies on that:
        librdkafka asks Metadata v9+ for all topics with a 4-byte placeholder count whose first
        byte reads as null and the rest trail the body. Requests are therefore read non-strict.
        """
        r = buf if isinstance(buf, Reader) else Reader(buf, pos)
        try:
            value = self._codec(version)[0](r)
        except ProtocolError as e:
            where = getattr(e, "field_path", None)
            e.message = (
                f"{self.name} v{version}" + (f" {where}" if where else "") + f": {e.message}"
            )
            e.args = (e.message,)
            raise
        if strict and r.pos != r.end:
            raise InvalidRequestError(
                f"{self.name} v{version}: {r.end - r.pos} unexpected bytes after the body "
                f"at position {r.pos}",
                position=r.pos,
            )
        return value

    def encode(self, value: dict, version: int, out: Encoded | None = None) -> Encoded:
        out = out or Encoded()
        self._codec(version)[1](value, out)
        return out

    def default(self, version: int) -> dict:
        return {f.name: _copy(f.default_for(version)) for f in self.fields}
