"""Kafka's JSON for decoded internal records, as kafka-dump-log's decoders print it.

kafka-dump-log writes a decoded message with the generated ``*JsonConverter.write(message,
version)`` and Jackson's ``toString``. Two consequences that a plain ``json.dumps`` of
format/internal's decoded dicts would get wrong:

- Only fields that exist at the record's version are written; a tagged field only when it holds
  something other than its default; unknown tagged fields never. The decoders, by contrast, give
  every field of the schema (absent ones at their defaults) so that code reading them need not
  care about versions.
- Jackson's text: no spaces, non-ASCII characters as they are, control characters escaped with
  upper-case hex, bytes as padded base64, doubles as Java's ``Double.toString`` (``1.0E7``).
"""

from __future__ import annotations

import base64
import decimal
import json
import math
import re
import uuid

from ...format.internal import uuid_to_kafka_string
from ...format.message import Field, Message

__all__ = ["java_json", "kafka_json", "metadata_type_name"]


def kafka_json(msg: Message, data: dict, version: int) -> dict:
    """The fields of ``data`` (read with ``msg``) that Kafka's JSON converter writes at ``version``,
    as JSON-ready values (bytes as base64, UUIDs in Kafka's form)."""
    return _struct(msg.fields, data, version)


def _struct(fields: list[Field], data: dict, version: int) -> dict:
    out: dict = {}
    for f in fields:
        if not f.in_version(version):
            continue
        default = f.default_for(version)
        value = data.get(f.name, default)
        if f.tag is not None and value == default:
            continue
        out[f.name] = _value(f, value, version)
    return out


def _value(f: Field, value: object, version: int) -> object:
    if value is None:
        return None
    if f.type == "[]":
        assert isinstance(value, list)
        return [_struct(f.fields, v, version) for v in value]
    if f.type.startswith("["):
        assert isinstance(value, list)
        return [_scalar(v) for v in value]
    if f.type == "{}":
        assert isinstance(value, dict)
        return _struct(f.fields, value, version)
    return _scalar(value)


def _scalar(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return uuid_to_kafka_string(value)
    return value


# An escape \u00xx in json.dumps output (lower-case hex) not itself preceded by an escaping "\".
_LOWER_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})")


def _java_string(text: str) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    if "\\u" not in encoded:
        return encoded
    return _LOWER_HEX_ESCAPE.sub(lambda m: m.group(1) + "\\u" + m.group(2).upper(), encoded)


def _java_double(value: float) -> str:
    """Java's Double.toString: plain decimals in [1e-3, 1e7), else ``d.dddE[-]n``."""
    if math.isnan(value):
        return '"NaN"'  # Jackson writes non-finite numbers as strings
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_json(obj: object) -> str:
    """``obj`` as Jackson's ``JsonNode.toString()`` writes it."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return _java_double(obj)
    if isinstance(obj, str):
        return _java_string(obj)
    if isinstance(obj, dict):
        return (
            "{" + ",".join(f"{_java_string(str(k))}:{java_json(v)}" for k, v in obj.items()) + "}"
        )
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(java_json(v) for v in obj) + "]"
    return java_json(_scalar(obj))


def metadata_type_name(record_name: str) -> str:
    """MetadataRecordType's enum name of a KRaft record: ``PartitionChangeRecord`` ->
    ``PARTITION_CHANGE_RECORD`` (the generator's toSnakeCase, upper-cased)."""
    out = []
    previous_upper = True
    for c in record_name:
        if c.isupper():
            if not previous_upper:
                out.append("_")
            out.append(c)
            previous_upper = True
        else:
            out.append(c.upper())
            previous_upper = False
    return "".join(out)
