"""``verify``: check a broker's data directory, one partition directory or one file against Kafka's
rules, and report every problem where it is.

Users point kafkalog at a dead broker's disk, so verify only reads: files are opened O_RDONLY or
mapped read-only, nothing is created, renamed or truncated, and what Kafka's loader would do on
startup (delete leftovers, rebuild indexes, truncate a torn tail) is described, never done.

What is checked, and why it matters:

- every batch: framing, CRC, header rules and (``deep``, the default) every record; offsets
  increase within and across segments from each segment's base offset (:mod:`.verify_segment`);
- ``.index``, ``.timeindex`` and ``.txnindex`` against the log, and Kafka's sanity checks, which
  decide whether a broker rebuilds an index (:mod:`.verify_index`);
- leftovers as Kafka's loader treats them, producer snapshots, leader epochs, and every offset the
  broker wrote down (recovery point, log start offset, high watermark, cleaner offset) against the
  log end offset (:mod:`.verify_partition`);
- for a data directory: its checkpoint files, ``meta.properties``, the clean-shutdown marker, and
  topic ids (``partition.metadata`` across partitions, and against KRaft metadata when present);
- with a tiered storage's remote store, each tiered partition's remote segments, as part of its
  log (:mod:`.tiered`).

Severities and codes: :mod:`.verify_report`; the list of codes is in docs/cli.md.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import KafkalogError
from ..datadir import (
    CLEAN_SHUTDOWN_FILE_NAME,
    CLEANER_OFFSET_CHECKPOINT,
    CLUSTER_METADATA_DIR,
    INDEX_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOCK_FILE_NAME,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES_FILE_NAME,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA_FILE_NAME,
    PRODUCER_IDS_FILE_NAME,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TIME_INDEX_FILE_SUFFIX,
    TOPICS_FILE_NAME,
    TXN_INDEX_FILE_SUFFIX,
    Manifest,
    PartitionDirKind,
    TopicConfigs,
    TopicPartition,
    is_manifest_name,
    load_metadata_image,
    nesting_guard,
    newest_manifest,
    parse_partition_dir_name,
    parse_segment_file_name,
    parse_snapshot_file_name,
    read_clean_shutdown,
    read_meta_properties,
    read_offset_checkpoint,
    require_regular_file,
    topic_configs,
)
from ..storage import as_path, is_remote
from ..storage.remote_storage import missing_object
from ..tiered import LocalTieredStorageLayout
from .index import check_index_file, check_txn_index
from .partition import (
    QUORUM_STATE_FILE_NAME,
    PartitionContext,
    PartitionResult,
    check_json_file,
    check_leader_epoch_file,
    check_partition,
    check_partition_metadata,
    check_snapshot_file,
    error_text,
    is_segment_name,
    note_stray_file,
    regular_files,
)
from .report import (
    ERROR,
    INFO,
    WARNING,
    Finding,
    FindingSink,
    PartitionSummary,
    VerifyReport,
)
from .segment import scan_log
from .tiered import RemoteStore, TieredCheck, open_remote_store

if TYPE_CHECKING:
    from ..tiered import RemoteStorageLayout

__all__ = ["ERROR", "INFO", "WARNING", "Finding", "PartitionSummary", "VerifyReport", "verify"]

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
_REMOTE_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
                    TXN_INDEX_FILE_SUFFIX, PRODUCER_SNAPSHOT_FILE_SUFFIX)  # fmt: skip
# Which PartitionContext field each root checkpoint fills.
_CONTEXT_FIELDS = {
    RECOVERY_POINT_OFFSET_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
    CLEANER_OFFSET_CHECKPOINT: "cleaner_offset",
}
_DIR_KINDS = {
    PartitionDirKind.DELETE: "renamed for deletion; Kafka deletes it on startup (not verified)",
    PartitionDirKind.FUTURE: "a future replica being moved into this directory (verified)",
    PartitionDirKind.STRAY: "a replica the controller no longer assigns here (verified)",
}


def verify(
    path: str | os.PathLike,
    *,
    deep: bool = True,
    on_bytes: Callable[[int], None] | None = None,
    remote_storage: RemoteStorageLayout | str | os.PathLike | None = None,
) -> VerifyReport:
    """Verify a data directory, a partition directory (one that directly holds ``*.log`` files)
    or a single file, read-only. ``deep=False`` skips decoding records (CRCs are still checked);
    ``on_bytes`` is told the size of every file of batches once it is walked (progress bars).
    ``remote_storage`` (a tiered storage's remote store, as :func:`kafkalog.log.tiered.
    open_tiered_partition` takes it) verifies the remote segments of the partitions whose
    copied remote segments the data directory's ``__remote_log_metadata`` lists, as part of
    each partition's log.

    Raises FileNotFoundError when ``path`` does not exist, ValueError for a file kind verify does
    not know; everything wrong *inside* the files is a finding, never an exception.
    """
    target = as_path(path)  # a URL: objects, read as the files are
    if is_remote(target):
        if not target.exists():
            raise missing_object(str(target))
    elif not target.is_dir():
        require_regular_file(target)  # FileNotFoundError, or a FIFO/device/loop: never opened
    sink = FindingSink(on_bytes)
    report = VerifyReport(str(target), deep)
    if not target.is_dir():
        _verify_file(target, sink, report, deep)
    elif is_partition_dir(target):
        configs = topic_configs(target.parent)
        manifest = _newest_manifest(target.parent, sink)
        context = _context_for(target, _read_checkpoints(target.parent, sink), configs, manifest)
        if manifest is not None and context.committed is None:
            _report_uncommitted_partition(target, sink)
        else:
            store = _remote_store(target.parent, remote_storage, sink)
            result = _check_partition(target, sink, deep, context, store)
            report.partitions.append(result.summary)
    else:
        _verify_data_dir(target, sink, report, deep, remote_storage)
    report.findings, report.files_checked = sink.findings, sink.files_checked
    return report


def is_partition_dir(path: Path) -> bool:
    """Holds ``*.log`` files; or is named ``topic-partition``, has no subdirectory and holds a
    partition's files (its .log files may all be gone)."""
    children = list(path.iterdir())
    if any(c.name.endswith(LOG_FILE_SUFFIX) and c.is_file() for c in children):
        return True
    try:
        parse_partition_dir_name(path.name)
    except KafkalogError:
        return False
    if any(c.is_dir() and not is_segment_name(c.name) for c in children):
        return False  # a directory named like a segment is reported, not a partition below
    names = {c.name for c in children}
    return bool(names & {LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE_NAME}) or any(
        n.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, PRODUCER_SNAPSHOT_FILE_SUFFIX))
        for n in names
    )


# -- a data directory ------------------------------------------------------------------------------


def _newest_manifest(root: Path, sink: FindingSink) -> Manifest | None:
    """The newest commit of kafkalog's writers in a data directory in object storage (None:
    none, or a local directory); one that cannot be read is an error finding."""
    if not is_remote(root):
        return None
    try:
        return newest_manifest(root)
    except KafkalogError as e:
        sink.error("manifest-corrupt", e.path or root, error_text(e))
    except OSError as e:
        sink.io_error(root, e, "cannot read the newest manifest")
    return None


def _report_uncommitted_partition(directory: Path, sink: FindingSink) -> None:
    sink.info(
        "uncommitted-partition", directory,
        "no commit of kafkalog's writers names this partition (a write that died or is under "
        "way): readers skip it, and so does this check",
    )  # fmt: skip


def _remote_store(root: Path, remote_storage, sink: FindingSink) -> RemoteStore | None:
    """Tiered storage's remote store and metadata of a local data directory (None: one in
    object storage, where Kafka's brokers keep none)."""
    return None if is_remote(root) else open_remote_store(root, remote_storage, sink)


def _check_partition(
    directory: Path,
    sink: FindingSink,
    deep: bool,
    context: PartitionContext | None,
    store: RemoteStore | None,
) -> PartitionResult:
    """:func:`check_partition`, and a tiered partition's remote part (:mod:`.tiered`)."""
    if store is None or context is None:
        return check_partition(directory, sink, deep=deep, context=context)
    tiered = TieredCheck(directory, store, context)
    tiered.prepare()
    try:
        result = check_partition(directory, sink, deep=deep, context=context)
        tiered.check(sink, result.summary, deep=deep)
    finally:
        tiered.close()
    return result


def _verify_data_dir(
    root: Path, sink: FindingSink, report: VerifyReport, deep: bool, remote_storage=None
) -> None:
    checkpoints = _read_checkpoints(root, sink)
    configs = topic_configs(root)
    manifest = _newest_manifest(root, sink)
    _check_root_files(root, sink, deep)
    store = _remote_store(root, remote_storage, sink)
    topic_ids: dict[str, dict[object, list[Path]]] = {}
    seen: set[TopicPartition] = set()
    for child in sorted(root.iterdir()):
        if not child.is_dir():
            continue
        try:
            parsed = parse_partition_dir_name(child.name)
        except KafkalogError as e:
            sink.info("unknown-directory", child, e.message)
            continue
        if parsed.kind != PartitionDirKind.LIVE:
            sink.info(f"partition-dir-{parsed.kind.name.lower()}", child, _DIR_KINDS[parsed.kind])
            if parsed.kind != PartitionDirKind.DELETE:  # a log Kafka keeps: verify it too
                report.partitions.append(check_partition(child, sink, deep=deep).summary)
            continue
        tp = parsed.topic_partition
        seen.add(tp)
        # KRaft keeps the metadata log's offsets itself, not in the data dir's checkpoints.
        context = (
            None
            if child.name == CLUSTER_METADATA_DIR
            else _context_for(child, checkpoints, configs, manifest)
        )
        if manifest is not None and (context is None or context.committed is None):
            _report_uncommitted_partition(child, sink)
            continue
        result = _check_partition(child, sink, deep, context, store)
        report.partitions.append(result.summary)
        if result.topic_id is not None and child.name != CLUSTER_METADATA_DIR:
            topic_ids.setdefault(tp.topic, {}).setdefault(result.topic_id, []).append(child)
    _check_topic_ids(root, topic_ids, sink)
    _check_checkpointed_partitions(root, checkpoints, seen, sink)


def _read_checkpoints(
    root: Path, sink: FindingSink, *, only: str | None = None
) -> dict[str, dict[TopicPartition, int]]:
    found = {}
    for name in OFFSET_CHECKPOINT_FILES if only is None else (only,):
        path = root / name
        if not path.is_file():
            continue
        sink.files_checked += 1
        try:
            found[name] = read_offset_checkpoint(path)
        except KafkalogError as e:
            sink.error("checkpoint-corrupt", path, error_text(e))
        except OSError as e:
            sink.io_error(path, e)
    return found


def _context_for(
    directory: Path,
    checkpoints: dict,
    configs: TopicConfigs | None,
    manifest: Manifest | None = None,
) -> PartitionContext:
    context = PartitionContext()
    try:
        tp = parse_partition_dir_name(directory.name).topic_partition
    except KafkalogError:
        return context
    if manifest is not None:
        context.committed = manifest.files(tp)
    if configs is not None:  # the topic's limit tells a torn append from a damaged size
        context.max_message_bytes = configs.config_for(tp.topic)["max.message.bytes"]
    for name, field_name in _CONTEXT_FIELDS.items():
        offset = checkpoints.get(name, {}).get(tp)
        if offset is not None:
            setattr(context, field_name, offset)
            context.sources[field_name] = str(directory.parent / name)
    return context


# kafkalog's own JSON files at a data directory's root, read (size and nesting bounded) to say
# whether kafkalog's commands can open the directory.
_JSON_ROOT_FILES = {
    TOPICS_FILE_NAME: "topics-file-corrupt",
    PRODUCER_IDS_FILE_NAME: "producer-ids-corrupt",
}


def _check_root_files(root: Path, sink: FindingSink, deep: bool) -> None:
    meta = root / META_PROPERTIES_FILE_NAME
    if meta.is_file():
        _check_meta_properties(meta, sink)
    else:
        sink.info("meta-properties-missing", meta, "Kafka writes a new one on startup")
    marker = root / CLEAN_SHUTDOWN_FILE_NAME
    if marker.is_file():
        _check_clean_shutdown(marker, sink)
    else:
        sink.info(
            "unclean-shutdown", marker,
            "absent: the broker did not stop cleanly (or the copy was taken while it ran); "
            "Kafka recovers every segment after each partition's recovery point on startup",
        )  # fmt: skip
    known = {
        META_PROPERTIES_FILE_NAME,
        CLEAN_SHUTDOWN_FILE_NAME,
        LOCK_FILE_NAME,
        TOPICS_FILE_NAME,
        PRODUCER_IDS_FILE_NAME,
    }
    for path in regular_files(root, sink):
        if path.name in _JSON_ROOT_FILES:
            check_json_file(path, sink, _JSON_ROOT_FILES[path.name])
            continue
        if path.name in known or path.name in OFFSET_CHECKPOINT_FILES:
            continue
        if is_manifest_name(path.name):  # a commit of kafkalog's writers (object storage)
            continue
        if path.name == BOOTSTRAP_CHECKPOINT:
            scan_log(path, sink, deep=deep, snapshot=True)
        else:
            note_stray_file(path, sink, "at a data directory's root")


def _check_meta_properties(path: Path, sink: FindingSink) -> None:
    sink.files_checked += 1
    try:
        read_meta_properties(path)
    except KafkalogError as e:
        sink.error("meta-properties-corrupt", path, error_text(e))
    except OSError as e:
        sink.io_error(path, e)


def _check_clean_shutdown(path: Path, sink: FindingSink) -> None:
    sink.files_checked += 1
    try:
        with nesting_guard(path):
            read_clean_shutdown(path)
    except KafkalogError as e:
        sink.warning(
            "clean-shutdown-corrupt", path,
            f"{error_text(e)} (Kafka ignores the marker's contents: its presence still means a "
            f"clean shutdown)",
        )  # fmt: skip
    except OSError as e:
        sink.io_error(path, e)


def _check_topic_ids(root: Path, topic_ids: dict, sink: FindingSink) -> None:
    image = None
    if (root / CLUSTER_METADATA_DIR).is_dir():
        try:
            image = load_metadata_image([str(root)])
        except (KafkalogError, OSError) as e:
            sink.warning("metadata-unreadable", root / CLUSTER_METADATA_DIR, str(e))
        for problem in image.problems if image is not None else ():
            sink.warning("metadata-replay", root / CLUSTER_METADATA_DIR, problem)
        if image is not None and not image.topics:
            image = None  # nothing to compare with (a fresh or truncated metadata log)
    for topic, by_id in sorted(topic_ids.items()):
        usual = Counter({tid: len(dirs) for tid, dirs in by_id.items()}).most_common(1)[0][0]
        for tid, dirs in by_id.items():
            if tid != usual:
                for d in dirs:
                    sink.error(
                        "topic-id-mismatch", d / PARTITION_METADATA_FILE_NAME,
                        f"topic id {tid} differs from {usual} of the topic's other partitions "
                        f"here: one of them belongs to a deleted and recreated topic",
                    )  # fmt: skip
        if image is None:
            continue
        known = image.topics.get(topic)
        for tid, dirs in by_id.items():
            if known is not None and known.topic_id == tid:
                continue
            why = (
                f"the KRaft metadata (as of offset {image.offset}) has no topic {topic}"
                if known is None
                else f"the KRaft metadata gives topic {topic} the id {known.topic_id}, not {tid}"
            )
            for d in dirs:
                sink.warning(
                    "topic-id-not-in-metadata", d / PARTITION_METADATA_FILE_NAME,
                    f"{why}: Kafka treats this replica as stray (renamed -stray on startup)",
                )  # fmt: skip


def _check_checkpointed_partitions(root: Path, checkpoints: dict, seen: set, sink) -> None:
    named: dict[TopicPartition, list[str]] = {}
    for name, offsets in checkpoints.items():
        for tp, offset in offsets.items():
            if tp not in seen:
                named.setdefault(tp, []).append(f"{name} ({offset})")
    for tp, where in sorted(named.items(), key=lambda item: (item[0].topic, item[0].partition)):
        sink.warning(
            "checkpoint-partition-missing", root / str(tp),
            f"named in {', '.join(where)} but there is no such partition directory: its data is "
            f"gone or was moved; Kafka ignores the entries",
        )  # fmt: skip


# -- a single file ---------------------------------------------------------------------------------


def _verify_file(path: Path, sink: FindingSink, report: VerifyReport, deep: bool) -> None:
    name = path.name
    if name in OFFSET_CHECKPOINT_FILES:
        _read_checkpoints(path.parent, sink, only=name)
    elif name == LEADER_EPOCH_CHECKPOINT:
        check_leader_epoch_file(path, sink)
    elif name == PARTITION_METADATA_FILE_NAME:
        check_partition_metadata(path, sink)
    elif name == META_PROPERTIES_FILE_NAME:
        _check_meta_properties(path, sink)
    elif name == CLEAN_SHUTDOWN_FILE_NAME:
        _check_clean_shutdown(path, sink)
    elif name == QUORUM_STATE_FILE_NAME:
        check_json_file(path, sink, "quorum-state-corrupt")
    elif name == BOOTSTRAP_CHECKPOINT or _is_complete_kraft_snapshot(name):
        scan_log(path, sink, deep=deep, snapshot=True)
    else:
        _verify_segment_file(path, sink, report, deep)


def _is_complete_kraft_snapshot(name: str) -> bool:
    try:
        parsed = parse_snapshot_file_name(name)
    except KafkalogError:
        return False
    return parsed is not None and not parsed.partial and not parsed.deleted


def _segment_file_name(path: Path):
    """``(parsed name, remote)``: a segment file's base offset, suffix and status, by Kafka's
    names or, ``remote``, a remote segment's in Kafka's LocalTieredStorage
    (``OFFSET-SEGMENTID.log``, the name of a rolled segment)."""
    try:
        return parse_segment_file_name(path.name), False
    except KafkalogError:
        start = LocalTieredStorageLayout.start_offset_of(path.name)
        suffix = "." + path.name.rsplit(".", 1)[-1]
        if start is not None and suffix in _REMOTE_SUFFIXES:
            return parse_segment_file_name(f"{start:020d}{suffix}"), True
        raise ValueError(
            f"{path}: not a file kafkalog verify knows (a .log, .index, .timeindex, .txnindex or "
            f".snapshot segment file, by Kafka's names or a remote segment's in "
            f"LocalTieredStorage, a checkpoint, partition.metadata, meta.properties, "
            f".kafka_cleanshutdown, quorum-state, or a KRaft snapshot)"
        ) from None


def _verify_segment_file(path: Path, sink: FindingSink, report: VerifyReport, deep: bool) -> None:
    parsed, remote = _segment_file_name(path)
    base, suffix = parsed.base_offset, parsed.suffix
    active = not parsed.status and not any(
        p.name.endswith(LOG_FILE_SUFFIX) and p.name.split(".", 1)[0].isdigit()
        and int(p.name.split(".", 1)[0]) > base
        for p in path.parent.iterdir()
    )  # fmt: skip
    active = active and not remote
    if suffix == LOG_FILE_SUFFIX:
        scan = scan_log(path, sink, deep=deep, base_offset=base, active=active)
        errors, warnings = sink.count_since(0)
        summary = PartitionSummary(
            path=str(path), segments=1, batches=scan.batches, records=scan.records,
            log_start_offset=base, log_end_offset=scan.next_offset or base,
            errors=errors, warnings=warnings,
        )  # fmt: skip
        report.partitions.append(summary)
    elif suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
        check_index_file(path, base, sink, time_index=suffix == TIME_INDEX_FILE_SUFFIX,
                         active=active)  # fmt: skip
    elif suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
        check_snapshot_file(path, sink, offset=base)
    else:
        log = path.with_name(f"{path.name.split('.', 1)[0]}{LOG_FILE_SUFFIX}")
        scan = scan_log(log, FindingSink(), deep=False, base_offset=base) if log.exists() else None
        check_txn_index(path, base, scan, sink)
