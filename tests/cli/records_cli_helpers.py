"""Running ``produce``, ``consume`` and ``export``: as the real console script (a subprocess,
stdin and stdout as pipes) or in-process through ``main()``; and kafka-python's view of the
files they write (an independent decoder)."""

from __future__ import annotations

import io
import json
import subprocess
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path

from kafka.record import MemoryRecords as KpMemoryRecords

from arrow.arrow_data import T0, kp_records  # shared with the Arrow API tests

from .console import kafkalog_exe, run_console

__all__ = ["T0", "KpBatch", "cli", "json_lines", "kafkalog_exe", "kp_batches", "kp_records",
           "main_in_process"]  # fmt: skip


def cli(*args, stdin: bytes | None = None, status: int | None = 0) -> subprocess.CompletedProcess:
    """The console script in a subprocess; checks the exit status unless ``status`` is None."""
    return run_console(*args, stdin=stdin, status=status, text=False)


@dataclass
class Result:
    status: int
    stdout: bytes
    stderr: str


def main_in_process(capsysbinary, *args, status: int | None = 0) -> Result:
    """``kafkalog.cli.main.main(args)`` with stdout captured as bytes."""
    from kafkalog.cli.main import main

    err = io.StringIO()
    capsysbinary.readouterr()
    with redirect_stderr(err):
        code = main([str(a) for a in args])
    out = capsysbinary.readouterr()
    result = Result(code, out.out, err.getvalue() + out.err.decode(errors="replace"))
    if status is not None:
        assert code == status, (code, result.stderr[-2000:])
    return result


def json_lines(data: bytes) -> list[dict]:
    # split at "\n" only: str.splitlines() also splits at U+0085, U+2028 and U+2029, which JSON
    # strings may hold unescaped
    return [json.loads(line) for line in data.split(b"\n") if line]


@dataclass(frozen=True)
class KpBatch:
    base_offset: int
    magic: int
    codec: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool
    crc_ok: bool
    records: list  # (offset, timestamp, key, value, headers)


def kp_batches(partition_dir: Path) -> list[KpBatch]:
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        records = KpMemoryRecords(log.read_bytes())
        while (b := records.next_batch()) is not None:
            out.append(KpBatch(
                b.base_offset, b.magic, b.compression_type, b.producer_id, b.producer_epoch,
                b.base_sequence, b.is_transactional, b.is_control_batch, b.validate_crc(),
                [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b],
            ))  # fmt: skip
    return out
