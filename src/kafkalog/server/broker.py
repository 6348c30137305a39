"""The broker: one node that leads every partition of its data directory.

It owns the :class:`~kafkalog.log.datadir.manager.LogManager` (opened writable, so an unclean
shutdown is recovered on start and a clean one writes ``.kafka_cleanshutdown``) and the appends
every producer and coordinator goes through. With one replica the high watermark is the log end
offset, so an append is committed when it returns; ``acks=all`` additionally waits for
:meth:`Broker.flush`, an fsync, so an acknowledged record survives a power cut and not only a
crash of this process.

The broker is state and the operations on it; it imports no API and no coordinator. What serves
requests over it (the route table of :mod:`.apis`, the coordinators of :mod:`.coordinators`, the
retention task) is built by :mod:`kafkalog.server.app`.

Interface for the coordinators (:mod:`kafkalog.server.coordinators`): ``log_manager``,
``node_id``, ``host``, ``port``, ``config``, ``append_records``, ``flush``,
``ensure_internal_topic`` and ``add_shutdown_hook``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import inspect
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import InternalTopicError, KafkalogError
from ..format.validate import AppendOrigin
from ..log.datadir import (
    META_PROPERTIES_FILE_NAME,
    LogManager,
    TopicPartition,
    read_meta_properties,
)
from ..log.partition import Log, LogAppendInfo
from ..log.segment import FileRecords
from .config import ServerConfig, broker_topic_defaults
from .internal_topics import INTERNAL_TOPICS
from .limits import MAX_WINDOW_DESCRIPTORS

__all__ = ["INTERNAL_TOPICS", "Broker", "BrokerStats", "LogFlusher"]

log = logging.getLogger("kafkalog.server")


@dataclass
class BrokerStats:
    """Counters a test or an operator can read: requests by (API, version), bytes sent with and
    without sendfile, connections."""

    requests: Counter = field(default_factory=Counter)
    sendfile_bytes: int = 0
    copied_record_bytes: int = 0
    connections_accepted: int = 0
    connections_rejected: int = 0
    connections_open: int = 0
    connections_closed_on_error: int = 0
    authentication_failures: int = 0  # SASL exchanges that failed
    copied_windows: int = 0  # fetched windows sent from a copy (no descriptor left for them)


FSYNC_THREADS = 16  # partitions whose fsyncs run at once (each log has one flush in flight)


class LogFlusher:
    """Group commit of one log's fsyncs, off the event loop.

    One flush is in flight per log. A caller that needs the records below offset X durable
    (:meth:`flush`) waits for the flush in flight when that one covers X, else joins the next,
    which starts when the one in flight ends and covers everything appended before it starts:
    N producers to a partition cost one or two fsyncs, not N. Each flush is planned on the
    loop (:meth:`Log.plan_flush`: the segments to fsync, their descriptors pinned so that
    retention, the cleaner or a topic deletion closing or deleting a segment meanwhile cannot
    close them under the fsync), runs on a worker thread, and is completed on the loop again
    (:meth:`Log.complete_flush` moves the marks). Only then are its callers answered: an
    acks=all produce is still acknowledged only after its records are fsynced. Flushes leave
    the active segment's indexes to the next roll or the shutdown (``indexes=False``): the
    recovery point stays at the active segment, whose indexes recovery rebuilds after a power
    cut, as Kafka's do between its flushes.
    """

    def __init__(self, log: Log, executor: concurrent.futures.Executor) -> None:
        self.log = log
        self._executor = executor
        self.task: asyncio.Task | None = None
        self._in_flight_upto = -1  # the end of the flush in flight (-1: none)
        self._in_flight: list[tuple[int, asyncio.Future]] = []
        self._next: list[tuple[int, asyncio.Future]] = []
        self.rounds = 0  # flushes run (tests read it)

    async def flush(self, offset: int) -> None:
        if self.log.durable_offset >= offset:
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        if self._in_flight_upto >= offset:
            self._in_flight.append((offset, waiter))
        else:
            self._next.append((offset, waiter))
            if self.task is None:
                self.task = loop.create_task(self._run(), name=f"flush {self.log.dir.name}")
        await waiter

    async def _run(self) -> None:
        target = self.log
        try:
            while self._next:
                self._in_flight, self._next = self._next, []
                if target.closed:  # deleted meanwhile (or the server stopping): nothing to do
                    self._answer(None)
                    continue
                try:
                    plan = target.plan_flush(indexes=False)
                except Exception as e:
                    self._answer(e)
                    continue
                self._in_flight_upto = plan.upto
                try:
                    if not plan.empty:
                        await self._run_plan(plan)
                except asyncio.CancelledError:
                    self._answer(OSError(f"the flush of {target.dir.name} was interrupted"))
                    raise
                except Exception as e:
                    self._answer(e)
                    continue
                finally:
                    self._in_flight_upto = -1
                self.rounds += 1
                target.complete_flush(plan)
                durable, end = target.durable_offset, target.log_end_offset
                for offset, waiter in self._in_flight:
                    if waiter.done():
                        continue
                    if offset <= durable:
                        waiter.set_result(None)
                    elif offset > end:  # truncated away meanwhile: nothing to acknowledge
                        waiter.set_exception(
                            KafkalogError(f"{target.dir.name} was truncated below {offset}")
                        )
                    else:  # a truncation voided the flush: the next one
                        self._next.append((offset, waiter))
                self._in_flight = []
        finally:
            self.task = None

    async def _run_plan(self, plan) -> None:
        """``plan.run`` on a worker thread, which releases its descriptors; if this wait is
        cancelled before the thread took it up, they are released here."""
        try:
            done = self._executor.submit(plan.run)
        except RuntimeError:  # the executor is shut down
            plan.release()
            raise OSError(f"{self.log.dir.name}: the server is stopping") from None
        try:
            await asyncio.shield(asyncio.wrap_future(done))
        except asyncio.CancelledError:
            if done.cancel():
                plan.release()
            raise

    def _answer(self, error: BaseException | None) -> None:
        waiters, self._in_flight = self._in_flight, []
        for _, waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)


class Broker:
    """A single Kafka node over a kafkalog data directory."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        log_manager: LogManager | None = None,
        window_descriptors: int = MAX_WINDOW_DESCRIPTORS,
    ) -> None:
        self.config = config
        # Descriptors fetch answers may own at once (one per segment window being sent); a
        # window beyond them is sent from a copy (see own_window).
        self.window_descriptors = window_descriptors
        self.windows_held = 0
        # The flushes flush.messages and flush.ms call for run on the fsync pool too (see
        # flush_if_due), not in the append on the event loop.
        self.log_manager = log_manager or LogManager(
            config.data_dirs,
            writable=True,
            create=True,
            topic_defaults=broker_topic_defaults(config),
            interval_flushes=False,
        )
        # The dynamic broker configs (kafkalog.server.dynamic_configs), installed by the app,
        # and the connection quotas in force (kafkalog.server.connection_quotas).
        self.dynamic_configs = None
        self.connection_quotas = None
        self.node_id = config.node_id
        self.host = config.advertised
        self.port = config.port
        # listener name -> the host and port it advertises (set by the server once bound)
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.stats = BrokerStats()
        self._shutdown_hooks: list[Callable] = []
        self.creating_topics: dict[str, asyncio.Event] = {}  # topics whose creation is under way
        self._data_waiters: set[asyncio.Future] = set()
        self._flushers: dict[TopicPartition, LogFlusher] = {}
        self._roll_flushes: set[asyncio.Task] = set()  # see _flush_rolled
        self._fsync_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topics_by_id: dict[uuid.UUID, str] = {}
        self.log_retention = None  # the retention task, which kafkalog.server.app starts
        self.coordinators = None  # the group and transaction coordinators, ditto
        self._topic_ids_key: tuple | None = None
        meta_path = self.log_manager.data_dirs[0] / META_PROPERTIES_FILE_NAME
        self.cluster_id = (
            read_meta_properties(meta_path).cluster_id if meta_path.exists() else None
        ) or "kafkalog"
        for note_log in self.log_manager.logs.values():
            for note in note_log.load_notes:
                log.warning("%s: %s", note_log.dir, note)

    # -- the coordinators' interface ---------------------------------------------------------------
    def add_shutdown_hook(self, hook: Callable) -> None:
        self._shutdown_hooks.append(hook)

    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        if name not in self.log_manager.topics():
            for created in self.log_manager.create_topic(name, partitions, configs):
                created.assign_epoch_start_offset(0)  # led from the start, as a new topic's

    async def append_records(
        self, topic: str, partition: int, records: bytes, *, origin: str
    ) -> tuple[int, int]:
        info = self.append(topic, partition, records, origin=origin)
        await self.flush_if_due(topic, partition)
        return info.first_offset, info.last_offset

    def flush_due(self, topic: str, partition: int) -> bool:
        """Whether the partition's ``flush.messages`` or ``flush.ms`` calls for a flush."""
        target = self.log_manager.get_log(TopicPartition(topic, partition))
        return target is not None and target.flush_due()

    async def flush_if_due(self, topic: str, partition: int) -> None:
        """:meth:`flush` everything appended when :meth:`flush_due`: what Kafka's append does
        in the request's thread, here on the fsync pool while the loop serves others."""
        if self.flush_due(topic, partition):
            await self.flush(topic, partition)

    async def flush(self, topic: str, partition: int, offset: int | None = None) -> None:
        """Return once the partition's records below ``offset`` (default: all appended so far)
        are durable; raises the fsync's OSError if they could not be made so. The fsyncs run
        on worker threads, grouped per log (see :class:`LogFlusher`); a partition that is gone
        (its topic deleted) has nothing left to flush."""
        tp = TopicPartition(topic, partition)
        target = self.log_manager.get_log(tp)
        if target is None:
            return
        if offset is None:
            offset = target.log_end_offset
        if target.durable_offset >= offset:
            return
        flusher = self._flushers.get(tp)
        if flusher is None or flusher.log is not target:
            flusher = self._flushers[tp] = LogFlusher(target, self._fsync_executor())
        await flusher.flush(offset)

    def _fsync_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._fsync_pool is None:
            self._fsync_pool = concurrent.futures.ThreadPoolExecutor(
                FSYNC_THREADS, thread_name_prefix="kafkalog-fsync"
            )
        return self._fsync_pool

    # -- topic ids ---------------------------------------------------------------------------------
    def topic_ids(self) -> dict[str, uuid.UUID]:
        """Every topic's id, cached: Fetch v13+ resolves ids on every request, and the log layer
        reads them from ``partition.metadata`` files. Refreshed whenever the topic set changes."""
        topics = self.log_manager.topics()
        key = tuple((t, len(p)) for t, p in topics.items())
        if key != self._topic_ids_key:
            ids = {t: self.log_manager.topic_id(t) for t in topics}
            self._topic_ids = {t: i for t, i in ids.items() if i is not None}
            self._topics_by_id = {i: t for t, i in self._topic_ids.items()}
            self._topic_ids_key = key
        return self._topic_ids

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topic_ids().get(topic)

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        self.topic_ids()
        return self._topics_by_id.get(topic_id)

    def topics_changed(self) -> None:
        self._topic_ids_key = None

    # -- appends and reads -------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.log_manager.get_log(TopicPartition(topic, partition))

    def leader_epoch(self, partition_log: Log) -> int:
        """The epoch this node leads with: the newest in the partition's leader-epoch cache."""
        latest = partition_log.leader_epoch_cache.latest_epoch()
        return 0 if latest is None else latest

    def append(self, topic: str, partition: int, records, *, origin: str) -> LogAppendInfo:
        """Validate and append as the leader (origin "client" or "coordinator"), wake fetches."""
        if origin == "client" and topic in INTERNAL_TOPICS:
            raise InternalTopicError(f"Cannot append to internal topic {topic}")
        tp = TopicPartition(topic, partition)
        target = (
            self.log_manager.get_log(tp)
            if origin == "client"
            else self.log_manager.get_or_create_log(tp)
        )
        if target is None:
            raise KafkalogError(f"This server does not host this topic-partition {tp}")
        active = target.segments[-1] if target.segments else None
        info = target.append_as_leader(
            records, leader_epoch=self.leader_epoch(target), origin=AppendOrigin(origin)
        )
        if target.segments[-1] is not active:
            self._flush_rolled(tp, target.segments[-1].base_offset)
        self.notify_data()
        return info

    def _flush_rolled(self, tp: TopicPartition, new_base: int) -> None:
        """Kafka's flush-log task of a roll: the rolled segment, the roll's producer snapshot
        (written unsynced on the loop, see :meth:`Log.roll`) and the directory are fsynced on
        the fsync pool, grouped with the acks=all flushes, and the recovery point moves to the
        new segment."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # appended outside a server: the next flush or the close does it
            return
        task = loop.create_task(
            self.flush(tp.topic, tp.partition, new_base), name=f"roll flush {tp}"
        )
        self._roll_flushes.add(task)
        task.add_done_callback(self._roll_flush_done)

    def _roll_flush_done(self, task: asyncio.Task) -> None:
        self._roll_flushes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: flush after roll failed: %s", task.get_name(), task.exception())

    def own_window(self, records: FileRecords) -> FileRecords | bytes:
        """A fetch answer's segment window that outlives the request: over a descriptor of its
        own (:meth:`FileRecords.detach`, sent with sendfile) while the allowance lasts, else
        its bytes (a fetch answer of thousands of partitions must not take a descriptor each)."""
        if self.windows_held < self.window_descriptors:
            try:
                window = records.detach(on_close=self._window_closed)
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
            else:
                self.windows_held += 1
                return window
        self.stats.copied_windows += 1
        return records.read(records.start, records.size_in_bytes())

    def _window_closed(self) -> None:
        self.windows_held -= 1

    def notify_data(self) -> None:
        waiters, self._data_waiters = self._data_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_for_data(self, timeout_s: float) -> None:
        """Return when anything is appended or the timeout passes (a fetch's max wait)."""
        waiter = asyncio.get_running_loop().create_future()
        self._data_waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            self._data_waiters.discard(waiter)

    # -- life cycle --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Run the shutdown hooks, then close the logs: checkpoints and the clean marker."""
        for hook in reversed(self._shutdown_hooks):
            try:
                result = hook()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("shutdown hook %r failed", hook)
        self.notify_data()
        # Flushes under way end first (their callers are answered); closing the logs then
        # flushes everything, indexes included.
        running = [*self._roll_flushes]
        running += [f.task for f in self._flushers.values() if f.task is not None]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        try:
            self.log_manager.close()
        finally:
            if self._fsync_pool is not None:
                self._fsync_pool.shutdown(wait=True)
