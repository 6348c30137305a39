"""``kafkalog dump`` on real broker data (../shared/fixtures): text line for line against
kafka-dump-log's format strings applied to kafka-python's decoding or to struct-unpacked index
bytes; JSON against the facts of EXPECTED.json (computed by an independent decoder).
"""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecords as KpMemoryRecords

from shared_fixtures import KAFKA_DATA, requires_shared_fixtures

from .console import run_console
from .dump_testing import (
    CODECS,
    json_lines,
    kafka_dump_log_lines,
    run_dump,
)

pytestmark = requires_shared_fixtures


@pytest.fixture(scope="module")
def facts(shared_fixtures) -> dict:
    return shared_fixtures.expected


def _small_logs(facts: dict, limit: int) -> list[str]:
    return sorted(
        name
        for name, fact in facts["logs"].items()
        if fact["records"] and fact["size"] < limit and fact.get("clean_to_end", True)
    )


def test_text_matches_kafka_dump_log_lines_on_small_fixture_logs(facts: dict) -> None:
    names = _small_logs(facts, 16384)
    assert len(names) > 200
    paths = [str(KAFKA_DATA / name) for name in names]
    status, out, err = run_dump("--deep-iteration", "--print-data-log", *paths)
    assert status == 0, err
    expected_lines: list[str] = []
    for path in paths:
        data = Path(path).read_bytes()
        expected_lines.append(f"Dumping {path}")
        if path.endswith("bootstrap.checkpoint"):
            expected_lines.append("KRaft bootstrap snapshot")
        elif path.endswith(".checkpoint"):
            offset, epoch = Path(path).name[: -len(".checkpoint")].split("-")
            expected_lines.append(f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}")
        else:
            expected_lines.append(f"Log starting offset: {int(Path(path).name.split('.')[0])}")
        expected_lines += kafka_dump_log_lines(data, deep=True, print_data=True)
    # Payloads hold newlines and other line breaks: compare the whole text, show where it differs.
    want = "".join(line + "\n" for line in expected_lines)
    if out != want:
        at = next(i for i, (a, b) in enumerate(zip(out + "\0", want + "\0")) if a != b)
        raise AssertionError(
            f"differs at {at}: {out[at - 200 : at + 80]!r} != {want[at - 200 : at + 80]!r}"
        )


def test_metadata_lines_match_kafka_dump_log_on_fixture_logs(facts: dict) -> None:
    """--deep-iteration without data: large batches print from the fast path's columns."""
    names = _small_logs(facts, 1 << 20)
    paths = [str(KAFKA_DATA / name) for name in names if name.endswith(".log")]
    assert any(f["records"] / max(1, f["batches"]) >= 16 for f in map(facts["logs"].get, names))
    status, out, err = run_dump("--deep-iteration", *paths)
    assert status == 0, err
    want = []
    for path in paths:
        want.append(f"Dumping {path}")
        want.append(f"Log starting offset: {int(Path(path).name.split('.')[0])}")
        want += kafka_dump_log_lines(Path(path).read_bytes(), deep=True, print_data=False)
    assert out.splitlines() == want


def test_console_script_prints_the_same_golden_lines(facts: dict) -> None:
    # The in-process runs above, once through the installed command (entry point, stdout
    # encoding and buffering included), on a few logs of different shapes.
    names = _small_logs(facts, 4096)[:: max(1, len(_small_logs(facts, 4096)) // 12)]
    paths = [str(KAFKA_DATA / name) for name in names]
    proc = run_console("dump", "--deep-iteration", *paths, status=0)
    want = []
    for path in paths:
        want.append(f"Dumping {path}")
        name = Path(path).name
        if name.endswith(".log"):
            want.append(f"Log starting offset: {int(name.split('.')[0])}")
        elif name == "bootstrap.checkpoint":
            want.append("KRaft bootstrap snapshot")
        else:
            offset, epoch = name[: -len(".checkpoint")].split("-")
            want.append(f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}")
        want += kafka_dump_log_lines(Path(path).read_bytes(), deep=True, print_data=False)
    assert proc.stdout == "".join(line + "\n" for line in want)


@pytest.mark.parametrize(
    "name",
    [
        "xpxwo100+bullShit/foo-0/00000000000000000000.log",  # magic 1
        "Jeong-Rae+KafkaDemo/__cluster_metadata-0/00000000000000000000.log",  # LEADER_CHANGE
    ],
)
def test_text_matches_kafka_dump_log_lines_on_feature_files(name: str) -> None:
    path = KAFKA_DATA / name
    status, out, err = run_dump("--deep-iteration", str(path))
    assert status == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert lines[2:] == kafka_dump_log_lines(path.read_bytes(), deep=True, print_data=False)


def _digests(objects: list[dict]) -> tuple[str, str]:
    """EXPECTED.json's batch_digest and record_digest, from our JSON objects."""
    batch_lines, record_lines = [], []
    magic = 2
    for obj in objects:
        if obj["type"] == "batch":
            magic = obj["magic"]
            batch_lines.append(
                f"{obj['position']},{obj['baseOffset']},{obj['lastOffset']},{magic},"
                f"{obj['compression']},{obj['count']}\n"
            )
        elif obj["type"] == "record":
            import base64

            key = "N" if obj["key"] is None else base64.b64decode(obj["key"]).hex()
            value = (
                "N"
                if obj["value"] is None
                else hashlib.sha256(base64.b64decode(obj["value"])).hexdigest()
            )
            ts = "N" if obj["timestamp"] is None else obj["timestamp"]
            record_lines.append(f"{obj['offset']},{ts},{key},{value},{len(obj['headers'])}\n")
    return (
        hashlib.sha256("".join(batch_lines).encode()).hexdigest(),
        hashlib.sha256("".join(record_lines).encode()).hexdigest(),
    )


def _check_json_against_expected(facts: dict, names: list[str]) -> None:
    paths = [str(KAFKA_DATA / name) for name in names]
    status, out, err = run_dump("--json", "--deep-iteration", *paths)
    assert status in (0, 1), err
    objects = json_lines(out)
    starts = [i for i, o in enumerate(objects) if o["type"] == "file"] + [len(objects)]
    assert len(starts) == len(names) + 1
    for n, name in enumerate(names):
        chunk = objects[starts[n] : starts[n + 1]]
        fact = facts["logs"][name]
        summary = chunk[-1]
        assert summary["type"] == "summary", name
        assert summary["batches"] == fact["batches"], name
        assert summary["records"] == fact["records"], name
        assert _digests(chunk) == (fact["batch_digest"], fact["record_digest"]), name
        assert summary["error"] is None, name  # every fixture log is sound (None: empty)
        assert fact["all_crcs_valid"] in (True, None), name
        assert (summary["tail"] == "none") == fact["clean_to_end"], name


def test_json_matches_expected_digests_on_small_logs(facts: dict) -> None:
    _check_json_against_expected(facts, _small_logs(facts, 16384))


@pytest.mark.slow
def test_json_matches_expected_digests_on_every_fixture_log(facts: dict) -> None:
    _check_json_against_expected(facts, sorted(facts["logs"]))


def _index_entries(data: bytes, base: int, entry: str) -> list[tuple[int, int]]:
    """Entries as kafka-dump-log reads them: stop at a slot i > 0 holding the base offset."""
    size = struct.calcsize(entry)
    out = []
    for i in range(len(data) // size):
        a, b = struct.unpack_from(entry, data, i * size)
        relative = a if entry == ">ii" else b
        if relative == 0 and i > 0:
            break
        out.append((base + a, b) if entry == ">ii" else (a, base + b))
    return out


def _index_files(facts: dict, kind: str) -> list[str]:
    return sorted(
        name
        for name, fact in facts["indexes"].items()
        if fact["kind"] == kind and fact.get("log_present", True) and fact["entries"]
    )


@pytest.mark.parametrize(("kind", "entry"), [("index", ">ii"), ("timeindex", ">qi")])
def test_index_text_and_json_entries(facts: dict, kind: str, entry: str) -> None:
    names = _index_files(facts, kind)
    assert names
    for name in names:
        path = KAFKA_DATA / name
        base = int(path.name.split(".")[0])
        entries = _index_entries(path.read_bytes(), base, entry)
        fact = facts["indexes"][name]
        assert len(entries) == fact["entries"]
        _, out, _ = run_dump(str(path))
        lines = out.splitlines()
        assert lines[0] == f"Dumping {path}"
        if kind == "index":
            assert lines[1:] == [f"offset: {o} position: {p}" for o, p in entries]
        else:
            assert lines[1:] == [f"timestamp: {t} offset: {o}" for t, o in entries]
        objs = json_lines(run_dump("--json", str(path))[1])
        got = [o for o in objs if o["type"] in ("indexEntry", "timeIndexEntry")]
        # EXPECTED.json gives offsets relative to the segment's base offset.
        if kind == "index":
            pairs = [[o["offset"] - base, o["position"]] for o in got]
        else:
            pairs = [[o["timestamp"], o["offset"] - base] for o in got]
        assert pairs[: len(fact["first_entries"])] == fact["first_entries"]
        assert pairs[-1] == fact["last_entry"]
        assert objs[-1]["type"] == "indexSummary"
        assert objs[-1]["entries"] == fact["entries"]


def _kafka_time_index_problems(index_path: Path) -> int:
    """How many entries kafka-dump-log's time index check flags, from kafka-python's decoding."""
    base = int(index_path.name.split(".")[0])
    batches = []
    records = KpMemoryRecords(index_path.with_suffix(".log").read_bytes())
    while records.has_next():
        b = records.next_batch()
        batches.append((b.last_offset, max((r.timestamp for r in b), default=-1)))
    problems = 0
    previous = -1
    for timestamp, offset in _index_entries(index_path.read_bytes(), base, ">qi"):
        found = next((batch for batch in batches if batch[0] >= offset), None)
        if found is None or found[0] != offset:
            problems += 1
        else:
            problems += (found[1] != timestamp) + (previous >= timestamp)
        previous = timestamp
    return problems


def test_verify_index_only_flags_exactly_what_kafka_dump_log_would(facts: dict) -> None:
    for kind in ("index", "timeindex"):
        for name in _index_files(facts, kind):
            path = KAFKA_DATA / name
            status, out, err = run_dump("--verify-index-only", str(path))
            assert out == f"Dumping {path}\n", name
            if kind == "index":
                # The fixtures' offset index entries all point at a batch ending at their offset.
                assert (
                    facts["indexes"][name]["entries_pointing_at_batch_with_that_last_offset"]
                    == (facts["indexes"][name]["entries"])
                )
                assert (status, err) == (0, ""), name
            else:
                flagged = _kafka_time_index_problems(path)
                assert status == (1 if flagged else 0), name
                assert err.count("\nIndexed offset: ") + err.count("  Index timestamp: ") == (
                    flagged
                ), name


def test_indexes_whose_log_is_missing_are_dumped_and_reported(facts: dict) -> None:
    names = [n for n, f in facts["indexes"].items() if not f.get("log_present", True)]
    assert names
    for name in names:
        if not re.search(r"\.(index|timeindex)$", name):
            continue
        status, out, err = run_dump(str(KAFKA_DATA / name))
        assert status == 1 and "does not exist" in err
        assert len(out.splitlines()) == 1 + facts["indexes"][name]["entries"]


def test_producer_snapshots_text_and_json(facts: dict) -> None:
    names = sorted(n for n, f in facts["indexes"].items() if f["kind"] == "producer-snapshot")
    paths = [str(KAFKA_DATA / n) for n in names]
    status, out, err = run_dump(*paths)
    assert status == 0, err
    expected_lines = []
    for path in paths:
        data = Path(path).read_bytes()
        expected_lines.append(f"Dumping {path}")
        (count,) = struct.unpack_from(">i", data, 6)
        for i in range(count):
            pid, epoch, seq, last, delta, ts, coord, txn = struct.unpack_from(
                ">qhiqiqiq", data, 10 + 46 * i
            )
            txn_text = "OptionalLong.empty" if txn < 0 else f"OptionalLong[{txn}]"
            line = (
                f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
                f"currentTxnFirstOffset: {txn_text} lastTimestamp: {ts} "
            )
            if last >= 0:
                first_seq = seq - delta if seq >= delta else seq - delta + (1 << 31)
                line += (
                    f"firstSequence: {first_seq} lastSequence: {seq} lastOffset: {last} "
                    f"offsetDelta: {delta} timestamp: {ts}"
                )
            expected_lines.append(line)
    assert out.splitlines() == expected_lines
    for name in names:
        fact = facts["indexes"][name]
        objs = json_lines(run_dump("--json", str(KAFKA_DATA / name))[1])
        entries = [o for o in objs if o["type"] == "producerEntry"]
        assert len(entries) == fact["producer_entries"]
        sample = [
            {
                "pid": o["producerId"],
                "epoch": o["producerEpoch"],
                "last_seq": -1 if o["lastSequence"] is None else o["lastSequence"],
                "last_offset": -1 if o["lastOffset"] is None else o["lastOffset"],
                "offset_delta": o["offsetDelta"] or 0,
                "ts": o["lastTimestamp"],
                "coord_epoch": o["coordinatorEpoch"],
                "txn_first_offset": -1
                if o["currentTxnFirstOffset"] is None
                else o["currentTxnFirstOffset"],
            }
            for o in entries
        ]
        assert sample[: len(fact["entries_sample"])] == fact["entries_sample"]


def _metadata_type(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper() + "_RECORD"


def test_cluster_metadata_decoder_types_match_expected(facts: dict) -> None:
    names = sorted(
        n
        for n, f in facts["logs"].items()
        if f.get("kraft_record_types")
        and (f["size"] < 40_000 or n.startswith("Jeong-Rae+KafkaDemo/"))  # + BeginTransaction...
    )
    assert names
    status, out, err = run_dump(
        "--json", "--cluster-metadata-decoder", *(str(KAFKA_DATA / n) for n in names)
    )
    assert status == 0, err
    objects = json_lines(out)
    starts = [i for i, o in enumerate(objects) if o["type"] == "file"] + [len(objects)]
    for n, name in enumerate(names):
        counts: dict[str, int] = {}
        controls: dict[str, int] = {}
        for obj in objects[starts[n] : starts[n + 1]]:
            if obj["type"] == "record" and obj["isControl"]:
                assert obj["controlData"]["version"] >= 0 and obj["decodedValue"] is None
                controls[obj["controlType"]] = controls.get(obj["controlType"], 0) + 1
            if obj["type"] == "record" and not obj["isControl"]:
                assert obj["decodeError"] is None, (name, obj)
                kind = obj["decodedValue"]["type"]
                counts[kind] = counts.get(kind, 0) + 1
        want = {_metadata_type(k): v for k, v in facts["logs"][name]["kraft_record_types"].items()}
        assert counts == want, name
        assert controls == facts["logs"][name]["control_record_types"], name


def test_leftover_files_are_dumped(facts: dict) -> None:
    leftovers = sorted(
        p
        for p in KAFKA_DATA.rglob("*")
        if re.search(r"\.(log|index|timeindex)\.(swap|cleaned)$", p.name)
    )
    assert leftovers
    for path in leftovers:
        status, out, err = run_dump(str(path))
        assert status in (0, 1) and "Ignoring unknown file" not in err
        assert out.startswith(f"Dumping {path}\n")
    assert CODECS[0] == "none"
