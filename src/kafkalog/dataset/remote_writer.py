"""Writing to a data directory in object storage: staged objects, segments built in a local
scratch directory, put in place, committed by a manifest (:mod:`.manifest`).

The steps of a write, as for a local directory (:mod:`.writer`), with object storage's commit:

- the driver (:func:`prepare_remote`) notes the newest commit (the manifest the write starts
  from) and refuses what object storage cannot do atomically (``overwrite``, appending to a
  directory that was uploaded rather than written by kafkalog: it has no manifest to extend);
- tasks stage their encoded batches as objects under ``<dataDir>/.kafkalog-staging/<write>/``
  (one process stages in a local temporary directory instead);
- the commit (:func:`commit_remote`) appends the staged batches, offsets assigned, to logs in a
  local scratch directory where each partition starts at its committed log end offset (so new
  segments begin there: committed objects are never rewritten), puts the new segment objects in
  place, then the manifest naming them (the commit point), then the data directory's derived
  files (checkpoints, ``kafkalog-topics.json``). A failure before the manifest deletes what was
  put; a process killed there leaves objects no manifest names, which readers ignore.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConcurrentCommitError, KafkalogError
from ..log.datadir import (
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    TOPICS_FILE_NAME,
    Manifest,
    PartitionEntry,
    TopicPartition,
    log_dir_name,
    manifest_name,
    newest_manifest,
    write_manifest,
    write_offset_checkpoint,
)
from ..log.storage import RemoteFile, as_path, delete_objects, delete_prefix, is_remote, put_file
from .options import OptionError, WriteOptions

if TYPE_CHECKING:
    from .writer import WriteResult

__all__ = ["commit_remote", "is_remote_staging", "prepare_remote", "remove_remote_staging"]

STAGING_DIR = ".kafkalog-staging"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
# Files of the data directory put once, by the first commit (a broker needs them on a disk).
FIRST_COMMIT_FILES = ("meta.properties", ".kafka_cleanshutdown")

# A staging's name ends with the commit its write started from (Spark prepares and commits a
# write in different Python processes: the name is what both see).
_FROM = ".from-"
LOCAL_STAGING_PREFIX = "kafkalog-remote-staging-"


def is_remote_staging(staging: str) -> bool:
    """Whether ``staging`` is a write's to object storage (a prefix, or one process's local
    temporary directory)."""
    name = os.path.basename(staging.rstrip("/"))
    return is_remote(staging) or (name.startswith(LOCAL_STAGING_PREFIX) and _FROM in name)


def started_from(staging: str) -> int:
    """The commit the write of ``staging`` started from (0: none)."""
    tail = staging.rstrip("/").rsplit(_FROM, 1)[-1]
    return int(tail) if tail.isdigit() else 0


def prepare_remote(options: WriteOptions, *, overwrite: bool, shared: bool) -> str:
    """The driver's checks before a write to object storage, and its staging: a prefix under
    the data directory (``shared``: tasks on other machines put their batches there) or a local
    temporary directory (one process)."""
    if overwrite:
        raise OptionError(
            f"path {options.path}: mode overwrite is not supported in object storage (committed "
            f"objects are never rewritten, so readers' plans stay valid); write to a new prefix"
        )
    base = newest_manifest(options.path)
    root = as_path(options.path)
    if base is None and root.is_dir() and any(True for _ in root.iterdir()):
        raise OptionError(
            f"path {options.path}: it holds objects but no kafkalog manifest (a data directory "
            f"uploaded as it is on a disk, or something else): kafkalog appends only to "
            f"directories it wrote to object storage; write to a new prefix"
        )
    if options.topic is not None:
        existing = _partition_count(base, options.topic)
        if not existing and not options.num_partitions:
            raise OptionError(
                f"topic {options.topic!r} does not exist in {options.path}: give the option "
                f"numPartitions to create it"
            )
        if existing:
            from .writer import check_partition_count

            check_partition_count(options, options.topic, existing)
    write = f"{uuid.uuid4().hex}{_FROM}{0 if base is None else base.commit}"
    if shared:
        return f"{options.path}/{STAGING_DIR}/{write}"
    staging = os.path.join(tempfile.gettempdir(), f"{LOCAL_STAGING_PREFIX}{write}")
    os.mkdir(staging)
    return staging


def _partition_count(manifest: Manifest | None, topic: str) -> int:
    found = [tp.partition for tp in (manifest.partitions if manifest else ()) if tp.topic == topic]
    return max(found) + 1 if found else 0


def remote_partition_count(path: str, topic: str) -> int:
    """The partition count of ``topic`` in the newest commit of ``path`` (0 if absent)."""
    return _partition_count(newest_manifest(path), topic)


def remove_remote_staging(staging: str) -> None:
    """Remove a write's staged objects (or local staged files)."""
    if is_remote(staging):
        delete_prefix(staging)
    else:
        shutil.rmtree(staging, ignore_errors=True)


def _check_base(options: WriteOptions, started: int) -> None:
    now = newest_manifest(options.path)
    if (0 if now is None else now.commit) != started:
        raise ConcurrentCommitError(
            f"commit {now.commit if now else 0} was made by another write after this one started "
            f"from commit {started}: one writer at a time per directory; nothing of this write "
            f"is visible, run it again",
            path=options.path,
        )


def _seed(scratch: Path, options: WriteOptions, base: Manifest | None) -> None:
    """A scratch data directory where each committed partition starts, empty, at its committed
    log end offset (an empty segment there, as Kafka's ``truncateFullyAndStartAt`` leaves), with
    the committed topics file (topic ids, configs)."""
    if base is None:
        return
    topics = as_path(options.path) / TOPICS_FILE_NAME
    if topics.exists():
        (scratch / TOPICS_FILE_NAME).write_bytes(topics.read_bytes())
    for tp, entry in base.partitions.items():
        directory = scratch / log_dir_name(tp)
        directory.mkdir()
        (directory / f"{entry.log_end_offset:020d}{LOG_FILE_SUFFIX}").touch()


def _segment_base(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() and len(stem) == 20 else None


def commit_remote(options: WriteOptions, messages, *, staging: str | None) -> WriteResult:
    """Commit what tasks staged (``messages``) to the data directory ``options.path`` in object
    storage: new segments put in place, then the manifest naming them. Nothing of the write is
    visible to readers until the manifest is put, and all of it is after."""
    from ..log.datadir import LogManager
    from .writer import WriteResult

    started = started_from(staging) if staging is not None else 0
    _check_base(options, started)
    base = newest_manifest(options.path)
    scratch = Path(tempfile.mkdtemp(prefix="kafkalog-commit-"))
    put: list[str] = []
    try:
        _seed(scratch, options, base)
        manager = LogManager(str(scratch), writable=True, create=True)
        try:
            result = _append_staged(manager, options, messages)
            ends = {tp: log.log_end_offset for tp, log in manager.logs.items()}
        finally:
            manager.close()
        manifest, uploads, derived = _plan_commit(scratch, options, base, ends, result, staging)
        _check_base(options, started)
        for relative, local in uploads:
            url = f"{options.path}/{relative}"
            put.append(url)
            put_file(url, local)
        _check_base(options, started)
        write_manifest(manifest)  # the commit point
        put.clear()
    except BaseException:
        delete_objects(put)  # (never a committed object: new segments start past them)
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    try:  # committed: what follows is derived, and a failure is said, not raised (a write
        for relative, local in derived:  # run again would append its records twice)
            put_file(f"{options.path}/{relative}", local)
        if manifest.commit > 2:  # the one before stays for plans made just now
            older = range(max(1, manifest.commit - 8), manifest.commit - 1)
            delete_objects([f"{options.path}/{manifest_name(c)}" for c in older])
    except OSError as e:
        from .planner import notice

        notice(
            f"commit {manifest.commit} of {options.path} is made, but its checkpoint files were "
            f"not all updated ({e}): the next commit rewrites them; readers go by the manifest"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return WriteResult(result)


def _append_staged(manager, options: WriteOptions, messages) -> dict:
    """The local commit's appends (:func:`.writer.append_staged`) into the scratch logs."""
    from .writer import append_staged

    return append_staged(manager, options, messages, size_of=_size_of)


def _size_of(path: str) -> int:
    if is_remote(path):
        with RemoteFile(path) as f:
            return f.size()
    return os.path.getsize(path)


def _plan_commit(scratch: Path, options, base, ends, result, staging):
    """(the new manifest, the segment objects to put, the derived files to put after it)."""
    partitions = dict(base.partitions) if base is not None else {}
    objects = set(base.objects) if base is not None else set()
    uploads: list[tuple[str, Path]] = []
    for tp, end in sorted(ends.items(), key=lambda i: (i[0].topic, i[0].partition)):
        committed = partitions.get(tp)
        if committed is not None and end == committed.log_end_offset:
            continue  # nothing appended
        start = committed.log_end_offset if committed is not None else 0
        directory = scratch / log_dir_name(tp)
        new_segments = []
        for f in sorted(directory.iterdir()):
            name, where = f.name, f"{log_dir_name(tp)}/{f.name}"
            segment = _segment_base(name)
            if committed is None and segment is None:  # partition.metadata, leader epochs
                uploads.append((where, f))
            elif segment is not None and segment >= start:
                if name.endswith(".snapshot"):
                    if segment > start or committed is None:
                        uploads.append((where, f))
                    continue
                log = directory / f"{segment:020d}{LOG_FILE_SUFFIX}"
                if committed is not None and log.stat().st_size == 0:
                    continue  # the empty start of a partition nothing was appended to
                uploads.append((where, f))
                if name.endswith(LOG_FILE_SUFFIX):
                    new_segments.append((segment, f.stat().st_size))
        old = committed.segments if committed is not None else ()
        log_start = committed.log_start_offset if committed is not None else 0
        partitions[tp] = PartitionEntry(log_start, end, tuple(old) + tuple(new_segments))
    objects.update(relative for relative, _ in uploads)
    derived = []
    write_offset_checkpoint(
        scratch / LOG_START_OFFSET_CHECKPOINT,
        {tp: e.log_start_offset for tp, e in partitions.items()},
    )
    write_offset_checkpoint(
        scratch / RECOVERY_POINT_CHECKPOINT, {tp: e.log_end_offset for tp, e in partitions.items()}
    )
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, TOPICS_FILE_NAME,
                 *FIRST_COMMIT_FILES):  # fmt: skip
        if (scratch / name).exists() and (name not in FIRST_COMMIT_FILES or name not in objects):
            derived.append((name, scratch / name))
            objects.add(name)
    write_id = os.path.basename(staging.rstrip("/")).split(_FROM)[0] if staging else ""
    write_id = write_id.removeprefix(LOCAL_STAGING_PREFIX) or uuid.uuid4().hex
    manifest = Manifest(
        options.path, (base.commit if base else 0) + 1, partitions, tuple(objects), write_id
    )
    return manifest, uploads, derived


def check_committed(manifest: Manifest, tp: TopicPartition, base: int, url: str, size: int):
    """A segment object as its commit left it (objects are never rewritten; one that changed
    was put by a write that raced this directory's commits)."""
    entry = manifest.partitions[tp]
    for b, committed in entry.segments:
        if b == base and committed != size:
            raise KafkalogError(
                f"the segment is {size} bytes, but commit {manifest.commit} of the data "
                f"directory says {committed}: it was rewritten after its commit (two writers at "
                f"once?)",
                path=url,
            )
