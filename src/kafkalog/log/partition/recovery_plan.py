"""What opening a partition directory for writing would change, worked out without changing it.

``kafkalog recover`` runs Kafka's recovery (:mod:`.loader`) only with ``--apply``; by default it
prints this plan. The plan takes the loader's decisions step by step, on files opened read-only:

1. leftovers (``.deleted``, ``.cleaned``, swaps of an unfinished clean) and indexes without a
   ``.log`` leave the directory (kafkalog moves them to the quarantine where Kafka deletes);
2. finished cleans (``.swap``) replace the segments they cover and are renamed into place;
3. a segment whose ``.index`` or ``.timeindex`` is missing or fails Kafka's sanity check (or
   kafkalog's on the entries' order and range) has its indexes rebuilt, and so has every segment
   from the recovery point on after an unclean shutdown, or after a clean one when the end of the
   log cannot be read; rebuilding walks the log and cuts it at the first invalid batch (failed
   CRC or framing, offsets going back, an offset the segment cannot index, a torn or zero-filled
   tail);
4. after a cut, the later segments leave too: the log now ends in the cut segment.

Then the log's bookkeeping follows its new end: leader epochs starting past it are dropped. A
leader-epoch-checkpoint that cannot be parsed (Kafka's startup fails on it) is rebuilt from the
batches' partition leader epochs (:mod:`.leader_epoch_repair`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import CorruptIndexError, CorruptRecordError
from ..clock import SystemClock
from ..datadir import (
    INDEX_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    log_file,
    offset_from_file_name,
    offset_index_file,
    read_leader_epoch_checkpoint,
    time_index_file,
)
from ..json_fields import json_fields
from ..segment import (
    LogSegment,
    OffsetIndex,
    TimeIndex,
    TransactionIndex,
    ValidPrefix,
    ValidPrefixWalk,
    records_from,
    zero_filled,
)
from .config import LogConfig
from .leader_epoch_repair import describe_epochs, leader_epoch_problem, rebuilt_leader_epochs
from .loader import RecoveryRecord, classify_leftovers, leftover_reason

__all__ = [
    "DROP_SEGMENT",
    "QUARANTINE",
    "REBUILD_INDEXES",
    "REBUILD_LEADER_EPOCHS",
    "RENAME",
    "REWRITE_CHECKPOINT",
    "TRIM_LEADER_EPOCHS",
    "TRUNCATE",
    "UNREADABLE_END",
    "PartitionRecoveryPlan",
    "RecoveryAction",
    "ValidPrefix",
    "finish_recovery_plan",
    "plan_recovery",
    "records_from",
    "segment_index_problem",
    "segment_valid_prefix",
    "zero_filled",
]

# What an action does to ``path``.
QUARANTINE = "quarantine"  # moved to kafkalog-quarantine/ (Kafka deletes it)
RENAME = "rename"  # a finished clean's .swap file takes its final name
REBUILD_INDEXES = "rebuild-indexes"  # .index, .timeindex and .txnindex written anew from the log
TRUNCATE = "truncate"  # the .log is cut at ``position``; the cut bytes go to the quarantine
DROP_SEGMENT = "drop-segment"  # a whole segment after a cut goes to the quarantine
TRIM_LEADER_EPOCHS = "trim-leader-epochs"  # leader-epoch-checkpoint entries past the new end go
REBUILD_LEADER_EPOCHS = "rebuild-leader-epochs"  # a malformed leader-epoch-checkpoint rebuilt
REWRITE_CHECKPOINT = "rewrite-checkpoint"  # a data directory's malformed offset checkpoint
# Not a change: Kafka's startup fails on the partition; kafkalog's writable opening recovers it
# as after an unclean shutdown (the plan's other actions).
UNREADABLE_END = "unreadable-end"

_INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryAction:
    """One change recovery makes, where, and why."""

    action: str
    path: str
    reason: str
    position: int | None = None  # truncate: the byte where the cut falls
    bytes: int | None = None  # bytes leaving the log (truncate, drop-segment)
    offset: int | None = None  # the first offset affected, when known
    records: int | None = None  # records leaving the log (truncate, drop-segment), by headers
    records_exact: bool = True  # False: the framing breaks, more may go than counted

    def to_dict(self) -> dict:
        return json_fields(
            self,
            ("action", "path", "position", "bytes", "offset", "records", "records_exact", "reason"),
        )


@dataclass(slots=True)
class PartitionRecoveryPlan:
    """Every change recovering one partition directory would make (none: nothing to do)."""

    directory: str
    actions: list[RecoveryAction] = field(default_factory=list)
    recovered_from: int | None = None  # base offset from which segments are re-checked
    log_end_offset: int | None = None  # after recovery (None: no segment)
    # False: planned without walking the segments recovery re-checks (``walk=False``); what
    # their walks find comes from the recovery itself (:func:`finish_recovery_plan`).
    complete: bool = True
    leader_epochs: list = field(default_factory=list, repr=False)  # the checkpoint's, before

    @property
    def changes(self) -> bool:
        return any(a.action != UNREADABLE_END for a in self.actions)

    @property
    def unreadable(self) -> bool:
        """Opening the log would fail: only a recovery that re-checks the last segment helps."""
        return any(a.action == UNREADABLE_END for a in self.actions)

    @property
    def bytes_cut(self) -> int:
        return sum(a.bytes or 0 for a in self.actions if a.action in (TRUNCATE, DROP_SEGMENT))

    def add(
        self, action: str, path: str | os.PathLike, reason: str, **where: int | bool | None
    ) -> None:
        """Add an action on ``path`` (``where``: its position, bytes, offset and records)."""
        self.actions.append(RecoveryAction(action=action, path=str(path), reason=reason, **where))


def segment_valid_prefix(segment: LogSegment) -> ValidPrefix:
    """The bytes LogSegment.recover keeps, read-only (:class:`.valid_prefix.ValidPrefixWalk`,
    the walk recovery itself takes), and why the rest goes."""
    walk = ValidPrefixWalk(segment)
    for _ in walk.runs():
        pass
    return walk.prefix()


def plan_recovery(
    directory: str | os.PathLike,
    *,
    recovery_point: int = 0,
    had_clean_shutdown: bool = True,
    log_start_offset: int = 0,
    config: LogConfig | None = None,
    walk: bool = True,
) -> PartitionRecoveryPlan:
    """What :func:`kafkalog.log.partition.loader.load_segments` with ``writable=True`` would do to
    ``directory``, with the same arguments; reads only.

    ``walk=False`` (for a recovery about to run, whose own walk says the rest): the segments
    recovery re-checks are listed but not walked, so the plan names no cut, no dropped segment,
    no log end and no leader epochs trimmed (``complete`` is False) until
    :func:`finish_recovery_plan` adds what the recovery found. A malformed leader-epoch-checkpoint
    is planned with the walks still (its rebuild is described from the batches)."""
    directory = Path(directory)
    config = config or LogConfig()
    clock = SystemClock()
    if not walk and leader_epoch_problem(directory) is not None:
        walk = True
    plan = PartitionRecoveryPlan(str(directory), complete=walk)

    deleted, cleaned, invalid_swaps, valid_swaps = classify_leftovers(directory)
    for path in deleted + cleaned + invalid_swaps:
        plan.add(QUARANTINE, path, leftover_reason(path))

    logs = {
        offset_from_file_name(p.name): p
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name.endswith(LOG_FILE_SUFFIX)
    }
    ends: dict[int, int | None] = {}  # base -> next offset, for the final log end
    replaced: set[int] = set()
    swap_bases: list[int] = []
    for swap_log in valid_swaps:
        base = offset_from_file_name(swap_log.name)
        with _open(directory, base, config, clock, SWAP_FILE_SUFFIX) as segment:
            prefix = segment_valid_prefix(segment)
        _cut(plan, swap_log, prefix)
        end = prefix.next_offset or base
        covered = sorted(b for b in logs if base <= b < max(end, base + 1))
        replaced.update(covered)
        swap_bases.append(base)
        ends[base] = prefix.next_offset if prefix.next_offset is not None else base
        for b in covered:
            for path in _segment_files(logs[b]):
                plan.add(
                    QUARANTINE, path, f"replaced by the finished clean {swap_log.name}", offset=b
                )
        for path in sorted(
            directory.glob(
                f"{swap_log.name[: -len(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)]}.*{SWAP_FILE_SUFFIX}"
            )
        ):
            final = path.name[: -len(SWAP_FILE_SUFFIX)]
            plan.add(RENAME, path, f"a finished clean: renamed to {final}", offset=base)

    for path in sorted(directory.iterdir()):
        if path.is_file() and path.name.endswith(_INDEX_SUFFIXES):
            if offset_from_file_name(path.name) not in logs:
                plan.add(QUARANTINE, path, "index without a .log file")

    bases = sorted((set(logs) - replaced) | set(swap_bases))
    recovered_from = None
    if not had_clean_shutdown and bases:
        below = [b for b in bases if b <= recovery_point]
        recovered_from = below[-1] if below else bases[0]
    plan.recovered_from = recovered_from

    cut_at: int | None = None  # index in ``bases`` of the segment a cut ends the log in
    for i, base in enumerate(bases):
        if base in swap_bases:
            continue
        path = logs[base]
        rebuild_reason = None
        if recovered_from is not None and base >= recovered_from:
            rebuild_reason = (
                f"recovered after an unclean shutdown (at or after the recovery point "
                f"{recovery_point})"
            )
        else:
            following = bases[i + 1] if i + 1 < len(bases) else None
            rebuild_reason = segment_index_problem(directory, base, config, following)
        if rebuild_reason is None:
            ends[base] = None
            continue
        plan.add(REBUILD_INDEXES, path, rebuild_reason, offset=base)
        if not walk:
            continue  # what the walk finds: finish_recovery_plan
        with _open(directory, base, config, clock, "") as segment:
            prefix = segment_valid_prefix(segment)
        ends[base] = prefix.next_offset if prefix.next_offset is not None else base
        if _cut(plan, path, prefix):
            cut_at = i
            break

    if cut_at is not None:
        for base in bases[cut_at + 1 :]:
            source = logs.get(base) or log_file(directory, base, SWAP_FILE_SUFFIX)
            suffix = "" if base in logs else SWAP_FILE_SUFFIX
            with _open(directory, base, config, clock, suffix) as segment:
                records, exact = records_from(segment, segment.log.start)
            for path in _segment_files(source):
                is_log = path.name.endswith(LOG_FILE_SUFFIX)
                plan.add(
                    DROP_SEGMENT,
                    path,
                    f"after the cut in segment {bases[cut_at]}: the log ends there",
                    offset=base,
                    bytes=path.stat().st_size if is_log else None,
                    records=records if is_log else None,
                    records_exact=exact,
                )
        bases = bases[: cut_at + 1]
    rechecked = {a.offset for a in plan.actions if a.action == REBUILD_INDEXES}
    if walk or (bases and bases[-1] not in rechecked):
        # Without the walks: only whether the end can be read (the recovery sets the end).
        plan.log_end_offset = _log_end(
            plan, directory, bases, ends, logs, config, clock, log_start_offset, walk
        )
    if had_clean_shutdown and plan.unreadable:
        # The loader recovers such a partition as after an unclean shutdown (Kafka's startup
        # fails on it instead): the plan is that recovery's, after the finding.
        recovered = plan_recovery(
            directory,
            recovery_point=recovery_point,
            had_clean_shutdown=False,
            log_start_offset=log_start_offset,
            config=config,
            walk=walk,
        )
        recovered.actions[:0] = [a for a in plan.actions if a.action == UNREADABLE_END]
        return recovered
    if walk or not rechecked:
        plan.complete = True  # nothing left for a recovery's walk to say
        _plan_leader_epochs(directory, plan)
    else:
        plan.log_end_offset = None
        path = directory / LEADER_EPOCH_CHECKPOINT
        plan.leader_epochs = read_leader_epoch_checkpoint(path) if path.exists() else []
    return plan


def finish_recovery_plan(
    plan: PartitionRecoveryPlan, record: RecoveryRecord | None, log_end_offset: int | None
) -> None:
    """Complete a plan made with ``walk=False`` with what the recovery that followed found
    (``record``: the opened :class:`~.log.Log`'s ``recovery_record``) and the log end
    offset it left: the cuts, with their reasons and the records they took, the segments
    dropped after a cut (instead of their re-checks), and the leader epochs trimmed."""
    if plan.complete:
        return
    record = record or RecoveryRecord()
    dropped = {d.base_offset for d in record.dropped}
    plan.actions = [
        a for a in plan.actions if not (a.action == REBUILD_INDEXES and a.offset in dropped)
    ]
    for recovered in record.recovered:
        prefix = recovered.prefix
        if prefix.reason is None or recovered.base_offset in dropped:
            continue  # nothing cut, or the whole segment went after an earlier cut
        at = next(
            (i + 1 for i, a in enumerate(plan.actions)
             if a.action == REBUILD_INDEXES and a.offset == recovered.base_offset),
            len(plan.actions),
        )  # fmt: skip
        plan.actions.insert(at, _truncation(recovered.path, prefix))
    for segment in record.dropped:
        for path, size in segment.files:
            is_log = path.name.endswith(LOG_FILE_SUFFIX)
            plan.add(
                DROP_SEGMENT,
                path,
                f"after the cut in segment {segment.after}: the log ends there",
                offset=segment.base_offset,
                bytes=size if is_log else None,
                records=segment.records if is_log else None,
                records_exact=segment.records_exact,
            )
    plan.log_end_offset = log_end_offset
    beyond = [e for e in plan.leader_epochs if log_end_offset is not None
              and e.start_offset >= log_end_offset]  # fmt: skip
    if beyond:
        _trim_epochs(plan, Path(plan.directory) / LEADER_EPOCH_CHECKPOINT, beyond)
    plan.complete = True


def _cut(plan: PartitionRecoveryPlan, path: Path, prefix: ValidPrefix) -> bool:
    if prefix.reason is None:
        return False
    plan.actions.append(_truncation(path, prefix))
    return True


def _truncation(path: Path, prefix: ValidPrefix) -> RecoveryAction:
    return RecoveryAction(
        action=TRUNCATE,
        path=str(path),
        reason=prefix.reason,
        position=prefix.valid_bytes,
        bytes=prefix.size - prefix.valid_bytes,
        offset=prefix.first_bad_offset or prefix.next_offset,
        records=prefix.records_cut,
        records_exact=prefix.records_cut_exact,
    )


def _segment_files(log: Path) -> list[Path]:
    """A segment's .log and its indexes that exist (with the log's own suffix, if any)."""
    name = log.name
    stem, rest = name.split(".", 1)
    status = rest[len("log") :]  # "" or ".swap"
    files = [log]
    for suffix in _INDEX_SUFFIXES:
        other = log.with_name(f"{stem}{suffix}{status}")
        if other.exists():
            files.append(other)
    return files


def segment_index_problem(
    directory: Path, base: int, config: LogConfig, next_base: int | None = None
) -> str | None:
    """Why the loader would rebuild this segment's indexes, or None (its checks:
    :func:`kafkalog.log.partition.loader.check_indexes`; ``next_base`` is the next segment's base
    offset). The checks read the files as a writable open would (every slot counts), but without
    opening
    them for writing."""
    kinds = (
        (OffsetIndex, offset_index_file(directory, base)),
        (TimeIndex, time_index_file(directory, base)),
    )
    for _kind, file in kinds:
        if not file.exists():
            return f"missing index {file.name}"
    log_size = log_file(directory, base).stat().st_size
    try:
        for kind, file in kinds:
            index = kind(file, base, max_index_size=config["segment.index.bytes"])
            try:
                index.sanity_check()
                if kind is OffsetIndex:
                    index.check_entries(log_size, next_base)
                else:
                    index.check_entries(next_base)
            finally:
                index.close()
        txn = TransactionIndex(directory / f"{base:020d}{TXN_INDEX_FILE_SUFFIX}", base)
        try:
            txn.sanity_check()
        finally:
            txn.close()
    except CorruptIndexError as e:
        return f"corrupt index: {e.message}"
    return None


def _log_end(
    plan, directory, bases, ends, logs, config, clock, log_start_offset, walk=True
) -> int | None:
    """The log end offset after recovery. A last segment recovery does not re-check is read as
    opening reads it: to its last complete batch, which fails on corrupt framing."""
    if not bases:
        return None
    last = bases[-1]
    if ends.get(last) is not None:
        return ends[last]
    suffix = "" if last in logs else SWAP_FILE_SUFFIX
    with _open(directory, last, config, clock, suffix) as segment:
        try:
            next_offset = segment.read_next_offset()
        except CorruptRecordError as e:
            next_offset = segment_valid_prefix(segment).next_offset if walk else None
            plan.add(
                UNREADABLE_END,
                segment.log.path,
                f"the end of the log cannot be read ({e.message}): a broker's startup fails "
                f"there; kafkalog's writable opening (serve) recovers the partition as after an "
                f"unclean shutdown (the actions that follow), and so does recover --full",
                position=e.position,
            )
    return max(next_offset if next_offset is not None else last, log_start_offset)


def _plan_leader_epochs(directory: Path, plan: PartitionRecoveryPlan) -> None:
    path = directory / LEADER_EPOCH_CHECKPOINT
    end = plan.log_end_offset
    if end is None or not path.exists():
        return
    problem = leader_epoch_problem(directory)
    if problem is not None:
        rebuilt = [e for e in rebuilt_leader_epochs(directory) if e.start_offset < end]
        plan.add(
            REBUILD_LEADER_EPOCHS,
            path,
            f"unreadable ({problem}): a broker cannot open the partition (its log directory goes "
            f"offline); rebuilt from the batches' partition leader epochs: "
            f"{describe_epochs(rebuilt)} (the old file is quarantined)",
        )
        return
    entries = read_leader_epoch_checkpoint(path)
    beyond = [e for e in entries if e.start_offset >= plan.log_end_offset]
    if beyond:
        _trim_epochs(plan, path, beyond)


def _trim_epochs(plan: PartitionRecoveryPlan, path: Path, beyond: list) -> None:
    epochs = ", ".join(f"{e.epoch}@{e.start_offset}" for e in beyond)
    plan.add(
        TRIM_LEADER_EPOCHS,
        path,
        f"epochs starting at or past the new log end offset {plan.log_end_offset} go: {epochs}",
        offset=plan.log_end_offset,
    )


class _open:
    """A segment opened read-only for the length of a ``with`` block."""

    def __init__(self, directory, base, config, clock, suffix) -> None:
        self._segment = LogSegment.open(
            directory, base, config, clock, writable=False, suffix=suffix
        )

    def __enter__(self) -> LogSegment:
        return self._segment

    def __exit__(self, *exc) -> None:
        self._segment.close()
