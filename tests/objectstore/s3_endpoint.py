"""A real S3-compatible endpoint on loopback for the object-storage tests: moto's server, and a
TCP proxy in front of it that counts the bytes answered and injects failures (a connection
dropped in the middle of an answer, 503 SlowDown answers), a given number of times or always."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


def _slow_down() -> bytes:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
        b"<Message>Please reduce your request rate.</Message></Error>"
    )
    head = (
        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    return head + body


class Proxy:
    """Forwards loopback connections to ``upstream``. ``drop`` answers (those whose status line
    starts with ``drop_status``) are cut after half their first bytes and the connection closed;
    ``slow_down`` requests are answered 503 SlowDown without reaching the server; -1 means
    always. ``answered`` counts the bytes sent back to clients."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.drop = 0
        self.drop_status = b"HTTP/1.1 2"
        self.slow_down = 0
        self.answered = 0
        self.dropped = 0
        self.slowed = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _take(self, name: str) -> bool:
        with self._lock:
            left = getattr(self, name)
            if left == 0:
                return False
            if left > 0:
                setattr(self, name, left - 1)
            return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        done = threading.Event()

        def close() -> None:
            done.set()
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        def requests() -> None:
            try:
                while not done.is_set():
                    data = client.recv(65536)
                    if not data:
                        break
                    if data[:4] in (b"GET ", b"HEAD") and self._take("slow_down"):
                        with self._lock:
                            self.slowed += 1
                        client.sendall(_slow_down())
                        break
                    upstream.sendall(data)
            except OSError:
                pass
            close()

        def answers() -> None:
            try:
                while not done.is_set():
                    data = upstream.recv(65536)
                    if not data:
                        break
                    if data.startswith(self.drop_status) and self._take("drop"):
                        with self._lock:
                            self.dropped += 1
                        half = data[: max(1, len(data) // 2)]
                        client.sendall(half)
                        with self._lock:
                            self.answered += len(half)
                        break
                    client.sendall(data)
                    with self._lock:
                        self.answered += len(data)
            except OSError:
                pass
            close()

        threading.Thread(target=requests, daemon=True).start()
        answers()

    def close(self) -> None:
        self._closed = True
        self._server.close()


def upload(client, bucket: str, root: Path, prefix: str) -> int:
    """Upload every regular file under ``root`` to ``bucket`` under ``prefix``; their count."""
    n = 0
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(root).as_posix()}")
            n += 1
    return n


@contextlib.contextmanager
def moto_s3(bucket: str, secret: str, **env: str) -> Iterator[tuple[object, str]]:
    """(boto3 client, endpoint): moto's S3 server on loopback holding an empty ``bucket``, with
    the AWS SDK's environment pointed at it (``secret`` as the secret key; ``env`` besides)."""
    import boto3
    from moto import server as moto_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_SESSION_TOKEN"):
                mp.delenv(name, raising=False)
            settings = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": secret,
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                        "AWS_EC2_METADATA_DISABLED": "true", **env}  # fmt: skip
            for name, value in settings.items():
                mp.setenv(name, value)
            client = boto3.client("s3")
            client.create_bucket(Bucket=bucket)
            yield client, endpoint
    finally:
        server.stop()
