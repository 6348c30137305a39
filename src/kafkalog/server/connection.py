"""One client connection: frames in, requests handled one at a time, responses out in order.

Kafka processes a connection's requests in order and answers in the same order (clients match
answers to requests by position as well as correlation id), so a connection is a single loop.
A request that cannot be read, an API or version we do not serve (except ApiVersions, answered
with UNSUPPORTED_VERSION and our versions, as KIP-511 requires) or an oversized frame closes
this connection only; other clients are never affected.

Fetched records are windows of segment files. They go out with the kernel's ``sendfile`` where
the transport is a plain socket (``os.sendfile`` for what the socket buffer takes at once,
``loop.sendfile`` for the rest), and are copied through user space otherwise; both are counted
in :class:`~kafkalog.server.broker.BrokerStats`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..log.segment import FileRecords
from ..protocol import (
    API_NAMES,
    ApiKey,
    FrameBuffer,
    ProtocolError,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    peek_header,
)
from ..protocol.framing import size_prefix
from .apis.metadata import api_versions_body
from .handlers import CloseConnection, Handler, RequestContext
from .security.sasl import SaslAuthenticator, SaslFailed
from .security.tls import peer_principal

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["Connection"]

log = logging.getLogger("kafkalog.server")
_READ_SIZE = 256 * 1024


class _FileWindow:
    """The file object ``loop.sendfile`` wants, over a window's descriptor (not owned)."""

    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *_args: Any) -> None:  # positions are passed explicitly
        return None


def _close_windows(value: Any) -> None:
    """Close every segment window in an answer that will not be sent."""
    if isinstance(value, FileRecords):
        value.close()
    elif isinstance(value, dict):
        for item in value.values():
            _close_windows(item)
    elif isinstance(value, list):
        for item in value:
            _close_windows(item)


class Connection:
    def __init__(
        self,
        broker: Broker,
        routes: Mapping[int, Handler],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection_id: int,
        *,
        listener: str = "PLAINTEXT",
        advertised: tuple[str, int] | None = None,
        sasl: SaslAuthenticator | None = None,
    ) -> None:
        self.broker = broker
        self.routes = routes
        self.reader = reader
        self.writer = writer
        self.connection_id = connection_id
        peer = writer.get_extra_info("peername")
        self.client_host = f"/{peer[0]}" if peer else "/unknown"
        self.frames = FrameBuffer(broker.config.socket_request_max_bytes)
        self.listener = listener
        self.advertised = advertised
        self.sasl = sasl  # on SASL listeners: nothing but authentication until it succeeds
        tls = writer.get_extra_info("sslcontext") is not None
        # TLS encrypts in user space: fetched records are copied through it
        self.sendfile_ok = broker.config.sendfile and not tls
        self.principal = "User:ANONYMOUS"
        if tls:
            self.principal = "User:" + peer_principal(writer.get_extra_info("peercert"))

    async def run(self) -> None:
        idle_s = self.broker.config.connections_max_idle_ms / 1000
        try:
            while True:
                try:
                    data = await asyncio.wait_for(self.reader.read(_READ_SIZE), idle_s)
                except asyncio.TimeoutError:
                    log.info("connection %s idle for %.0f s: closed", self.client_host, idle_s)
                    return
                if not data:
                    return
                self.frames.feed(data)
                while (frame := self.frames.next_frame()) is not None:
                    if not await self._process(frame):
                        return
        except ProtocolError as e:
            self._protocol_error(e)
        except (OSError, asyncio.IncompleteReadError) as e:  # the peer went away mid-answer
            log.debug("connection from %s lost: %s", self.client_host, e)
        finally:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    def _protocol_error(self, e: Exception) -> None:
        self.broker.stats.connections_closed_on_error += 1
        log.warning("closing connection from %s: %s", self.client_host, e)

    async def _process(self, frame: bytes) -> bool:
        """Handle one request; False when the connection must close."""
        if self.sasl is not None and not self.sasl.authenticated:
            return await self._authenticate(frame)
        return await self._dispatch(frame)

    async def _dispatch(self, frame: bytes) -> bool:
        """A request through the route table; False when the connection must close."""
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as e:
            api_key, _, correlation_id = peek_header(frame)
            if api_key != ApiKey.API_VERSIONS:
                self._protocol_error(e)
                return False
            # what we serve, for the client to retry
            body = api_versions_body(self.routes, error_code=e.code)
            await self._send(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))
            return True
        except ProtocolError as e:
            self._protocol_error(e)
            return False
        header = request.header
        handler = self.routes.get(header.api_key)
        if handler is None:
            self._protocol_error(
                UnsupportedVersionError(f"{API_NAMES[header.api_key]} is not served")
            )
            return False
        self.broker.stats.requests[(request.name, header.api_version)] += 1
        context = RequestContext(
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host=self.client_host,
            connection_id=self.connection_id,
            listener=self.listener,
            advertised=self.advertised,
            principal=self.principal,
        )
        try:
            response = await handler(context, request.body)
        except CloseConnection as e:
            log.info("closing connection from %s: %s", self.client_host, e)
            return False
        except Exception:
            log.exception(
                "%s v%d from %s failed", request.name, header.api_version, self.client_host
            )
            self.broker.stats.connections_closed_on_error += 1
            return False
        if response is None:  # Produce with acks=0: no answer at all
            return True
        try:
            parts = encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
        except BaseException:
            _close_windows(response)  # the answer will not go out: release its descriptors
            raise
        await self._send(parts)
        return True

    async def _authenticate(self, frame: bytes) -> bool:
        """A frame before SASL authentication succeeded (Kafka's SaslServerAuthenticator): a
        raw token after a v0 handshake, else ApiVersions, SaslHandshake or SaslAuthenticate in
        their turn; anything else closes the connection unanswered. False: close."""
        sasl = self.sasl
        assert sasl is not None
        if sasl.raw:
            try:
                answer = sasl.raw_token(frame)
            except SaslFailed:
                self.broker.stats.authentication_failures += 1
                return False
            await self._send([size_prefix(len(answer)) + answer])
            return True
        try:
            api_key, version, correlation_id = peek_header(frame)
        except ProtocolError as e:
            self._protocol_error(e)
            return False
        allowed = {
            "handshake": (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE),
            "authenticate": (ApiKey.SASL_AUTHENTICATE,),
        }.get(sasl.state, ())
        if api_key not in allowed:
            name = API_NAMES.get(api_key, f"api key {api_key}")
            log.info(
                "closing connection from %s: unexpected %s request during SASL %s",
                self.client_host, name, "handshake" if sasl.state == "handshake" else
                "authentication",
            )  # fmt: skip
            self.broker.stats.connections_closed_on_error += 1
            return False
        if api_key == ApiKey.API_VERSIONS:
            return await self._dispatch(frame)
        try:
            request = decode_request(frame)
        except ProtocolError as e:
            self._protocol_error(e)
            return False
        self.broker.stats.requests[(request.name, version)] += 1
        if api_key == ApiKey.SASL_HANDSHAKE:
            response, last = sasl.handshake(version, request.body)
        else:
            response, last = sasl.authenticate(request.body)
            if last:
                self.broker.stats.authentication_failures += 1
        await self._send(encode_response(api_key, version, correlation_id, response))
        if sasl.authenticated:
            self.principal = sasl.principal or self.principal
        return not last

    def _sendfile_now(self, file_fd: int, start: int, size: int) -> int:
        """Send what the socket takes right now with os.sendfile: the bytes sent.

        Only when the transport's own buffer is empty (nothing may overtake bytes it holds).
        This skips ``loop.sendfile``'s per-call machinery for the common case of a window the
        socket buffer absorbs at once; what does not fit goes through ``loop.sendfile``, which
        waits for the socket to drain.
        """
        transport = self.writer.transport
        sock = transport.get_extra_info("socket")
        if sock is None or transport.get_write_buffer_size() or transport.is_closing():
            return 0
        if transport.get_extra_info("sslcontext") is not None:
            return 0
        sent = 0
        while sent < size:
            try:
                n = os.sendfile(sock.fileno(), file_fd, start + sent, size - sent)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    self.sendfile_ok = False  # not for this kind of file or socket
                    break
                raise
            if n == 0:
                break
            sent += n
        return sent

    async def _send(self, parts: list) -> None:
        """Write a response frame; windows of segment files are closed once sent (or not)."""
        try:
            await self._send_parts(parts)
        finally:
            for part in parts:
                if isinstance(part, FileRecords):
                    part.close()

    async def _send_parts(self, parts: list) -> None:
        writer = self.writer
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                writer.write(part)
                continue
            size = part.size_in_bytes()
            if writer.transport.is_closing():
                raise ConnectionError("the client closed the connection")
            start = part.start
            if self.sendfile_ok:
                await writer.drain()
                sent = self._sendfile_now(part.fd, start, size)
                self.broker.stats.sendfile_bytes += sent
                if sent == size:
                    continue
                size, start = size - sent, start + sent
            if self.sendfile_ok:
                try:
                    sent = await asyncio.get_running_loop().sendfile(
                        writer.transport, _FileWindow(part.fd), start, size, fallback=False
                    )
                    self.broker.stats.sendfile_bytes += sent
                    if sent == size:
                        continue
                    size, start = size - sent, start + sent
                except (asyncio.SendfileNotAvailableError, NotImplementedError):
                    self.sendfile_ok = False
            data = os.pread(part.fd, size, start)
            if len(data) != size:  # the file shrank under us: the frame cannot be completed
                raise ConnectionError(f"segment window at {start} shrank: {len(data)} of {size}")
            self.broker.stats.copied_record_bytes += size
            writer.write(data)
        await writer.drain()
