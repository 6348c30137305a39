"""The asyncio server: accepts connections within limits, runs them, shuts down cleanly.

This module assembles the server and nothing in :mod:`kafkalog.server` imports it back (only the
CLI and embedding programs do): it builds the :class:`~.broker.Broker` (the state), the route
table (API key to handler: the broker's own APIs of :mod:`.apis`, then the group and transaction
coordinators of :mod:`.coordinators` and the consumer groups of KIP-848 beside the classic ones,
:mod:`.groups.consumer_protocol`), the retention task and the log cleaner, and hands each
connection the broker and the table.

Starting opens the data directory writable through the log layer, which recovers every log if
the last run did not end with ``.kafka_cleanshutdown``. Stopping (SIGTERM, SIGINT or
:meth:`Server.stop`) stops accepting, closes the connections, runs the coordinators' shutdown
hooks and closes the logs, which flushes them, writes the checkpoints and the clean-shutdown
marker, so the next start skips recovery.

:class:`BackgroundServer` runs one in a thread, for tests and for programs embedding a broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import gc
import logging
import signal
import socket
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from ..log.partition import broker_synonyms
from ..log.segment import configured_capacity, default_cache
from ..protocol import ApiKey
from .apis import (
    cluster,
    configs,
    delete_records,
    fetch,
    log_dirs,
    metadata,
    offsets,
    produce,
    sasl,
    topics,
    transactions,
)
from .broker import Broker
from .config import ServerConfig, broker_topic_defaults
from .connection import Connection
from .connection_quotas import ConnectionQuotas, CreationRate
from .coordinators import SETTING_NAMES
from .coordinators import load as load_coordinators
from .dynamic_configs import DynamicBrokerConfigs
from .groups.consumer_protocol import SETTINGS as CONSUMER_GROUP_SETTINGS
from .groups.consumer_protocol import ConsumerGroupConfig, ConsumerGroups
from .handlers import Handler
from .limits import (
    AcceptErrorLog,
    DescriptorPlan,
    effective_max_connections,
    open_descriptors,
    plan_descriptors,
    raise_open_files_limit,
)
from .log_cleaner import CleanerSettings, LogCleaner
from .log_retention import LogRetention, RetentionSettings
from .security.listeners import Listener, ListenerError
from .security.sasl import SaslAuthenticator
from .security.tls import server_context

__all__ = [
    "BackgroundServer",
    "Server",
    "build_routes",
    "serve",
    "start_log_tasks",
    "unused_settings",
]

log = logging.getLogger("kafkalog.server")

# after metadata
_BROKER_APIS = (
    produce, fetch, offsets, topics, configs, delete_records, transactions, sasl, cluster, log_dirs
)  # fmt: skip


async def build_routes(broker: Broker) -> dict[int, Handler]:
    """The route table: the broker's own APIs, then the coordinators', loaded from their logs
    and their timeouts started (stopped by the broker's shutdown)."""
    routes: dict[int, Handler] = {}
    routes.update(metadata.handlers(broker, routes))  # ApiVersions lists the table's keys
    for api in _BROKER_APIS:
        routes.update(api.handlers(broker))
    coordinators = await load_coordinators(broker)
    routes.update(coordinators.routes())
    consumer_groups = ConsumerGroups(
        coordinators.groups,
        functools.partial(_topic_partitions, broker),
        ConsumerGroupConfig.from_extra(broker.config.extra),
    )
    routes[ApiKey.CONSUMER_GROUP_HEARTBEAT] = consumer_groups.heartbeat
    routes[ApiKey.CONSUMER_GROUP_DESCRIBE] = consumer_groups.describe
    coordinators.start()
    broker.add_shutdown_hook(coordinators.stop)
    broker.coordinators = coordinators
    return routes


def _topic_partitions(broker: Broker) -> dict:
    """Every topic with an id: its id and partition count, by name (what the consumer groups'
    assignors divide)."""
    ids = broker.topic_ids()
    return {t: (ids[t], max(ps) + 1) for t, ps in broker.log_manager.topics().items()
            if t in ids}  # fmt: skip


def unused_settings(config: ServerConfig) -> list[str]:
    """The ``--config`` names no part of the server reads: a typo, or a Kafka setting serve has
    no use for (listeners, threads and replication are its own; see docs/server.md)."""
    tables = (RetentionSettings.SETTINGS, CleanerSettings.SETTINGS, CONSUMER_GROUP_SETTINGS,
              ConnectionQuotas.SETTINGS)  # fmt: skip
    used = {name for table in tables for name, *_ in table}
    return sorted(set(config.extra or {}) - used - SETTING_NAMES - broker_synonyms())


def install_dynamic_configs(broker: Broker) -> None:
    """Load the dynamic broker configs stored in the data directory and apply them to the topic
    defaults, before anything is served."""
    broker.dynamic_configs = DynamicBrokerConfigs.load(broker.config)
    applied = broker.dynamic_configs.applied_to(broker.config)
    broker.log_manager.set_topic_defaults(broker_topic_defaults(applied))
    broker.connection_quotas = ConnectionQuotas.from_config(applied)


def start_log_tasks(broker: Broker) -> None:
    """The background log work (:mod:`.log_retention`, :mod:`.log_cleaner`), stopped by the
    broker's shutdown (the cleaner first: its replaced segments wait in retention's timers)."""
    retention = LogRetention(broker, RetentionSettings.from_config(broker.config))
    cleaner = LogCleaner(
        broker,
        CleanerSettings.from_config(broker.dynamic_configs.applied_to(broker.config)),
        delete_later=retention.delete_later,
    )
    retention.busy = cleaner.is_cleaning
    broker.log_retention = retention
    broker.log_cleaner = cleaner
    retention.start()
    broker.add_shutdown_hook(retention.stop)
    cleaner.start()
    broker.add_shutdown_hook(cleaner.stop)  # hooks run in reverse: the cleaner stops first


class Server:
    def __init__(
        self,
        broker: Broker,
        open_files_limit: int | None = None,
        plan: DescriptorPlan | None = None,
    ) -> None:
        self.broker = broker
        self.open_files_limit = open_files_limit
        self.plan = plan
        self.max_connections = broker.config.max_connections
        # What the open-files limit leaves for connections (None: unknown), under max.connections.
        self.connection_room: int | None = None
        self.routes: dict[int, Handler] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: set[asyncio.Task] = set()
        self._per_ip: Counter = Counter()
        self._creation_rate = CreationRate()
        self._next_id = 0

    async def start(self) -> None:
        config = self.broker.config
        install_dynamic_configs(self.broker)
        self.routes = await build_routes(self.broker)
        start_log_tasks(self.broker)
        # Segment files count with their budget, not with what happens to be open now.
        in_use = open_descriptors()
        reserved = 0
        if self.plan is not None and in_use is not None:
            in_use = max(0, in_use - default_cache().open_count)
            reserved = self.plan.files + self.plan.windows
        quotas = self.broker.connection_quotas
        self.max_connections = effective_max_connections(
            quotas.max_connections, self.open_files_limit, in_use, reserved
        )
        if self.open_files_limit is not None and in_use is not None:
            self.connection_room = effective_max_connections(
                2**31 - 1, self.open_files_limit, in_use, reserved, quiet=True
            )
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        listeners = config.all_listeners()
        tls = server_context(config.tls) if any(lis.tls for lis in listeners) else None
        if tls is None and config.tls is not None:
            server_context(config.tls)  # unused, but a bad file is still an error at start
        if any(lis.sasl for lis in listeners) and config.sasl is None:
            raise ListenerError("SASL listeners need users (--sasl-users or --sasl-user)")
        for listener in listeners:
            try:
                server = await asyncio.start_server(
                    functools.partial(self._accept, listener),
                    listener.host,
                    listener.port,
                    reuse_address=True,
                    ssl=tls if listener.tls else None,
                )
            except BaseException:
                for started in self._servers:  # the listeners opened before this one
                    started.close()
                raise
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]  # the real port when 0 asked for any
            host, advertised_port = config.advertised_listeners.get(
                listener.name, (config.advertised_host or listener.host, 0)
            )
            self.broker.endpoints[listener.name] = (host, advertised_port or port)
            log.info("listening on %s (%s)", replace(listener, port=port), listener.protocol)
        # broker.host and broker.port: the first listener's (what a single --listen gives)
        self.broker.host, self.broker.port = self.broker.endpoints[listeners[0].name]

    async def _accept(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        config = self.broker.config
        stats = self.broker.stats
        peer = writer.get_extra_info("peername")
        ip = peer[0] if peer else "?"
        quotas = self.broker.connection_quotas
        self.max_connections = quotas.max_connections
        if self.connection_room is not None:
            self.max_connections = min(self.max_connections, self.connection_room)
        delay = self._creation_rate.delay(quotas.max_connection_creation_rate)
        if delay:
            await asyncio.sleep(delay)  # throttled, as Kafka's acceptor is
        if (
            delay is None
            or len(self._tasks) >= self.max_connections
            or self._per_ip[ip] >= quotas.per_ip_limit(ip)
        ):
            stats.connections_rejected += 1
            log.warning("connection from %s refused: connection limit reached", ip)
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stats.connections_accepted += 1
        self._next_id += 1
        self._per_ip[ip] += 1
        stats.connections_open += 1
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            sasl = None
            if listener.sasl:
                assert config.sasl is not None
                sasl = SaslAuthenticator(config.sasl, client=f"{ip} ({listener.name})")
            await Connection(
                self.broker,
                self.routes,
                reader,
                writer,
                self._next_id,
                listener=listener.name,
                advertised=self.broker.endpoints.get(listener.name),
                sasl=sasl,
            ).run()
        except asyncio.CancelledError:
            pass  # stop() closing it: finish quietly (asyncio logs a cancelled client task)
        finally:
            self._tasks.discard(task)
            self._per_ip[ip] -= 1
            stats.connections_open -= 1

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.broker.shutdown()
        log.info(
            "stopped cleanly: %d connections, %d bytes sent with sendfile, %d copied",
            self.broker.stats.connections_accepted,
            self.broker.stats.sendfile_bytes,
            self.broker.stats.copied_record_bytes,
        )


async def serve(
    config: ServerConfig,
    *,
    ready: Callable[[Broker], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or ``stop`` is set), then shut down cleanly."""
    stop = stop or asyncio.Event()
    for name in unused_settings(config):  # as Kafka's AbstractConfig.logUnused warns
        log.warning("The configuration '%s' was supplied but isn't a known config.", name)
    limit = raise_open_files_limit()
    files = config.max_open_files or configured_capacity()  # --max-open-files, else the env
    plan = plan_descriptors(limit, open_descriptors(), files)
    default_cache().capacity = plan.files
    log.info(
        "open-files limit %s: up to %d segment files open at once, %d for fetch answers",
        limit, plan.files, plan.windows,
    )  # fmt: skip
    try:
        broker = Broker(config, window_descriptors=plan.windows)
    except OSError as e:
        if e.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        raise OSError(
            e.errno,
            f"out of file descriptors opening the logs (open-files limit {limit}, ulimit -n): "
            f"{e}; raise the limit (ulimit -n, LimitNOFILE=)",
        ) from e
    # The logs loaded live as long as the server: out of the cyclic collector's way, or every
    # full collection walks all partitions' objects with the event loop stopped.
    gc.freeze()
    server = Server(broker, limit, plan)
    try:
        await server.start()
    except BaseException:
        await server.broker.shutdown()
        raise
    loop = asyncio.get_running_loop()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready(server.broker)
    try:
        await stop.wait()
    finally:
        await server.stop()


class BackgroundServer:
    """A server on its own thread and event loop: ``with BackgroundServer(config) as s:``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafkalog-server", daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"{self.config.all_listeners()[0].host}:{self.broker.port}"

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(broker: Broker) -> None:
                self.broker = broker
                self._ready.set()

            await serve(self.config, ready=ready, stop=self._stop)

        try:
            asyncio.run(main())
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()

    def start(self) -> BackgroundServer:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
