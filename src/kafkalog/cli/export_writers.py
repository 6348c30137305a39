"""The output formats of ``kafkalog export``: one writer class per format, fed scan batches.

Parquet keeps Arrow's types (binary keys and values, a UTC microsecond timestamp, headers as a
list of structs). CSV cannot hold bytes or lists: keys and values become text through a decoder
(base64 unless chosen), headers a JSON array of ``[key, base64 value or null]`` pairs (the dump
JSON's form). JSON lines are ``consume --json``'s objects.
"""

from __future__ import annotations

import argparse
import base64
from typing import BinaryIO

import pyarrow as pa

from .output import compact_json
from .record_json import RecordFormatError, iter_rows, record_line
from .value_decoders import DECODERS, ValueDecodeError

__all__ = ["WRITERS", "CsvWriter", "JsonLinesWriter", "ParquetWriter"]


class ParquetWriter:
    def __init__(self, target: str | BinaryIO, schema: pa.Schema, args: argparse.Namespace) -> None:
        import pyarrow.parquet as pq

        codec = None if args.compression == "none" else args.compression
        self._writer = pq.ParquetWriter(target, schema, compression=codec)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()


def _text_column(batch: pa.RecordBatch, name: str, decoder: str) -> pa.Array:
    decode = DECODERS[decoder]
    shown = []
    offsets = batch.column("offset")
    for i, data in enumerate(batch.column(name).to_pylist()):
        try:
            value = decode(data)
        except ValueDecodeError as e:
            raise RecordFormatError(
                f"{batch.column('topic')[i]}-{batch.column('partition')[i]} offset "
                f"{offsets[i]}: {name}: {e}"
            ) from None
        if value is not None and not isinstance(value, str):
            value = compact_json(value)
        shown.append(value)
    return pa.array(shown, pa.string())


def _headers_column(headers: pa.Array) -> pa.Array:
    out = []
    for hs in headers.to_pylist():
        if hs is None:
            out.append(None)
            continue
        pairs = [
            [h["key"], None if h["value"] is None else base64.b64encode(h["value"]).decode()]
            for h in hs
        ]
        out.append(compact_json(pairs))
    return pa.array(out, pa.string())


class CsvWriter:
    def __init__(self, target: str | BinaryIO, schema: pa.Schema, args: argparse.Namespace) -> None:
        import pyarrow.csv as csv

        self._key = args.key_decoder or "base64"
        self._value = args.value_decoder or "base64"
        fields = []
        for f in schema:
            if f.name in ("key", "value", "headers"):
                fields.append(pa.field(f.name, pa.string()))
            else:
                fields.append(f)
        self.schema = pa.schema(fields)
        self._writer = csv.CSVWriter(target, self.schema)

    def write(self, batch: pa.RecordBatch) -> None:
        columns = []
        for f in self.schema:
            if f.name == "key":
                columns.append(_text_column(batch, "key", self._key))
            elif f.name == "value":
                columns.append(_text_column(batch, "value", self._value))
            elif f.name == "headers":
                columns.append(_headers_column(batch.column("headers")))
            else:
                columns.append(batch.column(f.name))
        self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema))

    def close(self) -> None:
        self._writer.close()


class JsonLinesWriter:
    def __init__(self, target: str | BinaryIO, schema: pa.Schema, args: argparse.Namespace) -> None:
        self._own = isinstance(target, str)
        self._file: BinaryIO = open(target, "wb") if self._own else target
        self._key = args.key_decoder
        self._value = args.value_decoder
        self._headers = "headers" in schema.names

    def write(self, batch: pa.RecordBatch) -> None:
        lines = [
            record_line(row, self._key, self._value, headers=self._headers)
            for row in iter_rows(batch)
        ]
        if lines:
            self._file.write(("\n".join(lines) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._own:
            self._file.close()
        else:
            self._file.flush()


WRITERS = {"parquet": ParquetWriter, "jsonl": JsonLinesWriter, "csv": CsvWriter}
