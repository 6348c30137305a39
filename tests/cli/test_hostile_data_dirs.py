"""Reproducers of a hostile-input run against the commands that read a data directory: each one
once ended in a traceback, a hang, a silent wrong number, an error naming no file, a bypassed
lock or a write a broker refuses.

Inputs are written by ``kafkalog produce`` and then damaged here with ``struct`` (CRCs made to
match again); expected values come from Kafka's documented behaviour (its exception messages,
the CRC rules, the lock a broker holds), never from kafkalog's own output. Commands that could
hang run as the real console script with a timeout.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalog.log.datadir.dir_lock import DataDirLock

from .console import run_console
from .records_cli_helpers import kp_batches, main_in_process

SEGMENT = "00000000000000000000.log"


def produce(data: Path, *extra: str, values: int = 20, topic: str = "t") -> Path:
    """``values`` text records into ``topic``-0 of ``data``, in batches of about 120 bytes."""
    src = data.parent / f"{data.name}-{topic}.txt"
    src.write_text("".join(f"value-{i}\n" for i in range(values)))
    from kafkalog.cli.main import main

    status = main(["produce", str(data), "-t", topic, "-p", "0", "--format", "text",
                   "--batch-size", "120", "--file", str(src), "--quiet", *extra])  # fmt: skip
    assert status == 0
    return data / f"{topic}-0"


def entries(data: bytes) -> list[tuple[int, int]]:
    """(position, end) of every batch, from the length fields."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, end))
        pos = end
    return out


def rewrite_v2(path: Path, which: int, offset_in_batch: int, fmt: str, value: int) -> int:
    """Set a field of the ``which``-th v2 batch and make its CRC-32C (bytes 21..end) match
    again; the batch's position."""
    data = bytearray(path.read_bytes())
    pos, end = entries(bytes(data))[which]
    struct.pack_into(fmt, data, pos + offset_in_batch, value)
    struct.pack_into(">I", data, pos + 17, crc32c(bytes(data[pos + 21 : end])))
    path.write_bytes(bytes(data))
    return pos


def no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr


# -- FIFOs, sockets and symlink loops named like Kafka's files ------------------------------------
@pytest.mark.parametrize("name", [SEGMENT, "00000000000000000000.index",
                                  "00000000000000000007.snapshot"])  # fmt: skip
def test_dump_refuses_a_fifo_without_opening_it(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    proc = run_console("dump", fifo, timeout=60)  # opening the FIFO would block: no hang
    assert proc.returncode == 3, proc
    assert f"{fifo}: not a regular file (a FIFO)" in proc.stderr
    no_traceback(proc)


def test_dump_of_an_index_names_its_fifo_log(tmp_path):
    """An .index is checked against its .log: a FIFO there is refused, and named."""
    data = tmp_path / "data"
    part = produce(data)
    log = part / SEGMENT
    log.unlink()
    os.mkfifo(log)
    index = part / "00000000000000000000.index"
    index.write_bytes(struct.pack(">ii", 4, 0))  # one entry: the .log is read to check it
    proc = run_console("dump", index, timeout=60)
    assert proc.returncode == 3, proc
    assert f"{log}: not a regular file (a FIFO)" in proc.stderr
    proc = run_console("rebuild-index", part, timeout=60)
    assert proc.returncode == 3, proc
    assert f"{log}: not a regular file (a FIFO)" in proc.stderr


def test_dump_refuses_a_symlink_loop(tmp_path):
    loop = tmp_path / SEGMENT
    os.symlink(SEGMENT, loop)  # ln -s a a
    proc = run_console("dump", "--deep-iteration", loop, timeout=60)
    assert proc.returncode == 3, proc
    assert f"{loop}: not a regular file (a symbolic link loop)" in proc.stderr
    no_traceback(proc)


def test_dump_refuses_a_socket(tmp_path):
    import socket

    path = tmp_path / SEGMENT
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        proc = run_console("dump", path, timeout=60)
    assert proc.returncode == 3, proc
    assert f"{path}: not a regular file (a socket)" in proc.stderr


def test_a_fifo_in_a_partition_directory(tmp_path):
    """verify reports it (and goes on), every command that opens the partition refuses it,
    naming the path; none opens it."""
    data = tmp_path / "data"
    part = produce(data)
    fifo = part / "00000000000000000100.log"
    os.mkfifo(fifo)

    proc = run_console("verify", "--json", data, timeout=60)
    assert proc.returncode == 1, proc
    findings = [json.loads(line) for line in proc.stdout.splitlines()]
    bad = [f for f in findings if f.get("code") == "not-regular-file"]
    assert [(f["path"], f["severity"]) for f in bad] == [(str(fifo), "error")]
    proc = run_console("verify", fifo, timeout=60)
    assert proc.returncode == 3 and f"{fifo}: not a regular file (a FIFO)" in proc.stderr

    for args, status in ((("stats", data), 1), (("recover", data), 3),
                         (("recover", "--apply", data), 3)):  # fmt: skip
        proc = run_console(*args, timeout=60)
        assert proc.returncode == status, (args, proc)
        assert f"{fifo}: not a regular file (a FIFO)" in proc.stderr, (args, proc.stderr)
        no_traceback(proc)


# -- stats: a negative records count ---------------------------------------------------------------
def test_stats_reports_a_negative_record_count_as_damage(tmp_path, capsysbinary):
    """recordsCount -1 behind a matching CRC: Kafka's DefaultRecordBatch throws
    InvalidRecordException("Found invalid record count -1 in magic v2 batch"); stats reports the
    batch (file, position) instead of adding -1 to the count."""
    data = tmp_path / "data"
    part = produce(data)
    log = part / SEGMENT
    batches = kp_batches(part)
    position = rewrite_v2(log, 1, 57, ">i", -1)
    result = main_in_process(capsysbinary, "stats", "--json", data, status=1)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    (partition,) = [r for r in rows if r["type"] == "partition"]
    assert partition["records"] == len(batches[0].records)  # the numbers stop at the damage
    assert partition["records"] >= 0
    assert f"{log}, position {position}, offset {batches[1].base_offset}" in partition["error"]
    assert "invalid record count -1" in partition["error"]
    assert f"{log}, position {position}" in result.stderr


# -- errors name their file ------------------------------------------------------------------------
def test_recover_apply_errors_name_the_segment(tmp_path):
    """A transaction's COMMIT marker whose record length is -16 (CRC matching): rebuilding the
    producer state (no snapshot) fails there, and the error names the segment file."""
    data = tmp_path / "data"
    part = produce(data, "--transaction", "commit")
    log = part / SEGMENT
    marker_pos, _ = entries(log.read_bytes())[-1]
    data_bytes = bytearray(log.read_bytes())
    data_bytes[marker_pos + 61] = 0x1F  # zigzag varint -16: the first record's length
    end = len(data_bytes)
    struct.pack_into(">I", data_bytes, marker_pos + 17,
                     crc32c(bytes(data_bytes[marker_pos + 21 : end])))  # fmt: skip
    log.write_bytes(bytes(data_bytes))
    for snapshot in part.glob("*.snapshot"):
        snapshot.unlink()
    (data / ".kafka_cleanshutdown").unlink(missing_ok=True)

    proc = run_console("recover", "--full", "--apply", data, timeout=120)
    assert proc.returncode == 1, proc
    no_traceback(proc)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kafkalog recover:")]
    assert lines and all(str(log) in line for line in lines), proc.stderr
    assert "Invalid record size -16" in proc.stderr

    proc = run_console("transactions", data, timeout=120)
    assert proc.returncode == 1, proc
    assert f"{log}, position {marker_pos + 61}" in proc.stderr


# -- bounded JSON and checkpoint files -------------------------------------------------------------
def test_deeply_nested_topics_file_is_a_typed_error(tmp_path):
    data = tmp_path / "data"
    produce(data)
    topics = data / "kafkalog-topics.json"
    topics.write_text("[" * 100_000 + "]" * 100_000)
    for args in (("stats", data), ("recover", "--apply", data), ("compact", data),
                 ("retention", data)):  # fmt: skip
        proc = run_console(*args, timeout=120)
        no_traceback(proc)
        assert proc.returncode == 1, (args, proc)
        assert f"{topics}: invalid topics file: JSON nested 100000 deep" in proc.stderr, args
    proc = run_console("verify", "--json", data, timeout=120)
    found = [json.loads(line) for line in proc.stdout.splitlines()]
    assert any(f.get("code") == "topics-file-corrupt" and f["path"] == str(topics) for f in found)


def test_deeply_nested_clean_shutdown_marker_is_not_a_traceback(tmp_path):
    data = tmp_path / "data"
    produce(data)
    marker = data / ".kafka_cleanshutdown"
    marker.write_text("[" * 100_000 + "]" * 100_000)
    proc = run_console("verify", data, timeout=120)
    no_traceback(proc)
    assert "clean-shutdown-corrupt" in proc.stdout
    proc = run_console("recover", "--apply", data, timeout=120)
    no_traceback(proc)
    assert proc.returncode == 0, proc


# -- the lock of the real data directory -----------------------------------------------------------
def symlinked_partition(tmp_path) -> tuple[Path, Path, Path]:
    data = tmp_path / "DATA"
    part = produce(data)
    other = tmp_path / "other"
    other.mkdir()
    link = other / "t-0"
    link.symlink_to(part, target_is_directory=True)  # ln -s DATA/t-0 other/t-0
    return data, part, link


def tree(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize(
    "args",
    [
        ("recover", "--full", "--apply"),
        ("recover", "--apply"),
        ("compact", "--apply"),
        ("retention", "--apply", "--assume-defaults"),
        ("rebuild-index", "--apply"),
    ],
)
def test_a_symlinked_partition_is_guarded_by_its_real_data_directory(tmp_path, args):
    data, part, link = symlinked_partition(tmp_path)
    before = tree(part)
    with DataDirLock(data):  # what a broker serving DATA holds
        proc = run_console(*args, link, timeout=120)
        assert proc.returncode == 3, proc
        assert f"Failed to acquire lock on file .lock in {data}" in proc.stderr
        proc = run_console(*args, link.parent, timeout=120)  # other/ as a data directory
        if args[0] != "rebuild-index":  # rebuild-index takes a partition directory only
            assert proc.returncode == 3, proc
            assert f"Failed to acquire lock on file .lock in {data}" in proc.stderr
    assert tree(part) == before  # nothing of the live partition changed


def test_a_symlinked_partition_uses_its_real_data_directorys_checkpoints(tmp_path):
    """Without a lock held, recover through the symlink works, and keeps DATA's checkpoints."""
    data, _, link = symlinked_partition(tmp_path)
    proc = run_console("recover", "--full", "--apply", link, timeout=120)
    assert proc.returncode == 0, proc
    assert "t 0 " in (data / "recovery-point-offset-checkpoint").read_text()
    assert not (link.parent / "recovery-point-offset-checkpoint").exists()


def test_recover_through_a_symlink_while_serve_runs(tmp_path):
    """The reproducer: ``kafkalog serve DATA`` running, ``recover --full --apply other/t-0``."""
    from server.server_process import ServerProcess

    data, part, link = symlinked_partition(tmp_path)
    before = (part / SEGMENT).read_bytes()
    with ServerProcess(data):  # it preallocates the active segment's indexes: logs compared
        proc = run_console("recover", "--full", "--apply", link, timeout=120)
        assert proc.returncode == 3, proc
        assert f"Failed to acquire lock on file .lock in {data}" in proc.stderr
        assert (part / SEGMENT).read_bytes() == before
        assert not (part / "kafkalog-quarantine").exists()


def test_produce_into_a_data_directory_with_a_symlinked_live_partition(tmp_path):
    data, _, link = symlinked_partition(tmp_path)
    with DataDirLock(data):
        proc = run_console("produce", link.parent, "-t", "t", "-p", "0", "--format", "text",
                           stdin="x\n", timeout=120)  # fmt: skip
        assert proc.returncode == 3, proc
        assert f"Failed to acquire lock on file .lock in {data}" in proc.stderr


# -- produce and Kafka's internal topics -----------------------------------------------------------
INTERNAL = ["__consumer_offsets", "__transaction_state", "__cluster_metadata",
            "__share_group_state"]  # fmt: skip


@pytest.mark.parametrize("topic", INTERNAL)
def test_produce_refuses_internal_topics(tmp_path, capsysbinary, topic):
    """A broker answers INVALID_TOPIC_EXCEPTION ("Cannot append to internal topic")."""
    data = tmp_path / "data"
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    result = main_in_process(capsysbinary, "produce", data, "-t", topic, "--format", "text",
                             "--file", src, status=2)  # fmt: skip
    assert f"Cannot append to internal topic {topic}" in result.stderr
    assert "--allow-internal-topics" in result.stderr
    assert not data.exists()  # refused before any file is made


def test_produce_refuses_an_internal_topic_named_by_a_line(tmp_path, capsysbinary):
    data = tmp_path / "data"
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"topic": "orders", "partition": 0, "value": "one"}) + "\n"
        + json.dumps({"topic": "__consumer_offsets", "partition": 0, "value": "two"}) + "\n"
    )  # fmt: skip
    result = main_in_process(capsysbinary, "produce", data, "--file", src, status=2)
    assert f"{src} line 2: Cannot append to internal topic __consumer_offsets" in result.stderr
    assert [r[3] for b in kp_batches(data / "orders-0") for r in b.records] == [b"one"]
    assert not (data / "__consumer_offsets-0").exists()


def test_allow_internal_topics_writes_them(tmp_path, capsysbinary):
    data = tmp_path / "data"
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    main_in_process(capsysbinary, "produce", data, "-t", "__consumer_offsets", "--format",
                    "text", "--file", src, "--allow-internal-topics", "--quiet")  # fmt: skip
    assert [r[3] for b in kp_batches(data / "__consumer_offsets-0") for r in b.records] == [b"x"]


def test_produce_help_documents_the_flag():
    proc = run_console("produce", "--help", status=0)
    assert "--allow-internal-topics" in proc.stdout


# -- a compressed batch whose header says 0 records ------------------------------------------------
def test_records_hidden_behind_a_zero_count_are_reported(tmp_path):
    """Kafka's DefaultRecordBatch returns no record for a count of 0 without decompressing;
    records there are hidden from every consumer: deep verify and dump --deep-iteration report
    them ("Incorrect declared batch size, records still remaining")."""
    data = tmp_path / "data"
    part = produce(data, "--codec", "gzip", "--batch-size", "100000")
    log = part / SEGMENT
    assert len(entries(log.read_bytes())) == 1
    rewrite_v2(log, 0, 57, ">i", 0)
    proc = run_console("verify", "--json", part, timeout=120)
    assert proc.returncode == 1, proc
    (finding,) = [json.loads(line) for line in proc.stdout.splitlines()
                  if json.loads(line).get("severity") == "error"]  # fmt: skip
    assert (finding["code"], finding["path"], finding["position"]) == (
        "batch-records-count", str(log), 0)  # fmt: skip
    assert "holding 20 records" in finding["message"]
    proc = run_console("dump", "--deep-iteration", log, timeout=120)
    assert proc.returncode == 1, proc
    assert f"Error in {log} at position 0 (offset 0): Incorrect declared batch size" in proc.stderr
    assert run_console("dump", log, timeout=120).returncode == 0  # batch lines only: as Kafka
