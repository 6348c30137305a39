"""What the tests of the operator commands share: data directories written through kafkalog's
LogManager from kafka-python's batches, running the command in-process or as the real console
script, hashing a tree, and decoding logs with kafka-python for expectations. The console script is
found and run by :mod:`console`, shared by every CLI test (``kafkalog_exe`` is re-exported)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path

from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpRecords
from kafka.record import MemoryRecordsBuilder as KpBuilder

from kafkalog.cli.main import main
from kafkalog.log.clock import MockClock
from kafkalog.log.datadir.manager import LogManager

from .console import kafkalog_exe as kafkalog_exe  # re-exported for the tests that start it
from .console import run_console

T0 = 1_700_000_000_000


def file_damage(*, max_zeros: int, junk: bool = False) -> st.SearchStrategy[tuple[str, int, int]]:
    """Damage to a file as (kind, at, value): a bit flipped, a cut, zeros (and junk) appended."""
    kinds = [
        st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
        st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
        st.tuples(st.just("zeros"), st.integers(1, max_zeros), st.just(0)),
    ]
    if junk:
        kinds.append(st.tuples(st.just("junk"), st.integers(1, 300), st.integers(0, 255)))
    return st.one_of(*kinds)


def damaged(data: bytes, how: tuple[str, int, int]) -> bytes:
    """``data`` with one :func:`file_damage` applied."""
    kind, at, value = how
    if kind == "flip":
        if not data:
            return data
        out = bytearray(data)
        out[at % len(out)] ^= 1 << value
        return bytes(out)
    if kind == "cut":
        return data[: at % (len(data) + 1)]
    if kind == "zeros":
        return data + bytes(at)
    return data + bytes([value]) * at


SMALL_SEGMENTS = {
    "internal.segment.bytes": "3000",
    "index.interval.bytes": "200",
    "message.timestamp.before.max.ms": str(1 << 50),
}


def run_script(*args: str | Path, status: int, env: dict | None = None):
    """The real console script in a subprocess (through the shared helper); asserts the exit
    status."""
    return run_console(*args, status=status, env=env)


def run_main(*args: str | Path, status: int) -> tuple[str, str]:
    """``kafkalog ARGS`` in-process; (stdout, stderr), asserting the exit status."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    assert code == status, (code, out.getvalue(), err.getvalue())
    return out.getvalue(), err.getvalue()


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def client_batch(keys: list[bytes], ts: int, **kw) -> bytes:
    """A magic-2 batch of one record per key, built by kafka-python (values name key and time)."""
    builder = KpBuilder(2, 0, 1 << 30, **kw)
    for i, key in enumerate(keys):
        assert builder.append(ts + i, key, b"%s@%d " % (key, ts + i) * 8, []) is not None
    builder.close()
    return bytes(builder.buffer())


def build(root: Path, topics: dict[str, tuple[int, dict]], batches: int = 30) -> Path:
    """Each topic's partitions get ``batches`` batches of 2 records, keys k0..k2 repeating,
    timestamps T0 + batch number; small segments; a clean shutdown."""
    with LogManager(root, writable=True, create=True, clock=MockClock(now_ms=T0)) as manager:
        logs = []
        for topic, (partitions, configs) in topics.items():
            logs += manager.create_topic(topic, partitions, {**SMALL_SEGMENTS, **configs})
        for j in range(batches):
            keys = [b"k%d" % ((2 * j) % 3), b"k%d" % ((2 * j + 1) % 3)]
            for log in logs:
                log.append_as_leader(client_batch(keys, T0 + j))
    return root


def copy(source: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(source, tmp_path / "data"))


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def kp_batches(log: Path) -> list:
    """kafka-python's view of every batch of a ``.log`` file, in order."""
    records = KpRecords(log.read_bytes())
    found = []
    while records.has_next():
        found.append(records.next_batch())
    return found


def kp_records(log: Path) -> list[tuple[int, bytes | None, int]]:
    """(offset, key, timestamp) of every record of a ``.log`` file, decoded by kafka-python."""
    return [(r.offset, r.key, r.timestamp) for b in kp_batches(log) for r in b]


def batch_positions(log: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of every entry, read with the log's framing alone."""
    import struct

    data, out, pos = log.read_bytes(), [], 0
    while pos + 12 <= len(data):
        base, size = struct.unpack_from(">qi", data, pos)
        if size <= 0:
            break
        out.append((pos, base, 12 + size))
        pos += 12 + size
    return out
