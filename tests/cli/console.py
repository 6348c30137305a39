"""The installed ``kafkalog`` console script, run in a subprocess: what users run, entry point
included. Every CLI test that runs the real command goes through here."""

from __future__ import annotations

import functools
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["kafkalog_exe", "run_console", "run_on_terminal"]


@functools.cache
def kafkalog_exe() -> list[str]:
    """The command line that starts the console script: the one installed beside this
    interpreter (a virtual environment's ``bin``), else the first ``kafkalog`` on PATH."""
    beside = Path(sys.executable).with_name("kafkalog")
    if beside.exists() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("kafkalog")
    if found is None:
        pytest.fail("the kafkalog console script is not installed: pip install -e '.[test]'")
    return [found]


def run_console(
    *args: object,
    stdin: bytes | str | None = None,
    status: int | None = None,
    text: bool = True,
    cwd: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """``kafkalog ARGS`` in a subprocess with captured output; checks the exit status unless
    ``status`` is None (the failure shows the tail of stderr)."""
    proc = subprocess.run(
        [*kafkalog_exe(), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=text,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )
    if status is not None:
        err = proc.stderr if text else proc.stderr.decode(errors="replace")
        assert proc.returncode == status, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    return proc


def run_on_terminal(args: list[str], env: dict[str, str]) -> tuple[bytes, bytes, int]:
    """``kafkalog ARGS`` with stderr on a pseudo-terminal and stdout on a pipe, both read as
    they come (neither can fill and block the other): (stdout, terminal, status)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*kafkalog_exe(), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    os.close(slave)
    out_fd = proc.stdout.fileno()
    got = {master: b"", out_fd: b""}
    open_fds = [master, out_fd]
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 30)
        if not ready:
            break
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if chunk:
                got[fd] += chunk
            else:
                open_fds.remove(fd)
    os.close(master)
    proc.stdout.close()
    return got[out_fd], got[master], proc.wait(timeout=60)
