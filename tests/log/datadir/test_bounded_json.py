"""kafkalog.log.datadir.bounded_json and kafkalog.log.datadir.regular_file: the size, nesting and
file-type bounds every JSON or checkpoint file of a data directory is read within.

Expected values are the json module's own results on documents within the bounds; beyond them,
the typed errors naming the file (never RecursionError, never a hang on a FIFO)."""

from __future__ import annotations

import json
import os
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.log.datadir.bounded_json import json_depth, loads_bounded, read_json_file
from kafkalog.log.datadir.regular_file import (
    NotRegularFileError,
    irregular_reason,
    open_regular,
    require_regular_entries,
    require_regular_file,
)
from kafkalog.log.errors import CorruptCheckpointError

documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=20,
)


def nesting(value) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(documents, st.booleans())
def test_depth_and_parse_agree_with_the_json_module(doc, ascii_only) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only)
    assert json_depth(text) == nesting(doc)
    assert loads_bounded(text, path="f.json") == json.loads(text)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[[[[{{{{", "b": ['"]]]', "\\"]})
    assert json_depth(text) == 2


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_nesting_beyond_the_bound_is_refused_naming_the_file(opener) -> None:
    closer = "]" if opener == "[" else "}"
    deep = opener * 100_000 + "1" + closer * 100_000
    with pytest.raises(CorruptCheckpointError, match="nested 100000 deep") as info:
        loads_bounded(deep, path="topics.json")
    assert info.value.path == "topics.json"
    ok = opener * 64 + "1" + closer * 64
    assert json_depth(ok) == 64
    loads_bounded(ok, path="topics.json")
    with pytest.raises(CorruptCheckpointError, match="nested 65 deep"):
        loads_bounded(opener + ok + closer, path="topics.json")


def test_unterminated_strings_cost_one_pass() -> None:
    hostile = '["' + '\\"' * 2_000_000
    assert json_depth(hostile) == 1
    with pytest.raises(CorruptCheckpointError, match="not JSON"):
        loads_bounded(hostile, path="x.json")


def test_read_json_file_bounds_size(tmp_path) -> None:
    path = tmp_path / "kafkalog-topics.json"
    path.write_text('{"version": 1}')
    assert read_json_file(path) == {"version": 1}
    with pytest.raises(CorruptCheckpointError, match="larger than the 10 bytes") as info:
        read_json_file(path, max_bytes=10)
    assert info.value.path == str(path)
    path.write_bytes(b'{"a": \xff}')
    with pytest.raises(CorruptCheckpointError, match="not JSON"):
        read_json_file(path)


def test_non_regular_files_are_refused_unopened(tmp_path) -> None:
    fifo = tmp_path / "a.json"
    os.mkfifo(fifo)
    for read in (read_json_file, require_regular_file, open_regular):
        with pytest.raises(NotRegularFileError, match=r"not a regular file \(a FIFO\)") as info:
            read(fifo)
        assert info.value.filename == str(fifo)
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop.name)
    with pytest.raises(NotRegularFileError, match="symbolic link loop"):
        require_regular_file(loop)
    sock = tmp_path / "s.log"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        assert irregular_reason(sock) == "not a regular file (a socket)"
    dangling = tmp_path / "gone.log"
    dangling.symlink_to(tmp_path / "nowhere")
    assert irregular_reason(dangling) == "not a regular file (a dangling symbolic link)"
    assert irregular_reason(tmp_path) is None
    with pytest.raises(FileNotFoundError):
        require_regular_file(tmp_path / "missing.log")
    with pytest.raises(NotRegularFileError) as info:
        require_regular_entries(tmp_path)
    assert info.value.filename in {str(fifo), str(loop), str(sock), str(dangling)}


def test_clean_shutdown_marker_and_producer_snapshot_are_read_within_bounds(tmp_path) -> None:
    from kafkalog.log.datadir.clean_shutdown import read_clean_shutdown
    from kafkalog.log.producer.snapshot import CorruptSnapshotError, read_snapshot

    marker = tmp_path / ".kafka_cleanshutdown"
    marker.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptCheckpointError, match="nested 100000 deep") as raised:
        read_clean_shutdown(marker)
    assert str(marker) in str(raised.value)
    fifo = tmp_path / "00000000000000000012.snapshot"
    os.mkfifo(fifo)
    with pytest.raises(CorruptSnapshotError, match="not a regular file") as raised:
        read_snapshot(fifo)  # refused unopened: opening a FIFO would block
    assert str(fifo) in str(raised.value)


def test_segment_files_and_indexes_open_only_regular_files(tmp_path) -> None:
    from kafkalog.log.segment.file_records import FileRecords
    from kafkalog.log.segment.offset_index import OffsetIndex

    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with pytest.raises(NotRegularFileError, match="a FIFO") as raised:
            if name.endswith(".log"):
                FileRecords(fifo).read(0, 1)  # opened without blocking, then refused
            else:
                OffsetIndex(fifo, 0)
        assert raised.value.filename == str(fifo)
