"""Real broker data: every record-batch file of ../shared/fixtures decodes as EXPECTED.json says.

``kafka-data/`` holds data directories written by real Kafka brokers (0.10.1 to KRaft 2026) and
``EXPECTED.json`` what an independent decoder (kafka-python 3.0.12's record classes) found in each
file. For every ``.log``, ``.log.swap``, KRaft snapshot ``*.checkpoint`` and
``bootstrap.checkpoint`` file, this walks the bytes with kafkalog's format layer only
(:class:`RecordsScan`, batch and record views) and recomputes each per-file field of EXPECTED.json
whose meaning is pinned down (see ``_summarize``), the two digests included. Expected values come
from EXPECTED.json alone, never from kafkalog.

Meanings were established by recomputing every field with kafka-python over all 1,224 files and
matching EXPECTED.json exactly. Fields not checked: ``topic`` and ``partition`` (taken from the
directory name, not from the bytes; e.g. ``bootstrap.checkpoint`` of
``Danielowo2000+BigDataTechnologies-Version-2`` has topic ``...-Version`` and partition 2).

The fixtures are read-only and live beside the repository (only in CI): the module skips without
them. Files are only ever read.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter

import lz4.frame  # a kafkalog dependency; only used to check LZ4 header checksums
import pytest

from kafkalog.format import RecordsScan
from kafkalog.format.control import decode_control_type
from shared_fixtures import EXPECTED, KAFKA_DATA, MISSING, requires_shared_fixtures

pytestmark = requires_shared_fixtures

EXPECTED_LOGS: dict[str, dict] = EXPECTED.get("logs", {})
MISSING_FILES = {f"{d}/{p}" for d, paths in MISSING.items() for p in paths}

# Kafka's ControlRecordType names (ControlRecordType.java).
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

# KRaft metadata record names by apiKey: the "name" of each
# metadata/src/main/resources/common/metadata/*Record.json of apache/kafka, without "Record".
KRAFT_RECORD_TYPES = {
    0: "RegisterBroker",
    1: "UnregisterBroker",
    2: "Topic",
    3: "Partition",
    4: "Config",
    5: "PartitionChange",
    7: "FenceBroker",
    8: "UnfenceBroker",
    9: "RemoveTopic",
    10: "DelegationToken",
    11: "UserScramCredential",
    12: "FeatureLevel",
    14: "ClientQuota",
    15: "ProducerIds",
    17: "BrokerRegistrationChange",
    18: "AccessControlEntry",
    19: "RemoveAccessControlEntry",
    20: "NoOp",
    21: "ZkMigrationState",
    22: "RemoveUserScramCredential",
    23: "BeginTransaction",
    24: "EndTransaction",
    25: "AbortTransaction",
    26: "RemoveDelegationToken",
    27: "RegisterController",
}

V2_RECORDS_OFFSET = 61  # a magic 2 batch's (compressed) records section starts here
XERIAL_MAGIC = b"\x82SNAPPY\x00"
SNAPSHOT_NAME = re.compile(r"^\d{20}-\d{10}\.checkpoint$")


def _kind(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    if name == "bootstrap.checkpoint":
        return "bootstrap-checkpoint"
    if name.endswith(".checkpoint"):
        return "kraft-snapshot"
    if name.endswith(".log.swap"):
        return "log.swap"
    return "log"


def _segment_base_offset(rel: str) -> int | None:
    """A segment's base offset is its file name; snapshots and bootstrap files have none."""
    name = rel.rsplit("/", 1)[-1]
    if name.endswith((".log", ".log.swap")):
        return int(name.split(".", 1)[0])
    return None


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def _kraft_record_type(value: bytes) -> str:
    """A KRaft metadata record value: frameVersion uvarint | apiKey uvarint | version | data."""
    _frame_version, pos = _uvarint(value, 0)
    api_key, _ = _uvarint(value, pos)
    return KRAFT_RECORD_TYPES.get(api_key, f"unknown({api_key})")


def _internal_key_version(key: bytes) -> str:
    """A __consumer_offsets key starts with its int16 version: 0/1 offset commit, 2 group."""
    (version,) = struct.unpack_from(">h", key)
    kind = {0: "offset_commit", 1: "offset_commit", 2: "group_metadata"}.get(version, "unknown")
    return f"{kind}(v{version})"


def _codec_framing(codec: str, payload: bytes) -> str:
    """How the compressed payload of one batch (or legacy wrapper) is framed.

    Pinned against the fixtures for gzip (RFC 1952 header bytes), LZ4 frames (FLG, BD and whether
    the header checksum byte is right) and xerial-framed snappy; the labels of other framings
    (raw snappy, a wrong LZ4 header checksum, zstd) are not covered by any fixture.
    """
    if codec == "gzip":
        mtime = "zero" if payload[4:8] == bytes(4) else "set"
        return (
            f"gzip(cm={payload[2]},flg=0x{payload[3]:02x},mtime={mtime},xfl={payload[8]},"
            f"os={payload[9]})"
        )
    if codec == "lz4":
        try:
            lz4.frame.get_frame_info(payload)  # checks the header checksum byte
            hc = "ok"
        except RuntimeError:
            hc = "bad"
        return f"lz4-frame(flg=0x{payload[4]:02x},bd=0x{payload[5]:02x},hc={hc})"
    if codec == "snappy":
        if payload[:8] != XERIAL_MAGIC:
            return "snappy-raw"
        version, compat = struct.unpack_from(">ii", payload, 8)
        pos, blocks = 16, 0
        while pos < len(payload):
            (length,) = struct.unpack_from(">i", payload, pos)
            pos += 4 + length
            blocks += 1
        return f"snappy-xerial(v={version},compat={compat},blocks={blocks})"
    return codec


def _summarize(rel: str, data: bytes, lines: dict[str, list[str]] | None = None) -> dict:
    """Every checked field of one file, computed from kafkalog's views of ``data``.

    ``lines``, if given, receives the lines hashed into the two digests (for failure messages).

    Meanings (a "batch" is a top-level entry: a v2 batch, or a magic 0/1 message or wrapper):

    - size, sha256: of the file's bytes; kind: from the file name; segment_base_offset: the
      20-digit file name of a ``.log``/``.log.swap``, None for checkpoints.
    - batches, magics, codecs, timestamp_types (Kafka's names): counted per batch.
    - records: all records, control records and a wrapper's inner messages included.
    - first_offset, last_offset: offsets of the first and the last record (None if no records).
    - min_timestamp, max_timestamp: over record timestamps >= 0 (LogAppendTime records carry the
      batch's max timestamp); records_without_timestamp: records with a timestamp < 0.
    - max_batch_timestamp: max over v2 batches' maxTimestamp and magic 1 entries' timestamps.
    - control_batches, transactional_batches: v2 attribute bits; idempotent_nontxn_batches: v2
      batches with a producer id >= 0 that are not transactional; producer_ids: v2 batches per
      producer id >= 0; leader_epochs: v2 batches per partitionLeaderEpoch.
    - control_record_types: control records per ControlRecordType name.
    - empty_batches: v2 batches with no records; batches_last_record_before_last_offset: v2
      batches whose last record's offset is below the batch's lastOffset (compaction).
    - records_with_headers, null_key_records, null_value_records: counted per record.
    - bad_batch_crcs: batches whose CRC does not match; bad_inner_crcs: magic 0/1 records
      (a plain message or a wrapper's inner message) whose CRC does not match; all_crcs_valid:
      None without batches, else whether both counts are 0.
    - parsed_bytes: bytes up to the end of the last complete batch; clean_to_end: that is the
      whole file.
    - offset_gaps_between_batches / non_monotonic_batches: consecutive batches where the next
      first offset (v2 baseOffset, a legacy entry's first inner offset) is above the previous
      last offset + 1 / is not above the previous last offset.
    - batch_digest, record_digest: as EXPECTED.json's README describes.
    - codec_framing, kraft_record_types, internal_key_versions: see the helpers above; the last
      two count non-control records, in ``__cluster_metadata`` logs, snapshots and bootstrap
      files and in ``__consumer_offsets`` logs respectively.
    - stop, decode_errors, n_decode_errors: a framing error that ended the walk, and batches
      whose records could not be decoded.
    """
    parts = rel.split("/")
    topic_dir = parts[-2] if len(parts) > 2 else ""
    is_kraft = topic_dir.startswith("__cluster_metadata-") or parts[-1] == "bootstrap.checkpoint"
    is_offsets = topic_dir.startswith("__consumer_offsets-")

    magics: Counter = Counter()
    codecs: Counter = Counter()
    timestamp_types: Counter = Counter()
    framing: Counter = Counter()
    control_types: Counter = Counter()
    producer_ids: Counter = Counter()
    leader_epochs: Counter = Counter()
    kraft_types: Counter = Counter()
    key_versions: Counter = Counter()
    batch_digest = hashlib.sha256()
    record_digest = hashlib.sha256()
    n_batches = n_records = 0
    first_offset = last_offset = None
    min_ts = max_ts = max_batch_ts = None
    control = transactional = idempotent = empty = last_before = 0
    with_headers = null_keys = null_values = no_timestamp = 0
    bad_batch = bad_inner = gaps = non_monotonic = 0
    decode_errors: list[str] = []
    prev_last = None

    scan = RecordsScan(data)
    for batch in scan:
        n_batches += 1
        magic = batch.magic
        codec = batch.compression.label
        magics[str(magic)] += 1
        codecs[codec] += 1
        timestamp_types[str(batch.timestamp_type)] += 1
        if not batch.is_valid:
            bad_batch += 1
        try:
            records = list(batch.records())
        except Exception as e:  # a decode error is a finding, reported below
            decode_errors.append(f"batch at position {batch.position}: {e!r}")
            continue
        if codec != "none":
            if magic == 2:
                start = batch.position + V2_RECORDS_OFFSET
                payload = data[start : batch.position + batch.size_in_bytes]
            else:
                payload = batch.value
            framing[_codec_framing(codec, payload)] += 1

        if magic == 2:
            base = batch.base_offset
            if batch.is_control:
                control += 1
            if batch.is_transactional:
                transactional += 1
            if batch.producer_id >= 0:
                producer_ids[str(batch.producer_id)] += 1
                if not batch.is_transactional:
                    idempotent += 1
            leader_epochs[str(batch.partition_leader_epoch)] += 1
            if not records:
                empty += 1
            elif records[-1].offset < batch.last_offset:
                last_before += 1
        else:
            base = records[0].offset
            bad_inner += sum(1 for r in records if not r.is_valid)
        if magic > 0:
            bts = batch.max_timestamp
            max_batch_ts = bts if max_batch_ts is None else max(max_batch_ts, bts)
        if prev_last is not None:
            if base > prev_last + 1:
                gaps += 1
            if base <= prev_last:
                non_monotonic += 1
        prev_last = batch.last_offset
        line = f"{batch.position},{base},{batch.last_offset},{magic},{codec},{len(records)}\n"
        batch_digest.update(line.encode())
        if lines is not None:
            lines["batch_digest"].append(line)

        is_control = magic == 2 and batch.is_control
        for r in records:
            n_records += 1
            if first_offset is None:
                first_offset = r.offset
            last_offset = r.offset
            ts = r.timestamp
            if ts < 0:
                no_timestamp += 1
            else:
                min_ts = ts if min_ts is None else min(min_ts, ts)
                max_ts = ts if max_ts is None else max(max_ts, ts)
            if r.headers:
                with_headers += 1
            if r.key is None:
                null_keys += 1
            if r.value is None:
                null_values += 1
            if is_control:
                t = decode_control_type(r.key)
                control_types[CONTROL_TYPES.get(t, str(t))] += 1
            else:
                if is_kraft and r.value is not None:
                    kraft_types[_kraft_record_type(r.value)] += 1
                if is_offsets and r.key is not None:
                    key_versions[_internal_key_version(r.key)] += 1
            key = "N" if r.key is None else r.key.hex()
            value = "N" if r.value is None else hashlib.sha256(r.value).hexdigest()
            ts_text = "N" if magic == 0 else str(ts)
            line = f"{r.offset},{ts_text},{key},{value},{len(r.headers)}\n"
            record_digest.update(line.encode())
            if lines is not None:
                lines["record_digest"].append(line)

    return {
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "kind": _kind(rel),
        "segment_base_offset": _segment_base_offset(rel),
        "batches": n_batches,
        "records": n_records,
        "first_offset": first_offset,
        "last_offset": last_offset,
        "magics": dict(magics),
        "codecs": dict(codecs),
        "codec_framing": dict(framing),
        "timestamp_types": dict(timestamp_types),
        "min_timestamp": min_ts,
        "max_timestamp": max_ts,
        "max_batch_timestamp": max_batch_ts,
        "control_batches": control,
        "control_record_types": dict(control_types),
        "transactional_batches": transactional,
        "idempotent_nontxn_batches": idempotent,
        "producer_ids": dict(producer_ids),
        "leader_epochs": dict(leader_epochs),
        "empty_batches": empty,
        "batches_last_record_before_last_offset": last_before,
        "records_with_headers": with_headers,
        "null_key_records": null_keys,
        "null_value_records": null_values,
        "records_without_timestamp": no_timestamp,
        "all_crcs_valid": None if n_batches == 0 else bad_batch == 0 and bad_inner == 0,
        "bad_batch_crcs": bad_batch,
        "bad_inner_crcs": bad_inner,
        "parsed_bytes": scan.valid_bytes,
        "clean_to_end": scan.valid_bytes == len(data),
        "offset_gaps_between_batches": gaps,
        "non_monotonic_batches": non_monotonic,
        "kraft_record_types": dict(kraft_types),
        "internal_key_versions": dict(key_versions),
        "stop": None if scan.error is None else f"{scan.tail}: {scan.error}",
        "decode_errors": decode_errors,
        "n_decode_errors": len(decode_errors),
        "record_digest": record_digest.hexdigest(),
        "batch_digest": batch_digest.hexdigest(),
    }


def _expected_view(expected: dict, got: dict) -> dict:
    """EXPECTED.json's values for the fields ``got`` has, in a form comparable with it.

    ``kraft_record_types`` and ``internal_key_versions`` are only listed for the files where they
    apply and have counts (absent = none). The text of ``stop`` and ``decode_errors`` entries is
    the other decoder's wording, so only their presence and number are compared.
    """
    view = {name: expected.get(name, {}) for name in got}
    if view["stop"] is not None and got["stop"] is not None:
        view["stop"] = got["stop"]
    if len(view["decode_errors"]) == len(got["decode_errors"]):
        view["decode_errors"] = got["decode_errors"]
    return view


def _reference_lines(data: bytes) -> dict[str, list[str]]:
    """The digest lines as kafka-python 3.0.12 decodes ``data``: only to point at the first
    differing batch or record when a digest does not match (expected values stay EXPECTED.json's).
    """
    from kafka.record import MemoryRecords as KafkaPythonRecords

    names = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    out: dict[str, list[str]] = {"batch_digest": [], "record_digest": []}
    pos = 0
    for batch in KafkaPythonRecords(data):
        records = list(batch)
        if batch.magic == 2:
            base, last = batch.base_offset, batch.last_offset
        else:
            base, last = (records[0].offset if records else batch.base_offset), batch.base_offset
        codec = names[batch.compression_type]
        n = len(records)
        out["batch_digest"].append(f"{pos},{base},{last},{batch.magic},{codec},{n}\n")
        for r in records:
            key = "N" if r.key is None else r.key.hex()
            value = "N" if r.value is None else hashlib.sha256(r.value).hexdigest()
            ts = "N" if batch.magic == 0 else str(r.timestamp)
            out["record_digest"].append(f"{r.offset},{ts},{key},{value},{len(r.headers)}\n")
        pos += batch.size_in_bytes
    return out


def _digest_diagnosis(data: bytes, lines: dict[str, list[str]], mismatched: list[str]) -> str:
    try:
        reference = _reference_lines(data)
    except Exception as e:  # only a diagnostic: never hide the real failure behind it
        return f"(kafka-python could not decode the file for a diagnosis: {e!r})"
    notes = []
    for name in mismatched:
        ours, theirs = lines[name], reference[name]
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                notes.append(f"{name}: line {i} is {a.strip()!r}, kafka-python has {b.strip()!r}")
                break
        else:
            if len(ours) == len(theirs):
                notes.append(f"{name}: the same {len(ours)} lines as kafka-python decodes")
            else:
                notes.append(f"{name}: {len(ours)} lines, kafka-python has {len(theirs)}")
    return "; ".join(notes)


@pytest.mark.parametrize("rel", sorted(EXPECTED_LOGS))
def test_log_file_matches_expected(rel: str) -> None:
    path = KAFKA_DATA / rel
    if not path.is_file():
        if rel in MISSING_FILES:
            pytest.skip(f"{rel} is listed in MISSING.json")
        pytest.fail(f"{rel} is listed in EXPECTED.json but absent from kafka-data/")
    data = path.read_bytes()
    lines: dict[str, list[str]] = {"batch_digest": [], "record_digest": []}
    got = _summarize(rel, data, lines)
    expected = _expected_view(EXPECTED_LOGS[rel], got)
    mismatched = [name for name in lines if got[name] != expected[name]]
    diagnosis = _digest_diagnosis(data, lines, mismatched) if mismatched else ""
    assert got == expected, diagnosis


def _is_batch_file(name: str) -> bool:
    return (
        name.endswith((".log", ".log.swap"))
        or name == "bootstrap.checkpoint"
        or bool(SNAPSHOT_NAME.match(name))
    )


def test_expected_logs_are_present_or_known_missing() -> None:
    """Every file EXPECTED.json describes is here or in MISSING.json; every record-batch file here
    is described by EXPECTED.json (so the test above covers all of them)."""
    missing = MISSING_FILES
    absent = sorted(rel for rel in EXPECTED_LOGS if not (KAFKA_DATA / rel).is_file())
    assert [rel for rel in absent if rel not in missing] == []
    on_disk = {
        p.relative_to(KAFKA_DATA).as_posix()
        for p in KAFKA_DATA.rglob("*")
        if p.is_file() and _is_batch_file(p.name)
    }
    assert sorted(on_disk - EXPECTED_LOGS.keys()) == []
    assert sorted(on_disk & missing) == []  # MISSING.json lists only files that are absent
