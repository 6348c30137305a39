"""``dump_lines``: kafka-dump-log's record lines from int64 columns, the same bytes and line ends
in both kernel twins, and the line a record gets from its fields written out here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .fastcheck import twin

_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_rows = st.lists(
    st.tuples(_I64, st.sampled_from([-1, 0, 1, 7]), _I64, _I64, _I64, _I64), max_size=40
)
_NAMES = {0: "CreateTime", 1: "LogAppendTime"}


def _run(name: str, rows: list[tuple]) -> tuple[bytes, list[int]]:
    columns = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(6)]
    ends = np.empty(len(rows) + 1, np.int64)
    return twin(name).dump_lines(*columns, ends), ends.tolist()


@given(rows=_rows)
@settings(max_examples=200, deadline=None)
def test_both_twins_write_kafka_dump_log_lines(rows):
    expected = [
        f"| offset: {o} {_NAMES.get(tt, 'NoTimestampType')}: {t} keySize: {k} valueSize: {v} "
        f"sequence: {q} headerKeys: []\n".encode()
        for o, tt, t, k, v, q in rows
    ]
    marks = [0]
    for line in expected:
        marks.append(marks[-1] + len(line))
    for name in ("pure", "compiled"):
        assert _run(name, rows) == (b"".join(expected), marks)


@pytest.mark.parametrize("name", ["pure", "compiled"])
def test_columns_of_other_lengths_are_refused(name):
    a, b = np.zeros(3, np.int64), np.zeros(2, np.int64)
    with pytest.raises(ValueError):
        twin(name).dump_lines(a, a, a, a, a, a, np.empty(3, np.int64))
    with pytest.raises(ValueError):
        twin(name).dump_lines(a, a, a, a, a, b, np.empty(4, np.int64))


_EDGES = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1009, 10**13 + 5, 10**18, -1, -9, -10,
          -99, -100, -101, (1 << 63) - 1, -(1 << 63)]  # fmt: skip


def test_every_digit_count_and_sign_is_written_in_full():
    rows = [(v, 0, v, v, v, v) for v in _EDGES]
    expected = b"".join(
        f"| offset: {v} CreateTime: {v} keySize: {v} valueSize: {v} sequence: {v} "
        f"headerKeys: []\n".encode()
        for v in _EDGES
    )
    for name in ("pure", "compiled"):
        assert _run(name, rows)[0] == expected
