"""Keyed deadlines for the coordinators' timeouts, driven by an injected clock.

Kafka's coordinators keep one timer per concern (a member's session, a group's join or sync
phase, a transaction's timeout) and rescheduling a key replaces its timer. Here the timers are
plain data: :meth:`Scheduler.due` hands back what expired at a given time, so tests drive them
with a mock clock and no sleeping, and the server runs them from one background task.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Hashable

__all__ = ["Scheduler"]

Callback = Callable[[], Awaitable[None]]


class Scheduler:
    """Callbacks by key, each with a deadline in clock milliseconds."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, tuple[int, int, Callback]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callback) -> None:
        """Run ``callback`` at ``deadline_ms``, replacing any timer of the same key."""
        self._seq += 1
        self._tasks[key] = (deadline_ms, self._seq, callback)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._tasks.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._tasks

    def next_deadline(self) -> int | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            task = self._tasks.get(key)
            if task is not None and task[1] == seq:
                return deadline
            heapq.heappop(self._heap)  # replaced or cancelled
        return None

    def due(self, now_ms: int) -> list[Callback]:
        """Remove and return, in deadline order, the callbacks whose deadline has passed."""
        out: list[Callback] = []
        while (deadline := self.next_deadline()) is not None and deadline <= now_ms:
            _, _, key = heapq.heappop(self._heap)
            out.append(self._tasks.pop(key)[2])
        return out
