"""Open-file limits: the limit is shared between segment files (a budget), fetch answers and
connections; max.connections fits what is left; accept failures log rarely; a locked data
directory is exit status 3."""

from __future__ import annotations

import asyncio
import errno
import logging
import subprocess
import sys

import pytest

from kafkalog.log.datadir.dir_lock import DataDirLock
from kafkalog.server.limits import (
    DESCRIPTOR_MARGIN,
    MAX_WINDOW_DESCRIPTORS,
    MIN_FILES_BUDGET,
    AcceptErrorLog,
    effective_max_connections,
    open_descriptors,
    plan_descriptors,
    raise_open_files_limit,
)

resource = pytest.importorskip("resource")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 512:
        pytest.skip(f"hard open-files limit {hard} leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        assert raise_open_files_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_open_descriptors_counts_a_new_one():
    before = open_descriptors()
    if before is None:
        pytest.skip("this system does not list a process's descriptors")
    with open(__file__, "rb"):
        assert open_descriptors() == before + 1


def test_max_connections_is_capped_to_the_descriptors_left_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, "kafkalog.server"):
        assert effective_max_connections(1000, 1024, 310) == 1024 - 310 - DESCRIPTOR_MARGIN
    assert len(caplog.records) == 1 and "1024" in caplog.records[0].getMessage()
    assert effective_max_connections(1000, 20000, 310) == 1000
    assert effective_max_connections(1000, None, None) == 1000


def test_too_few_descriptors_to_serve_is_a_clear_error_naming_the_limit():
    with pytest.raises(OSError, match="open-files limit is 300") as info:
        effective_max_connections(1000, 300, 290)
    assert info.value.errno == errno.EMFILE


def test_out_of_descriptor_accept_failures_are_logged_once_per_interval(caplog):
    now = [0.0]
    handler = AcceptErrorLog(interval=30, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    context = {"message": "socket.accept() out of system resource",
               "exception": OSError(errno.EMFILE, "Too many open files")}  # fmt: skip
    try:
        with caplog.at_level(logging.ERROR):
            for _ in range(1000):  # asyncio retries each second; a flood must not follow
                handler(loop, context)
                now[0] += 0.01
            now[0] += 30
            handler(loop, context)
            handler(loop, {"message": "something else", "exception": ValueError("boom")})
    finally:
        loop.close()
    ours = [r for r in caplog.records if r.name == "kafkalog.server"]
    assert len(ours) == 2 and handler.failures == 1001
    assert "999 more since the last report" in ours[1].getMessage()
    assert any("something else" in r.getMessage() for r in caplog.records if r not in ours)


def test_the_limit_is_shared_between_segment_files_fetch_answers_and_connections():
    plan = plan_descriptors(1024, 20)
    left = 1024 - 20 - DESCRIPTOR_MARGIN
    assert plan.windows == left // 8
    assert plan.files == (left - plan.windows) // 2
    connections = effective_max_connections(1000, 1024, 20, plan.files + plan.windows)
    assert connections == left - plan.files - plan.windows >= plan.files
    assert plan_descriptors(1_048_576, 20).windows == MAX_WINDOW_DESCRIPTORS
    assert plan_descriptors(1024, 20, files=100).files == 100
    assert plan_descriptors(100, 90).files == MIN_FILES_BUDGET
    assert plan_descriptors(None, None).files > 0


def test_the_startup_check_counts_the_budget_not_the_segments():
    # 30,000 segment files: only the budget's 400 count, whatever is open at the moment.
    assert effective_max_connections(1000, 1024, 30, reserved=400 + 100) == (
        1024 - 30 - 500 - DESCRIPTOR_MARGIN
    )
    with pytest.raises(OSError, match="reserved for segment files") as info:
        effective_max_connections(1000, 1024, 30, reserved=1000)
    assert info.value.errno == errno.EMFILE


def test_serving_a_locked_data_directory_exits_3_naming_the_lock_file(tmp_path):
    with DataDirLock(tmp_path):
        done = subprocess.run(
            [sys.executable, "-m", "kafkalog.cli.main", "serve", str(tmp_path), "--listen",
             "127.0.0.1:0"], capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert str(tmp_path / ".lock") in done.stderr
    assert "Traceback" not in done.stderr
