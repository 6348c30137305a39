"""A raw Kafka-protocol client over a socket, for tests that send what real clients never would."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Mapping

from kafkalog.protocol import ApiKey, decode_response, encode_request


class WireClient:
    def __init__(self, host: str, port: int, timeout: float = 10) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """The next response frame's body, or None when the server closed the connection."""
        head = self._read_exactly(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes | None:
        data = bytearray(n)
        view = memoryview(data)
        got = 0
        while got < n:
            try:
                chunk = self.sock.recv_into(view[got:], n - got)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            got += chunk
        return bytes(data)

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation_id += 1
        self.send_raw(encode_request(api_key, version, self.correlation_id, "wire", body))
        frame = self.read_frame()
        assert frame is not None, "server closed the connection"
        correlation_id, response = decode_response(api_key, version, frame)
        assert correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def create_topic(
    client: WireClient,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, str] | Iterable[tuple[str, str]] = (),
) -> None:
    """CreateTopics of one topic (replication factor 1) with ``configs``; it must succeed."""
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1,
             "configs": [{"name": k, "value": v} for k, v in dict(configs).items()]}  # fmt: skip
    answer = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [topic]})
    assert answer["topics"][0]["error_code"] == 0
