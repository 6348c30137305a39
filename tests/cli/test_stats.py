"""``kafkalog stats``: the numbers of every real broker's partition against EXPECTED.json (an
independent decoder's counts), the table, and the plot."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from shared_fixtures import EXPECTED, KAFKA_DATA, MISSING, requires_shared_fixtures

from .operate_support import (
    build,
    digest,
    json_lines,
    run_main,
    run_script,
)


def expected_partitions() -> dict[tuple[str, str], dict]:
    """EXPECTED.json's per-file facts summed per partition directory (segment .log files)."""
    logs = EXPECTED["logs"]
    found: dict[tuple[str, str], dict] = defaultdict(
        lambda: {
            "records": 0,
            "batches": 0,
            "max": None,
            "codecs": defaultdict(int),
            "first": None,
            "last": None,
            "control": 0,
        }
    )
    for key, facts in sorted(logs.items()):
        parts = key.split("/")
        if len(parts) != 3 or not parts[2].endswith(".log"):
            continue
        entry = found[(parts[0], parts[1])]
        entry["records"] += facts["records"]
        entry["batches"] += facts["batches"]
        entry["control"] += facts["control_batches"]
        for codec, n in facts["codecs"].items():
            entry["codecs"][codec] += n
        if facts["max_timestamp"] is not None:
            entry["max"] = max(entry["max"] or facts["max_timestamp"], facts["max_timestamp"])
        if facts["first_offset"] is not None and entry["first"] is None:
            entry["first"] = facts["first_offset"]
        if facts["last_offset"] is not None:
            entry["last"] = facts["last_offset"]
    return found


def lost_partitions(name: str) -> set[str]:
    """Partitions of a fixture data dir that lost records: a ``.log`` listed in MISSING.json whose
    index remains, not below the partition's first present ``.log`` (what every reader reports
    as missing offsets; below it, Kafka's loader deletes the orphan index)."""
    lost = set()
    for rel in MISSING.get(name, []):
        partition, file_name = rel.split("/")
        stem, kind = file_name.split(".", 1)
        directory = KAFKA_DATA / name / partition
        bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
        remains = any(directory.glob(f"{stem}.*index"))
        if kind == "log" and remains and not (bases and int(stem) < bases[0]):
            lost.add(partition)
    return lost


@requires_shared_fixtures
def test_fixture_numbers_match_expected_json() -> None:
    expected = expected_partitions()
    checked = 0
    for data_dir in sorted(p for p in KAFKA_DATA.iterdir() if p.is_dir()):
        before = digest(data_dir)
        lost = lost_partitions(data_dir.name)
        out, _ = run_main("stats", "--json", data_dir, status=1 if lost else 0)
        assert digest(data_dir) == before, "stats changed a fixture file"
        objects = json_lines(out)
        for o in objects[:-1]:
            name = Path(o["path"]).name
            assert (o["error"] is not None) == (name in lost), (data_dir.name, name, o["error"])
            e = expected.get((data_dir.name, name))
            if e is None:  # every .log of it is listed in MISSING.json
                assert o["records"] == 0
                continue
            got = (o["records"], o["batches"], o["maxTimestamp"], o["controlBatches"],
                   o["codecs"], o["firstOffset"], o["lastOffset"])  # fmt: skip
            assert got == (e["records"], e["batches"], e["max"], e["control"], dict(e["codecs"]),
                           e["first"], e["last"]), (data_dir.name, o["path"])  # fmt: skip
            checked += 1
        summary = objects[-1]
        assert summary["records"] == sum(o["records"] for o in objects[:-1])
    assert checked > 100


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    topics = {"events": (2, {}), "users": (1, {"cleanup.policy": "compact"})}
    return build(tmp_path_factory.mktemp("stats") / "data", topics)


def test_table_and_json(data_dir: Path) -> None:
    out, _ = run_main("stats", data_dir, status=0)
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["PARTITION", "SEGMENTS", "SIZE", "RECORDS"]
    rows = {line.split()[0]: line.split() for line in lines[1:4]}
    assert set(rows) == {"events-0", "events-1", "users-0"}
    assert rows["users-0"][3] == "60" and rows["users-0"][-3:] == ["compact", "(dirty", "1.00)"]
    assert lines[-1] == (
        f"3 partitions of 2 topics: {sum(len(list(data_dir.glob(f'{p}/*.log'))) for p in rows)} "
        f"segments, {lines[-1].split(', ')[1]}, 90 batches, 180 records"
    )
    objects = json_lines(run_main("stats", "--json", "--topic", "users", data_dir, status=0)[0])
    users = objects[0]
    assert (users["cleanupPolicy"], users["dirtyRatio"], users["cleanerOffset"]) == (
        "compact", 1.0, None)  # fmt: skip
    assert users["sizeBytes"] == sum(p.stat().st_size for p in data_dir.glob("users-0/*.log"))


def test_plot_writes_a_png(data_dir: Path, tmp_path: Path) -> None:
    png = tmp_path / "growth.png"
    proc = run_script("stats", "--plot", png, data_dir, status=0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert proc.stdout == run_main("stats", data_dir, status=0)[0]


def test_unreadable_data_is_reported_and_counted_up_to_it(data_dir: Path, tmp_path: Path) -> None:
    import shutil

    root = Path(shutil.copytree(data_dir, tmp_path / "copy"))
    log = sorted((root / "events-0").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    data[8:12] = b"\x00\x00\x00\x05"  # the first batch's length: smaller than any batch
    log.write_bytes(data)
    out, err = run_main("stats", "--json", root, status=1)
    events0 = json_lines(out)[0]
    assert events0["error"] and "position 0" in events0["error"] and str(log) in err
    run_main("stats", root / "nope", status=3)
    run_main("stats", "--topic", "nope", root, status=2)


def test_records_that_do_not_decode_are_damage_unless_no_deep(tmp_path: Path) -> None:
    """A batch whose CRC matches but whose record offsets go back (kafka-python's builder,
    offsetDelta 0, 2, 1, 3): every consumer refuses it, so stats reports it, naming the file
    and the record's position; ``--no-deep`` counts it from its header, as documented."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    first = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    first.append(0, 10, b"k", b"first", [])
    bad = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, delta in enumerate([0, 2, 1, 3]):
        bad.append(delta, 10 + i, b"k", b"v%d" % i, [])
    damaged = bytearray(bad.build())
    damaged[0:8] = (1).to_bytes(8, "big")  # baseOffset 1, after the first batch (not CRC'd)
    (tmp_path / "t-0").mkdir()
    log = tmp_path / "t-0" / "00000000000000000000.log"
    log.write_bytes(bytes(first.build()) + bytes(damaged))
    out, err = run_main("stats", "--json", tmp_path, status=1)
    t0 = json_lines(out)[0]
    assert t0["records"] == 1 and "not above the previous record's 2" in t0["error"]
    assert str(log) in err and "position 155, offset 1" in err  # the record's, its batch's
    out, _ = run_main("stats", "--json", "--no-deep", tmp_path, status=0)
    assert json_lines(out)[0]["records"] == 5
