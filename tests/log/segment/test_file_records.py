"""FileRecords: bounded chunked reads, searches, appends and zero-copy sends over real files.

Expected values come from kafka-python's decoder over the same bytes.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalog.errors import CorruptRecordError
from kafkalog.log.segment.file_records import FileRecords


def batch(base_offset: int, n: int, ts0: int, codec: int = 0, value_size: int = 50) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i in range(n):
        b.append(
            i,
            timestamp=ts0 + i,
            key=b"k%d" % i,
            value=bytes([65 + i % 26]) * value_size,
            headers=[],
        )
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def segment(n_batches: int = 40) -> bytes:
    out, offset = bytearray(), 0
    for i in range(n_batches):
        n = 1 + i % 5
        out += batch(offset, n, 1_000 + offset * 10, codec=i % 2)
        offset += n
    return bytes(out)


def kafka_python_batches(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) per batch, decoded by kafka-python."""
    out, pos = [], 0
    records = KpMemoryRecords(data)
    while records.has_next():
        b = records.next_batch()
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, size, b.base_offset, b.last_offset))
        pos += size
    return out


@pytest.fixture
def log_file(tmp_path: Path) -> tuple[Path, bytes]:
    data = segment()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path, data


@settings(max_examples=30, deadline=None)
@given(chunk=st.integers(min_value=18, max_value=5000), tail=st.integers(0, 60))
def test_chunked_reads_see_every_batch_whatever_the_chunk_size(
    tmp_path_factory, chunk: int, tail: int
) -> None:
    data = segment()
    path = tmp_path_factory.mktemp("fr") / "00000000000000000000.log"
    path.write_bytes(data + data[:tail])  # a partial tail must end iteration quietly
    with FileRecords(path) as records:
        got = [
            (b.position, b.size_in_bytes, b.base_offset, b.last_offset)
            for b in records.batches(chunk_size=chunk)
        ]
    assert got == kafka_python_batches(data)


def test_search_for_offset_matches_a_linear_scan(log_file) -> None:
    path, data = log_file
    expected = kafka_python_batches(data)
    with FileRecords(path) as records:
        for target in range(expected[-1][3] + 2):
            found = records.search_for_offset_with_size(target, 0)
            want = next(((p, s, last) for p, s, _, last in expected if last >= target), None)
            if want is None:
                assert found is None
            else:
                assert (found.position, found.size, found.offset) == want


def test_search_for_timestamp_finds_first_record_at_or_after(log_file) -> None:
    path, data = log_file
    records_kp = []
    kp = KpMemoryRecords(data)
    while kp.has_next():
        records_kp.extend((r.timestamp, r.offset) for r in kp.next_batch())
    with FileRecords(path) as records:
        for target in (0, 1_000, 1_005, 1_333, records_kp[-1][0], records_kp[-1][0] + 1):
            found = records.search_for_timestamp(target, 0, 0)
            want = next(((ts, o) for ts, o in records_kp if ts >= target), None)
            assert (None if found is None else (found.timestamp, found.offset)) == want


def test_corrupt_header_names_file_and_position(log_file) -> None:
    path, data = log_file
    first = kafka_python_batches(data)[0][1]
    broken = bytearray(data)
    struct.pack_into(">i", broken, first + 8, 3)
    path.write_bytes(bytes(broken))
    with FileRecords(path) as records, pytest.raises(CorruptRecordError) as info:
        list(records.batches())
    assert info.value.position == first and info.value.path == str(path)


def test_read_only_by_default(log_file) -> None:
    path, _ = log_file
    before = path.read_bytes()
    with FileRecords(path) as records:
        with pytest.raises(PermissionError):
            records.append(b"x")
        with pytest.raises(PermissionError):
            records.truncate_to(0)
    assert path.read_bytes() == before


def test_append_flush_truncate(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    one, two = batch(0, 3, 10), batch(3, 2, 20)
    with FileRecords(path, writable=True, create=True) as records:
        assert records.append(one) == len(one)
        records.append(two)
        records.flush()
        assert records.size_in_bytes() == len(one) + len(two)
        assert records.truncate_to(len(one)) == len(two)
        assert [b.last_offset for b in records] == [2]
    assert path.read_bytes() == one


def test_slice_is_a_window(log_file) -> None:
    path, data = log_file
    expected = kafka_python_batches(data)
    with FileRecords(path) as records:
        pos, size = expected[3][0], expected[3][1] + expected[4][1]
        window = records.slice(pos, size)
        assert [b.position for b in window] == [expected[3][0], expected[4][0]]
        assert window.read(pos, size) == data[pos : pos + size]


def test_send_to_uses_sendfile(log_file) -> None:
    path, data = log_file
    left, right = socket.socketpair()
    try:
        with FileRecords(path) as records:
            sent = records.send_to(left.fileno(), 100, 500)
        assert sent == 500
        got = b""
        while len(got) < 500:
            got += right.recv(500 - len(got))
        assert got == data[100:600]
    finally:
        left.close()
        right.close()


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        FileRecords(tmp_path / "nope.log")
    assert not os.path.exists(tmp_path / "nope.log")


# -- the descriptor budget (kafkalog.log.segment.file_cache)
# ----------------------------------------------


def _files(tmp_path: Path, n: int, cache) -> list[FileRecords]:
    out = []
    for i in range(n):
        records = FileRecords(tmp_path / f"{i:020d}.log", writable=True, create=True,
                              file_cache=cache)  # fmt: skip
        records.append(f"file {i}".encode())
        out.append(records)
    return out


def test_files_beyond_the_budget_are_closed_and_reopened_transparently(tmp_path: Path) -> None:
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    files = _files(tmp_path, 50, cache)
    assert cache.open_count <= 8 and cache.evictions >= 42
    for _ in range(3):  # every file still reads, appends and flushes: reopened by path
        for i, records in enumerate(files):
            assert records.read(0, 100).startswith(f"file {i}".encode())
            records.append(b"!")
            records.flush()
            assert cache.open_count <= 8
    assert all(r.file_size() == len(f"file {i}!!!") for i, r in enumerate(files))
    for records in files:
        records.close()
    assert cache.open_count == 0


def test_a_renamed_file_reopens_under_its_new_name(tmp_path: Path) -> None:
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    first, *others = _files(tmp_path, 20, cache)
    first.rename_to(tmp_path / "renamed.log.deleted")
    for records in others:  # evicts the renamed one
        records.read(0, 1)
    assert not first._file.is_open
    assert first.read(0, 6) == b"file 0"
    assert first.path.endswith("renamed.log.deleted")


def test_a_deleted_file_is_not_recreated_by_a_reopen(tmp_path: Path) -> None:
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    first, *others = _files(tmp_path, 20, cache)
    os.unlink(first.path)
    for records in others:
        records.read(0, 1)
    with pytest.raises(FileNotFoundError):
        first.read(0, 1)
    assert not os.path.exists(first.path)


def test_a_descriptor_in_use_is_never_closed_nor_reused_under_its_reader(tmp_path: Path) -> None:
    """A window being read (or sent) pins its descriptor: eviction skips it, and closing the
    file defers the close to the last release, so the number cannot name another file."""
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    files = _files(tmp_path, 8, cache)
    window = files[0].slice(0, 6)
    with window.pinned_fd() as fd:
        for records in _files(tmp_path, 30, cache)[8:]:  # far over the budget
            records.read(0, 1)
        assert os.pread(fd, 6, 0) == b"file 0"  # still open, still this file
        files[0].close()  # the segment closed while its window is being sent
        for records in files[1:]:
            records.close()
        reused = os.open(tmp_path / f"{29:020d}.log", os.O_RDONLY)
        try:
            assert reused != fd  # the pinned number was not given to another file
            assert os.pread(fd, 6, 0) == b"file 0"
        finally:
            os.close(reused)
    with pytest.raises(OSError):
        os.fstat(fd)  # released: closed now


def test_a_detached_window_owns_a_descriptor_outside_the_budget(tmp_path: Path) -> None:
    from kafkalog.log.segment.file_cache import FileCache

    cache = FileCache(8)
    files = _files(tmp_path, 8, cache)
    released = []
    window = files[0].slice(0, 6).detach(on_close=lambda: released.append(True))
    files[0].close()
    os.unlink(files[0].path)  # deleted: the detached window keeps the inode
    for records in _files(tmp_path, 30, cache)[8:]:
        records.read(0, 1)
    assert window.read(0, 6) == b"file 0"
    assert os.pread(window.fd, 6, 0) == b"file 0"  # a stable descriptor, for sendfile
    window.close()
    window.close()
    assert released == [True]
