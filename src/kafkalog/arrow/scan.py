"""Kafka data directories as Arrow record batches, without Spark.

A scan is planned the way the Spark source plans a batch query (the same option meanings, the
same planner and the same columnar reader, :mod:`kafkalog.dataset.reader`, which runs without
pyspark): partitions are chosen, offset ranges resolved from listings, index files and segment
tails, and cut into byte ranges of segments. Planning happens when the scan is made, so bad
options and missing data surface at once; records are decoded only as batches are pulled.

A scan is a snapshot: records appended after planning are not read. ``kafkalog consume
--follow`` tails a live log by planning again from where the previous scan ended.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

from ..dataset import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    arrow_schema,
    discover,
    open_selected,
    parse_read_options,
    plan_input_partitions,
    read_partition,
    resolve_ranges,
)
from ..errors import KafkalogError
from ..log.datadir import TopicPartition

__all__ = ["OffsetsArg", "Scan", "open_data_dir", "plan_scan", "schema"]

SCAN_SPLIT_BYTES = 32 << 20  # smaller pieces than Spark's tasks: progress moves more evenly

OffsetsArg = str | int | Mapping[str, Mapping[int, int]] | Mapping[tuple[str, int], int] | None
"""Where reading starts or ends: ``"earliest"``, ``"latest"``, one offset for every partition,
``{"topic": {partition: offset}}`` or ``{("topic", partition): offset}``; -2 means earliest and
-1 latest; partitions not named take the default (earliest to start, latest to end)."""


def schema(include_headers: bool = False) -> pa.Schema:
    """The columns of every scan: Spark's Kafka source schema (``headers`` last, optional)."""
    return arrow_schema(include_headers)


@dataclass(frozen=True)
class Scan:
    """A planned read: the offset range of every selected partition and the byte ranges of
    segments to decode. ``ranges[tp] == (start, end)``: offsets ``[start, end)`` are read."""

    schema: pa.Schema
    ranges: dict[TopicPartition, tuple[int, int]]
    parts: tuple
    total_bytes: int

    def batches(self, on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
        """Record batches in partition order, then offset order; ``on_bytes(n)`` is called as
        each planned byte range is finished (for progress bars)."""
        for part in self.parts:
            for piece in getattr(part, "parts", [part]):  # packed small ranges, one by one
                try:
                    yield from read_partition(piece)
                except KafkalogError as e:
                    raise e.located(path=piece.path) from None
                except FileNotFoundError as e:
                    raise FileNotFoundError(
                        f"{e.filename or piece.path}: a segment went away while it was read "
                        f"(retention or compaction by a process writing to the data directory)"
                    ) from None
                if on_bytes is not None:
                    on_bytes(piece.end_position - piece.start_position)

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.batches())


def _listify(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split(",")
    out = [t.strip() for t in value if t and t.strip()]
    if not out:
        raise OptionError("topics names no topic")
    return out


def _paths(path) -> list[str]:
    if isinstance(path, (str, os.PathLike)):
        return [os.fspath(path)]
    out = [os.fspath(p) for p in path]
    if not out:
        raise OptionError("no data directory given")
    return out


def _spark_options(paths, topics, topic_pattern, partitions, starting_timestamp,
                   ending_timestamp, isolation_level, include_headers, fail_on_data_loss,
                   options) -> dict[str, str]:  # fmt: skip
    out = {
        "paths": json.dumps(paths),
        "includeHeaders": "true" if include_headers else "false",
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
        "kafka.isolation.level": isolation_level,
    }
    chosen = [n for n, v in (("topics", topics), ("topic_pattern", topic_pattern)) if v]
    if isinstance(partitions, Mapping):
        chosen.append("partitions (a mapping)")
        out["assign"] = json.dumps(
            {t: sorted({int(p) for p in ps}) for t, ps in partitions.items()}
        )
    if len(chosen) > 1:
        raise OptionError(f"give only one of {' and '.join(chosen)}")
    if topics is not None:
        out["subscribe"] = ",".join(_listify(topics))
    elif topic_pattern is not None:
        out["subscribePattern"] = topic_pattern
    if starting_timestamp is not None:
        out["startingTimestamp"] = str(int(starting_timestamp))
    if ending_timestamp is not None:
        out["endingTimestamp"] = str(int(ending_timestamp))
    out.update({str(k): str(v) for k, v in (options or {}).items()})
    return out


def _offset_spec(
    value: OffsetsArg, tps: Iterable[TopicPartition], *, start: bool, strict: bool = True
) -> OffsetSpec:
    """An OffsetSpec naming every selected partition (unnamed ones take the default)."""
    what = "starting_offsets" if start else "ending_offsets"
    if isinstance(value, str):
        kind = value.strip().lower()
        if kind == "earliest" and not start:
            raise OptionError("ending_offsets cannot be 'earliest' (a range ending at the start)")
        if kind not in ("earliest", "latest"):
            raise OptionError(f"{what} must be earliest, latest, an offset or a mapping: {value!r}")
        return OffsetSpec(kind)
    default = EARLIEST if start else LATEST
    if isinstance(value, bool):
        raise OptionError(f"{what} must be an offset, not {value!r}")
    if isinstance(value, int):
        given = {(tp.topic, tp.partition): value for tp in tps}
    elif isinstance(value, Mapping):
        given = {}
        for k, v in value.items():
            if isinstance(k, tuple):
                given[(str(k[0]), int(k[1]))] = v
            elif isinstance(v, Mapping):
                given.update({(str(k), int(p)): o for p, o in v.items()})
            else:
                raise OptionError(f"{what}: {k!r} must map partitions to offsets")
    else:
        raise OptionError(f"{what} must be earliest, latest, an offset or a mapping: {value!r}")
    selected = {(tp.topic, tp.partition) for tp in tps}
    unknown = sorted(set(given) - selected)
    for key in unknown if not strict else ():
        del given[key]
    if unknown and strict:
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise OptionError(f"{what} names partitions that are not read: {names}")
    offsets = {}
    for key, v in given.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < EARLIEST:
            raise OptionError(f"{what}: {key[0]}-{key[1]} has invalid offset {v!r}")
        if not start and v == EARLIEST:
            raise OptionError(f"{what}: {key[0]}-{key[1]} cannot be -2 (earliest)")
        offsets[key] = v
    for tp in tps:
        offsets.setdefault((tp.topic, tp.partition), default)
    return OffsetSpec("offsets", offsets)


def plan_scan(
    path: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    topics: str | Iterable[str] | None = None,
    topic_pattern: str | None = None,
    partitions: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
    starting_offsets: OffsetsArg = None,
    ending_offsets: OffsetsArg = None,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    isolation_level: str = "read_uncommitted",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    options: Mapping[str, str] | None = None,
    strict_offsets: bool = True,
) -> Scan:
    """Plan a read of one broker's data directories (see :func:`open_data_dir`).

    ``strict_offsets=False`` ignores offsets given for partitions that are not read (gone since
    they were saved, or not selected), for resuming from offsets of an earlier scan."""
    if starting_offsets is not None and starting_timestamp is not None:
        raise OptionError("give starting_offsets or starting_timestamp, not both")
    if ending_offsets is not None and ending_timestamp is not None:
        raise OptionError("give ending_offsets or ending_timestamp, not both")
    paths = _paths(path)
    opts = parse_read_options(
        _spark_options(paths, topics, topic_pattern, partitions, starting_timestamp,
                       ending_timestamp, isolation_level, include_headers, fail_on_data_loss,
                       options)
    )  # fmt: skip
    if partitions is not None and not isinstance(partitions, Mapping):
        wanted = {int(p) for p in partitions}
        assign: dict[str, list[int]] = {}
        for tp in discover(opts.paths):
            if tp.partition in wanted and opts.selects(tp.topic, tp.partition):
                assign.setdefault(tp.topic, []).append(tp.partition)
        opts = dataclasses.replace(
            opts, assign={t: tuple(sorted(ps)) for t, ps in assign.items()}, subscribe=None,
            subscribe_pattern=None,
        )  # fmt: skip
    logs = open_selected(opts)
    try:
        if starting_offsets is not None:
            opts = dataclasses.replace(
                opts,
                starting=_offset_spec(starting_offsets, logs, start=True, strict=strict_offsets),
            )
        if ending_offsets is not None:
            opts = dataclasses.replace(
                opts, ending=_offset_spec(ending_offsets, logs, start=False, strict=strict_offsets)
            )
        ranges = resolve_ranges(opts, logs)
        parts = plan_input_partitions(opts, logs, ranges, split_bytes=SCAN_SPLIT_BYTES)
    finally:
        for log in logs.values():
            log.close()
    total = 0
    for part in parts:
        for p in getattr(part, "parts", [part]):
            total += p.end_position - p.start_position
    return Scan(
        schema=arrow_schema(opts.include_headers),
        ranges={r.tp: (r.start, r.end) for r in ranges},
        parts=tuple(parts),
        total_bytes=total,
    )


def open_data_dir(
    path: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    topics: str | Iterable[str] | None = None,
    topic_pattern: str | None = None,
    partitions: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
    starting_offsets: OffsetsArg = None,
    ending_offsets: OffsetsArg = None,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    isolation_level: str = "read_uncommitted",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    options: Mapping[str, str] | None = None,
) -> pa.RecordBatchReader:
    """The records of a Kafka data directory as a ``pyarrow.RecordBatchReader``.

    Columns are Spark's Kafka source schema (:func:`schema`). ``path`` is a data directory,
    several (one broker's ``log.dirs``) or one partition directory. Topics: ``topics`` (names),
    ``topic_pattern`` (a regex matching whole names), or every topic not starting with ``__``;
    ``partitions`` keeps these partition numbers of each, or, as ``{"topic": [0, 1]}``, exactly
    these (one absent is data loss). Ranges: ``starting_offsets``/``ending_offsets``
    (:data:`OffsetsArg`) or ``starting_timestamp``/``ending_timestamp`` (milliseconds: the first
    offset whose timestamp is at or after it). ``isolation_level="read_committed"`` stops at the
    last stable offset and drops aborted records. Offsets asked for but gone raise
    :class:`~kafkalog.dataset.planner.DataLossError` unless ``fail_on_data_loss=False``.
    ``options`` takes any other option of the Spark source by its Spark name. Bad options raise
    :class:`~kafkalog.dataset.options.OptionError` (a ``ValueError``) before anything is read.
    """
    return plan_scan(
        path, topics=topics, topic_pattern=topic_pattern, partitions=partitions,
        starting_offsets=starting_offsets, ending_offsets=ending_offsets,
        starting_timestamp=starting_timestamp, ending_timestamp=ending_timestamp,
        isolation_level=isolation_level, include_headers=include_headers,
        fail_on_data_loss=fail_on_data_loss, options=options,
    ).reader()  # fmt: skip
