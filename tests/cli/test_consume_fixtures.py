"""``kafkalog consume --json`` over every real broker data directory of ../shared/fixtures.

Expected records come from kafka-python (an independent decoder), whose per-file record digests
are first checked against EXPECTED.json. A consumer never sees control records nor records
below the log start offset (DeleteRecords), so those are left out of the expectation; data
directories with ``.log`` files missing (MISSING.json) are read with --no-fail-on-data-loss.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from shared_fixtures import DATA_DIRS, EXPECTED, KAFKA_DATA, MISSING, requires_shared_fixtures

from .records_cli_helpers import main_in_process

pytestmark = requires_shared_fixtures


def digest_line(offset, ts, key: bytes | None, value: bytes | None, n_headers: int) -> str:
    """EXPECTED.json's record line (README of the fixtures)."""
    k = "N" if key is None else key.hex()
    v = "N" if value is None else hashlib.sha256(value).hexdigest()
    return f"{offset},{ts},{k},{v},{n_headers}\n"


def kafka_python_view(segment: Path) -> tuple[list[str], list[tuple[int, str]]]:
    """(every record's line, control included; (offset, line) of what a consumer sees)."""
    records = KpMemoryRecords(segment.read_bytes())
    every, visible = [], []
    while (batch := records.next_batch()) is not None:
        control = getattr(batch, "is_control_batch", False)
        log_append = batch.magic == 2 and batch.timestamp_type == 1
        for r in batch:
            ts = "N" if batch.magic == 0 else (batch.max_timestamp if log_append else r.timestamp)
            line = digest_line(r.offset, ts, r.key, r.value, len(r.headers or ()))
            every.append(line)
            if not control:
                visible.append((r.offset, line))
    return every, visible


def log_start_offsets(data_dir: Path) -> dict[tuple[str, int], int]:
    path = data_dir / "log-start-offset-checkpoint"
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        out[(topic, int(partition))] = int(offset)
    return out


def _bytes(shown, encoding) -> bytes | None:
    if shown is None:
        return None
    import base64

    return shown.encode() if encoding == "utf8" else base64.b64decode(shown)


@pytest.mark.slow
@pytest.mark.parametrize("name", DATA_DIRS)
def test_consume_matches_expected(name, capsysbinary):
    root = KAFKA_DATA / name
    lossy = any(f.endswith(".log") for f in MISSING.get(name, []))
    # Every topic by name: a pattern leaves Kafka's internal topics out, as a consumer's does.
    names = {p.name.rpartition("-")[0] for p in root.iterdir() if p.is_dir()}
    topics = sorted(n for n in names if n and not n.startswith("."))
    args = ["consume", root, "--topic", ",".join(topics), "--json"]
    result = main_in_process(capsysbinary, *args, *(["--no-fail-on-data-loss"] if lossy else []))
    got: dict[tuple[str, int], list[str]] = defaultdict(list)
    for raw in result.stdout.splitlines():
        r = json.loads(raw)
        ts = "N" if r["timestampType"] == "NoTimestampType" else r["timestamp"]
        line = digest_line(r["offset"], ts, _bytes(r["key"], r["keyEncoding"]),
                           _bytes(r["value"], r["valueEncoding"]), len(r["headers"]))  # fmt: skip
        got[(r["topic"], r["partition"])].append(line)
    starts = log_start_offsets(root)
    want: dict[tuple[str, int], list[str]] = defaultdict(list)
    for part in sorted(p for p in root.iterdir() if p.is_dir()):
        topic, _, partition = part.name.rpartition("-")
        if not partition.isdigit():
            continue
        tp = (topic, int(partition))
        for segment in sorted(part.glob("*.log")):
            rel = f"{name}/{part.name}/{segment.name}"
            every, visible = kafka_python_view(segment)
            digest = hashlib.sha256("".join(every).encode()).hexdigest()
            assert digest == EXPECTED["logs"][rel]["record_digest"], rel  # kafka-python agrees
            want[tp] += [line for offset, line in visible if offset >= starts.get(tp, 0)]
    assert {tp: lines for tp, lines in got.items() if lines} == {
        tp: lines for tp, lines in want.items() if lines
    }
