"""Writing DataFrames as Kafka logs: staged files in tasks, offsets assigned on the driver.

Tasks (``write``) turn their rows into magic 2 record batches with the columnar encoder
(:func:`kafkalog.format.fast.encode_columnar`: codec, level and batch size from the options) and
append them to one staged file per topic-partition under
``<dataDir>/.kafkalog-staging/<write id>/<task>/``, with offsets starting at 0. The driver's
``commit`` takes the data directory's lock and appends each staged file, in task order, to the
partition's log: a batch's base offset lies outside its CRC, so assigning the real offsets
rewrites 8 bytes per batch and nothing else. The log rolls segments and writes indexes,
checkpoints and the clean-shutdown marker as a broker does. If an append fails, every partition
is truncated back to where it was; ``abort`` and failed commits remove the staged files.

The data directory must be on a filesystem the driver and every executor share (a local path in
local mode; NFS or similar on a cluster). An executor that cannot see it fails with that message.

The streaming sink (:class:`KafkaLogStreamWriter`) commits micro-batch ``batchId`` at most once:
a state file in the data directory records the last committed batch and, while appending, the
log end offsets before the append, so a replayed batch is skipped and a half-appended one is
truncated away and redone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError, KafkalogError
from ..format.entries import entry_header
from ..table.options import OptionError, WriteOptions

try:
    from pyspark.sql.datasource import (
        DataSourceArrowWriter,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = DataSourceStreamArrowWriter = WriterCommitMessage = object

__all__ = ["KafkaLogStreamWriter", "KafkaLogWriter", "StagedFiles", "commit_staged"]

STAGING_DIR = ".kafkalog-staging"
SINK_STATE_PREFIX = "kafkalog-sink-"
FLUSH_BYTES = 4 << 20  # rows buffered per partition before encoding
APPEND_CHUNK = 1 << 20  # bytes per log append on commit (segments roll between appends)
_I64 = struct.Struct(">q")


@dataclass
class StagedFiles(WriterCommitMessage):
    """What one task staged: {(topic, partition): (file, records)} and its directory."""

    task_dir: str
    files: dict


def _check_columns(schema, options: WriteOptions) -> None:
    """Spark's Kafka sink's checks (``KafkaWriter.validateQuery``), before any task runs: a
    ``value`` column, a topic (option or column), and each sink column's type, with Spark's
    wording. Columns the sink does not use are ignored, as Spark ignores them."""
    fields = {f.name: f.dataType for f in schema.fields} if schema is not None else {}
    if options.topic is None:
        if "topic" not in fields:
            raise OptionError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        _check_type("topic", fields["topic"], ("string",))
    for name, desired in (  # Spark's order: topic, key, value, headers, partition
        ("key", ("string", "binary")),
        ("value", ("string", "binary")),
        ("headers", ("array<struct<key:string,value:binary>>",)),
        ("partition", ("int",)),
    ):
        if name in fields:
            _check_type(name, fields[name], desired)
        elif name == "value":
            raise OptionError("Required attribute 'value' not found")


def _check_type(name: str, data_type, desired: tuple[str, ...]) -> None:
    """Spark's ``KafkaWriter.expression`` check (types compared without nullability)."""
    got = data_type.simpleString()
    if got not in desired:
        raise OptionError(
            f"{name} attribute unsupported type {got}. {name} must be a(n) {' or '.join(desired)}"
        )


class _TaskWriter:
    """One task's staging: rows grouped per topic-partition, encoded, appended to files."""

    def __init__(self, options: WriteOptions, staging: str, *, overwrite: bool = False) -> None:
        self.options = options
        self.overwrite = overwrite
        if not os.path.isdir(options.path):
            raise FileNotFoundError(
                f"data directory {options.path} is not visible from this executor: it must be on "
                f"a filesystem the driver and every executor share"
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
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        col = {name: batch.column(i) for i, name in enumerate(names)}
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
        partitions = np.full(n, -1, np.int32)
        if "partition" in col:
            given = col["partition"]
            partitions = np.array(given.fill_null(-1), dtype=np.int32)
        for t, topic in enumerate(topics):
            count = self.partition_count(topic)
            rows = topic_idx == t if len(topics) > 1 else np.ones(n, bool)
            bad = rows & (partitions >= count)
            if bad.any():
                raise KafkalogError(
                    f"partition {int(partitions[bad][0])} of topic {topic!r} does not exist "
                    f"(the topic has {count} partitions)"
                )
            todo = rows & (partitions < 0)
            if not todo.any():
                continue
            self._default_partitions(topic, count, keys, values, todo, partitions)
        group = topic_idx.astype(np.int64) * (1 << 32) + partitions
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
        from ..table.partitioning import StickyPartitioner, partitions_for_keys

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
        from ..format import fast

        pieces = self.pending.pop(tp, [])
        self.pending_bytes.pop(tp, None)
        if not pieces:
            return
        table = pa.Table.from_batches(pieces).combine_chunks()
        headers = table.column("headers") if "headers" in table.column_names else None
        o = self.options
        data = fast.encode_columnar(
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
        return StagedFiles(self.dir, {tp: tuple(v) for tp, v in self.files.items()})


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
    from ..table.planner import discover

    if not os.path.isdir(path):
        return 0
    found = [tp.partition for tp in discover([path]) if tp.topic == topic]
    return max(found) + 1 if found else 0


# -- the driver's side ------------------------------------------------------------------------
def _patch_offsets(view: memoryview, next_offset: int) -> int:
    """Give each batch of ``view`` consecutive offsets from ``next_offset``; return the next."""
    pos, end = 0, len(view)
    while (header := entry_header(view, pos, end)) is not None:
        _I64.pack_into(view, pos, next_offset)
        next_offset += header.last_offset - header.base_offset + 1
        pos = header.end
    if pos != end:
        raise CorruptRecordError("a staged file ends in a partial batch", position=pos)
    return next_offset


def commit_staged(options: WriteOptions, messages, *, overwrite: bool, before_append=None) -> dict:
    """Append every staged file to its partition's log, in task order; returns
    {(topic, partition): (first offset, next offset)}. ``before_append(manager, tps)`` runs
    under the lock first (the streaming sink's bookkeeping). On failure nothing stays appended."""
    from ..log.naming import TopicPartition
    from ..table.reader import iter_chunks

    staged = [m for m in messages if m is not None]
    written: dict[tuple[str, int], list[str]] = {}
    for m in staged:
        for tp, (path, _records) in m.files.items():
            written.setdefault(tuple(tp), []).append(path)
    topics = sorted({t for t, _ in written})
    manager = _open_locked(options)
    touched: dict = {}
    try:
        if before_append is not None and before_append(manager, written) is False:
            return {}
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
            next_offset = start
            for path in written[tp]:
                for _, view in iter_chunks(path, 0, os.path.getsize(path), chunk=APPEND_CHUNK):
                    next_offset = _patch_offsets(view, next_offset)
                    log.append_as_follower(view)
            result[tp] = (start, next_offset)
        manager.flush()
        touched.clear()
        return result
    except BaseException:
        for log, start in touched.values():  # undo partial appends
            try:
                log.truncate_to(start)
            except Exception:
                pass
        raise
    finally:
        manager.close()


LOCK_POLL_SECONDS = 0.05


def _open_locked(options: WriteOptions):
    """The data directory's LogManager, waiting up to ``lockTimeoutMs`` for its lock (another
    write committing, a ``kafkalog`` command) before failing."""
    from ..log.manager import DataDirLockedError, LogManager

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
    from ..log.naming import log_delete_dir_name

    for tp in [tp for tp in manager.logs if tp.topic in topics]:
        log = manager.logs.pop(tp)
        log.close()
        root = manager.log_dir_of.pop(tp)
        doomed = root / log_delete_dir_name(tp)
        os.rename(log.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)


class KafkaLogWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalog")``: staged in tasks, committed on the driver."""

    def __init__(self, options: WriteOptions, schema, overwrite: bool) -> None:
        _check_columns(schema, options)
        self.options = options
        self.overwrite = overwrite
        os.makedirs(options.path, exist_ok=True)
        self.staging = os.path.join(options.path, STAGING_DIR, uuid.uuid4().hex)
        os.makedirs(self.staging)
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
                _remove_staging(self.staging)
                raise

    def write(self, iterator):
        task = _TaskWriter(self.options, self.staging, overwrite=self.overwrite)
        for batch in iterator:
            task.add(batch)
        return task.finish()

    def commit(self, messages) -> None:
        try:
            commit_staged(self.options, messages, overwrite=self.overwrite)
        finally:
            _remove_staging(self.staging)

    def abort(self, messages) -> None:
        _remove_staging(self.staging)


def _remove_staging(staging: str) -> None:
    """Remove a write's staged files, then the staging folders above it when empty (never
    past ``.kafkalog-staging``). A task Spark has not stopped yet may still be adding a file
    while the folder goes: it is removed again, a few times (a task finding its folder gone
    fails, and adds nothing)."""
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


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkalog")``: each micro-batch appended at most once."""

    def __init__(self, options: WriteOptions, schema, overwrite: bool) -> None:
        _check_columns(schema, options)
        if overwrite:
            raise OptionError("the kafkalog streaming sink only appends (outputMode append)")
        self.options = options
        os.makedirs(options.path, exist_ok=True)
        sink = options.sink_id or "default"
        digest = hashlib.sha256(sink.encode()).hexdigest()[:16]
        self.state_path = os.path.join(options.path, f"{SINK_STATE_PREFIX}{digest}.json")
        self.sink_name = sink
        self.staging_root = os.path.join(options.path, STAGING_DIR, f"stream-{digest}")

    def _staging(self, batch_id: int) -> str:
        return os.path.join(self.staging_root, str(batch_id))

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = None
        if ctx is not None:
            batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        staging = self._staging(int(batch_id)) if batch_id is not None else self.staging_root
        os.makedirs(staging, exist_ok=True)
        task = _TaskWriter(self.options, staging)
        for batch in iterator:
            task.add(batch)
        return task.finish()

    def commit(self, messages, batchId: int) -> None:
        def bookkeeping(manager, written):
            from ..log.naming import TopicPartition

            state = _read_state(self.state_path)
            pending = state.get("pending")
            if pending is not None:  # a crash mid-append: undo what may have been appended
                for key, start in pending["starts"].items():
                    topic, _, p = key.rpartition("-")
                    log = manager.get_log(TopicPartition(topic, int(p)))
                    if log is not None and log.log_end_offset > start:
                        log.truncate_to(start)
                state.pop("pending")
            if state.get("committed", -1) >= batchId:
                _write_state(self.state_path, state)
                return False  # Spark replays a batch already appended: skip it
            starts = {}
            for t, p in written:
                log = manager.get_log(TopicPartition(t, p))
                starts[f"{t}-{p}"] = log.log_end_offset if log is not None else 0
            state["pending"] = {"batchId": batchId, "starts": starts}
            _write_state(self.state_path, state)
            return True

        try:
            commit_staged(self.options, messages, overwrite=False, before_append=bookkeeping)
            state = _read_state(self.state_path)
            if state.get("committed", -1) < batchId:
                state.pop("pending", None)
                state["committed"] = batchId
                state["sink"] = self.sink_name
                _write_state(self.state_path, state)
        finally:
            _remove_staging(self._staging(batchId))

    def abort(self, messages, batchId: int) -> None:
        _remove_staging(self._staging(batchId))


def _read_state(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _write_state(path: str, state: dict) -> None:
    from ..log.checkpoints import write_file_atomically

    write_file_atomically(path, (json.dumps(state, sort_keys=True) + "\n").encode())
