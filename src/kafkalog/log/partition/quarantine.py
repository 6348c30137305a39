"""Where recovery puts what it takes out of a log, instead of deleting it.

Kafka's recovery deletes: torn tails, segments after a corrupt batch, cleaner and retention
leftovers. kafkalog moves every such file, or the bytes cut from one, into
``<partition dir>/kafkalog-quarantine/<UTC time>/`` with a ``NOTE.txt`` saying why. The folder sits
inside the partition directory because Kafka refuses to start with unknown directories at the top
of a log dir, while it ignores subdirectories of a partition directory (it only lists files there).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["QUARANTINE_DIR_NAME", "Quarantine"]

QUARANTINE_DIR_NAME = "kafkalog-quarantine"


class Quarantine:
    """One recovery run's quarantine folder for a partition (created on first use)."""

    def __init__(self, partition_dir: str | os.PathLike, *, clock_ms: int | None = None) -> None:
        ms = int(time.time() * 1000) if clock_ms is None else clock_ms
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"
        self.path = Path(partition_dir) / QUARANTINE_DIR_NAME / stamp
        self.notes: list[str] = []

    def _ensure(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def move_file(self, file: str | os.PathLike, why: str) -> Path:
        """Move ``file`` here; returns its new path."""
        self._ensure()
        source = Path(file)
        target = self.path / source.name
        n = 1
        while target.exists():
            target = self.path / f"{source.name}.{n}"
            n += 1
        os.replace(source, target)
        self._note(f"{source.name}: moved here: {why}")
        return target

    def save_bytes(self, source_name: str, position: int, data: bytes, why: str) -> Path:
        """Keep ``data`` cut from ``source_name`` at byte ``position``."""
        self._ensure()
        target = self.path / f"{source_name}.cut-at-{position}"
        with open(target, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._note(f"{source_name}: {len(data)} bytes from position {position} cut: {why}")
        return target

    def _note(self, line: str) -> None:
        self.notes.append(line)
        with open(self.path / "NOTE.txt", "a", encoding="utf-8") as f:
            f.write(line + "\n")
