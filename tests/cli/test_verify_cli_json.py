"""Every operator command's ``--json`` is compact, as ``dump --json`` and ``consume --json``
are (no blank after ``,`` or ``:``), and numeric options out of range are usage errors."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from kafkalog.cli.main import main

from .operate_support import build, run_main, run_script


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("json") / "data",
                 {"t": (1, {}), "c": (1, {"cleanup.policy": "compact"})}, batches=8)  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["stats"],
        ["transactions", "--all"],
        ["recover", "--full"],
        ["compact"],
        ["retention"],
        ["rebuild-index"],
    ],
)
def test_json_lines_are_compact(data_dir: Path, command: list[str]) -> None:
    target = data_dir / "t-0" if command[0] == "rebuild-index" else data_dir
    out, _ = run_main(*command, "--json", target, status=0)
    lines = out.splitlines()
    assert lines
    for line in lines:
        assert line == json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)


def usage_status(*args: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    with pytest.raises(SystemExit) as info, contextlib.redirect_stderr(err):
        main([str(a) for a in args])
    return info.value.code, err.getvalue()


@pytest.mark.parametrize(
    "args",
    [
        ["transactions", "--timeout-ms", "-5"],
        ["transactions", "--timeout-ms", "0"],
        ["transactions", "--now-ms", "-1"],
        ["retention", "--now-ms", "-1"],
        ["compact", "--now-ms", "-1"],
        ["compact", "--now-ms", "soon"],
        ["transactions", "--timeout-ms", str(1 << 63)],
    ],
)
def test_numbers_out_of_range_are_usage_errors(data_dir: Path, args: list[str]) -> None:
    status, err = usage_status(*args, data_dir)
    assert status == 2 and args[1] in err


def test_the_console_script_rejects_a_negative_timeout(data_dir: Path) -> None:
    proc = run_script("transactions", "--timeout-ms", "-5", data_dir, status=2)
    assert "-5 is not in 1.." in proc.stderr and proc.stdout == ""
