"""Produce requests that fail validation get Kafka's error code, never a closed connection.

Each request here once crashed its handler (a traceback and the connection closed): the answer
must be the error code Kafka gives for the partition, and the connection must go on.
"""

from __future__ import annotations

import logging
import struct

import pytest

from kafkalog.format.crc import crc32c
from kafkalog.protocol import ApiKey
from kafkalog.server.apis import produce as produce_module
from kafkalog.server.app import BackgroundServer
from kafkalog.server.config import ServerConfig

from .server_process import SMALL
from .wire import WireClient

kafka = pytest.importorskip("kafka")
from kafka.record import MemoryRecordsBuilder as KpBuilder  # noqa: E402

LONG_MAX = 2**63 - 1
INVALID_RECORD = 87
CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_COMPRESSION_TYPE = 76
_ATTRIBUTES_AT = 21
_CRC_AT = 17
_TRANSACTIONAL = 0x10


def v2_batch(codec: int, values: list[bytes]) -> bytes:
    """A v2 batch; values are padded so that kafka-python really compresses them (it keeps a
    batch uncompressed when compressing would not make it smaller)."""
    builder = KpBuilder(magic=2, compression_type=codec, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=None, value=value * 200, headers=[])
    builder.close()
    batch = bytes(builder.buffer())
    assert struct.unpack_from(">h", batch, _ATTRIBUTES_AT)[0] & 7 == codec
    return batch


def transactional_without_producer_id(codec: int) -> bytes:
    """A v2 batch flagged transactional with producerId -1 (kafka-python refuses to build one):
    the flag set afterwards, the CRC recomputed so that only the producer id is wrong."""
    batch = bytearray(v2_batch(codec, [b"a", b"b"]))
    (attributes,) = struct.unpack_from(">h", batch, _ATTRIBUTES_AT)
    struct.pack_into(">h", batch, _ATTRIBUTES_AT, attributes | _TRANSACTIONAL)
    assert struct.unpack_from(">q", batch, 43)[0] == -1  # producerId
    struct.pack_into(">I", batch, _CRC_AT, crc32c(memoryview(batch)[_ATTRIBUTES_AT:]))
    return bytes(batch)


def magic_1_messages(timestamps: list[int]) -> bytes:
    builder = KpBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for ts in timestamps:
        builder.append(timestamp=ts, key=None, value=b"v", headers=[])
    builder.close()
    return bytes(builder.buffer())


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = ServerConfig([tmp_path_factory.mktemp("produce-errors")], port=0, **SMALL)
    with BackgroundServer(config) as s:
        yield s


@pytest.fixture
def client(server):
    c = WireClient("127.0.0.1", server.broker.port)
    yield c
    c.close()


@pytest.fixture
def logged():
    handler = _Errors()
    logging.getLogger("kafkalog.server").addHandler(handler)
    yield handler.records
    logging.getLogger("kafkalog.server").removeHandler(handler)


def create(client: WireClient, topic: str, configs: dict[str, str]) -> None:
    listed = [{"name": k, "value": v} for k, v in configs.items()]
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                        "configs": listed}]}  # fmt: skip
    assert client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]["error_code"] == 0


def produce(client: WireClient, topic: str, records: bytes, version: int = 9) -> dict:
    body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
    return client.call(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"][0]


def still_served(client: WireClient) -> bool:
    return client.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0


@pytest.mark.parametrize("codec", [1, 4], ids=["gzip", "zstd"])
def test_a_transactional_batch_without_producer_id_is_an_invalid_record(client, codec, logged):
    topic = f"uncompressed-{codec}"
    create(client, topic, {"compression.type": "uncompressed"})
    answer = produce(client, topic, transactional_without_producer_id(codec))
    assert answer["error_code"] == INVALID_RECORD
    assert "producer" in answer["error_message"].lower()
    assert still_served(client)
    assert produce(client, topic, v2_batch(codec, [b"ok"]))["error_code"] == 0
    assert logged == []  # a client's mistake, not the server's


def test_a_transactional_batch_without_producer_id_kept_as_it_is_is_refused_too(client):
    create(client, "same-codec", {"compression.type": "producer"})
    answer = produce(client, "same-codec", transactional_without_producer_id(1))
    assert answer["error_code"] == INVALID_RECORD
    assert still_served(client)


@pytest.mark.parametrize("codec", [0, 1], ids=["none", "gzip"])
def test_record_offsets_that_go_back_are_a_corrupt_message(client, codec, logged):
    """kafka-python's builder with offsetDelta 0, 2, 1, 3 (a CRC-valid batch): Kafka would store
    an uncompressed one as it is, for consumers to drop records from; kafkalog refuses it as
    its readers would refuse the log, and nothing is appended."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    topic = f"deltas-{codec}"
    create(client, topic, {})
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i, delta in enumerate([0, 2, 1, 3]):
        builder.append(delta, 1_700_000_000_000 + i, None, b"v%d" % i * 100, [])
    answer = produce(client, topic, bytes(builder.build()))
    assert answer["error_code"] == CORRUPT_MESSAGE
    assert "offset delta 1" in answer["error_message"]
    assert still_served(client)
    ok = produce(client, topic, v2_batch(codec, [b"ok"]))
    assert (ok["error_code"], ok["base_offset"]) == (0, 0)
    assert logged == []


def test_produce_v3_with_magic_1_messages_is_an_invalid_record(client, logged):
    # Timestamps -1 and Long.MAX, which no v2 batch can hold as deltas of one another, to a
    # topic whose timestamp limits let any timestamp through: Kafka refuses the request before
    # the validator (ProduceRequest.validateRecords: v3+ carries magic 2 batches only).
    create(client, "any-time", {"message.timestamp.before.max.ms": str(LONG_MAX),
                                "message.timestamp.after.max.ms": str(LONG_MAX)})  # fmt: skip
    answer = produce(client, "any-time", magic_1_messages([-1, LONG_MAX]), version=3)
    assert answer["error_code"] == INVALID_RECORD  # (v3 answers carry no message)
    answer = produce(client, "any-time", magic_1_messages([-1, LONG_MAX]), version=9)
    assert answer["error_code"] == INVALID_RECORD
    assert "magic version 2" in answer["error_message"]
    assert still_served(client)
    assert logged == []


def test_more_than_one_batch_and_zstd_before_v7_are_refused_as_kafka_does(client):
    create(client, "one-batch", {})
    two = v2_batch(0, [b"a"]) + v2_batch(0, [b"b"])
    assert produce(client, "one-batch", two)["error_code"] == INVALID_RECORD
    assert produce(client, "one-batch", v2_batch(4, [b"z"]), version=6)["error_code"] == (
        UNSUPPORTED_COMPRESSION_TYPE
    )
    assert produce(client, "one-batch", v2_batch(4, [b"z"]), version=7)["error_code"] == 0
    assert still_served(client)


def test_an_unexpected_failure_in_one_partition_is_an_unknown_server_error(
    server, client, logged, monkeypatch
):
    create(client, "boom", {})
    real = server.broker.append

    def failing(topic, partition, records, *, origin):
        if topic == "boom":
            raise RuntimeError("something the handler did not expect")
        return real(topic, partition, records, origin=origin)

    monkeypatch.setattr(server.broker, "append", failing)
    answer = produce(client, "boom", v2_batch(0, [b"x"]))
    assert answer["error_code"] == UNKNOWN_SERVER_ERROR
    assert still_served(client)
    tracebacks = [r for r in logged if r.exc_info]
    assert len(tracebacks) == 1 and "boom-0" in tracebacks[0].getMessage()
    produce(client, "boom", v2_batch(0, [b"y"]))  # the same failure again: logged once
    assert len([r for r in logged if r.exc_info]) == 1
    monkeypatch.setattr(server.broker, "append", real)
    assert produce(client, "boom", v2_batch(0, [b"z"]))["error_code"] == 0


def test_validation_errors_from_the_record_layer_are_mapped_to_codes():
    to_code = produce_module.error_of
    assert to_code(OverflowError("varlong out of int64 range"))[0] == INVALID_TIMESTAMP
    from kafkalog.format.varint import encode_varint, encode_varlong

    for encode, value, code in (
        (encode_varlong, 1 << 63, INVALID_TIMESTAMP),
        (encode_varint, 1 << 31, INVALID_RECORD),
    ):
        with pytest.raises(ValueError) as raised:
            encode(value)
        assert to_code(raised.value)[0] == code
    assert to_code(ValueError("a transactional batch needs a producer id"))[0] == INVALID_RECORD
