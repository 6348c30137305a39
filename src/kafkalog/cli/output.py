"""How the commands write: compact JSON lines, counted nouns, times and paths in text.

Every ``--json`` of kafkalog writes one compact object per line (no spaces after separators,
non-ASCII as it is), the form ``kafkalog produce`` reads back; the text helpers keep tables and
summaries alike from one command to the next.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from .remote import is_url

__all__ = ["compact_json", "format_time", "plural", "relative", "write_json"]


def compact_json(value: object) -> str:
    """JSON text without spaces after separators: what every command prints for JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def write_json(obj: dict, out: TextIO | None = None) -> None:
    """One compact JSON object per line, on ``out`` (stdout when not given)."""
    (sys.stdout if out is None else out).write(compact_json(obj) + "\n")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_time(ms: int | None) -> str:
    """A timestamp for tables: ISO 8601 UTC to the second, ``-`` when there is none."""
    if ms is None or ms < 0:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def relative(path: str | os.PathLike, root: Path) -> str:
    """``path`` relative to the target directory when it is under it."""
    if is_url(root) or is_url(path):  # URLs: their text, never the local disk's paths
        path, root = str(path), str(root).rstrip("/")
        if path == root:
            return "."
        return path[len(root) + 1 :] if path.startswith(root + "/") else path
    rel = os.path.relpath(path, root)
    return str(path) if rel.startswith("..") else rel
