"""Time as the log layer sees it: Kafka's ``Time`` interface, injected so tests control it.

Segment rolling (segment.ms), retention (retention.ms) and LogAppendTime all read the clock; the
log layer never calls ``time`` directly, it takes a :class:`Clock`. :class:`SystemClock` is the
real one; :class:`MockClock` (Kafka's MockTime) only moves when told, or by ``auto_tick_ms`` on
every read, so time-based behaviour is deterministic in tests.

``milliseconds()`` is wall-clock time (epoch ms, may jump); ``nanoseconds()`` is a monotonic
counter for measuring durations (Java's System.nanoTime), not related to the epoch.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "MockClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What the log layer needs from time (Kafka's org.apache.kafka.common.utils.Time)."""

    def milliseconds(self) -> int:
        """Wall-clock time in ms since the epoch."""
        ...

    def nanoseconds(self) -> int:
        """A monotonic counter in ns, for durations only."""
        ...

    def hi_res_clock_ms(self) -> int:
        """``nanoseconds()`` in ms: a monotonic ms counter."""
        ...

    def sleep(self, ms: int) -> None:
        """Block for ``ms`` milliseconds (a mock clock just advances)."""
        ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def hi_res_clock_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def sleep(self, ms: int) -> None:
        if ms > 0:
            time.sleep(ms / 1000)

    def __repr__(self) -> str:
        return "SystemClock()"


class MockClock:
    """A clock that moves only when told (Kafka's MockTime).

    Starts at a fixed, realistic wall-clock time (``now_ms``) so tests are reproducible.
    ``auto_tick_ms`` advances time by that much on every ``milliseconds()``/``nanoseconds()`` read,
    for code that loops until time passes. ``sleep`` advances instead of blocking.
    """

    __slots__ = ("_auto_tick_ms", "_lock", "_ms", "_ns")

    DEFAULT_START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z

    def __init__(
        self, *, now_ms: int = DEFAULT_START_MS, now_ns: int | None = None, auto_tick_ms: int = 0
    ) -> None:
        if auto_tick_ms < 0:
            raise ValueError(f"auto_tick_ms must be >= 0, got {auto_tick_ms}")
        self._ms = now_ms
        self._ns = now_ms * 1_000_000 if now_ns is None else now_ns
        self._auto_tick_ms = auto_tick_ms
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        with self._lock:
            self._tick(self._auto_tick_ms)
            return self._ms

    def nanoseconds(self) -> int:
        with self._lock:
            self._tick(self._auto_tick_ms)
            return self._ns

    def hi_res_clock_ms(self) -> int:
        return self.nanoseconds() // 1_000_000

    def sleep(self, ms: int) -> None:
        self.advance(ms)

    def advance(self, ms: int) -> None:
        """Move both clocks forward by ``ms`` (>= 0)."""
        if ms < 0:
            raise ValueError(f"cannot move a clock backwards by {ms} ms; use set_milliseconds")
        with self._lock:
            self._tick(ms)

    def set_milliseconds(self, now_ms: int) -> None:
        """Set wall-clock time (it may go backwards, as a real wall clock can); the monotonic
        counter moves forward by the difference only when that difference is positive."""
        with self._lock:
            if now_ms > self._ms:
                self._ns += (now_ms - self._ms) * 1_000_000
            self._ms = now_ms

    def _tick(self, ms: int) -> None:
        self._ms += ms
        self._ns += ms * 1_000_000

    def __repr__(self) -> str:
        return f"MockClock(now_ms={self._ms}, auto_tick_ms={self._auto_tick_ms})"
