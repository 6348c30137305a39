"""Reader agreement, Spark's ``format("kafkalog")``: a small sample of damaged copies (slow).

The same contract as test_agreement.py (contract.py), for Spark: read all rows of the topic, with
``failOnDataLoss`` true (the default) and false. What can be seen from the driver is checked:
rows, success or failure, and the error's text (file name and position). Executors' Python
warnings do not reach the driver, so the opt-out's warning is not checked here, and a Spark error
carries the Python worker's traceback by design, so tracebacks are not counted against it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spark.conftest import spark  # the suite's one SparkSession

from .contract import (
    _check_opt_out_records,
    _diff,
    _earlier,
    _is_prefix,
    _span,
    names_position,
)
from .damage import SOURCES, Damage, grid
from .expected import Expected, expected_for
from .readers import Outcome, read_spark

pytestmark = pytest.mark.slow

__all__ = ["spark"]

PICKS = {
    "v2-none-3seg": [
        ("truncate:", "middle)"),
        ("zero-tail:", "+ 4096 zero bytes"),
        ("flip:00000000000000000000.log", "(crc of"),
        ("flip-crc:00000000000000000000.log", "records middle"),
        ("size:00000000000000000000.log", "size field = -1"),
        ("delete:", ""),
        ("append:", "duplicate of its last batch"),
        ("index:00000000000000000000.index", "garbage"),
        ("file:", "removed (middle"),
        ("file:", "symlink loop"),
    ],
    "legacy-v0v1": [("flip-crc:00000000000000000000.log", "middle"), ("truncate-middle:", "")],
}


def _cases() -> list[tuple[str, str, str]]:
    return [(src, pre, sub) for src, picks in PICKS.items() for pre, sub in picks]


def check_spark(exp: Expected, out: Outcome, opt_out: bool) -> list[str]:
    if out.timed_out:
        return ["timed out (jobs cancelled after 180 s)"]
    want = exp.data_records
    got = out.records or []
    text = out.error or ""
    problems = []
    if exp.kind == "undetermined":
        return problems
    if exp.kind == "damage" and opt_out and exp.unreadable and not out.ok:
        # a file that cannot be read is no data loss to skip: the opt-out may refuse it too
        return [] if exp.file in text else [f"the error does not name {exp.file}: {text[:300]}"]
    if exp.kind == "clean" or exp.kind == "torn-tail" or opt_out:
        if not out.ok:
            problems.append(f"did not succeed: {text[:400]}")
        elif exp.kind == "damage":
            problems += _check_opt_out_records(got, want, exp, _DATA_ONLY)
        elif d := _diff(got, want):
            problems.append(f"rows: {d}")
        return problems
    if out.ok:
        problems.append(f"succeeded on damage (expected an error); rows: {_diff(got, want)}")
    else:
        if exp.file not in text:
            problems.append(f"the error does not name {exp.file}: {text[:300]}")
        elif not exp.unreadable and not names_position(text, exp.position, exp.end, _earlier(exp)):
            problems.append(f"the error does not name position {_span(exp)}")
    if not _is_prefix(got, want):
        problems.append("rows that are not a prefix of the valid prefix")
    return problems


class _DataOnly:
    control = False


_DATA_ONLY = _DataOnly()


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    built = {}
    for s in SOURCES:
        if s.name in PICKS:
            root = tmp_path_factory.mktemp("spark-source") / "data"
            s.build(root)
            built[s.name] = (s, root)
    return built


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0]}-{c[1]}{c[2]}".replace(" ", "_"))
def test_spark_agrees(case, spark, sources, tmp_path):
    src_name, prefix, sub = case
    source, root = sources[src_name]
    damages = [
        d for d in grid(root / source.dirname) if d.name.startswith(prefix) and sub in d.name
    ]
    assert damages, f"no damage {prefix}...{sub} for {src_name}"
    damage: Damage = damages[0]
    copy = tmp_path / "data"
    shutil.copytree(root, copy, symlinks=True)
    part: Path = copy / source.dirname
    damage.apply(part)
    exp = expected_for(part)
    failures = []
    for opt_out in (False, True):
        out = read_spark(spark, copy, source.topic, opt_out=opt_out)
        problems = check_spark(exp, out, opt_out)
        if problems:
            failures.append(
                f"[{out.reader}] on {src_name} damaged by {damage.name}\n"
                f"  expected: {exp.describe()}\n  problems: {'; '.join(problems)}\n"
                f"  got: {out.summary()}\n  command: {out.argv[0]}"
            )
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
