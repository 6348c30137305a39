"""The examples of docs/cli-operate.md run as written: every ``sh`` block, in order, in an empty
directory. ``kafkalog`` runs in-process (a pipeline's other commands in bash, feeding its
stdin); a usage or I/O error (exit 2 or 3) means the guide is wrong."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kafkalog.cli.main import main

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "cli-operate.md"


def run_line(line: str) -> tuple[int, str]:
    """(exit status, stdout) of one example line."""
    stages = [s.strip() for s in line.split(" | ")]
    at = next((i for i, s in enumerate(stages) if s.startswith("kafkalog ")), None)
    if at is None:
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout
    feed = b""
    if at:
        feed = subprocess.run(["bash", "-c", " | ".join(stages[:at])], capture_output=True,
                              check=True).stdout  # fmt: skip
    out = io.StringIO()
    with tempfile.TemporaryFile() as source:  # a real file: commands may ask for its fileno
        source.write(feed)
        source.seek(0)
        stdin, sys.stdin = sys.stdin, io.TextIOWrapper(source)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                status = main(shlex.split(stages[at])[1:])
        finally:
            sys.stdin.detach()
            sys.stdin = stdin
    return status, out.getvalue()  # later stages (| head) only shorten what is shown


@pytest.mark.skipif(shutil.which("awk") is None or shutil.which("dd") is None,
                    reason="the guide's examples use awk and dd")  # fmt: skip
def test_the_guide_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAFKALOG_PROGRESS", "never")
    lines = [line for block in re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S)
             for line in block.strip().splitlines()]  # fmt: skip
    assert len(lines) > 15
    results = [(line, *run_line(line)) for line in lines]
    assert [(line, status) for line, status, _ in results if status not in (0, 1)] == []
    # What the walk-through says happens: the damaged segment is cut, then verify is clean.
    line, status, out = results[-3]
    assert line == "kafkalog verify demo" and status == 0 and "0 errors" in out
    assert (tmp_path / "demo-growth.png").stat().st_size > 10_000
