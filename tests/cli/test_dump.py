"""``kafkalog dump`` run as the real console script, on segments written by kafka-python.

Expected values come from kafka-python's decoder (an independent implementation) formatted with
kafka-dump-log's format strings, never from kafkalog's own output.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.cli.dump import columnar

from .console import kafkalog_exe, run_console
from .dump_testing import kafka_dump_log_lines, run_dump

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def run_script(*args: str, check_status: int | None = None) -> subprocess.CompletedProcess:
    """The real console script in a subprocess (end-to-end tests)."""
    return run_console(*args, status=check_status)


def run(*args: str, check_status: int | None = None) -> subprocess.CompletedProcess:
    """``kafkalog dump ...`` in-process (fast): the same result object as :func:`run_script`."""
    assert args[0] == "dump"
    status, out, err = run_dump(*args[1:])
    proc = subprocess.CompletedProcess(list(args), status, out, err)
    if check_status is not None:
        assert proc.returncode == check_status, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def v2_batch(base_offset: int, codec: str, n: int, *, pid: int = -1, headers=()) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_IDS[codec],
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        batch_size=1 << 20,
    )
    for i in range(n):
        key = None if i % 3 == 0 else f"k{i}".encode()
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=key,
            value=f"value {i} ".encode() * 20,
            headers=list(headers),
        )
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # a broker assigns offsets in place
    return bytes(data)


def legacy_set(magic: int, base_offset: int, codec: str, n: int) -> bytes:
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=CODEC_IDS[codec], batch_size=1 << 20
    )
    for i in range(n):
        offset = i if codec != "none" and magic == 1 else base_offset + i
        builder.append(offset, timestamp=1_600_000_000_000 + i, key=b"key", value=b"val%d" % i)
    data = bytearray(builder.build())
    if codec != "none":  # wrapper offset = last inner absolute offset
        struct.pack_into(">q", data, 0, base_offset + n - 1)
    return bytes(data)


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    data = (
        v2_batch(0, "none", 4, pid=7, headers=[("h1", b"x"), ("h2", None)])
        + v2_batch(4, "gzip", 3)
        + v2_batch(7, "lz4", 2)
        + v2_batch(9, "zstd", 5)
    )
    path = tmp_path / "topic-0" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(data)
    return path


def expected_batch_lines(data: bytes) -> list[str]:
    """kafka-dump-log's batch lines, from kafka-python's decoding of ``data``."""
    lines, position = [], 0
    records = KpMemoryRecords(data)
    while records.has_next():
        b = records.next_batch()
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        codec = {v: k for k, v in CODEC_IDS.items()}[b.compression_type]
        lines.append(
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.records_count} "
            f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} "
            f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
            f"partitionLeaderEpoch: {b.leader_epoch} isTransactional: "
            f"{str(b.is_transactional).lower()} isControl: {str(b.is_control_batch).lower()} "
            f"deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: "
            f"{b.max_timestamp} size: {size} magic: 2 compresscodec: {codec} crc: {b.crc} "
            f"isvalid: true"
        )
        position += size
    return lines


def test_text_batch_lines_match_kafka_dump_log_format(segment: Path) -> None:
    proc = run_script("dump", str(segment), check_status=0)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2:] == expected_batch_lines(segment.read_bytes())


def test_text_deep_iteration_record_lines(segment: Path) -> None:
    proc = run("dump", "--deep-iteration", "--print-data-log", str(segment), check_status=0)
    record_lines = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    expected = []
    records = KpMemoryRecords(segment.read_bytes())
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            keys = ",".join(k for k, _ in r.headers)
            sequence = (
                -1
                if batch.base_sequence < 0
                else batch.base_sequence + r.offset - batch.base_offset
            )
            line = (
                f"| offset: {r.offset} CreateTime: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} "
                f"sequence: {sequence} "
                f"headerKeys: [{keys}]"
            )
            if r.key is not None:
                line += f" key: {r.key.decode()}"
            line += f" payload: {r.value.decode()}"
            expected.append(line)
    assert record_lines == expected


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.sampled_from(list(CODEC_IDS)),
            st.integers(min_value=1, max_value=40),  # records: many take the columns' path
            st.sampled_from([-1, 0, 2**31 - 5]),  # base sequence (wraps past Int.MAX)
            st.lists(st.sampled_from(["h", "trace-id", "ключ", ""]), max_size=3),
            st.integers(min_value=0, max_value=3),  # offsets skipped before the batch
            st.booleans(),  # LogAppendTime
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_record_metadata_lines_are_kafka_dump_logs(tmp_path_factory, batches) -> None:
    """--deep-iteration without data prints batches of 16 records or more from the fast path's
    columns: the lines of kafka-dump-log (from kafka-python's decoding), and the same
    non-consecutive offsets report as the record-at-a-time path."""
    data, offset = b"", 0
    for codec, n, seq, header_keys, skip, log_append in batches:
        offset += skip
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=CODEC_IDS[codec], is_transactional=False,
            producer_id=5 if seq >= 0 else -1, producer_epoch=0 if seq >= 0 else -1,
            base_sequence=seq, batch_size=1 << 20,
        )  # fmt: skip
        for i in range(n):
            builder.append(
                i,
                timestamp=1_700_000_000_000 + i,
                key=None if i % 4 == 0 else b"k%d" % i,
                value=None if i % 5 == 1 else b"v" * i,
                headers=[(k, None if j else b"x") for j, k in enumerate(header_keys)],
            )
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)
        if log_append:  # the broker's LogAppendTime: attribute bit, CRC over it again
            struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x08)
            struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        data += bytes(batch)
        offset += n
    deep_dump_as_kafka_dump_log(tmp_path_factory, data)


def deep_dump_as_kafka_dump_log(tmp_path_factory, data: bytes) -> str:
    """``dump --deep-iteration`` of a segment holding ``data``: exit 0, the lines of
    kafka-dump-log (from kafka-python's decoding), and the same output when every record goes
    the record-at-a-time path (no window of lines, no columns); its stderr."""
    path = tmp_path_factory.mktemp("dump") / f"{0:020d}.log"
    path.write_bytes(data)
    status, out, err = run_dump("--deep-iteration", str(path))
    assert status == 0, err
    assert out.splitlines()[2:] == kafka_dump_log_lines(data, deep=True, print_data=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columnar.MetadataLineWindows, "lines", lambda self, batch: None)
        mp.setattr(columnar, "_LINES_MIN_RECORDS", 1 << 62)
        assert run_dump("--deep-iteration", str(path)) == (status, out, err)
    return err


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=60),  # records
            st.lists(st.integers(min_value=0, max_value=59), max_size=4),  # gaps after row i
            st.integers(min_value=0, max_value=2),  # offsets skipped before the batch
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_offset_gaps_inside_batches_are_reported_as_kafka_dump_log(
    tmp_path_factory, batches
) -> None:
    """A compacted log's batches skip offsets inside them: every place the next offset is not
    the one before plus one is reported (pairs worked out here from the gaps made), and the
    record lines are kafka-python's offsets, whichever path wrote them."""
    data, offset, expected_pairs, last = b"", 0, [], -1
    for n, gaps, skip in batches:
        offset += skip
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
        )  # fmt: skip
        delta = 0
        for i in range(n):
            record_offset = offset + delta
            if record_offset != last + 1:
                expected_pairs.append((last, record_offset))
            last = record_offset
            builder.append(delta, timestamp=1_700_000_000_000 + i, key=None, value=b"v",
                           headers=[])  # fmt: skip
            delta += 1 + 2 * gaps.count(i)
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)
        data += bytes(batch)
        offset += delta
    err = deep_dump_as_kafka_dump_log(tmp_path_factory, data)
    reported = [
        tuple(int(x) for x in line.split(" is followed by "))
        for line in err.splitlines()
        if " is followed by " in line
    ]
    assert reported == sorted(expected_pairs)


def test_legacy_text_lines(tmp_path: Path) -> None:
    data = legacy_set(1, 0, "none", 2) + legacy_set(1, 2, "gzip", 3) + legacy_set(0, 5, "none", 1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    proc = run("dump", "--deep-iteration", str(path), check_status=0)
    lines = proc.stdout.splitlines()[2:]
    records = KpMemoryRecords(data)
    expected, position = [], 0
    while records.has_next():
        b = records.next_batch()
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        entry_crc, magic, attrs = struct.unpack_from(">IbB", data, position + 12)
        ts_type = "NoTimestampType" if magic == 0 else "CreateTime"
        max_ts = -1 if magic == 0 else struct.unpack_from(">q", data, position + 18)[0]
        codec = {v: k for k, v in CODEC_IDS.items()}[attrs & 7]
        last = struct.unpack_from(">q", data, position)[0]
        expected.append(
            f"offset: {last} position: {position} {ts_type}: {max_ts} size: {size} "
            f"magic: {magic} compresscodec: {codec} crc: {entry_crc} isvalid: true"
        )
        for r in b:
            expected.append(
                f"| offset: {r.offset} {ts_type}: {-1 if r.timestamp is None else r.timestamp} "
                f"keySize: {len(r.key)} "
                f"valueSize: {len(r.value)} isValid: true crc: {r.checksum}"
            )
        position += size
    assert lines == expected


def load_json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.split("\n") if line]


BATCH_FIELDS = {
    "type",
    "position",
    "size",
    "baseOffset",
    "lastOffset",
    "count",
    "magic",
    "compression",
    "crc",
    "isValid",
    "timestampType",
    "maxTimestamp",
    "producerId",
    "producerEpoch",
    "baseSequence",
    "lastSequence",
    "isTransactional",
    "isControl",
    "partitionLeaderEpoch",
    "deleteHorizonMs",
}
RECORD_FIELDS = {
    "type",
    "offset",
    "timestamp",
    "timestampType",
    "keySize",
    "valueSize",
    "key",
    "value",
    "headers",
    "sequence",
    "isControl",
    "controlType",
    "coordinatorEpoch",
    "decodedKey",
    "decodedValue",
    "decodeError",
    "controlData",
}
SUMMARY_FIELDS = {"type", "batches", "records", "validBytes", "invalidBytes", "tail", "error"}


def test_json_contract_fields_and_values(segment: Path) -> None:
    proc = run_script("dump", "--json", "--deep-iteration", str(segment), check_status=0)
    objs = load_json_lines(proc.stdout)
    assert objs[0] == {"type": "file", "path": str(segment), "kind": "log"}
    batches = [o for o in objs if o["type"] == "batch"]
    records = [o for o in objs if o["type"] == "record"]
    assert all(set(b) == BATCH_FIELDS for b in batches)
    assert all(set(r) == RECORD_FIELDS for r in records)
    assert set(objs[-1]) == SUMMARY_FIELDS
    kp = KpMemoryRecords(segment.read_bytes())
    kp_records = []
    kp_batches = []
    while kp.has_next():
        b = kp.next_batch()
        kp_batches.append(b)
        kp_records.extend((b, r) for r in b)
    assert [(b["baseOffset"], b["lastOffset"], b["count"], b["crc"]) for b in batches] == [
        (b.base_offset, b.last_offset, b.records_count, b.crc) for b in kp_batches
    ]
    assert [b["compression"] for b in batches] == ["none", "gzip", "lz4", "zstd"]
    for got, (_, r) in zip(records, kp_records):
        assert got["offset"] == r.offset
        assert got["timestamp"] == r.timestamp
        assert got["key"] == (None if r.key is None else base64.b64encode(r.key).decode())
        assert base64.b64decode(got["value"]) == r.value
        assert got["headers"] == [
            [k, None if v is None else base64.b64encode(v).decode()] for k, v in r.headers
        ]
        assert got["isControl"] is False and got["controlType"] is None
    assert objs[-1] == {
        "type": "summary",
        "batches": 4,
        "records": 14,
        "validBytes": segment.stat().st_size,
        "invalidBytes": 0,
        "tail": "none",
        "error": None,
    }


def test_partial_tail_is_not_an_error(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data + data[:30])
    proc = run("dump", "--json", str(segment), check_status=0)
    summary = load_json_lines(proc.stdout)[-1]
    assert summary["tail"] == "partial" and summary["error"] is None
    assert summary["validBytes"] == len(data) and summary["invalidBytes"] == 30


def test_zero_filled_tail_is_reported(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data + bytes(4096))
    proc = run("dump", "--json", str(segment), check_status=1)
    objs = load_json_lines(proc.stdout)
    assert objs[-1]["tail"] == "zeros" and objs[-1]["validBytes"] == len(data)
    assert objs[-2]["type"] == "error" and objs[-2]["position"] == len(data)
    text = run("dump", str(segment), check_status=1)
    assert f"Found 4096 invalid bytes at the end of {segment.name}" in text.stdout


def test_bad_crc_is_reported_and_dump_continues(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    first_size = 12 + struct.unpack_from(">i", data, 8)[0]
    data[first_size - 1] ^= 0xFF  # last byte of the first batch's records
    segment.write_bytes(bytes(data))
    proc = run("dump", "--json", str(segment), check_status=1)
    objs = load_json_lines(proc.stdout)
    assert [o["type"] for o in objs[:3]] == ["file", "batch", "error"]
    assert objs[1]["isValid"] is False
    assert objs[2]["position"] == 0 and "crc" in objs[2]["message"]
    assert sum(o["type"] == "batch" for o in objs) == 4
    assert objs[-1]["tail"] == "none" and objs[-1]["error"] == objs[2]["message"]


def test_corrupt_header_stops_with_corrupt_tail(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    first_size = 12 + struct.unpack_from(">i", data, 8)[0]
    struct.pack_into(">i", data, first_size + 8, 5)  # second entry's size below the minimum
    segment.write_bytes(bytes(data))
    proc = run("dump", "--json", str(segment), check_status=1)
    objs = load_json_lines(proc.stdout)
    assert objs[-1]["tail"] == "corrupt" and objs[-1]["validBytes"] == first_size
    assert objs[-2]["type"] == "error" and objs[-2]["position"] == first_size
    text = run("dump", str(segment))
    assert text.returncode == 1
    assert f"position {first_size}" in text.stderr


def test_exit_codes_for_usage_and_io_errors(tmp_path: Path) -> None:
    assert run("dump").returncode == 2
    with pytest.raises(SystemExit) as usage:
        run("dump", "--max-bytes", "x", "a.log")
    assert usage.value.code == 2
    missing = tmp_path / "00000000000000000000.log"
    assert run("dump", str(missing)).returncode == 3
    proc = run_script("dump", "--max-bytes", "0", str(missing))
    assert proc.returncode == 2
    proc = run_script("dump", str(missing))
    assert proc.returncode == 3 and str(missing) in proc.stderr


def test_files_option_and_unknown_files(segment: Path, tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    proc = run("dump", "--files", f"{segment},{other}", check_status=0)
    assert f"Ignoring unknown file {other}" in proc.stderr
    assert proc.stdout.startswith(f"Dumping {segment}\n")


def test_swap_and_checkpoint_files_are_dumped(segment: Path, tmp_path: Path) -> None:
    swap = tmp_path / "00000000000000000000.log.swap"
    shutil.copy(segment, swap)
    snap = tmp_path / "00000000000000000042-0000000003.checkpoint"
    shutil.copy(segment, snap)
    proc = run("dump", str(swap), str(snap), check_status=0)
    assert "Log starting offset: 0" in proc.stdout
    assert "Snapshot end offset: 42, epoch: 3" in proc.stdout
    assert proc.stdout.count("baseOffset: 0 ") == 2


def test_max_bytes_limits_reading(segment: Path) -> None:
    data = segment.read_bytes()
    first_size = 12 + struct.unpack_from(">i", data, 8)[0]
    proc = run("dump", "--json", "--max-bytes", str(first_size + 20), str(segment), check_status=0)
    objs = load_json_lines(proc.stdout)
    assert sum(o["type"] == "batch" for o in objs) == 1


def test_control_batch_fields(tmp_path: Path) -> None:
    # A COMMIT marker laid out by hand from Kafka's spec: key (version 0, type 1),
    # value (version 0, coordinatorEpoch 5).
    from kafkalog.format.crc import crc32c

    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 5)
    body = bytes([0]) + bytes([0]) + bytes([0])  # attributes, timestampDelta 0, offsetDelta 0
    body += bytes([len(key) << 1]) + key + bytes([len(value) << 1]) + value + bytes([0])
    record = bytes([len(body) << 1]) + body
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, 1000, 1000, 9, 0, -1, 1) + record
    batch = struct.pack(">qiib", 20, 49 + len(record), 0, 2)
    batch += struct.pack(">I", crc32c(after_crc)) + after_crc
    path = tmp_path / "00000000000000000020.log"
    path.write_bytes(batch)
    objs = load_json_lines(
        run("dump", "--json", "--deep-iteration", str(path), check_status=0).stdout
    )
    rec = next(o for o in objs if o["type"] == "record")
    assert rec["isControl"] is True
    assert rec["controlType"] == "COMMIT" and rec["coordinatorEpoch"] == 5
    text = run("dump", "--deep-iteration", str(path), check_status=0).stdout
    assert "endTxnMarker: COMMIT coordinatorEpoch: 5" in text


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a POSIX pipe")
def test_broken_pipe_is_not_an_error(segment: Path) -> None:
    script = " ".join(kafkalog_exe()) + f" dump --deep-iteration {segment} | head -n 1"
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
