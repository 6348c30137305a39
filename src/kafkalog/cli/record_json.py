"""Records as JSON lines: what ``consume --json`` and ``export --to jsonl`` write and what
``produce`` reads back, byte for byte.

One object per record (documented in docs/cli-data.md)::

    {"topic": "orders", "partition": 0, "offset": 42, "timestamp": 1700000000000,
     "timestampType": "CreateTime", "key": "user-1", "keyEncoding": "utf8",
     "value": "AAEC", "valueEncoding": "base64",
     "headers": [{"key": "trace", "value": "abc", "valueEncoding": "utf8"}]}

``key``/``value`` are the bytes as the named encoding shows them (one of the decoders of
:mod:`.value_decoders`); null stays ``null`` with a ``null`` encoding. Without a chosen decoder a
field is ``utf8`` when its bytes are valid UTF-8 and ``base64`` otherwise, so the bytes always
come back exactly. Header values follow the same rule; header keys are strings.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring as quote
from typing import TYPE_CHECKING

from ..errors import RecordFormatError
from .value_decoders import DECODERS, ENCODERS, ValueDecodeError, ValueEncodeError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "TIMESTAMP_TYPE_NAMES",
    "InputRecord",
    "RecordFormatError",
    "Row",
    "dumps",
    "field_json",
    "iter_rows",
    "parse_json_record",
    "record_line",
    "record_object",
]

TIMESTAMP_TYPE_NAMES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


def field_json(data: bytes | None, encoding: str | None) -> tuple[object, str | None]:
    """(shown value, encoding name) of ``data``; ``encoding`` None picks utf8 or base64."""
    if data is None:
        return None, None
    if encoding is None:
        try:
            return data.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii"), "base64"
    return DECODERS[encoding](data), encoding


@dataclass(frozen=True, slots=True)
class Row:
    """One record as read (Spark's Kafka columns, timestamp in milliseconds)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def iter_rows(batch: pa.RecordBatch) -> Iterator[Row]:
    """The rows of a scan batch (Spark's Kafka layout, ``headers`` optional)."""
    import numpy as np
    import pyarrow as pa

    names = batch.schema.names
    cols = {n: batch.column(n) for n in names}
    ms = (np.asarray(cols["timestamp"].cast(pa.int64())) // 1000).tolist()
    keys = cols["key"].to_pylist()
    values = cols["value"].to_pylist()
    topics = cols["topic"].to_pylist()
    partitions = cols["partition"].to_pylist()
    offsets = cols["offset"].to_pylist()
    types = cols["timestampType"].to_pylist()
    headers = cols["headers"].to_pylist() if "headers" in cols else [None] * batch.num_rows
    for i in range(batch.num_rows):
        hs = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else []
        yield Row(topics[i], partitions[i], offsets[i], ms[i], types[i], keys[i], values[i], hs)


def _record_field(row: Row, what: str, data, encoding: str | None):
    """:func:`field_json` of ``row``'s key or value (``what``), a decoder's refusal named."""
    try:
        return field_json(data, encoding)
    except ValueDecodeError as e:
        raise RecordFormatError(
            f"{row.topic}-{row.partition} offset {row.offset}: {what}: {e}"
        ) from None


def record_object(row: Row, key_encoding: str | None, value_encoding: str | None) -> dict:
    """The JSON object of ``row``; RecordFormatError names the record a decoder refused."""
    key, key_enc = _record_field(row, "key", row.key, key_encoding)
    value, value_enc = _record_field(row, "value", row.value, value_encoding)
    headers = []
    for hk, hv in row.headers:
        shown, enc = field_json(hv, None)
        headers.append({"key": hk, "value": shown, "valueEncoding": enc})
    return {
        "topic": row.topic,
        "partition": row.partition,
        "offset": row.offset,
        "timestamp": row.timestamp,
        "timestampType": TIMESTAMP_TYPE_NAMES.get(row.timestamp_type, str(row.timestamp_type)),
        "key": key,
        "keyEncoding": key_enc,
        "value": value,
        "valueEncoding": value_enc,
        "headers": headers,
    }


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: object) -> str:
    """Compact JSON, non-ASCII kept (one encoder, built once)."""
    return _ENCODER.encode(obj)


def _text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return quote(value)
    return _ENCODER.encode(value)


def record_line(
    row: Row, key_encoding: str | None, value_encoding: str | None, *, headers: bool = True
) -> str:
    """``dumps(record_object(...))`` without the dict, about twice as fast (every record of
    ``consume --json`` and ``export --to jsonl`` goes through here); ``headers=False`` leaves
    the headers field out."""
    obj = (
        record_object(row, key_encoding, value_encoding) if key_encoding or value_encoding else None
    )
    if obj is not None:  # a chosen decoder: values may be any JSON, take the general path
        if not headers:
            del obj["headers"]
        return _ENCODER.encode(obj)
    key, key_enc = field_json(row.key, None)
    value, value_enc = field_json(row.value, None)
    parts = [
        '{"topic":', quote(row.topic), ',"partition":', str(row.partition), ',"offset":',
        str(row.offset), ',"timestamp":', str(row.timestamp), ',"timestampType":"',
        TIMESTAMP_TYPE_NAMES.get(row.timestamp_type, str(row.timestamp_type)), '","key":',
        _text(key), ',"keyEncoding":', _text(key_enc), ',"value":', _text(value),
        ',"valueEncoding":', _text(value_enc),
    ]  # fmt: skip
    if headers:
        shown = []
        for hk, hv in row.headers:
            v, enc = field_json(hv, None)
            shown.append(f'{{"key":{quote(hk)},"value":{_text(v)},"valueEncoding":{_text(enc)}}}')
        parts += [',"headers":[', ",".join(shown), "]"]
    parts.append("}")
    return "".join(parts)


# -- reading records back (produce) -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InputRecord:
    """A record to produce; None fields were not given (the command's defaults apply)."""

    topic: str | None
    partition: int | None
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _bytes_of(obj: dict, field: str, enc_field: str) -> bytes | None:
    shown = obj.get(field)
    encoding = obj.get(enc_field)
    if shown is None:
        return None
    if encoding is None:
        # Hand-written input: strings are UTF-8 text, anything else is JSON.
        encoding = "utf8" if isinstance(shown, str) else "json"
    convert: Callable[[object], bytes] | None = ENCODERS.get(encoding)
    if convert is None:
        raise RecordFormatError(f"{enc_field} {encoding!r} is not one of {', '.join(ENCODERS)}")
    try:
        return convert(shown)
    except ValueEncodeError as e:
        raise RecordFormatError(f"{field}: {e}") from None


def _int_field(obj: dict, field: str, minimum: int) -> int | None:
    value = obj.get(field)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise RecordFormatError(f"{field} must be an integer >= {minimum}, not {value!r}")
    return value


def parse_json_record(line: bytes | str) -> InputRecord:
    """One JSON line as a record to produce (unknown fields such as offset are ignored)."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordFormatError(f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise RecordFormatError(f"a record must be a JSON object, not {type(obj).__name__}")
    topic = obj.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise RecordFormatError(f"topic must be a string, not {topic!r}")
    headers = []
    raw_headers = obj.get("headers") or []
    if not isinstance(raw_headers, list):
        raise RecordFormatError("headers must be a list of {key, value, valueEncoding} objects")
    for h in raw_headers:
        if isinstance(h, list) and len(h) == 2:  # the [key, value] pairs some tools write
            h = {"key": h[0], "value": h[1]}
        if not isinstance(h, dict) or not isinstance(h.get("key"), str):
            raise RecordFormatError(f"a header needs a string key: {h!r}")
        try:
            headers.append((h["key"], _bytes_of(h, "value", "valueEncoding")))
        except RecordFormatError as e:
            raise RecordFormatError(f"header {h['key']!r}: {e}") from None
    return InputRecord(
        topic=topic,
        partition=_int_field(obj, "partition", 0),
        timestamp=_int_field(obj, "timestamp", -1),
        key=_bytes_of(obj, "key", "keyEncoding"),
        value=_bytes_of(obj, "value", "valueEncoding"),
        headers=tuple(headers),
    )
