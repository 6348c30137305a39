"""``kafkalog verify`` run as the real console script: output formats and exit statuses.

Data dirs are written with kafkalog's LogManager (records built by kafka-python), damaged here
with ``struct``; expected locations are computed from the bytes, never from verify's output.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.format.crc import crc32c
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from shared_fixtures import KAFKA_DATA, MISSING, requires_shared_fixtures

from .console import run_console

T0 = 1_700_000_000_000


def run(*args: str | Path, status: int, script: bool = False) -> subprocess.CompletedProcess:
    """``kafkalog verify ARGS``: in-process, or (``script``) the real console script."""
    if script:
        proc = run_console("verify", *args)
    else:
        from kafkalog.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["verify", *map(str, args)])
            except SystemExit as e:  # argparse's usage errors
                code = e.code
        proc = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def client_batch(n: int, ts: int) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30)
    for i in range(n):
        builder.append(ts + i, b"k%d" % i, b"value %d " % i * 10, [])
    builder.close()
    return bytes(builder.buffer())


@pytest.fixture(scope="module")
def valid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic "events": 2 partitions of 30 batches x 2 records, several segments each."""
    root = tmp_path_factory.mktemp("cli") / "data"
    configs = {"internal.segment.bytes": "3000", "index.interval.bytes": "200",
               "message.timestamp.before.max.ms": str(1 << 50)}  # fmt: skip
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        for j, log in enumerate(manager.create_topic("events", 2, configs) * 30):
            log.append_as_leader(client_batch(2, T0 + j))
    return root


@pytest.fixture
def data_dir(valid_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(valid_dir, tmp_path / "data"))


def first_log(root: Path) -> Path:
    return sorted((root / "events-0").glob("*.log"))[0]


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file()}  # fmt: skip


def test_clean_data_dir_prints_a_table_and_exits_0(data_dir: Path) -> None:
    before = digest(data_dir)
    out = run(data_dir, status=0, script=True).stdout.splitlines()
    assert digest(data_dir) == before
    assert out[0].split() == ["PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "ERRORS", "WARNINGS"]
    rows = {line.split()[0]: line.split()[1:] for line in out[1:3]}
    segments = len(list((data_dir / "events-0").glob("*.log")))
    assert rows["events-0"] == [str(segments), "30", "60", "0", "0"]
    assert rows["events-1"][1:] == ["30", "60", "0", "0"]
    assert out[3] == "" and out[4].startswith(f"verified {data_dir}: 2 partitions")
    assert out[4].endswith("0 errors, 0 warnings, 0 info")


def test_json_lines_and_exit_1_on_a_crc_mismatch(data_dir: Path) -> None:
    log = first_log(data_dir)
    data = bytearray(log.read_bytes())
    size = struct.unpack_from(">i", data, 8)[0]
    position, base = 12 + size, struct.unpack_from(">q", data, 12 + size)[0]  # the 2nd batch
    data[position + 80] ^= 0x01
    log.write_bytes(data)
    objects = json_lines(run("--json", data_dir, status=1, script=True).stdout)
    assert [o["type"] for o in objects] == ["partition", "partition", "finding", "summary"]
    assert objects[2] == {
        "type": "finding", "severity": "error", "code": "crc-mismatch", "path": str(log),
        "position": position, "offset": base, "message": objects[2]["message"],
    }  # fmt: skip
    assert "stored crc" in objects[2]["message"]
    summary = objects[-1]
    assert (summary["ok"], summary["errors"], summary["warnings"], summary["partitions"]) == (
        False, 1, 0, 2)  # fmt: skip
    assert objects[0]["errors"] == 1 and objects[1]["errors"] == 0


def test_text_findings_name_file_position_and_offset(data_dir: Path) -> None:
    index = sorted((data_dir / "events-0").glob("*.index"))[0]
    index.write_bytes(index.read_bytes()[:-3])  # not a multiple of 8
    out = run(data_dir, status=1).stdout
    rel = index.relative_to(data_dir)
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{rel}: ERROR index-corrupt"))
    assert f"(position {index.stat().st_size // 8 * 8})" in line and "multiple of 8" in line


def test_no_deep_skips_record_decoding(data_dir: Path) -> None:
    log = first_log(data_dir)
    data = bytearray(log.read_bytes())
    data[61] ^= 0x7F  # the first record's length varint, then a matching CRC
    struct.pack_into(
        ">I", data, 17, crc32c(bytes(data[21 : 12 + struct.unpack_from(">i", data, 8)[0]]))
    )
    log.write_bytes(data)
    codes = [o["code"] for o in json_lines(run("--json", data_dir, status=1).stdout)
             if o["type"] == "finding"]  # fmt: skip
    assert codes == ["record-corrupt"]
    run("--no-deep", data_dir, status=0)


def test_quiet_prints_only_errors(data_dir: Path) -> None:
    (data_dir / "events-1" / "00000000000000000000.timeindex").unlink()  # a warning only
    assert run("--quiet", data_dir, status=0).stdout == ""
    log = first_log(data_dir)
    with log.open("ab") as f:
        f.write(bytes(100))
    lines = run("--quiet", data_dir, status=1).stdout.splitlines()
    assert lines == [next(ln for ln in lines if "ERROR zero-tail" in ln)]
    quiet_json = json_lines(run("--quiet", "--json", data_dir, status=1).stdout)
    assert [o["type"] for o in quiet_json] == ["finding", "summary"]
    assert quiet_json[-1]["warnings"] == 1


def test_partition_dirs_and_single_files(data_dir: Path) -> None:
    part = data_dir / "events-0"
    assert "events-0" in run(part, status=0).stdout
    run(part / "00000000000000000000.index", status=0)  # checked against its .log
    run(data_dir / "recovery-point-offset-checkpoint", status=0)


def test_usage_and_io_errors(data_dir: Path) -> None:
    missing = run(data_dir / "nope", status=3)
    assert str(data_dir / "nope") in missing.stderr and "No such file" in missing.stderr
    assert (
        "not a file kafkalog verify knows"
        in run(data_dir / "kafkalog-topics.json", status=2).stderr
    )
    assert "required" in run(status=2).stderr


@requires_shared_fixtures
def test_real_broker_data_dirs(tmp_path: Path) -> None:
    # Warnings only: the active segments' indexes are missing from this copy.
    out = run(KAFKA_DATA / "BiggerBrain+kafka", status=0).stdout
    assert "lsx1-0/00000000000000000000.index: WARNING index-missing" in out
    # Two .log files of the metadata log are missing while their indexes remain: lost records.
    found = json_lines(run("--json", KAFKA_DATA / "duongnvt2110+ms-practice", status=1).stdout)
    errors = {(o["code"], Path(o["path"]).name) for o in found if o.get("severity") == "error"}
    assert errors == {
        ("segment-missing", "00000000000000392983.log"),
        ("segment-missing", "00000000000000726679.log"),
    }


def batch_entries(log: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch, read with struct."""
    data, out, pos = log.read_bytes(), [], 0
    while pos + 12 <= len(data):
        base, size = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, base + struct.unpack_from(">i", data, pos + 23)[0]))
        pos += 12 + size
    return out


def damage_torn_tail(root: Path) -> tuple[str, str, int | None]:
    log = first_log(root)  # a rolled segment: Kafka completed it before rolling
    size = log.stat().st_size
    log.write_bytes(log.read_bytes()[: size - 7])
    position = batch_entries(log)[-1][0]
    return "error", "torn-tail", position


def damage_index_entry(root: Path) -> tuple[str, str, int | None]:
    index = first_log(root).with_suffix(".index")
    data = bytearray(index.read_bytes())
    relative, position = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, relative, position + 1)  # not where a batch starts
    index.write_bytes(data)
    return "error", "index-entry-mismatch", 8


def damage_missing_index(root: Path) -> tuple[str, str, int | None]:
    first_log(root).with_suffix(".timeindex").unlink()  # Kafka rebuilds it: a warning
    return "warning", "time-index-missing", None


def damage_stale_checkpoint(root: Path) -> tuple[str, str, int | None]:
    path = root / "recovery-point-offset-checkpoint"
    lines = path.read_text().splitlines()
    lines = [f"events 0 {10**6}" if line.startswith("events 0 ") else line for line in lines]
    path.write_text("\n".join(lines) + "\n")
    return "error", "recovery-point-beyond-log-end", None


@pytest.mark.parametrize(
    "damage",
    [damage_torn_tail, damage_index_entry, damage_missing_index, damage_stale_checkpoint],
    ids=lambda f: f.__name__[len("damage_") :],
)
def test_corruption_suite(damage, data_dir: Path) -> None:
    from kafkalog.cli.main import main

    severity, code, position = damage(data_dir)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["verify", "--json", str(data_dir)])
    findings = [o for o in json_lines(out.getvalue()) if o["type"] == "finding"]
    found = [(f["severity"], f["code"]) for f in findings if f["severity"] != "info"]
    assert found[0] == (severity, code)
    # A cut file also leaves the index entries that pointed past the cut without a batch.
    assert set(found[1:]) <= {("error", "index-entry-mismatch"),
                              ("error", "time-index-entry-mismatch")}  # fmt: skip
    if position is not None:
        assert findings[0]["position"] == position
    assert status == (1 if severity == "error" else 0)


@requires_shared_fixtures
def test_fixture_errors_are_exactly_the_missing_files() -> None:
    """Every real broker's dir verifies without error, except where MISSING.json's files leave
    a gap (a .log gone while its indexes remain)."""
    from kafkalog.cli.main import main

    missing = MISSING
    for data_dir in sorted(p for p in KAFKA_DATA.iterdir() if p.is_dir()):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(["verify", "--json", "--quiet", "--no-deep", str(data_dir)])
        errors = {str(Path(o["path"]).relative_to(data_dir)) for o in json_lines(out.getvalue())
                  if o["type"] == "finding"}  # fmt: skip
        assert errors <= set(missing.get(data_dir.name, [])), data_dir.name
        assert status == (1 if errors else 0)
