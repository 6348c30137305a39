"""Compaction while serving: Kafka's log cleaner thread, with its configs and schedule.

The cleaner (Kafka's LogCleaner.CleanerThread) picks, among the logs whose ``cleanup.policy``
has ``compact`` (``__consumer_offsets`` and ``__transaction_state`` included), the filthiest one
that is due (dirty ratio above the topic's ``min.cleanable.dirty.ratio``, else the broker's
``log.cleaner.min.cleanable.ratio``, or a segment waiting past ``max.compaction.lag.ms``; the
dirty part stops at ``min.compaction.lag.ms``, the last stable offset and the active segment),
cleans it and goes on at once; when none is due it sleeps ``log.cleaner.backoff.ms`` (15000).
The choice is the log layer's :func:`kafkalog.log.cleaner.filthiest_log` over its
:func:`~kafkalog.log.cleaner.log_to_clean`, the clean its :func:`~kafkalog.log.cleaner.clean`,
the code ``kafkalog compact --apply`` runs: the same records go (superseded keys, tombstones
older than ``delete.retention.ms``, aborted transactions' records, finished transactions'
markers), with an offset map of ``log.cleaner.dedupe.buffer.size`` bytes (a full map ends the
clean early; the next one goes on from there), and ``cleaner-offset-checkpoint`` is written
after each clean as Kafka writes it. ``log.cleaner.enable=false`` cleans nothing.

Where the work runs. The server serializes everything that touches a log on the event loop's
thread (see :mod:`.log_retention`). A clean runs on a worker thread, and every step of it that
reads the log's changing state (the dirty range, the producers) or changes the log (each swap of
``.cleaned`` segments in) is run on the loop by ``clean(exclusive=...)``, while the thread
waits: the slow part, reading segments that are no longer active and writing the ``.cleaned``
files, runs beside appends to the active segment and fetches, and so does every fsync. A swap
is three steps of renames on the loop (``.cleaned`` -> ``.swap``; the old segments ->
``.deleted`` with the new ones taking their place in the log; the ``.swap`` suffixes off), each
followed by a directory fsync on the thread, which keeps the order of the renames on disk that
crash recovery relies on while the loop answers requests. The log changes in one of them with
no await: a Fetch sees the old segments or the new ones, never a mix, and a Fetch answer being
sent keeps its own descriptor. The cleaner-offset checkpoint is written by the thread after the
last fsync. The replaced segments are renamed ``.deleted`` and removed ``file.delete.delay.ms``
later by the retention task's timer (Kafka's asyncDelete). Retention skips the log being cleaned
(Kafka's cleaner runs it for compacted logs after the clean). A log deleted meanwhile, or the
server stopping, makes the next step refuse (stopping waits for a swap under way instead): the
clean ends, its ``.cleaned`` files are removed; a deleted partition's checkpoint entry is
dropped on the next attempt. A crash at any point is recovered by the loader (``.cleaned`` and
``.swap`` files). A clean that fails otherwise marks the partition uncleanable until the next
start, as Kafka does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..errors import CleaningAborted, KafkalogError
from ..log.cleaner import clean, filthiest_log, log_to_clean
from ..log.datadir import (
    CLEANER_OFFSET_CHECKPOINT,
    TopicPartition,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from .config import ServerConfig, broker_settings, parse_bool

__all__ = ["CleanerSettings", "LogCleaner"]

log = logging.getLogger("kafkalog.server")

PARTITIONS_PER_TURN = 64  # logs ranked before the loop gets a turn
_DEDUPE_MINIMUM = 48  # two 24-byte entries: the smallest offset map that makes progress


def _ratio(value: str) -> float:
    ratio = float(value)
    if not 0 <= ratio <= 1:
        raise ValueError(f"must be between 0 and 1, not {value}")
    return ratio


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The broker configs of the log cleaner, by Kafka's names in ``ServerConfig.extra``."""

    enable: bool = True  # log.cleaner.enable
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    min_cleanable_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size (accepted; see docs/server.md)

    # Kafka name, field, parser, minimum (see config.broker_settings).
    SETTINGS: ClassVar[tuple] = (
        ("log.cleaner.enable", "enable", parse_bool, None),
        ("log.cleaner.backoff.ms", "backoff_ms", int, 0),
        ("log.cleaner.min.cleanable.ratio", "min_cleanable_ratio", _ratio, None),
        ("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", int, _DEDUPE_MINIMUM),
        ("log.cleaner.io.buffer.size", "io_buffer_size", int, 0),
    )

    @classmethod
    def from_config(cls, config: ServerConfig) -> CleanerSettings:
        return cls(**broker_settings(getattr(config, "extra", None) or {}, cls.SETTINGS))

    def broker_configs(self) -> dict[str, str]:
        return {
            "log.cleaner.enable": "true" if self.enable else "false",
            "log.cleaner.backoff.ms": str(self.backoff_ms),
            "log.cleaner.min.cleanable.ratio": str(self.min_cleanable_ratio),
            "log.cleaner.dedupe.buffer.size": str(self.dedupe_buffer_size),
            "log.cleaner.io.buffer.size": str(self.io_buffer_size),
        }


def _drop_checkpoint_entries(entries: list[tuple[TopicPartition, Path]]) -> None:
    """Remove these partitions' lines from their data directories' cleaner-offset-checkpoint
    (only the cleaner writes it, one step at a time)."""
    for tp, path in entries:
        try:
            offsets = read_offset_checkpoint(path) if path.exists() else {}
            if offsets.pop(tp, None) is not None:
                write_offset_checkpoint(path, offsets)
        except (OSError, KafkalogError) as e:
            log.error("log cleaner: updating %s failed: %s", path, e)


class LogCleaner:
    """The cleaner thread of one broker: its schedule, the log being cleaned, what it did."""

    def __init__(
        self,
        broker,
        settings: CleanerSettings,
        delete_later: Callable | None = None,
    ) -> None:
        self.broker = broker
        self.settings = settings
        # (segment, delay ms) -> None, on the loop: the replaced segments, renamed .deleted, are
        # removed after their log's file.delete.delay.ms (None: removed at once)
        self.delete_later = delete_later
        self.task: asyncio.Task | None = None
        self.cleaning: TopicPartition | None = None  # the log being cleaned now
        # failed: the log left alone until the next start (a topic created again is new)
        self.uncleanable: dict[TopicPartition, object] = {}
        self.passes = 0  # selections made (tests wait on it)
        self.cleans = 0  # logs cleaned
        self.records_removed = 0
        self._stopping = False
        self._seen: dict[TopicPartition, object] = {}  # the compacted logs of the last pass
        self._work: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- life cycle --------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.settings.enable:
            log.info("log cleaner disabled (log.cleaner.enable=false)")
            return
        self._loop = asyncio.get_running_loop()
        self.task = self._loop.create_task(self._run(), name="log-cleaner")
        log.info(
            "log cleaner started: backoff %d ms, min cleanable ratio %s, dedupe buffer %d bytes",
            self.settings.backoff_ms,
            self.settings.min_cleanable_ratio,
            self.settings.dedupe_buffer_size,
        )

    async def stop(self) -> None:
        """Stop the schedule; a clean under way ends at its next step (its files removed)."""
        self._stopping = True
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        if self._work is not None:
            await asyncio.wait([self._work])

    async def _run(self) -> None:
        while True:
            try:
                cleaned = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed")
                cleaned = False
            # Kafka's CleanerThread.doWork: back off only when there was nothing to clean.
            await asyncio.sleep(0 if cleaned else self.settings.backoff_ms / 1000)

    def is_cleaning(self, tp: TopicPartition) -> bool:
        return self.cleaning == tp

    # -- one attempt -------------------------------------------------------------------------------
    def _min_cleanable_ratio(self, partition_log) -> float:
        """The topic's min.cleanable.dirty.ratio when it sets one, else the broker's default."""
        if "min.cleanable.dirty.ratio" in partition_log.config.overrides:
            return partition_log.config["min.cleanable.dirty.ratio"]
        return self.settings.min_cleanable_ratio

    async def run_once(self) -> bool:
        """Clean the filthiest log that is due, if any: whether one was cleaned."""
        manager = self.broker.log_manager
        candidates = []
        for i, (tp, partition_log) in enumerate(list(manager.logs.items())):
            if i and i % PARTITIONS_PER_TURN == 0:
                await asyncio.sleep(0)
            if (
                manager.logs.get(tp) is not partition_log
                or not partition_log.config.compact
                or self.uncleanable.get(tp) is partition_log
            ):
                continue
            try:
                candidates.append((partition_log, log_to_clean(partition_log)))
            except Exception as e:  # this partition's data: the others go on
                log.error("log cleaner: %s-%d cannot be ranked: %s", tp.topic, tp.partition, e)
                self.uncleanable[tp] = partition_log
        forgotten = self._forget_deleted({log.topic_partition: log for log, _ in candidates})
        if forgotten:  # the checkpoint's write fsyncs: on a thread (cleans are not running)
            await asyncio.get_running_loop().run_in_executor(
                None, _drop_checkpoint_entries, forgotten
            )
        chosen = filthiest_log(candidates, min_cleanable_ratio=self._min_cleanable_ratio)
        self.passes += 1
        if chosen is None or self._stopping:
            return False
        partition_log, ltc = chosen
        tp = partition_log.topic_partition
        name = f"{tp.topic}-{tp.partition}"
        log.info(
            "Beginning cleaning of log %s (dirty ratio %.3f, dirty section [%d, %d))",
            name, ltc.cleanable_ratio, ltc.first_dirty_offset, ltc.first_uncleanable_offset,
        )  # fmt: skip
        started = time.monotonic()
        self.cleaning = tp
        self._work = asyncio.get_running_loop().run_in_executor(
            None, self._clean, partition_log, tp
        )
        try:
            result = await asyncio.shield(self._work)
        except CleaningAborted as e:
            log.info("Cleaning of log %s aborted: %s", name, e)
            return False
        except Exception as e:
            if self.broker.log_manager.logs.get(tp) is not partition_log:
                log.info("Cleaning of log %s aborted: the partition was deleted (%s)", name, e)
            else:
                log.error("Cleaning of log %s failed, marked uncleanable: %s", name, e)
                self.uncleanable[tp] = partition_log
            return False
        finally:
            if self._work is not None and self._work.done():
                self._work = None
                self.cleaning = None
        if not result.cleaned:
            log.info("Log %s not cleaned: %s", name, result.reason)
            return False
        self.cleans += 1
        self.records_removed += result.records_removed
        stats = result.stats
        log.info(
            "Cleaned log %s (dirty section = [%d, %d]): %d of %d records removed, "
            "%d -> %d bytes in %d -> %d segments, %.3f s, offset map %.1f%% full; "
            "cleaner offset -> %d",
            name, result.first_dirty_offset, result.end_offset, result.records_removed,
            stats.messages_read, result.bytes_read, result.bytes_written,
            len(result.segments_before), len(result.segments_after),
            time.monotonic() - started, 100 * result.buffer_utilization, result.end_offset,
        )  # fmt: skip
        return True

    def _forget_deleted(
        self, now: dict[TopicPartition, object]
    ) -> list[tuple[TopicPartition, Path]]:
        """The cleaner-offset-checkpoint entries to drop: those of the partitions deleted since
        the last pass (Kafka's updateCheckpoints with partitionToRemove), so a topic created
        again under the name is cleaned from its start."""
        gone = [(tp, old) for tp, old in self._seen.items() if now.get(tp) is not old]
        self._seen = now
        forgotten = []
        for tp, old in gone:
            if self.broker.log_manager.logs.get(tp) is old:
                continue  # not deleted: no longer compacted, or marked uncleanable
            self.uncleanable.pop(tp, None)
            forgotten.append((tp, old.dir.parent / CLEANER_OFFSET_CHECKPOINT))
        return forgotten

    # -- on the worker thread ----------------------------------------------------------------------
    def _clean(self, partition_log, tp: TopicPartition):
        return clean(
            partition_log,
            force=True,  # filthiest_log held it to its ratio (the broker's default included)
            dedupe_buffer_size=self.settings.dedupe_buffer_size,
            max_messages=0,
            exclusive=lambda fn, finishing=False: self._exclusive(
                partition_log, tp, fn, finishing=finishing
            ),
            delete_later=None
            if self.delete_later is None
            else lambda segment: self.delete_later(
                segment, partition_log.config["file.delete.delay.ms"]
            ),
        )

    def _exclusive(self, partition_log, tp: TopicPartition, fn, *, finishing: bool = False):
        """Run ``fn`` on the event loop (where nothing else touches the log) and wait for it.

        Refused once the partition is deleted or, unless the step finishes a swap under way
        (its ``.swap`` renames done: :meth:`stop` waits for it), once the server stops."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def step() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                if self._stopping and not finishing:
                    raise CleaningAborted("the server is stopping")
                if self.broker.log_manager.logs.get(tp) is not partition_log:
                    raise CleaningAborted("the partition was deleted")
                future.set_result(fn())
            except BaseException as e:
                future.set_exception(e)

        assert self._loop is not None
        self._loop.call_soon_threadsafe(step)
        return future.result()
