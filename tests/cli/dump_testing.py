"""Helpers of the ``kafkalog dump`` tests: running the command in-process, reading fixtures, and
kafka-dump-log's lines rebuilt from kafka-python's decoding (never from kafkalog's own).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import struct

from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.cli import dump
from kafkalog.cli.arguments import add_command

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def kp_v2_batch(base_offset: int, records: list[tuple[int, bytes | None, bytes | None]]) -> bytes:
    """A plain (uncompressed, non-transactional) v2 batch of (timestamp, key, value) records,
    written by kafka-python, not by kafkalog, at ``base_offset``."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, (timestamp, key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return struct.pack(">q", base_offset) + bytes(builder.build())[8:]


def run_dump(*argv: str) -> tuple[int, str, str]:
    """``kafkalog dump ARGV`` in-process through the command's own parser: (status, out, err)."""
    parser = argparse.ArgumentParser(prog="kafkalog")
    add_command(parser.add_subparsers(), "dump", dump)
    args = parser.parse_args(["dump", *argv])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = args.run(args)
    return status, out.getvalue(), err.getvalue()


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.split("\n") if line]  # not at U+0085, U+2028


def _bool(value: bool) -> str:
    return "true" if value else "false"


class Flexible:
    """A reader of Kafka's flexible message encoding, for the quorum control records."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def uuid(self) -> str:
        import base64

        raw = self.data[self.pos : self.pos + 16]
        self.pos += 16
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def array(self, read) -> list:
        return [read() for _ in range(self.uvarint() - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def struct(self, read) -> dict:
        value = read()
        self.tags()
        return value


def quorum_record_text(type_id: int, value: bytes) -> str:
    """kafka-dump-log's text of a KRaft quorum control record (Kafka 4.1+), read by hand."""
    r = Flexible(value)
    if type_id == 2:

        def voter() -> dict:
            return r.struct(lambda: {"voterId": r.fixed(">i")})

        body = r.struct(
            lambda: {
                "version": r.fixed(">h"),
                "leaderId": r.fixed(">i"),
                "voters": r.array(voter),
                "grantingVoters": r.array(voter),
            }
        )
        label = "LeaderChange:"
    elif type_id == 3:
        body = r.struct(
            lambda: {"version": r.fixed(">h"), "lastContainedLogTimestamp": r.fixed(">q")}
        )
        label = "SnapshotHeader"
    elif type_id == 4:
        body = r.struct(lambda: {"version": r.fixed(">h")})
        label = "SnapshotFooter"
    elif type_id == 5:
        body = r.struct(lambda: {"version": r.fixed(">h"), "kRaftVersion": r.fixed(">h")})
        label = "KRaftVersion"
    elif type_id == 6:

        def endpoint() -> dict:
            return r.struct(lambda: {"name": r.string(), "host": r.string(), "port": r.fixed(">H")})

        def feature() -> dict:
            return r.struct(
                lambda: {"minSupportedVersion": r.fixed(">h"), "maxSupportedVersion": r.fixed(">h")}
            )

        def voter() -> dict:
            return r.struct(
                lambda: {
                    "voterId": r.fixed(">i"),
                    "voterDirectoryId": r.uuid(),
                    "endpoints": r.array(endpoint),
                    "kRaftVersionFeature": feature(),
                }
            )

        body = r.struct(lambda: {"version": r.fixed(">h"), "voters": r.array(voter)})
        label = "KRaftVoters"
    else:
        raise AssertionError(f"control type {type_id}")
    return f" {label} {json.dumps(body, separators=(',', ':'))}"


def kafka_dump_log_lines(data: bytes, *, deep: bool, print_data: bool) -> list[str]:
    """kafka-dump-log's batch and record lines for ``data``, from kafka-python's decoding."""
    lines: list[str] = []
    position = 0
    records = KpMemoryRecords(data)
    while records.has_next():
        b = records.next_batch()
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        magic = data[position + 16]
        if magic == 2:
            attributes = struct.unpack_from(">h", data, position + 21)[0]
            ts_type = "LogAppendTime" if attributes & 0x08 else "CreateTime"
            horizon = (
                f"OptionalLong[{b.first_timestamp}]" if attributes & 0x40 else "OptionalLong.empty"
            )
            head = (
                f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} "
                f"count: {b.records_count} baseSequence: {b.base_sequence} "
                f"lastSequence: {b.last_sequence} producerId: {b.producer_id} "
                f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.leader_epoch} "
                f"isTransactional: {_bool(b.is_transactional)} "
                f"isControl: {_bool(b.is_control_batch)} deleteHorizonMs: {horizon}"
            )
            max_ts, crc, codec = b.max_timestamp, b.crc, CODECS[attributes & 7]
        else:
            offset, _, crc, _, attributes = struct.unpack_from(">qiIbb", data, position)
            ts_type = "NoTimestampType" if magic == 0 else "CreateTime"
            if magic == 1 and attributes & 0x08:
                ts_type = "LogAppendTime"
            max_ts = -1 if magic == 0 else struct.unpack_from(">q", data, position + 18)[0]
            head, codec = f"offset: {offset}", CODECS[attributes & 7]
        lines.append(
            f"{head} position: {position} {ts_type}: {max_ts} size: {size} magic: {magic} "
            f"compresscodec: {codec} crc: {crc} isvalid: true"
        )
        if deep:
            for r in b:
                lines.append(_record_line(b, r, magic, ts_type, print_data))
        position += size
    return lines


def _record_line(b, r, magic: int, ts_type: str, print_data: bool) -> str:
    key = getattr(r, "key", None)
    value = getattr(r, "value", None)
    timestamp = -1 if r.timestamp is None else r.timestamp
    key_size = -1 if key is None else len(key)
    value_size = -1 if value is None else len(value)
    line = (
        f"| offset: {r.offset} {ts_type}: {timestamp} keySize: {key_size} valueSize: {value_size}"
    )
    if magic == 2:
        sequence = -1
        if b.base_sequence >= 0:
            sequence = (b.base_sequence + r.offset - b.base_offset) % (1 << 31)
        keys = ",".join(k for k, _ in r.headers)
        line += f" sequence: {sequence} headerKeys: [{keys}]"
    else:
        line += f" isValid: true crc: {r.checksum}"  # 4.3+: no stray "}"
    if magic == 2 and b.is_control_batch:
        _, type_id = struct.unpack(">hh", key[:4])
        if type_id in (0, 1):
            epoch = struct.unpack_from(">i", value, 2)[0]
            line += f" endTxnMarker: {('ABORT', 'COMMIT')[type_id]} coordinatorEpoch: {epoch}"
        else:
            line += quorum_record_text(type_id, value)
    elif print_data:  # kafka-dump-log prints no key or payload for control records
        if key is not None:
            line += f" key: {bytes(key).decode('utf-8', 'replace')}"
        if value is not None:
            line += f" payload: {bytes(value).decode('utf-8', 'replace')}"
    return line
