"""Every Python example of docs/arrow.md runs, on a data directory written for it (the test
extra installs pandas, Polars and DuckDB; on a machine without them, their examples skip)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from arrow_data import write_topics

DOC = Path(__file__).resolve().parents[2] / "docs" / "arrow.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
OPTIONAL = ("pandas", "polars", "duckdb")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs") / "data"
    write_topics(root, {"orders": 2, "users": 1}, 12)
    return root


def test_the_doc_has_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_example_runs(n, data_dir, tmp_path, monkeypatch, capsys):
    code = BLOCKS[n].replace("/var/lib/kafka/data", str(data_dir))
    needs = [m for m in OPTIONAL if re.search(rf"\b{m}\b|to_{m}\(", code)]
    for module in needs:
        pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{DOC.name} example {n + 1}", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().err == ""
