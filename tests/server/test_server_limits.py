"""Open-file limits: max.connections fits the descriptors left, accept failures log rarely."""

from __future__ import annotations

import asyncio
import errno
import logging

import pytest

from kafkalog.server.limits import (
    DESCRIPTOR_MARGIN,
    AcceptErrorLog,
    effective_max_connections,
    open_descriptors,
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
