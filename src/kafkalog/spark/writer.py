"""Writing DataFrames as Kafka logs: staged files in tasks, offsets assigned on the driver.

The writing itself is :mod:`kafkalog.dataset`'s engine (``kafkalog.dataset.writer``, which
:func:`kafkalog.arrow.write_data_dir` runs in one process): tasks (``write``) stage their rows
with its ``TaskWriter`` (grouped per topic-partition, partitioned as Kafka's producer does,
encoded with the columnar encoder) under ``<dataDir>/.kafkalog-staging/<write id>/<task>/``,
with offsets starting at 0; the driver's ``commit`` runs its ``commit_staged``: under the data
directory's lock, each staged file is appended, in task order, to the partition's log, its
batches given their offsets. If an append fails, every partition is truncated back to where it
was; ``abort`` and failed commits remove the staged files. This module adds what is Spark's:
the check of the DataFrame's schema with Spark's wording, commit messages, save modes and the
streaming sink's once-only commits.

The data directory must be on a filesystem the driver and every executor share (a local path in
local mode; NFS or similar on a cluster), or in object storage (``s3://...``): tasks then put
their staged batches under the directory's ``.kafkalog-staging/`` prefix, and the driver's
commit puts the new segments and, last, the manifest that makes them visible
(``kafkalog.dataset.remote_writer``, docs/object-storage.md).

The streaming sink (:class:`KafkaLogStreamWriter`) commits micro-batch ``batchId`` at most once:
a state file in the data directory records the last committed batch and, while appending, the
log end offsets before the append, so a replayed batch is skipped and a half-appended one is
truncated away and redone.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from ..dataset import (
    STAGING_DIR,
    OptionError,
    TaskWriter,
    WriteOptions,
    check_sink_types,
    commit_staged,
    prepare_staging,
    remove_staging,
)
from ..log.storage import is_remote

try:
    from pyspark.sql.datasource import (
        DataSourceArrowWriter,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = DataSourceStreamArrowWriter = WriterCommitMessage = object

__all__ = [
    "SINK_STATE_PREFIX",
    "STAGING_DIR",
    "KafkaLogStreamWriter",
    "KafkaLogWriter",
    "StagedFiles",
    "commit_staged",
]

SINK_STATE_PREFIX = "kafkalog-sink-"


@dataclass
class StagedFiles(WriterCommitMessage):
    """What one task staged: {(topic, partition): (file, records)} and its directory."""

    task_dir: str
    files: dict


def _check_columns(schema, options: WriteOptions) -> None:
    """Spark's Kafka sink's checks (``KafkaWriter.validateQuery``) on the DataFrame's schema,
    before any task runs, with Spark's wording (the rules: kafkalog.dataset's
    ``check_sink_types``)."""
    fields = {f.name: f.dataType.simpleString() for f in schema.fields} if schema else {}
    check_sink_types(fields, options)


def _stage(options: WriteOptions, staging: str, iterator, *, overwrite: bool = False):
    task = TaskWriter(options, staging, overwrite=overwrite)
    for batch in iterator:
        task.add(batch)
    staged = task.finish()
    return StagedFiles(staged.task_dir, staged.files)


class KafkaLogWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalog")``: staged in tasks, committed on the driver."""

    def __init__(self, options: WriteOptions, schema, overwrite: bool) -> None:
        _check_columns(schema, options)
        self.options = options
        self.overwrite = overwrite
        self.staging = prepare_staging(options, overwrite=overwrite)

    def write(self, iterator):
        return _stage(self.options, self.staging, iterator, overwrite=self.overwrite)

    def commit(self, messages) -> None:
        try:
            commit_staged(self.options, messages, overwrite=self.overwrite, staging=self.staging)
        finally:
            remove_staging(self.staging)

    def abort(self, messages) -> None:
        remove_staging(self.staging)


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkalog")``: each micro-batch appended at most once."""

    def __init__(self, options: WriteOptions, schema, overwrite: bool) -> None:
        _check_columns(schema, options)
        if overwrite:
            raise OptionError("the kafkalog streaming sink only appends (outputMode append)")
        if is_remote(options.path):
            raise OptionError(
                f"path {options.path}: the streaming sink writes to local or shared directories; "
                f"object storage takes batch writes (df.write), each committed by a manifest"
            )
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
        return _stage(self.options, staging, iterator)

    def commit(self, messages, batchId: int) -> None:
        def bookkeeping(manager, written):
            from ..log.datadir import TopicPartition

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
            remove_staging(self._staging(batchId))

    def abort(self, messages, batchId: int) -> None:
        remove_staging(self._staging(batchId))


def _read_state(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _write_state(path: str, state: dict) -> None:
    from ..log.datadir import write_file_atomically

    write_file_atomically(path, (json.dumps(state, sort_keys=True) + "\n").encode())
