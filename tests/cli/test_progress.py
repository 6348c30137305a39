"""Progress bars: drawn on a terminal's stderr for reads over 64 MiB, never in piped output, and
standard output is byte for byte the same with and without a bar."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest

from kafkalog.cli.progress import THRESHOLD_BYTES, Progress

from .console import run_on_terminal
from .operate_support import build, kafkalog_exe, run_main


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKALOG_PROGRESS", raising=False)
    monkeypatch.delenv("KAFKALOG_PROGRESS_THRESHOLD", raising=False)


def test_shown_only_past_64_mib_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert THRESHOLD_BYTES == 64 * 1024 * 1024
    assert Progress(THRESHOLD_BYTES + 1, "x", stream=FakeTerminal()).shown
    assert not Progress(THRESHOLD_BYTES, "x", stream=FakeTerminal()).shown
    assert not Progress(THRESHOLD_BYTES + 1, "x", stream=io.StringIO()).shown
    assert not Progress(THRESHOLD_BYTES + 1, "x", stream=FakeTerminal(), quiet=True).shown
    monkeypatch.setenv("KAFKALOG_PROGRESS", "never")
    assert not Progress(THRESHOLD_BYTES + 1, "x", stream=FakeTerminal()).shown
    monkeypatch.setenv("KAFKALOG_PROGRESS", "always")
    assert Progress(1, "x", stream=io.StringIO()).shown
    monkeypatch.delenv("KAFKALOG_PROGRESS")
    monkeypatch.setenv("KAFKALOG_PROGRESS_THRESHOLD", "10")
    with Progress(11, "x", stream=FakeTerminal()) as progress:
        progress.advance(11)
        assert progress.shown and progress.done == 11


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("progress") / "data", {"events": (2, {})}, batches=10)


COMMANDS = [
    ["verify"],
    ["stats"],
    ["transactions"],
    ["recover"],
    ["retention", "--now-ms", "0"],
    ["compact"],
    ["rebuild-index", "events-0"],
]


def args_for(command: list[str], data_dir: Path) -> list[str]:
    if command[0] == "rebuild-index":
        return [command[0], str(data_dir / command[1])]
    return [*command, str(data_dir)]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_draws_a_bar_and_keeps_its_output(
    command, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKALOG_PROGRESS", "never")
    plain, plain_err = run_main(*args_for(command, data_dir), status=0)
    monkeypatch.setenv("KAFKALOG_PROGRESS", "always")  # a bar whatever the size and stream
    with_bar, bar = run_main(*args_for(command, data_dir), status=0)
    assert "%|" in bar and plain_err == "" and with_bar == plain


@pytest.mark.parametrize("command", [["verify"], ["stats"]], ids=lambda c: c[0])
def test_a_terminal_sees_the_bar_and_a_pipe_the_same_output(command, data_dir: Path) -> None:
    env = {**os.environ, "KAFKALOG_PROGRESS_THRESHOLD": "1"}  # as if past 64 MiB
    env.pop("KAFKALOG_PROGRESS", None)
    args = args_for(command, data_dir)
    stdout, terminal, status = run_on_terminal(args, env)
    assert f"{command[0]}:".encode() in terminal and b"%|" in terminal, terminal
    piped = subprocess.run([*kafkalog_exe(), *args], capture_output=True, env=env, check=False)
    assert piped.stderr == b"" and piped.returncode == status == 0
    assert piped.stdout == stdout and stdout
    if command[0] == "stats":  # (verify --quiet also prints only errors)
        quiet_stdout, quiet_terminal, _ = run_on_terminal([*args[:-1], "--quiet", args[-1]], env)
        assert b"%|" not in quiet_terminal and quiet_stdout == stdout
