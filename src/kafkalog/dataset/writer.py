"""Writing Arrow rows as Kafka logs: the engine behind :func:`kafkalog.arrow.write_data_dir` and
the Spark sink (``df.write.format("kafkalog")``).

Rows have the columns of Spark's Kafka sink: ``value`` (required), ``key``, ``headers``,
``topic`` (unless the ``topic`` option is set: the option wins), ``partition`` (null: Kafka's
default partitioner) and ``timestamp`` (null: the write time). Other columns are ignored.

A write has two steps, so that a distributed writer can run the first in its tasks:

- staging (:class:`TaskWriter`, one per task or process): rows are grouped by topic-partition
  (keyed rows go to ``toPositive(murmur2(key)) % partitions``, rows without a key spread as
  Kafka's sticky partitioner spreads them), encoded as magic 2 record batches with the columnar
  encoder (:func:`kafkalog.format.columnar.encode_columnar`: codec, level and batch size from the
  options) and appended to one staged file per topic-partition under
  ``<dataDir>/.kafkalog-staging/<write id>/<task>/``, with offsets starting at 0;
- the commit (:func:`commit_staged`, once): it takes the data directory's lock and appends each
  staged file, in task order, to the partition's log (``Log.append_as_follower``), giving each
  batch its offsets first (format's ``MutableRecordBatch.set_last_offset``: the base offset lies
  outside the CRC, so 8 bytes per batch change and nothing else). The log rolls segments and
  writes indexes, checkpoints and the clean-shutdown marker as a broker does. If an append
  fails, every partition is truncated back to where it was; staged files are removed by the
  caller (:func:`remove_staging`) whatever happens.

A data directory in object storage (``s3://...``) is staged and committed by
:mod:`.remote_writer`: staged objects, new segments put in place, and a manifest written last
as the commit point (docs/object-storage.md, "Writing").

:func:`write_batches` runs both in one process (the Arrow writer). Nothing reaches a log before
every row is encoded: an input that fails halfway leaves the data directory as it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError, KafkalogError, PartitionOutOfRangeError, WriteSchemaError
from ..format import MutableRecordBatch
from ..format.entries import entry_header
from ..log.storage import is_remote
from .options import OptionError, WriteOptions

__all__ = [
    "STAGING_DIR",
    "PartitionOutOfRangeError",
    "PartitionWrite",
    "StagedFiles",
    "TaskWriter",
    "WriteResult",
    "WriteSchemaError",
    "append_staged",
    "check_arrow_sink_schema",
    "check_partition_count",
    "check_sink_types",
    "commit_staged",
    "existing_partitions",
    "prepare_staging",
    "remove_staging",
    "write_batches",
]

STAGING_DIR = ".kafkalog-staging"
FLUSH_BYTES = 4 << 20  # rows buffered per partition before encoding
APPEND_CHUNK = 1 << 20  # bytes per log append on commit (segments roll between appends)
LOCK_POLL_SECONDS = 0.05

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


# -- the columns -------------------------------------------------------------------------------
# Spark's Kafka sink's types (``KafkaWriter.validateQuery``), in Spark's order of checks; and what
# an Arrow writer takes for the same column (Arrow has more types for each meaning).
_SPARK_TYPES = (
    ("key", ("string", "binary")),
    ("value", ("string", "binary")),
    ("headers", ("array<struct<key:string,value:binary>>",)),
    ("partition", ("int",)),
)
_ARROW_RULES = {
    "topic": "a string (or the topic option set)",
    "key": "binary or string (null: no key)",
    "value": "binary or string (null: a tombstone)",
    "headers": "a list of struct<key: string, value: binary or string> (null: no headers)",
    "partition": "an integer from 0 to the topic's partitions - 1 (null: Kafka's partitioner)",
    "timestamp": "a timestamp, or an integer of milliseconds since the epoch (null: now)",
}


def check_sink_types(types: Mapping[str, str], options: WriteOptions) -> None:
    """Spark's Kafka sink's checks, before any row is read: a ``value`` column, a topic (option
    or column), each sink column's type (Spark's ``simpleString`` names, compared without
    nullability), with Spark's wording. Columns the sink does not use are ignored."""
    if options.topic is None:
        if "topic" not in types:
            raise WriteSchemaError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic.",
                column="topic", rule=_ARROW_RULES["topic"],
            )  # fmt: skip
        _check_spark_type("topic", types["topic"], ("string",))
    for name, desired in _SPARK_TYPES:  # Spark's order: (topic), key, value, headers, partition
        if name in types:
            _check_spark_type(name, types[name], desired)
        elif name == "value":
            raise WriteSchemaError(
                "Required attribute 'value' not found", column="value", rule=_ARROW_RULES["value"]
            )


def _check_spark_type(name: str, got: str, desired: tuple[str, ...]) -> None:
    if got not in desired:
        raise WriteSchemaError(
            f"{name} attribute unsupported type {got}. {name} must be a(n) {' or '.join(desired)}",
            column=name, rule=" or ".join(desired),
        )  # fmt: skip


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):  # fmt: skip
        return "binary"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        item = t.value_type
        if pa.types.is_struct(item) and sorted(item.names) == ["key", "value"]:
            key, value = _kind(item.field("key").type), _kind(item.field("value").type)
            if key == "string" and value in ("binary", "string", "null"):
                return "headers"
    return "other"


_ARROW_KINDS = {
    "topic": ("string",),
    "key": ("binary", "string", "null"),
    "value": ("binary", "string", "null"),
    "headers": ("headers", "null"),
    "partition": ("integer", "null"),
    "timestamp": ("timestamp", "integer", "null"),
}


def check_arrow_sink_schema(schema: pa.Schema, options: WriteOptions) -> None:
    """The sink's rules for Arrow columns: :class:`WriteSchemaError` naming the column and
    what it must be. Arrow types of one meaning are all taken (large and view strings and
    binaries, dictionaries, any integer width for partitions, any timestamp unit)."""
    names = schema.names
    for name in set(names):
        if names.count(name) > 1 and name in _ARROW_KINDS:
            raise WriteSchemaError(
                f"column {name!r} appears {names.count(name)} times: give it once",
                column=name, rule="one column of that name",
            )  # fmt: skip
    if "value" not in names:
        raise WriteSchemaError(
            f"column 'value' is missing: value must be {_ARROW_RULES['value']} (columns given: "
            f"{', '.join(names) or 'none'})",
            column="value", rule=_ARROW_RULES["value"],
        )  # fmt: skip
    if options.topic is None and "topic" not in names:
        raise WriteSchemaError(
            "no topic: give the topic option, or a 'topic' column (a string per row)",
            column="topic", rule=_ARROW_RULES["topic"],
        )  # fmt: skip
    for name, kinds in _ARROW_KINDS.items():
        if name not in names or (name == "topic" and options.topic is not None):
            continue
        t = schema.field(name).type
        if _kind(t) not in kinds:
            raise WriteSchemaError(
                f"column {name!r} has type {t}: {name} must be {_ARROW_RULES[name]}",
                column=name, rule=_ARROW_RULES[name],
            )  # fmt: skip


def _plain(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _bytes_column(arr: pa.Array) -> pa.Array:
    """binary (large_binary for large types): string bytes as they are (UTF-8)."""
    arr = _plain(arr)
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_binary(t):
        return arr  # as the Spark sink always passed them
    if pa.types.is_large_string(t):
        return arr.cast(pa.large_binary())
    return arr.cast(pa.binary())


def conform_batch(batch: pa.RecordBatch, options: WriteOptions) -> dict[str, pa.Array]:
    """The sink columns of ``batch`` in the types the encoder and partitioners take; other
    columns are dropped."""
    names = batch.schema.names
    col = {name: batch.column(i) for i, name in enumerate(names) if name in _ARROW_KINDS}
    out: dict[str, pa.Array] = {"value": _bytes_column(col["value"])}
    if "key" in col:
        out["key"] = _bytes_column(col["key"])
    if options.topic is None:
        topic = _plain(col["topic"])
        if not pa.types.is_string(topic.type):
            topic = topic.cast(pa.string())
        out["topic"] = topic
    if "headers" in col:
        headers = _plain(col["headers"])
        if headers.type != HEADERS_TYPE:
            headers = headers.cast(HEADERS_TYPE)
        out["headers"] = headers
    if "partition" in col:
        given = _plain(col["partition"])
        if pa.types.is_null(given.type):
            given = pa.nulls(len(given), pa.int32())
        elif not (pa.types.is_int32(given.type) or pa.types.is_int64(given.type)):
            given = given.cast(pa.int64())
        out["partition"] = given
    if "timestamp" in col:
        ts = _plain(col["timestamp"])
        if not pa.types.is_null(ts.type):
            out["timestamp"] = ts
    return out


# -- staging -----------------------------------------------------------------------------------
@dataclass
class StagedFiles:
    """What one task staged: {(topic, partition): (file, records)} and its directory."""

    task_dir: str
    files: dict


class TaskWriter:
    """One task's staging: rows grouped per topic-partition, encoded, appended to files."""

    def __init__(self, options: WriteOptions, staging: str, *, overwrite: bool = False) -> None:
        self.options = options
        self.overwrite = overwrite
        self.upload_to: str | None = None  # a staging prefix in object storage
        if is_remote(staging):  # encoded here, put there by finish()
            self.upload_to = f"{staging}/{uuid.uuid4().hex}"
            self.dir = tempfile.mkdtemp(prefix="kafkalog-task-")
        else:
            if not is_remote(options.path) and not os.path.isdir(options.path):
                raise FileNotFoundError(
                    f"data directory {options.path} is not visible from this executor: it must "
                    f"be on a filesystem the driver and every executor share"
                )
            if not os.path.isdir(staging):
                raise KafkalogError(f"the write was aborted (staging {staging} is gone)")
            self.dir = os.path.join(staging, uuid.uuid4().hex)
            os.mkdir(self.dir)
        self.counts: dict[str, int] = {}
        self.sticky: dict = {}
        self.pending: dict[tuple[str, int], list[pa.RecordBatch]] = {}
        self.pending_bytes: dict[tuple[str, int], int] = {}
        self.files: dict[tuple[str, int], list] = {}  # -> [path, records]

    def partition_count(self, topic: str) -> int:
        n = self.counts.get(topic)
        if n is None:
            n = self.options.num_partitions if self.overwrite else None
            if not n:  # an existing topic keeps its partitions (the driver checked numPartitions
                n = existing_partitions(self.options.path, topic)  # for the topic option)
            if not n:
                n = self.options.num_partitions
                if not n:
                    raise OptionError(
                        f"topic {topic!r} does not exist in {self.options.path}: give the "
                        f"option numPartitions to create it"
                    )
            self.counts[topic] = n
        return n

    def add(self, batch: pa.RecordBatch) -> None:
        """Stage the rows of ``batch`` (sink columns, any Arrow types the sink takes)."""
        n = batch.num_rows
        if n == 0:
            return
        col = conform_batch(batch, self.options)
        if self.options.topic is not None:
            topics = [self.options.topic]
            topic_idx = np.zeros(n, np.int32)
        else:
            encoded = col["topic"].dictionary_encode()
            if encoded.null_count:
                raise KafkalogError("null topic present in the data. Use the topic option for "
                                    "setting a topic.")  # fmt: skip
            topics = encoded.dictionary.to_pylist()
            topic_idx = np.asarray(encoded.indices, dtype=np.int32)
        keys = col.get("key")
        values = col["value"]
        partitions = np.full(n, -1, np.int64)
        given = None
        if "partition" in col:
            given = np.asarray(col["partition"].is_valid())
            partitions = np.array(col["partition"].fill_null(-1), dtype=np.int64)
        for t, topic in enumerate(topics):
            count = self.partition_count(topic)
            rows = topic_idx == t if len(topics) > 1 else np.ones(n, bool)
            bad = rows & (partitions >= count)
            if given is not None:
                bad |= rows & given & (partitions < 0)
            if bad.any():
                raise PartitionOutOfRangeError(topic, int(partitions[bad][0]), count)
            todo = rows & (partitions < 0)
            if not todo.any():
                continue
            self._default_partitions(topic, count, keys, values, todo, partitions)
        group = topic_idx.astype(np.int64) * (1 << 32) + partitions  # all in [0, count) now
        order = np.argsort(group, kind="stable")
        sorted_groups = group[order]
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        ends = np.r_[starts[1:], n]
        out_cols = self._output_columns(col, n)
        table = pa.RecordBatch.from_arrays(list(out_cols.values()), names=list(out_cols))
        taken = table.take(pa.array(order))
        for a, b in zip(starts, ends):
            g = int(sorted_groups[a])
            tp = (topics[g >> 32], g & 0xFFFFFFFF)
            piece = taken.slice(int(a), int(b - a))
            self.pending.setdefault(tp, []).append(piece)
            size = self.pending_bytes.get(tp, 0) + piece.nbytes
            self.pending_bytes[tp] = size
            if size >= FLUSH_BYTES:
                self._flush(tp)

    def _default_partitions(self, topic, count, keys, values, todo, partitions) -> None:
        from .partitioning import StickyPartitioner, partitions_for_keys

        if keys is not None:
            keyed = todo & np.asarray(keys.is_valid())
            if keyed.any():
                idx = np.flatnonzero(keyed)
                partitions[idx] = partitions_for_keys(keys.take(pa.array(idx)), count)
            todo = todo & ~keyed
        if todo.any():
            idx = np.flatnonzero(todo)
            sticky = self.sticky.get(topic)
            if sticky is None:
                sticky = self.sticky[topic] = StickyPartitioner(count, self.options.batch_size)
            vals = values.take(pa.array(idx))
            sizes = np.asarray(pc.binary_length(vals).fill_null(0), dtype=np.int64)
            partitions[idx] = sticky.assign(sizes + 1)

    def _output_columns(self, col, n: int) -> dict:
        out = {"key": col.get("key"), "value": col["value"]}
        ts = col.get("timestamp")
        if ts is None or ts.null_count:
            now = int(time.time() * 1000)
            if ts is None:
                ms = pa.array(np.full(n, now, np.int64))
            else:
                ms = _millis(ts).fill_null(now)
        else:
            ms = _millis(ts)
        out["timestamp"] = ms
        if "headers" in col:
            out["headers"] = col["headers"]
        return {k: v if v is not None else pa.nulls(n, pa.binary()) for k, v in out.items()}

    def _flush(self, tp) -> None:
        from ..format import columnar

        pieces = self.pending.pop(tp, [])
        self.pending_bytes.pop(tp, None)
        if not pieces:
            return
        table = pa.Table.from_batches(pieces).combine_chunks()
        headers = table.column("headers") if "headers" in table.column_names else None
        o = self.options
        data = columnar.encode_columnar(
            table.column("key"), table.column("value"), table.column("timestamp"), headers,
            base_offset=0, compression=o.codec, compression_level=o.compression_level,
            batch_bytes=o.batch_size, partition_leader_epoch=0,
        )  # fmt: skip
        entry = self.files.get(tp)
        if entry is None:
            name = f"{len(self.files):06d}.batches"
            entry = self.files[tp] = [os.path.join(self.dir, name), 0]
        with open(entry[0], "ab") as f:
            f.write(data)
        entry[1] += table.num_rows

    def finish(self) -> StagedFiles:
        for tp in list(self.pending):
            self._flush(tp)
        if self.upload_to is not None:
            return self._put_staged()
        return StagedFiles(self.dir, {tp: tuple(v) for tp, v in self.files.items()})

    def _put_staged(self) -> StagedFiles:
        """Put the staged files in the staging prefix, where the driver's commit reads them."""
        from ..log.storage import put_file

        assert self.upload_to is not None
        try:
            files = {}
            for tp, (path, records) in self.files.items():
                url = f"{self.upload_to}/{os.path.basename(path)}"
                put_file(url, path)
                files[tp] = (url, records)
            return StagedFiles(self.upload_to, files)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _millis(ts: pa.Array) -> pa.Array:
    if pa.types.is_timestamp(ts.type):
        unit = {"s": 1000, "ms": 1, "us": 1 / 1000, "ns": 1 / 1_000_000}[ts.type.unit]
        raw = ts.cast(pa.int64())
        values = np.asarray(raw.fill_null(0), dtype=np.int64)
        ms = values * int(unit) if unit >= 1 else np.floor_divide(values, int(1 / unit))
        mask = np.asarray(ts.is_null()) if ts.null_count else None
        return pa.array(ms, pa.int64(), mask=mask)
    return ts.cast(pa.int64())


def check_partition_count(options: WriteOptions, topic: str, existing: int) -> None:
    """Appending to a topic keeps its partitions: a different numPartitions is an error."""
    wanted = options.num_partitions
    if wanted and wanted != existing:
        raise OptionError(
            f"topic {topic!r} already has {existing} partitions in {options.path}, and "
            f"numPartitions is {wanted}: an append writes to the existing partitions (Kafka "
            f"never changes a topic's partition count on produce). Leave numPartitions out, or "
            f"use mode('overwrite') to replace the topic with {wanted} partitions"
        )


def existing_partitions(path: str, topic: str) -> int:
    """The partition count of ``topic`` in data directory ``path`` (0 if absent)."""
    from .planner import discover

    if is_remote(path):
        from .remote_writer import remote_partition_count

        return remote_partition_count(path, topic)
    if not os.path.isdir(path):
        return 0
    found = [tp.partition for tp in discover([path]) if tp.topic == topic]
    return max(found) + 1 if found else 0


def prepare_staging(options: WriteOptions, *, overwrite: bool, shared: bool = True) -> str:
    """The driver's checks before any row is read (the topic option names an existing topic,
    or numPartitions creates it; appending keeps its partition count), then a new staging
    directory for the write's tasks: its path (in object storage: a prefix, or with ``shared``
    false, for one process, a local temporary directory)."""
    if is_remote(options.path):
        from .remote_writer import prepare_remote

        return prepare_remote(options, overwrite=overwrite, shared=shared)
    os.makedirs(options.path, exist_ok=True)
    staging = os.path.join(options.path, STAGING_DIR, uuid.uuid4().hex)
    os.makedirs(staging)
    if options.topic is not None:
        existing = existing_partitions(options.path, options.topic)
        try:
            if not existing and not options.num_partitions:
                raise OptionError(
                    f"topic {options.topic!r} does not exist in {options.path}: give the "
                    f"option numPartitions to create it"
                )
            if existing and not overwrite:
                check_partition_count(options, options.topic, existing)
        except OptionError:
            remove_staging(staging)
            raise
    return staging


def remove_staging(staging: str) -> None:
    """Remove a write's staged files, then the staging folders above it when empty (never
    past ``.kafkalog-staging``). A task Spark has not stopped yet may still be adding a file
    while the folder goes: it is removed again, a few times (a task finding its folder gone
    fails, and adds nothing)."""
    from .remote_writer import is_remote_staging, remove_remote_staging

    if is_remote_staging(staging):
        remove_remote_staging(staging)
        return
    for attempt in range(5):
        shutil.rmtree(staging, ignore_errors=True)
        if not os.path.exists(staging):
            break
        time.sleep(0.05 * (attempt + 1))
    parent = os.path.dirname(staging)
    while True:
        try:
            os.rmdir(parent)  # only when no other write is staging there
        except OSError:
            break
        if os.path.basename(parent) == STAGING_DIR:
            break
        parent = os.path.dirname(parent)


# -- the commit --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionWrite:
    """What a write appended to one partition: offsets ``[first_offset, next_offset)``."""

    first_offset: int
    next_offset: int
    batches: int
    bytes: int

    @property
    def records(self) -> int:
        return self.next_offset - self.first_offset


@dataclass(frozen=True)
class WriteResult:
    """What a write appended, by ``(topic, partition)``."""

    partitions: dict[tuple[str, int], PartitionWrite] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def batches(self) -> int:
        return sum(p.batches for p in self.partitions.values())

    @property
    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})


def _assign_offsets(view: memoryview, next_offset: int) -> tuple[int, int]:
    """Give each batch of ``view`` consecutive offsets from ``next_offset`` (format's
    MutableRecordBatch: the base offset lies outside the CRC); returns (the next offset,
    batches)."""
    pos, end, batches = 0, len(view), 0
    while (header := entry_header(view, pos, end)) is not None:
        batch = MutableRecordBatch(view[pos : header.end], pos)
        last = next_offset + batch.last_offset_delta
        batch.set_last_offset(last)
        next_offset = last + 1
        batches += 1
        pos = header.end
    if pos != end:
        raise CorruptRecordError("a staged file ends in a partial batch", position=pos)
    return next_offset, batches


def _written(messages) -> dict[tuple[str, int], list[str]]:
    """The staged files of each topic-partition, in task order."""
    written: dict[tuple[str, int], list[str]] = {}
    for m in messages:
        if m is not None:
            for tp, (path, _records) in m.files.items():
                written.setdefault(tuple(tp), []).append(path)
    return written


def append_staged(
    manager, options: WriteOptions, messages, *, overwrite: bool = False,
    touched: dict | None = None, size_of=os.path.getsize,
) -> dict[tuple[str, int], PartitionWrite]:  # fmt: skip
    """Append the staged files of ``messages`` to the logs of ``manager`` (topics created as
    the options say, replaced with ``overwrite``), offsets given in order; ``touched`` collects
    ``(log, start)`` per partition for an undo. ``size_of`` sizes a staged file (or object)."""
    from ..log.datadir import TopicPartition
    from .reader import iter_chunks

    written = _written(messages)
    touched = {} if touched is None else touched
    topics = sorted({t for t, _ in written})
    counts = {t: len(ps) for t, ps in manager.topics().items()}
    if overwrite:
        _drop_topics(manager, topics)
    configs = {"segment.bytes": str(options.segment_bytes)} if options.segment_bytes else {}
    if options.segment_bytes and options.segment_bytes < 1 << 20:
        configs["internal.segment.bytes"] = configs.pop("segment.bytes")
    existing = manager.topics()
    for topic in topics:
        if topic not in existing:
            wanted = max(p for t, p in written if t == topic) + 1
            count = options.num_partitions or counts.get(topic, 0)
            manager.create_topic(topic, max(wanted, count), configs)
    result = {}
    for tp in sorted(written):
        log = manager.get_or_create_log(TopicPartition(*tp))
        start = log.log_end_offset
        touched[tp] = (log, start)
        next_offset, batches, size = start, 0, 0
        for path in written[tp]:
            for _, view in iter_chunks(path, 0, size_of(path), chunk=APPEND_CHUNK):
                next_offset, n = _assign_offsets(view, next_offset)
                log.append_as_follower(view)
                batches += n
                size += len(view)
        result[tp] = PartitionWrite(start, next_offset, batches, size)
    return result


def commit_staged(
    options: WriteOptions, messages, *, overwrite: bool, before_append=None,
    staging: str | None = None,
) -> WriteResult:  # fmt: skip
    """Append every staged file (``messages``: what tasks staged, :class:`StagedFiles` or
    anything with its ``files``) to its partition's log, in task order. ``before_append(manager,
    tps)`` runs under the lock first (the streaming sink's bookkeeping; returning False skips
    the append). On failure nothing stays appended. A data directory in object storage is
    committed by a manifest instead (:mod:`.remote_writer`; ``staging`` names the write)."""
    messages = list(messages)
    if is_remote(options.path):
        from .remote_writer import commit_remote

        return commit_remote(options, messages, staging=staging)
    written = _written(messages)
    manager = _open_locked(options)
    touched: dict = {}
    try:
        if before_append is not None and before_append(manager, written) is False:
            return WriteResult()
        result = append_staged(manager, options, messages, overwrite=overwrite, touched=touched)
        manager.flush()
        touched.clear()
        return WriteResult(result)
    except BaseException:
        for log, start in touched.values():  # undo partial appends
            try:
                log.truncate_to(start)
            except Exception:
                pass
        raise
    finally:
        manager.close()


def _open_locked(options: WriteOptions):
    """The data directory's LogManager, waiting up to ``lockTimeoutMs`` for its lock (another
    write committing, a ``kafkalog`` command) before failing."""
    from ..log.datadir import DataDirLockedError, LogManager

    deadline = time.monotonic() + options.lock_timeout_ms / 1000
    while True:
        try:
            return LogManager(options.path, writable=True, create=True)
        except DataDirLockedError as e:
            if time.monotonic() >= deadline:
                raise DataDirLockedError(
                    f"{e.message}; waited {options.lock_timeout_ms} ms for it (option "
                    f"lockTimeoutMs): stop the process that holds it, or wait longer",
                    path=e.path,
                ) from None
            time.sleep(LOCK_POLL_SECONDS)


def _drop_topics(manager, topics) -> None:
    """Overwrite: remove the partitions of ``topics`` (renamed ``-delete``, then deleted)."""
    from ..log.datadir import log_delete_dir_name

    for tp in [tp for tp in manager.logs if tp.topic in topics]:
        log = manager.logs.pop(tp)
        log.close()
        root = manager.log_dir_of.pop(tp)
        doomed = root / log_delete_dir_name(tp)
        os.rename(log.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)


# -- one process -------------------------------------------------------------------------------
def write_batches(
    batches: Iterable[pa.RecordBatch], options: WriteOptions, *, overwrite: bool = False
) -> WriteResult:
    """Stage every batch, then commit, in this process (columns already checked with
    :func:`check_arrow_sink_schema`). ``overwrite`` replaces the topics written."""
    staging = prepare_staging(options, overwrite=overwrite, shared=False)
    try:
        task = TaskWriter(options, staging, overwrite=overwrite)
        for batch in batches:
            task.add(batch)
        return commit_staged(options, [task.finish()], overwrite=overwrite, staging=staging)
    finally:
        remove_staging(staging)
