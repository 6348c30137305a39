"""Reader agreement, ``kafkalog serve``: a few damaged copies served and fetched (slow).

The server starts on a damaged copy (it may recover the log at start, as Kafka does after an
unclean shutdown: a torn tail is cut) and kafka-python's KafkaConsumer fetches the partition from
offset 0. Expected: on a clean log every data record, on a torn tail exactly the valid prefix; on
damage the records served are a prefix of the valid prefix, and the server either stops there or
refuses the partition cleanly (a Kafka error to the client, or a start that fails with a message),
never a crash (the process still runs after the fetches), a traceback or a hang.
"""

from __future__ import annotations

import shutil

import pytest

from .contract import _diff, _is_prefix
from .damage import SOURCES, grid
from .expected import expected_for
from .readers import read_served

pytestmark = pytest.mark.slow

PICKS = [
    ("truncate:", "middle)"),
    ("zero-tail:", "+ 4096 zero bytes"),
    ("flip:00000000000000000000.log", "(crc of"),
    ("delete:", ""),
    ("index:00000000000000000000.index", "garbage"),
    ("size:00000000000000000000.log", "size field = -1"),
]
SOURCE = next(s for s in SOURCES if s.name == "v2-none-3seg")


@pytest.fixture(scope="module")
def source_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-source") / "data"
    SOURCE.build(root)
    return root


@pytest.mark.parametrize("pick", PICKS, ids=lambda p: f"{p[0]}{p[1]}".replace(" ", "_"))
def test_served_fetch_agrees(pick, source_root, tmp_path):
    prefix, sub = pick
    damage = next(
        d for d in grid(source_root / SOURCE.dirname) if d.name.startswith(prefix) and sub in d.name
    )
    copy = tmp_path / "data"
    shutil.copytree(source_root, copy, symlinks=True)
    part = copy / SOURCE.dirname
    damage.apply(part)
    exp = expected_for(part)
    want = exp.data_records
    out, log, alive = read_served(copy, SOURCE.topic, SOURCE.partition, want=len(want) + 50)
    got = out.records or []
    problems = []
    if out.timed_out:
        problems.append("the fetch hung (no end within 60 s)")
    if out.traceback:
        problems.append("a Python traceback in the server's log")
    started = not (out.error or "").startswith("server did not start")
    if started and not alive:
        problems.append("the server process died during the fetches")
    if exp.kind in ("clean", "torn-tail"):
        if not started:
            problems.append("the server did not start on a log Kafka would open")
        elif d := _diff(got, want):
            problems.append(f"records: {d}")
    elif not _is_prefix(got, want):
        problems.append(
            f"served records that are not a prefix of the valid prefix: "
            f"{_diff(got[: len(want)], want[: len(got)]) or len(got) - len(want)}"
            " past it"
        )
    if problems:
        pytest.fail(
            f"[serve] on {SOURCE.name} damaged by {damage.name}\n"
            f"  expected: {exp.describe()}\n  problems: {'; '.join(problems)}\n"
            f"  got: {out.summary()}\n  server log (tail): {log[-1500:]}",
            pytrace=False,
        )
