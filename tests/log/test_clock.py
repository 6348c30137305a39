"""Clocks: the real one moves by itself, the mock one only when told (Kafka's Time / MockTime)."""

from __future__ import annotations

import time

import pytest

from kafkalog.log.clock import Clock, MockClock, SystemClock


def test_both_clocks_satisfy_the_protocol():
    assert isinstance(SystemClock(), Clock)
    assert isinstance(MockClock(), Clock)


def test_system_clock_reads_wall_time_and_a_monotonic_counter():
    clock = SystemClock()
    assert abs(clock.milliseconds() - time.time() * 1000) < 5_000
    before = clock.nanoseconds()
    clock.sleep(1)
    assert clock.nanoseconds() > before
    assert clock.hi_res_clock_ms() == pytest.approx(time.monotonic_ns() // 1_000_000, abs=5_000)


def test_mock_clock_moves_only_when_told():
    clock = MockClock(now_ms=1_000)
    assert (clock.milliseconds(), clock.nanoseconds()) == (1_000, 1_000_000_000)
    clock.sleep(250)
    assert (clock.milliseconds(), clock.hi_res_clock_ms()) == (1_250, 1_250)
    clock.advance(0)
    assert clock.milliseconds() == 1_250
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_mock_clock_defaults_to_a_fixed_start():
    assert MockClock().milliseconds() == MockClock.DEFAULT_START_MS


def test_mock_clock_auto_ticks_on_every_read():
    clock = MockClock(now_ms=0, auto_tick_ms=10)
    assert [clock.milliseconds() for _ in range(3)] == [10, 20, 30]


def test_setting_wall_time_backwards_keeps_the_monotonic_counter():
    clock = MockClock(now_ms=5_000)
    clock.set_milliseconds(1_000)
    assert clock.milliseconds() == 1_000 and clock.nanoseconds() == 5_000_000_000
    clock.set_milliseconds(2_000)
    assert clock.nanoseconds() == 6_000_000_000
