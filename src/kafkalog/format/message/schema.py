"""Kafka's message-schema language, written as compact tables: one notation for the wire protocol's
requests and responses and for the internal topics' records (``__consumer_offsets``,
``__transaction_state``, KRaft metadata and control records), as Kafka's own generator reads one
JSON language for both (generator/.../MessageSpec.java).

A message is an indented text table, one field a line::

    name type [versions] [?[nullable-versions]] [tag=N] [=default]

``type`` is a primitive (int8, int16, uint16, int32, uint32, int64, float64, bool, string, bytes,
records, uuid), ``[prim]`` for an array of primitives, ``[]`` for an array of structs or ``{}``
for a struct (their fields follow, indented by two spaces); ``[]Name`` and ``{}Name`` take their
fields from the table ``Name`` of the message's ``structs`` (Kafka's commonStructs), read as if
written in place, so a struct several fields or messages share is written once. Versions read
``N+``, ``N-M``, ``N`` or ``none``; a field's default to its parent's (a message's fields: from
its first version on), a bare ``?`` to the field's own. ``tag=N`` makes the field tagged in the
flexible versions it exists in (Kafka's taggedVersions). Names are kept as each side spells them:
the protocol's in snake_case, the internal records' in Kafka's camelCase (as its JSON converters
print them).

Defaults, one rule: the declared ``=default`` (``null``, a number, ``true``/``false``, a string;
``""``, ``[]`` or ``{}`` for the empty value), else null where the field is nullable at that
version, else the zero value (0, false, "", empty bytes, empty list, zero uuid, a struct of
defaults). The byte rules themselves are in :mod:`.codec`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from .codec import RECORDS, Dialect, Encoded, Reader, compile_struct, copy_default, fail_prefix

__all__ = ["MAX_VERSION", "ZERO_UUID", "Field", "Message", "Versions"]

MAX_VERSION = 0x7FFF
ZERO_UUID = uuid.UUID(int=0)
PRIMITIVES = frozenset(
    {"int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool", "string", "bytes",
     "records", "uuid"}
)  # fmt: skip
_INTEGERS = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
_ZEROS: dict[str, Any] = {
    "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": b"", "uuid": ZERO_UUID,
}  # fmt: skip
_EMPTY = object()  # a declared empty default: the zero value even where the field is nullable


class Versions(NamedTuple):
    """An inclusive version range (a ``(lo, hi)`` pair); ``lo > hi`` is the empty range ("none").

    ``version in versions`` is membership in the range, not in the pair.
    """

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str, parent: Versions | None = None) -> Versions:
        if not text:
            assert parent is not None
            return parent
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: object) -> bool:
        return self.lo <= version <= self.hi  # type: ignore[operator]

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


@dataclass
class Field:
    """One line of a schema table."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = NONE
    tag: int | None = None
    default: Any = None
    has_default: bool = False
    fields: list[Field] = field(default_factory=list)

    def in_version(self, v: int) -> bool:
        return v in self.versions

    def nullable_in(self, v: int) -> bool:
        return v in self.nullable

    def default_for(self, v: int) -> Any:
        """The value of the field when the bytes do not hold it (see the module's rule)."""
        if self.has_default and self.default is not _EMPTY:
            return self.default
        if not self.has_default and self.nullable_in(v):
            return None
        if self.type == "{}":
            return {f.name: f.default_for(v) for f in self.fields}
        if self.type.startswith("["):
            return []
        return _ZEROS.get(self.type, 0)


def _parse_default(text: str, type_: str) -> Any:
    if text == "null":
        return None
    if text in ('""', "[]", "{}"):
        return _EMPTY
    if type_ in _INTEGERS:
        return int(text, 16) if text.startswith("0x") else int(text)
    if type_ == "float64":
        return float(text)
    if type_ == "bool":
        return text.lower() == "true"
    if type_ == "string":
        return text
    raise ValueError(f"a {type_} field takes no default {text!r}")


def parse_table(
    text: str, whole: Versions, structs: Mapping[str, str] = MappingProxyType({})
) -> list[Field]:
    """Parse an indented schema table into fields (nested by indentation); ``structs`` holds the
    tables that ``[]Name`` and ``{}Name`` refer to."""
    root: list[Field] = []
    stack: list[tuple[int, list[Field] | None, Versions]] = [(-1, root, whole)]
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while indent <= stack[-1][0]:
            stack.pop()
        _, siblings, parent_versions = stack[-1]
        if siblings is None:
            raise ValueError(f"schema line {lineno}: fields under a reference to a struct")
        name, type_, *rest = line.split()
        struct = type_[2:] if type_[:2] in ("[]", "{}") else ""
        if struct:
            if struct not in structs:
                raise ValueError(f"schema line {lineno}: unknown struct {struct!r}")
            type_ = type_[:2]
        if type_ not in PRIMITIVES and type_ not in ("[]", "{}"):
            if not (type_.startswith("[") and type_[1:-1] in PRIMITIVES):
                raise ValueError(f"schema line {lineno}: unknown type {type_!r}")
        f = Field(name, type_, parent_versions)
        for tok in rest:
            if tok[0].isdigit() or tok == "none":
                f.versions = Versions.parse(tok)
            elif tok.startswith("?"):
                f.nullable = Versions.parse(tok[1:], f.versions)
            elif tok.startswith("tag="):
                f.tag = int(tok[4:])
            elif tok.startswith("="):
                f.default, f.has_default = _parse_default(tok[1:], type_), True
            else:
                raise ValueError(f"schema line {lineno}: cannot read {tok!r}")
        siblings.append(f)
        if struct:
            f.fields = parse_table(structs[struct], f.versions, structs)
            stack.append((indent, None, f.versions))
        elif type_ in ("[]", "{}"):
            stack.append((indent, f.fields, f.versions))
    return root


class Message:
    """A message schema: name, versions, flexible versions, fields; codecs compiled per version.

    ``dialect`` is how the side the message belongs to reports bad bytes and treats what the
    byte rules leave open (:class:`.codec.Dialect`); ``api_key`` is the protocol's, if any;
    ``structs`` the tables its ``[]Name`` and ``{}Name`` fields refer to.
    """

    def __init__(
        self,
        name: str,
        versions: str,
        flexible: str,
        table: str,
        *,
        api_key: int | None = None,
        dialect: Dialect = RECORDS,
        structs: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.versions = Versions.parse(versions)
        self.flexible = Versions.parse(flexible)
        self.dialect = dialect
        self.fields = parse_table(table, Versions(self.versions.lo, MAX_VERSION), structs)
        self._codecs: dict[int, tuple] = {}

    @property
    def valid(self) -> Versions:
        """Kafka's name for :attr:`versions` (``validVersions``)."""
        return self.versions

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def codec(self, version: int) -> tuple:
        """The (decode, encode) pair of one version."""
        codec = self._codecs.get(version)
        if codec is None:
            if version not in self.versions:
                raise ValueError(f"{self.name} has no version {version} (valid: {self.versions})")
            codec = compile_struct(self.fields, version, self.is_flexible(version), self.dialect)
            self._codecs[version] = codec
        return codec

    def read(self, buf, pos: int, end: int, version: int) -> tuple[dict, int]:
        """Read the message at ``version`` from ``buf[pos:end]``: the fields and the end position.

        Bad bytes raise the dialect's error with the byte position, as the rule says it.
        """
        r = Reader(buf, pos, end, self.dialect)
        return self.codec(version)[0](r), r.pos

    def decode(self, buf, version: int, pos: int = 0, *, strict: bool = True) -> dict:
        """Decode a body (bytes or a :class:`.codec.Reader`); errors name the message, version
        and field path. With ``strict``, bytes after the body are an error.

        Kafka's request parser ignores bytes after the body, and a client relies on that:
        librdkafka asks Metadata v9+ for all topics with a 4-byte placeholder count whose first
        byte reads as null and the rest trail the body. Requests are therefore read non-strict.
        """
        r = buf if isinstance(buf, Reader) else Reader(buf, pos, None, self.dialect)
        try:
            value = self.codec(version)[0](r)
            if strict and r.pos != r.end:
                raise r.fail(f"{r.end - r.pos} unexpected bytes after the body")
        except self.dialect.error as e:
            raise fail_prefix(e, f"{self.name} v{version}") from None
        return value

    def encode(self, value: dict, version: int, out: Encoded | None = None) -> Encoded:
        """Append the message to ``out`` (missing fields at their defaults)."""
        out = Encoded() if out is None else out
        self.codec(version)[1](value, out)
        return out

    def write(self, value: dict, version: int) -> bytes:
        return bytes(self.encode(value, version).buf)

    def default(self, version: int) -> dict:
        return {f.name: copy_default(f.default_for(version)) for f in self.fields}
