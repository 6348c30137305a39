"""The read contract in Spark (docs/reading.md): a torn tail ends the log, other damage fails
the query naming file and position, and with failOnDataLoss=false is skipped, logged and
counted in the dataLossLog directory. Expected records come from kafka-python's decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

import kafkalog.spark
from dataset.written_logs import SEGMENT, extents, kafka_python_records, write_log


def _read(spark, path: Path, **options) -> list[tuple[int, bytes, bytes]]:
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = reader.load(str(path)).select("offset", "key", "value").collect()
    return sorted((r.offset, bytes(r.key), bytes(r.value)) for r in rows)


def test_torn_tail_is_the_end_of_the_log(spark, tmp_path: Path) -> None:
    data = write_log(tmp_path / "d")
    last, _ = extents(data)[-1]
    (tmp_path / "d" / "t-0" / f"{SEGMENT}.log").write_bytes(data[:-9])
    assert _read(spark, tmp_path / "d") == kafka_python_records(data[:last])


def test_damage_fails_the_query_or_is_skipped_and_counted(spark, tmp_path: Path) -> None:
    clean = write_log(tmp_path / "d")
    pos, size = extents(clean)[4]
    damaged = bytearray(clean)
    damaged[pos + 80] ^= 0x55  # a record byte: the batch's CRC no longer matches
    log = tmp_path / "d" / "t-0" / f"{SEGMENT}.log"
    log.write_bytes(bytes(damaged))

    with pytest.raises(Exception) as raised:
        _read(spark, tmp_path / "d")
    text = str(raised.value)
    assert str(log) in text and f"position {pos}" in text and "crc" in text

    report = tmp_path / "loss"
    skipped = {r[0] for r in kafka_python_records(clean[pos : pos + size])}
    expected = [r for r in kafka_python_records(clean) if r[0] not in skipped]
    got = _read(spark, tmp_path / "d", failOnDataLoss="false", dataLossLog=str(report))
    assert got == expected
    found = kafkalog.spark.data_loss_report(str(report))
    assert len(found) == 1
    assert (found[0]["path"], found[0]["position"]) == (str(log), pos)
