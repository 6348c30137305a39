"""Damaged files never crash the operator commands: for any bit flip, cut, zero-filled tail or
junk in any file of a partition, every read-only command exits 0 or 1 (problems found) with its
output, never with a traceback or a usage/I-O status."""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.cli.main import main

from .operate_support import build, damaged, file_damage

COMMANDS = [
    ["stats", "--json"],
    ["transactions", "--json"],
    ["recover", "--json"],
    ["recover", "--full"],
    ["compact", "--force"],
    ["retention"],
    ["verify", "--json"],
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    topics = {"t": (1, {"cleanup.policy": "compact"})}
    return build(tmp_path_factory.mktemp("corrupt") / "data", topics, batches=12)


damage = file_damage(max_zeros=300, junk=True)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(file_index=st.integers(0, 100), how=damage)
def test_no_command_crashes_on_damage(data_dir: Path, tmp_path: Path, file_index, how) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "data"  # examples may repeat
    shutil.copytree(data_dir, root)
    files = sorted(p for p in (root / "t-0").iterdir() if p.is_file())
    target = files[file_index % len(files)]
    target.write_bytes(damaged(target.read_bytes(), how))
    for command in [*COMMANDS, ["rebuild-index", "t-0"]]:
        args = [command[0], str(root / command[1])] if command[0] == "rebuild-index" else [
            *command, str(root)]  # fmt: skip
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(args)
        assert status in (0, 1), (command, target.name, how, err.getvalue())
        assert out.getvalue(), command
