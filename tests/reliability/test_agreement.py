"""Reader agreement on damaged data: every reader of a data directory against one contract.

Each case copies a source partition (kafkalog-written: codecs none/gzip/snappy/lz4/zstd, magic 0
and 1 message sets, headers, transactions, several segments; and real brokers' partitions from
../shared/fixtures/kafka-data), damages the copy (damage.py), computes the valid prefix with
kafka-python alone (expected.py) and runs every reader on it (readers.py): ``kafkalog consume``,
``export`` (each also with ``--no-fail-on-data-loss``), ``kafkalog.arrow.open_data_dir`` (also
with ``fail_on_data_loss=False``), ``dump --deep-iteration`` (text and ``--json``, per ``.log``),
``verify`` and ``stats``, in-process with a timeout. The contract is in contract.py. A failure
names the reader, the source, the damage, what was expected and what happened.

The CI grid runs a deterministic sample of the enumerated damages: about 1600 damaged copies, each
read by 10 readers (dump once per ``.log``), about 19,000 reader runs in under two minutes on two
cores. More by hand::

    KAFKALOG_HARNESS_CASES=50000 .venv/bin/pytest tests/reliability/test_agreement.py -q -x

runs every enumerated damage of every source and fills the rest with seeded random damages
(KAFKALOG_HARNESS_SEED, default 0, changes the draw); KAFKALOG_HARNESS_REPORT=FILE appends each
failure as a JSON line, and ``.venv/bin/python -m reliability.report FILE`` (from tests/) groups
them into classes (reader, problem, damage kind) with one example each. One case by hand, its
damaged copy kept for the printed commands (see case.py)::

    cd tests; D='flip-crc:00000000000000000000.log byte 876 ^0x10'
    ../.venv/bin/python -m reliability.case v2-none "$D" 'consume --no-fail-on-data-loss'
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shared_fixtures import PRESENT, REASON

from .contract import Failure, run_case
from .damage import (
    OPS,
    SOURCES,
    Damage,
    Source,
    _truncate,
    grid,
    layout,
    ops_damage,
    random_damages,
)
from .readers import READERS

CASES = int(os.environ.get("KAFKALOG_HARNESS_CASES", "2000"))
SEED = int(os.environ.get("KAFKALOG_HARNESS_SEED", "0"))
REPORT = os.environ.get("KAFKALOG_HARNESS_REPORT")
FAMILIES = [
    "truncate",
    "truncate-middle",
    "flip",
    "flip-crc",
    "zero",
    "zero-tail",
    "size",
    "count",
    "codec",
    "attr",
    "record-offset",
    "offset",
    "append",
    "delete",
    "index",
    "file",
    "random",
]
PER_ITEM = max(1, math.ceil(CASES / (len(SOURCES) * len(FAMILIES))))
# batches sampled per segment by the enumerated grid: a few in CI, every one for big runs by hand
BUDGET = 8 if CASES < 10_000 else 1 << 30


def _skip_absent(source: Source) -> None:
    if source.real and not PRESENT:
        pytest.skip(REASON)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each source's data directory, built once per module."""
    cache: dict[str, Path] = {}

    def get(source: Source) -> Path:
        if source.name not in cache:
            root = tmp_path_factory.mktemp("source") / "data"
            source.build(root)
            cache[source.name] = root
        return cache[source.name]

    return get


def _sample(items: list, k: int) -> list:
    if len(items) <= k:
        return items
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def _report(failures: list[Failure]) -> None:
    if not REPORT:
        return
    with open(REPORT, "a") as f:
        for x in failures:
            f.write(json.dumps(x.__dict__) + "\n")


def _assert_none(failures: list[Failure], cases: int) -> None:
    _report(failures)
    if not failures:
        return
    by_reader: dict[str, int] = {}
    for x in failures:
        by_reader[x.reader] = by_reader.get(x.reader, 0) + 1
    shown = {}
    for x in failures:  # one example per reader first
        shown.setdefault(x.reader, x)
    text = "\n\n".join(str(x) for x in shown.values())
    pytest.fail(
        f"{len(failures)} reader disagreements over {cases} damaged copies "
        f"(per reader: {by_reader}); one example per reader:\n\n{text}",
        pytrace=False,
    )


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_readers_agree(source: Source, family: str, built, tmp_path):
    _skip_absent(source)
    root = built(source)
    part = root / source.dirname
    if family == "random":
        damages = random_damages(part, SEED * 1_000_003 + SOURCES.index(source), PER_ITEM)
    else:
        damages = [d for d in grid(part, budget=BUDGET) if d.family == family]
        damages = _sample(damages, PER_ITEM)
    failures: list[Failure] = []
    for damage in damages:
        failures += run_case(source, root, damage, tmp_path)
    _assert_none(failures, len(damages))


HYPOTHESIS_EXAMPLES = int(os.environ.get("KAFKALOG_HARNESS_HYPOTHESIS", "30"))
HYPOTHESIS_SOURCES = [s for s in SOURCES if not s.real]
_op = st.tuples(
    st.sampled_from(OPS),
    st.integers(0, 1 << 16),
    st.integers(0, 1 << 30),
    st.integers(0, (1 << 32) - 1),
)


@settings(
    max_examples=HYPOTHESIS_EXAMPLES,
    derandomize=os.environ.get("KAFKALOG_HARNESS_SEED") is None,
    deadline=None,
    database=None,
    # shrinking reruns every reader per step: only when asked (KAFKALOG_HARNESS_SHRINK=1)
    phases=[Phase.explicit, Phase.generate]
    + ([Phase.shrink] if os.environ.get("KAFKALOG_HARNESS_SHRINK") == "1" else []),
    suppress_health_check=list(HealthCheck),
)
@given(source=st.sampled_from(HYPOTHESIS_SOURCES), ops=st.lists(_op, min_size=1, max_size=3))
def test_readers_agree_on_drawn_damage(source, ops, built, tmp_path_factory):
    """Hypothesis draws the damage (derandomized in CI; KAFKALOG_HARNESS_SEED set: random)."""
    root = built(source)
    damage = ops_damage(root / source.dirname, ops, f"drawn:{ops}")
    if damage is None:
        return
    work = tmp_path_factory.mktemp("drawn")
    _assert_none(run_case(source, root, damage, work), 1)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_readers_agree_on_undamaged_source(source: Source, built, tmp_path):
    _skip_absent(source)
    _assert_none(run_case(source, built(source), None, tmp_path), 1)


# ---------------------------------------------------------------------------------------------
# the issue's reproducers, for consume, export and open_data_dir

RECORD_READERS = [r for r in READERS if r.kind == "records" and not r.opt_out]


def _build_big(root: Path) -> None:
    from .damage import _produce

    lines = [{"key": f"k{i}", "value": "x" * 5000} for i in range(20)]
    _produce(root, "t", lines, "--batch-size", "1")


def _build_gzip(root: Path) -> None:
    from .damage import _lines, _produce

    _produce(
        root,
        "t",
        _lines(30, value_size=200),
        "--codec",
        "gzip",
        "--batch-size",
        "2000",
        "--config",
        "index.interval.bytes=100",
    )


BIG = Source("reproducer-20x5000", "t", 0, _build_big)
GZIP = Source("reproducer-gzip", "t", 0, _build_gzip)


def _log(part: Path) -> str:
    return layout(part)[-1][0]


def _reproducers() -> list[tuple[Source, str, object]]:
    import struct

    def torn(part: Path) -> None:  # truncate -s -100
        path = part / "00000000000000000000.log"
        os.truncate(path, path.stat().st_size - 100)

    def garbage_index(part: Path) -> None:
        (part / "00000000000000000000.index").write_bytes(bytes(range(7, 7 + 64)))

    def decreasing_index(part: Path) -> None:
        (part / "00000000000000000000.index").write_bytes(
            b"".join(struct.pack(">ii", o, p) for o, p in [(15, 5073 * 3), (9, 5073), (2, 0)])
        )

    def zero_tail(part: Path) -> None:
        with open(part / "00000000000000000000.log", "ab") as f:
            f.write(bytes(8192))

    def cut_compressed(part: Path) -> None:  # the last gzip batch cut inside its payload
        ents = layout(part)[-1][1]
        e = ents[-1]
        _truncate(_log(part), e.position + e.size - 7)(part)

    def deleted_batch(part: Path) -> None:
        ents = layout(part)[-1][1]
        e = ents[len(ents) // 2]
        path = part / _log(part)
        data = path.read_bytes()
        path.write_bytes(data[: e.position] + data[e.position + e.size :])

    def duplicate_batch(part: Path) -> None:
        e = layout(part)[-1][1][-1]
        path = part / _log(part)
        data = path.read_bytes()
        path.write_bytes(data + data[e.position : e.position + e.size])

    return [
        (BIG, "torn tail (truncate -s -100)", torn),
        (BIG, "garbage .index", garbage_index),
        (BIG, "decreasing .index", decreasing_index),
        (BIG, "zero-filled tail", zero_tail),
        (GZIP, "cut compressed payload", cut_compressed),
        (BIG, "deleted batch", deleted_batch),
        (BIG, "duplicate batch at the end", duplicate_batch),
    ]


@pytest.mark.parametrize("reader", RECORD_READERS, ids=lambda r: r.name)
@pytest.mark.parametrize("case", _reproducers(), ids=lambda c: c[1].replace(" ", "-"))
def test_issue_reproducer(case, reader, built, tmp_path):
    source, what, apply = case
    failures = run_case(
        source, built(source), Damage(f"reproducer:{what}", apply), tmp_path, [reader]
    )
    _assert_none(failures, 1)


# ---------------------------------------------------------------------------------------------
# the real console script: a few cases end to end, each under a timeout


@pytest.mark.parametrize(
    "case", _reproducers()[:1] + _reproducers()[3:5], ids=lambda c: c[1].replace(" ", "-")
)
def test_console_script_agrees(case, built, tmp_path):
    source, what, apply = case
    readers = [r for r in READERS if not r.api and r.name != "dump --json"]
    failures = run_case(
        source,
        built(source),
        Damage(f"reproducer:{what}", apply),
        tmp_path,
        readers,
        subprocess_=True,
    )
    _assert_none(failures, 1)


def test_console_script_does_not_hang_on_a_fifo(tmp_path):
    """A FIFO named like a segment: every reader ends (error or not) within its timeout."""
    data = tmp_path / "data"
    _build_big(data)
    os.mkfifo(data / "t-0" / "00000000000000000020.log")
    exe = str(Path(sys.executable).with_name("kafkalog"))
    for argv in (
        ["consume", str(data), "--topic", "t", "--quiet"],
        ["export", str(data), "--topic", "t", "--to", "jsonl", "-", "--quiet"],
        ["verify", str(data)],
        ["stats", str(data)],
        ["dump", str(data / "t-0" / "00000000000000000020.log")],
    ):
        try:
            proc = subprocess.run([exe, *argv], capture_output=True, timeout=30, check=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"kafkalog {' '.join(argv)} hung on a FIFO named like a segment")
        assert b"Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])
    shutil.rmtree(data)
