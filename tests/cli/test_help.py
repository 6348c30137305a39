"""Every command's ``--help``: an examples section, the exit statuses, and examples that run as
printed. Each example is run by bash through the installed console script, in a fresh copy of a
small workspace holding what the examples name (``data``, ``orders-0``, ``records.jsonl``, ...);
``/var/lib/kafka`` is the one path mapped (to ``var/lib/kafka`` in the workspace). On data that
is clean, every example's documented status is 0.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.cli.main import COMMANDS, main
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager
from kafkalog.log.datadir.naming import TopicPartition
from shared_fixtures import KAFKA_DATA, REASON

from .console import kafkalog_exe, run_console

T0 = 1_768_435_200_000  # 2026-01-15T00:00:00Z: inside the time ranges the examples use
HOUR = 3_600_000
# Examples that run until they are stopped: a server, and consumers that follow a live log.
RUNS_UNTIL_STOPPED = ("kafkalog serve", "--follow")
NO_EXIT_STATUS_SECTION = {"serve"}  # a server runs until stopped: no status to document
TOPIC_CONFIGS = {
    "message.timestamp.before.max.ms": str(1 << 50),
    "message.timestamp.after.max.ms": str(1 << 50),
}


def help_text(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def examples(text: str) -> list[str]:
    """The commands of the ``examples:`` section, continuation lines joined."""
    lines = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
        else:
            joined.append(line.strip())
    return [line for line in joined if line]


def all_examples() -> list[tuple[str, str]]:
    return [(command, ex) for command in COMMANDS for ex in examples(help_text(command))]


def test_the_console_script_lists_every_command() -> None:
    proc = run_console("--help", status=0)
    for command in COMMANDS:
        assert f"    {command}" in proc.stdout


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_has_examples_and_exit_statuses(command: str) -> None:
    text = help_text(command)
    assert "\nexamples:\n" in text, f"kafkalog {command} --help has no examples section"
    found = examples(text)
    assert found and all(ex.split("|")[-1].strip() or ex for ex in found)
    assert any(f"kafkalog {command}" in ex for ex in found)
    if command not in NO_EXIT_STATUS_SECTION:
        assert "\nexit status: 0 " in text, f"kafkalog {command} --help lists no exit statuses"


# -- the workspace the examples run in ----------------------------------------------------------


def kp_batch(
    rows: list[tuple[bytes | None, bytes]], ts: int, *, pid: int = -1, step: int = 1
) -> bytes:
    builder = KpBuilder(2, 0, 1 << 30, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=0 if pid >= 0 else -1)  # fmt: skip
    for i, (key, value) in enumerate(rows):
        assert builder.append(ts + i * step, key, value, []) is not None
    builder.close()
    return bytes(builder.buffer())


def write_data(root: Path) -> None:
    """orders (3 partitions; orders-0 holds offsets 0..1299 in segments 0 and 39, int64 keys,
    JSON values, an hour apart from 2026-01-15 on), payments (3), users (compacted), clicks."""
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        orders = manager.create_topic("orders", 3, TOPIC_CONFIGS)
        for p, log in enumerate(orders):
            offset = 0
            for size in [39, *([100] * 12), 61] if p == 0 else [50]:
                rows = [
                    (struct.pack(">q", offset + i), json.dumps({"n": offset + i}).encode())
                    for i in range(size)
                ]
                log.append_as_leader(kp_batch(rows, T0 + offset * HOUR, step=HOUR))
                offset += size
                if offset == 39:
                    log.roll()
        for log in manager.create_topic("payments", 3, TOPIC_CONFIGS):
            log.append_as_leader(kp_batch([(b"p", b"10 EUR")], T0))
        users = manager.create_topic("users", 1, {**TOPIC_CONFIGS, "cleanup.policy": "compact"})
        for j in range(5):
            users[0].append_as_leader(kp_batch([(b"user-%d" % (i % 3), b"v") for i in range(6)],
                                               T0 + j * 10_000))  # fmt: skip
            users[0].roll()
        for log in manager.create_topic("clicks", 2, TOPIC_CONFIGS):
            log.append_as_leader(kp_batch([(None, b"/page/%d" % i) for i in range(20)], T0))


def offsets_commit_segment() -> bytes:
    """One OffsetCommit record of __consumer_offsets, laid out from Kafka's message schemas:
    key v1 (group, topic, partition), value v3 (offset, leaderEpoch, metadata, timestamp)."""

    def string(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    key = struct.pack(">h", 1) + string("billing") + string("orders") + struct.pack(">i", 0)
    value = struct.pack(">hqi", 3, 42, -1) + string("") + struct.pack(">q", T0)
    return kp_batch([(key, value)], T0)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("examples") / "ws"
    write_data(root / "data")
    for copy in ("old", "copied-data", "var/lib/kafka/data"):
        shutil.copytree(root / "data", root / copy)
    for copy in ("orders-0", "var/lib/kafka/orders-0"):
        shutil.copytree(root / "data" / "orders-0", root / copy)
    (root / "var/lib/kafka/tiered").mkdir()  # a remote store (--remote-storage), empty here
    logs = sorted((root / "orders-0").glob("*.log"))
    shutil.copy(logs[0], root / "a.log")
    shutil.copy(logs[1], root / "b.log")
    (root / "__consumer_offsets-7").mkdir()
    (root / "__consumer_offsets-7" / f"{0:020d}.log").write_bytes(offsets_commit_segment())
    snapshots = sorted((KAFKA_DATA / "duongnvt2110+ms-practice" / "__cluster_metadata-0").glob(
        "*.checkpoint"))  # fmt: skip
    if snapshots:
        (root / "__cluster_metadata-0").mkdir()
        shutil.copy(snapshots[0], root / "__cluster_metadata-0")
    (root / "orders.txt").write_text("".join(f"user-{i}:visit {i}\n" for i in range(20)))
    (root / "records.jsonl").write_text(
        "".join(json.dumps({"key": f"p{i}", "value": f"{i} EUR"}) + "\n" for i in range(9))
    )
    return root


def runnable() -> list[tuple[str, str]]:
    return [
        (command, ex)
        for command, ex in all_examples()
        if not any(marker in ex for marker in RUNS_UNTIL_STOPPED)
    ]


def test_only_examples_that_run_until_stopped_are_left_out() -> None:
    run = runnable()
    left_out = [ex for command, ex in all_examples() if (command, ex) not in run]
    assert left_out and all("serve" in ex or "--follow" in ex for ex in left_out)
    assert len(run) >= 30


@pytest.mark.slow
@pytest.mark.parametrize(("command", "example"), runnable())
def test_example_runs_as_printed(
    workspace: Path, tmp_path: Path, command: str, example: str
) -> None:
    if "__cluster_metadata-0/" in example and not (workspace / "__cluster_metadata-0").exists():
        pytest.skip(REASON)  # the KRaft snapshot comes from the real-broker fixtures
    if "| jq " in example and shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    writes = any(word in example for word in ("--apply", "produce", "rebuild-index"))
    cwd = Path(shutil.copytree(workspace, tmp_path / "ws")) if writes else workspace
    script = example.replace("/var/lib/kafka", "var/lib/kafka")
    bin_dir = str(Path(kafkalog_exe()[0]).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, errors="replace", timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (script, proc.stdout[-1500:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    quiet = ("--apply", "produce", "--plot", "|")  # writers, and filters of clean output
    if not any(word in script for word in quiet):
        assert proc.stdout + proc.stderr, f"{script}: printed nothing"


def test_the_offsets_record_decodes_as_kafka_lays_it_out(workspace: Path) -> None:
    # The hand-made __consumer_offsets record above is the one Kafka's schemas describe.
    proc = run_console(
        "dump", "--offsets-decoder", "--json", workspace / "__consumer_offsets-7" / f"{0:020d}.log",
        status=0,
    )  # fmt: skip
    record = next(json.loads(line) for line in proc.stdout.splitlines()
                  if json.loads(line)["type"] == "record")  # fmt: skip
    assert record["decodedKey"]["data"] == {"group": "billing", "topic": "orders", "partition": 0}
    assert record["decodedValue"]["data"]["offset"] == 42


def test_manager_sees_the_workspace_topics(workspace: Path) -> None:
    with LogManager(workspace / "data") as manager:
        assert {tp.topic for tp in manager.logs} == {"orders", "payments", "users", "clicks"}
        assert manager.logs[TopicPartition("orders", 0)].log_end_offset == 1300
