"""kafkalog.errors holds the exceptions and Kafka's error codes; the modules that defined them
before still name the same classes, so every existing import and ``except`` keeps working."""

from __future__ import annotations

import importlib

import pytest

import kafkalog.errors as errors
from kafkalog.server import error_codes

# (module that defined them before, class names)
_MOVED = (
    ("kafkalog.log.errors", ("CorruptCheckpointError", "InvalidTopicError", "InvalidOffsetError")),
    ("kafkalog.log.partition.config", ("ConfigError",)),
    ("kafkalog.log.partition.log", ("OffsetOutOfRangeError",)),
    ("kafkalog.log.producer", ("CorruptSnapshotError", "InvalidProducerEpochError")),
    ("kafkalog.format.validate.types", ("RecordValidationError", "InvalidTimestampError")),
    ("kafkalog.protocol.errors", ("ProtocolError", "UnsupportedVersionError")),
)


@pytest.mark.parametrize(("module", "names"), _MOVED)
def test_old_homes_name_the_same_classes(module, names):
    home = importlib.import_module(module)
    for name in names:
        assert getattr(home, name) is getattr(errors, name), name


def test_the_server_reads_the_one_table():
    for name in error_codes.__all__:
        assert getattr(error_codes, name) is getattr(errors, name), name
    assert error_codes.KAFKA_STORAGE_ERROR == 56


def test_every_code_an_exception_carries_is_in_the_table():
    table = {getattr(errors, n) for n in error_codes.__all__ if n != "code_of"}
    carriers = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.KafkalogError)
    ]
    assert len(carriers) > 30
    assert {c.__name__ for c in carriers if c.code not in table} == set()


def test_code_of():
    assert errors.code_of(errors.CorruptRecordError("x")) == errors.CORRUPT_MESSAGE
    assert errors.code_of(OSError("disk")) == errors.KAFKA_STORAGE_ERROR
    assert errors.code_of(RuntimeError("?")) == errors.UNKNOWN_SERVER_ERROR


def test_checkpoint_errors_name_the_line_not_the_position():
    e = errors.CorruptCheckpointError("bad entry", path="/d/cp", line=3)
    assert str(e.located(position=9)) == "/d/cp, line 3: bad entry"
    assert str(errors.CorruptRecordError("bad", path="f", position=4, offset=7)) == (
        "f, position 4, offset 7: bad"
    )
