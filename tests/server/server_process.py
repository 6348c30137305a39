"""``kafkalog serve`` in a subprocess on a free loopback port, for tests driving real clients."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_READY = re.compile(r"kafkalog serving ([\w.\-]+):(\d+)")
# One partition each for __consumer_offsets and __transaction_state: quick starts in tests.
SMALL = {"offsets_topic_num_partitions": 1, "transaction_state_log_num_partitions": 1}
SMALL_INTERNAL_TOPICS = (
    "--offsets-topic-num-partitions",
    "1",
    "--transaction-state-log-num-partitions",
    "1",
)


class ServerProcess:
    """``open_files``: run the server with this open-files limit, soft and hard (so that the
    server's raising of the soft limit to the hard one cannot lift it)."""

    def __init__(
        self, data_dir: Path, *args: str, port: int = 0, open_files: int | None = None
    ) -> None:
        self.data_dir = data_dir
        self.args = args
        self.port = port
        self.open_files = open_files
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> ServerProcess:
        listen = f"127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "kafkalog.cli.main", "serve", str(self.data_dir),
               "--listen", listen, *SMALL_INTERNAL_TOPICS, *self.args]  # fmt: skip
        limit = self.open_files

        def lower_limit() -> None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.proc = subprocess.Popen(
            cmd,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            preexec_fn=lower_limit if limit is not None else None,
        )
        ready = threading.Event()

        def pump() -> None:
            for line in self.proc.stderr:
                self.lines.append(line)
                m = _READY.search(line)
                if m:
                    self.port = int(m.group(2))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError("server did not start:\n" + "".join(self.lines))
        if self.proc.poll() is not None and not _READY.search("".join(self.lines)):
            raise RuntimeError("server failed to start:\n" + "".join(self.lines))
        return self

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM: a graceful shutdown; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def log(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
