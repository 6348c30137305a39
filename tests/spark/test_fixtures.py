"""Every real broker data directory of ../shared/fixtures read through Spark: per segment file,
the records Spark returns have EXPECTED.json's count, first and last offsets and record digest.

EXPECTED.json comes from an independent decoder (kafka-python). Its record digest covers control
records, which a Kafka source never returns: for the few files holding control batches the
expected lines are recomputed with kafka-python without them (after checking that kafka-python's
full digest is EXPECTED.json's). Directories whose ``.log`` files are missing (MISSING.json) are
read with failOnDataLoss=false, and reading them with the default raises the data-loss error.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from functools import reduce
from pathlib import Path

import pytest

import shared_fixtures
from shared_fixtures import KAFKA_DATA, MISSING, requires_shared_fixtures

pytestmark = [requires_shared_fixtures, pytest.mark.slow]

EXPECTED = shared_fixtures.EXPECTED.get("logs", {})
LOSSY = sorted(d for d, files in MISSING.items() if any(f.endswith(".log") for f in files))
DIRS = shared_fixtures.DATA_DIRS


def _line(offset, ts, key, value, n_headers) -> str:
    k = "N" if key is None else bytes(key).hex()
    v = "N" if value is None else hashlib.sha256(bytes(value)).hexdigest()
    return f"{offset},{ts},{k},{v},{n_headers}\n"


def _log_start_offsets(data_dir: Path) -> dict[tuple[str, int], int]:
    """log-start-offset-checkpoint (version, count, then "topic partition offset" lines)."""
    path = data_dir / "log-start-offset-checkpoint"
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines()[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
    return out


def _kafka_python_lines(path: Path, *, with_control: bool, start: int = 0) -> list[str]:
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(path.read_bytes())
    lines = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        control = getattr(batch, "is_control_batch", False)
        if control and not with_control:
            continue
        log_append = getattr(batch, "timestamp_type", 0) == 1
        for r in batch:
            if r.offset < start:
                continue
            ts = batch.max_timestamp if log_append and batch.magic == 2 else r.timestamp
            ts = "N" if batch.magic == 0 else ts
            headers = len(r.headers) if batch.magic == 2 else 0
            lines.append(_line(r.offset, ts, r.key, r.value, headers))
    return lines


def _every_topic(reader, data_dir: Path):
    """Every topic of ``data_dir``, internal ones too: a pattern leaves Kafka's internal topics
    out (as Kafka's consumer does), so they are subscribed by name."""
    from kafkalog.dataset.planner import discover

    topics = sorted({tp.topic for tp in discover([data_dir])})
    if not topics:
        return reader.option("subscribePattern", ".*")
    return reader.option("subscribe", ",".join(topics))


def _segments(directory: Path) -> list[tuple[int, str]]:
    return sorted(
        (int(p.name[:-4]), p.name) for p in directory.iterdir()
        if p.name.endswith(".log") and p.name[:-4].isdigit()
    )  # fmt: skip


@pytest.fixture(scope="module")
def fixture_rows(spark):
    from pyspark.sql import functions as F

    frames = []
    for name in DIRS:
        reader = _every_topic(
            spark.read.format("kafkalog").option("includeHeaders", "true"), KAFKA_DATA / name
        )
        if name in LOSSY:
            reader = reader.option("failOnDataLoss", "false")
        df = reader.load(str(KAFKA_DATA / name))
        frames.append(
            df.select(
                F.lit(name).alias("dataDir"), "topic", "partition", "offset", "key", "value",
                (F.unix_micros("timestamp")).alias("ts_us"), "timestampType",
                F.coalesce(F.size("headers"), F.lit(0)).alias("n_headers"),
            )
        )  # fmt: skip
    table = reduce(lambda a, b: a.unionByName(b), frames).toArrow()
    rows = defaultdict(list)
    cols = table.to_pydict()
    for i in range(table.num_rows):
        key = (cols["dataDir"][i], cols["topic"][i], cols["partition"][i])
        rows[key].append(i)
    return cols, rows


def test_every_fixture_segment_matches_expected(fixture_rows):
    cols, rows = fixture_rows
    checked = files_with_records = 0
    for (data_dir, topic, partition), idx in sorted(rows.items()):
        directory = KAFKA_DATA / data_dir / f"{topic}-{partition}"
        segments = _segments(directory)
        idx.sort(key=lambda i: cols["offset"][i])
        per_file = defaultdict(list)
        bases = [b for b, _ in segments]
        for i in idx:
            offset = cols["offset"][i]
            owner = max(n for n, b in enumerate(bases) if b <= offset)
            per_file[segments[owner][1]].append(i)
        for _base, name in segments:
            rel = f"{data_dir}/{topic}-{partition}/{name}"
            exp = EXPECTED[rel]
            got = per_file.get(name, [])
            lines = [
                _line(cols["offset"][i], cols["ts_us"][i] // 1000, cols["key"][i],
                      cols["value"][i], cols["n_headers"][i])
                for i in got
            ]  # fmt: skip
            start = _log_start_offsets(KAFKA_DATA / data_dir).get((topic, partition), 0)
            if exp["control_batches"] or (exp["records"] and start > exp["first_offset"]):
                # control records or records below the log start offset are not returned
                full = _kafka_python_lines(directory / name, with_control=True)
                assert hashlib.sha256("".join(full).encode()).hexdigest() == exp["record_digest"]
                wanted = _kafka_python_lines(directory / name, with_control=False, start=start)
                assert lines == wanted, rel
            else:
                assert len(got) == exp["records"], rel
                digest = hashlib.sha256("".join(lines).encode()).hexdigest()
                assert digest == exp["record_digest"], rel
                if got and not exp["batches_last_record_before_last_offset"]:
                    assert cols["offset"][got[0]] == exp["first_offset"], rel
                    assert cols["offset"][got[-1]] == exp["last_offset"], rel
            checked += 1
            files_with_records += bool(got)
    expected_files = [
        k for k in EXPECTED
        if k.endswith(".log") and not k.endswith(".log.swap") and EXPECTED[k]["records"]
    ]  # fmt: skip
    assert files_with_records >= len(expected_files) - sum(
        1 for k in expected_files if EXPECTED[k]["records"] == EXPECTED[k]["control_batches"]
    )
    assert checked >= 100


def test_every_expected_log_file_was_read(fixture_rows):
    _cols, rows = fixture_rows
    read_partitions = {(d, t, p) for d, t, p in rows}
    for rel, exp in EXPECTED.items():
        if not rel.endswith(".log") or exp["records"] == 0:
            continue
        if exp["records"] == sum(exp["control_record_types"].values()):
            continue  # only control records: nothing for a Kafka source to return
        data_dir, part_dir, _ = rel.split("/")
        topic, _, partition = part_dir.rpartition("-")
        assert (data_dir, topic, int(partition)) in read_partitions, rel


@pytest.mark.parametrize("name", LOSSY)
def test_missing_log_files_are_data_loss(spark, name):
    from pyspark.errors import PySparkException

    df = _every_topic(spark.read.format("kafkalog"), KAFKA_DATA / name).load(str(KAFKA_DATA / name))
    with pytest.raises((PySparkException, Exception), match="failOnDataLoss"):
        df.count()
