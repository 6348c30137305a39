"""Retention while serving: Kafka's ``kafka-log-retention`` task and its segment deletion delay.

Every ``log.retention.check.interval.ms`` (300000, Kafka's default; the first pass after
``log.initial.task.delay.ms``, 30000), each partition's old segments are deleted by
:meth:`kafkalog.log.partition.log.Log.delete_old_segments`, the code ``kafkalog retention --apply``
runs (Kafka's UnifiedLog.deleteOldSegments): segments below the log start offset, and for
``cleanup.policy`` with ``delete``, segments whose newest record is older than retention.ms and the
oldest while the log stays over retention.bytes without them; never an empty active segment (a
non-empty one after rolling a new one). As Kafka's LogManager.cleanupLogs, the pass covers the logs
that are not compacted; Kafka's log cleaner thread runs the same deletion for compacted ones
(``compact,delete``, and the log start offset of ``compact``) after each cleaning attempt, so with
``log.cleaner.enable`` (true, Kafka's default) the pass covers those too, but not the one being
cleaned at that moment (:mod:`.log_cleaner`), and with it false they are left alone, as by Kafka.
The cleaner's replaced segments wait for their delay here too (:meth:`LogRetention.delete_later`).

Deleted segments are renamed ``.deleted`` at once and removed ``file.delete.delay.ms`` later
(the topic's config, 60000 by default; Kafka's LocalLog.deleteSegmentFiles with asyncDelete), by a
worker thread. Stopping the server removes the ones still waiting (Kafka drops the delayed task
and its loader removes ``.deleted`` files on the next start: so does kafkalog's loader, after a
crash). When a log start offset moved, the ``log-start-offset-checkpoint`` is written at the end
of the pass (Kafka writes it every log.flush.start.offset.checkpoint.interval.ms).

Where the work runs. The server serializes everything that touches a log (appends, reads,
DeleteRecords, topic deletion) by running it on the event loop's thread: that thread is the
partitions' lock, and a Fetch builds its answer's windows with no await between reading the log
and taking its own descriptors (``Broker.own_window``). So each partition's deletion, which only
decides, renames and updates the log's bookkeeping (cheap), runs on the loop, one partition at a
time with the loop free between partitions; the slow part, removing the files, runs on worker
threads after the delay. A Fetch answer being sent while its segment is renamed and removed keeps
sending from its own descriptor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..log.datadir import TopicPartition
from ..log.segment import LogSegment
from .config import ServerConfig, broker_settings, parse_bool

__all__ = ["LogRetention", "RetentionSettings"]

log = logging.getLogger("kafkalog.server")

# Partitions handled before the loop gets a turn (each is a few comparisons unless it deletes).
PARTITIONS_PER_TURN = 64


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """The broker configs of the retention task, by Kafka's names in ``ServerConfig.extra``."""

    check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    initial_delay_ms: int = 30_000  # log.initial.task.delay.ms
    cleaner_enable: bool = True  # log.cleaner.enable

    # Kafka name, field, parser, minimum (see config.broker_settings).
    SETTINGS: ClassVar[tuple] = (
        ("log.retention.check.interval.ms", "check_interval_ms", int, 1),
        ("log.initial.task.delay.ms", "initial_delay_ms", int, 0),
        ("log.cleaner.enable", "cleaner_enable", parse_bool, None),
    )

    @classmethod
    def from_config(cls, config: ServerConfig) -> RetentionSettings:
        return cls(**broker_settings(getattr(config, "extra", None) or {}, cls.SETTINGS))

    def broker_configs(self) -> dict[str, str]:
        return {
            "log.retention.check.interval.ms": str(self.check_interval_ms),
            "log.initial.task.delay.ms": str(self.initial_delay_ms),
            "log.cleaner.enable": "true" if self.cleaner_enable else "false",
        }


class LogRetention:
    """The periodic retention pass of one broker, and the segments waiting for their delay."""

    def __init__(self, broker, settings: RetentionSettings) -> None:
        self.broker = broker
        self.settings = settings
        self.task: asyncio.Task | None = None
        self.passes = 0  # completed passes (tests wait on it)
        self.segments_deleted = 0
        # id(segment) -> (segment, its timer): segments renamed .deleted, waiting for their delay
        self._pending: dict[int, tuple[LogSegment, asyncio.TimerHandle]] = {}
        self._removals: set[asyncio.Task] = set()
        # A log not to touch now: the one the log cleaner is cleaning (set by the server).
        self.busy: Callable[[TopicPartition], bool] = lambda tp: False

    # -- life cycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="log-retention")
        log.info(
            "log retention every %d ms (first after %d ms)",
            self.settings.check_interval_ms,
            self.settings.initial_delay_ms,
        )

    async def stop(self) -> None:
        """Stop the schedule; remove the segments still waiting for their delay."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        waiting = [segment for segment, _ in self._pending.values()]
        for _, handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
        if waiting:
            await asyncio.to_thread(_remove_all, waiting)
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)

    async def _run(self) -> None:
        period = self.settings.check_interval_ms / 1000
        await asyncio.sleep(self.settings.initial_delay_ms / 1000)
        next_due = time.monotonic()
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log retention pass failed")
            # At a fixed rate, as Kafka's scheduler: a pass that overran skips the missed ticks.
            now = time.monotonic()
            next_due += period
            if next_due < now:
                next_due += ((now - next_due) // period + 1) * period
            await asyncio.sleep(next_due - now)

    # -- one pass ----------------------------------------------------------------------------------
    def _covers(self, tp, partition_log) -> bool:
        if partition_log.config.compact and self.busy(tp):
            return False
        return self.settings.cleaner_enable or not partition_log.config.compact

    async def run_once(self) -> int:
        """One retention pass over every partition; the number of segments deleted."""
        manager = self.broker.log_manager
        deleted = 0
        moved = False
        for i, (tp, partition_log) in enumerate(list(manager.logs.items())):
            if i and i % PARTITIONS_PER_TURN == 0:
                await asyncio.sleep(0)  # requests go on between partitions
            if manager.logs.get(tp) is not partition_log or not self._covers(tp, partition_log):
                continue  # deleted (or replaced) since the pass started
            before = partition_log.log_start_offset
            delay_ms = partition_log.config["file.delete.delay.ms"]
            try:
                names = partition_log.delete_old_segments(
                    delete_later=lambda segment, d=delay_ms: self.delete_later(segment, d)
                )
            except Exception as e:  # this partition's data or disk: the others go on
                log.error("retention of %s-%d failed: %s", tp.topic, tp.partition, e)
                continue
            if names:
                deleted += len(names)
                log.info(
                    "retention deleted %d segment(s) of %s-%d, log start offset %d -> %d: %s",
                    len(names), tp.topic, tp.partition, before,
                    partition_log.log_start_offset, ", ".join(names),
                )  # fmt: skip
            moved |= partition_log.log_start_offset != before
        if moved:
            try:
                manager.checkpoint()
            except OSError as e:  # moved in memory; the loader recomputes it from the segments
                log.error("writing the log-start-offset checkpoint failed: %s", e)
            self.broker.notify_data()  # fetches waiting at an offset now deleted answer at once
        self.passes += 1
        self.segments_deleted += deleted
        return deleted

    # -- the deletion delay ------------------------------------------------------------------------
    def delete_later(self, segment: LogSegment, delay_ms: int) -> None:
        """A segment renamed ``.deleted`` (by retention or the cleaner): remove its files
        ``delay_ms`` (its log's file.delete.delay.ms) from now. On the event loop's thread."""
        loop = asyncio.get_running_loop()
        handle = loop.call_later(delay_ms / 1000, self._remove, segment)
        self._pending[id(segment)] = (segment, handle)

    def _remove(self, segment: LogSegment) -> None:
        if self._pending.pop(id(segment), None) is None:
            return
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(_remove_all, [segment]))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    @property
    def pending_deletions(self) -> int:
        return len(self._pending)


def _remove_all(segments: list[LogSegment]) -> None:
    for segment in segments:
        try:
            segment.delete_if_exists()
        except OSError as e:
            log.error("removing %s failed: %s", segment.log.path, e)
