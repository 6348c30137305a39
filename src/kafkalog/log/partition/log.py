"""One partition's log: segments, appends with Kafka's validation, reads, roll, flush, truncation
and retention (Kafka's UnifiedLog and LocalLog, for a single node).

With one replica the high watermark is the log end offset, so everything appended is committed;
the last stable offset is where the first open transaction starts. Appends go to the active
(last) segment, which rolls by size, age, full index or offset overflow. ``flush`` fsyncs and moves
the recovery point, the offset from which recovery re-checks the log after an unclean shutdown.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import CorruptRecordError, KafkalogError, OffsetOutOfRangeError
from ...format import Batch
from ...format.constants import NO_TIMESTAMP
from ...format.validate import AppendOrigin, LogValidatorConfig, validate_records
from ..clock import Clock, SystemClock
from ..datadir import DELETED_FILE_SUFFIX, parse_partition_dir_name
from ..producer import ProducerStateManager
from ..segment import (
    AbortedTxn,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    PinnedDescriptor,
    RollParams,
    TimestampAndOffset,
    walk_append,
    walk_validated,
)
from .config import LogConfig
from .leader_epoch import LeaderEpochFileCache
from .loader import RecoveryRecord, load_segments

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FlushPlan",
    "Log",
    "LogAppendInfo",
    "OffsetOutOfRangeError",
    "over_retention_bytes",
]

EARLIEST_TIMESTAMP = -2  # ListOffsets sentinels
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"


@dataclass(eq=False)
class FlushPlan:
    """One flush of a log (:meth:`Log.plan_flush`): the descriptors to fsync, pinned, and the
    marks the log moves to when they are (:meth:`Log.complete_flush`)."""

    upto: int  # records below it are durable after the flush
    recovery_point: int  # the recovery point after it
    pins: list[PinnedDescriptor]
    directory_fd: int | None  # the partition directory's, when an entry in it is new
    generation: int  # the log's truncation count when planned
    # The producer snapshots written unsynced at rolls, and descriptors of those still there.
    snapshots: tuple[Path, ...] = ()
    snapshot_fds: list[int] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to fsync: completing moves the marks only."""
        return not self.pins and not self.snapshot_fds and self.directory_fd is None

    def run(self) -> None:
        """fsync everything planned (on any thread), then give the descriptors back; raises
        the first fsync's error (the flush failed: complete nothing). The roll's snapshots go
        first, as Kafka's flush-log task, then the segments, then the directory."""
        try:
            for fd in self.snapshot_fds:
                os.fsync(fd)
            for pin in self.pins:
                pin.fsync()
            if self.directory_fd is not None:
                os.fsync(self.directory_fd)
        finally:
            self.release()

    def release(self) -> None:
        """Give the descriptors back without fsyncing (a plan not run). Twice is harmless."""
        pins, self.pins = self.pins, []
        for pin in pins:
            pin.release()
        fds, self.snapshot_fds = self.snapshot_fds, []
        fd, self.directory_fd = self.directory_fd, None
        for fd_ in [*fds, fd]:
            if fd_ is not None:
                os.close(fd_)


def over_retention_bytes(excess: int) -> Callable[[LogSegment, int], bool]:
    """retention.bytes's rule over the segments, oldest first: delete each while ``excess`` (the
    log's size past retention.bytes) still covers all of it (Kafka's
    deleteRetentionSizeBreachedSegments)."""

    def over(seg: LogSegment, nxt: int) -> bool:
        nonlocal excess
        if excess - seg.size() >= 0:
            excess -= seg.size()
            return True
        return False

    return over


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """Where an append went; ``duplicate`` when a retried batch was answered from the log."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    valid_bytes: int
    duplicate: bool = False


def validator_config(config: LogConfig) -> LogValidatorConfig:
    codec = config.compression
    return LogValidatorConfig(
        compression="producer" if codec is None else codec,
        compression_level=config.compression_level,
        timestamp_type=config.timestamp_type,
        timestamp_before_max_ms=config["message.timestamp.before.max.ms"],
        timestamp_after_max_ms=config["message.timestamp.after.max.ms"],
        max_message_bytes=config["max.message.bytes"],
        compacted=config.compact,
    )


class Log:
    """A partition directory opened as a log. Use :meth:`open`; read-only unless ``writable``."""

    def __init__(self, directory: Path, config: LogConfig, clock: Clock, writable: bool) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.writable = writable
        try:
            self.topic_partition = parse_partition_dir_name(directory.name).topic_partition
        except KafkalogError:
            self.topic_partition = None
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        # Records below it are durable (their .log fsynced): at or past the recovery point,
        # which also needs the indexes durable (see plan_flush).
        self.durable_offset = 0
        self._truncations = 0  # plans made before a truncation are void (complete_flush)
        # Producer snapshots a roll wrote without fsync: the next flush makes them durable
        # before the recovery point passes them (see roll).
        self.unsynced_snapshots: list[Path] = []
        self.closed = False
        self.load_notes: list[str] = []
        # What this opening's recovery re-checked, cut and dropped (writable openings).
        self.recovery_record: RecoveryRecord | None = None
        self.leader_epoch_cache = LeaderEpochFileCache(directory, writable=writable)
        self._producer_state: ProducerStateManager | None = None
        self._log_end_offset = 0
        # A read-only log whose last segment cannot be read to its end: where reads stop.
        self._readable_end: int | None = None
        self._unflushed = 0
        self._last_flush_ms = clock.milliseconds()
        # Whether an append that makes a flush due (flush.messages, flush.ms) flushes at once;
        # an owner that runs fsyncs off its thread (kafkalog serve) turns it off and asks
        # flush_due() instead.
        self.interval_flushes = True
        self._validator_config: tuple[LogConfig | None, LogValidatorConfig | None] = (None, None)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        *,
        config: LogConfig | None = None,
        clock: Clock | None = None,
        writable: bool = False,
        create: bool = False,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = True,
    ) -> Log:
        directory = Path(directory)
        if create:
            if not writable:
                raise ValueError("create=True needs writable=True")
            directory.mkdir(parents=True, exist_ok=True)
        elif not directory.is_dir():
            raise FileNotFoundError(f"no partition directory {directory}")
        log = cls(directory, config or LogConfig(), clock or SystemClock(), writable)
        loaded = load_segments(
            directory, log.config, log.clock, writable=writable, recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown, leader_epoch_cache=log.leader_epoch_cache,
            log_start_offset=log_start_offset,
        )  # fmt: skip
        log.segments = loaded.segments
        log.load_notes = loaded.notes
        log.recovery_record = loaded.record
        if not log.segments and writable:
            log.segments = [
                LogSegment.open(directory, log_start_offset, log.config, log.clock,
                                writable=True, file_already_exists=False)
            ]  # fmt: skip
        first_base = log.segments[0].base_offset if log.segments else log_start_offset
        log.log_start_offset = max(log_start_offset, first_base)
        if loaded.next_offset is not None and log.segments:
            log._log_end_offset = loaded.next_offset
        else:
            log._log_end_offset = log._read_log_end_offset() if log.segments else first_base
        log.recovery_point = (
            log._log_end_offset
            if not had_clean_shutdown or loaded.recovered
            else min(max(recovery_point, log.log_start_offset), log._log_end_offset)
        )
        log.durable_offset = log.recovery_point
        if writable:
            # Indexes were trimmed when the segment was closed: give the active one its room
            # back, or the next append would find them full and roll (Kafka's LogLoader does
            # the same).
            log.active_segment.resize_indexes(log.config["segment.index.bytes"])
            log.leader_epoch_cache.truncate_from_end(log._log_end_offset)
            log.leader_epoch_cache.truncate_from_start(log.log_start_offset)
            log._load_producer_state()
        return log

    def _read_log_end_offset(self) -> int:
        """The offset after the active segment's last complete batch.

        A read-only log of a damaged disk still opens: the end is where the readable batches
        end, and the damage is noted in :attr:`load_notes` (writable opening recovers instead).
        """
        segment = self.active_segment
        try:
            return segment.read_next_offset()
        except CorruptRecordError as e:
            if self.writable:
                raise
            next_offset, end = segment.base_offset, segment.log.start
            try:
                for batch in segment.log.batches():
                    next_offset, end = batch.next_offset, batch.position + batch.size_in_bytes
            except CorruptRecordError:
                pass
            self._readable_end = end
            self.load_notes.append(
                f"{os.path.basename(segment.log.path)}: readable up to offset {next_offset} "
                f"(position {end}): {e}"
            )
            return next_offset

    # -- state -------------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        if not self.segments:
            raise KafkalogError(f"{self.dir} has no segments", path=str(self.dir))
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._log_end_offset  # a single replica: everything appended is committed

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._producer_state is None:
            self._load_producer_state()
        return self._producer_state

    def _load_producer_state(self) -> None:
        state = ProducerStateManager(
            self.dir,
            clock=self.clock,
            writable=self.writable,
            topic_partition=str(self.topic_partition or self.dir.name),
        )
        state.truncate_and_reload(self.log_start_offset, self._log_end_offset)
        for batch in self.batches(state.map_end_offset):
            if batch.last_offset >= state.map_end_offset:
                state.replay_batch(batch)
        state.update_map_end_offset(self._log_end_offset)
        state.on_high_watermark_updated(self.high_watermark)
        self._producer_state = state

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        return (
            self.high_watermark
            if first_unstable is None
            else min(first_unstable, self.high_watermark)
        )

    def size_in_bytes(self) -> int:
        return sum(s.size() for s in self.segments)

    def _check_writable(self) -> None:
        if not self.writable:
            raise PermissionError(f"{self.dir} is open read-only")

    # -- appending ---------------------------------------------------------------------------------
    def append_as_leader(
        self, records, *, leader_epoch: int = 0, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """Validate client ``records`` as a broker does, assign offsets, append."""
        self._check_writable()
        now = self.clock.milliseconds()
        if self._validator_config[0] is not self.config:  # LogConfig objects never change
            self._validator_config = (self.config, validator_config(self.config))
        result = validate_records(
            records, self._validator_config[1], next_offset=self._log_end_offset,
            partition_leader_epoch=leader_epoch, now_ms=now, origin=origin,
            topic_partition=str(self.topic_partition or self.dir.name),
        )  # fmt: skip
        parts = result.validated_parts
        summaries, producers = walk_validated(parts)
        analysis = self.producer_state.analyze_batches(producers, origin=origin)
        if analysis.duplicate is not None:
            d = analysis.duplicate
            return LogAppendInfo(d.first_offset, d.last_offset, d.timestamp,
                                 result.log_append_time_ms, 0, duplicate=True)  # fmt: skip
        self._append(parts, result.first_offset, result.last_offset, result.max_timestamp,
                     analysis, summaries)  # fmt: skip
        if leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch()
            if latest is None or leader_epoch > latest:
                self.leader_epoch_cache.assign(leader_epoch, result.first_offset)
        return LogAppendInfo(
            result.first_offset,
            result.last_offset,
            result.max_timestamp,
            result.log_append_time_ms,
            result.validated_size,
        )

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches whose offsets are already assigned (replication, a DataFrame writer).

        Each batch must pass its CRC check and start at or after the log end offset. A partial
        batch at the end (a fetch response cut inside a batch) is not appended, as Kafka trims
        it; ``valid_bytes`` of the result says how many bytes were.
        """
        self._check_writable()
        data = records if isinstance(records, bytes) else bytes(records)
        offsets, summaries, producers, valid_bytes = walk_append(memoryview(data), check_crc=True)
        if not offsets:
            raise KafkalogError("nothing to append: no complete batch", path=str(self.dir))
        expected = self._log_end_offset
        latest = self.leader_epoch_cache.latest_epoch()
        max_ts = NO_TIMESTAMP
        for base, last, timestamp, epoch in offsets:
            if base < expected:
                raise KafkalogError(
                    f"Out of order offsets: batch at offset {base} appended to "
                    f"{self.dir} after offset {expected - 1}",
                    offset=base, path=str(self.dir),
                )  # fmt: skip
            if epoch >= 0 and (latest is None or epoch > latest):
                self.leader_epoch_cache.assign(epoch, base)
                latest = epoch
            expected = last + 1
            if timestamp > max_ts:
                max_ts = timestamp
        first, last = offsets[0][0], expected - 1
        analysis = self.producer_state.analyze_batches(producers, origin=AppendOrigin.REPLICATION)
        valid = data if valid_bytes == len(data) else data[:valid_bytes]
        self._append((valid,), first, last, max_ts, analysis, summaries)
        return LogAppendInfo(first, last, max_ts, NO_TIMESTAMP, valid_bytes)

    def _append(
        self, parts: tuple, first: int, last: int, max_ts: int, analysis, summaries: list
    ) -> None:
        segment = self._maybe_roll(sum(len(part) for part in parts), max_ts, last)
        segment.append_summarized(last, parts, summaries)
        self._log_end_offset = last + 1
        state = self.producer_state
        if analysis.updated_producers or analysis.completed_txns:
            for txn, lso in state.apply_append(analysis, self._log_end_offset):
                segment.update_txn_index(txn, lso)
        else:
            state.update_map_end_offset(self._log_end_offset)
        state.on_high_watermark_updated(self.high_watermark)
        self._unflushed += last - first + 1
        if self.interval_flushes and self.flush_due():
            self.flush()

    def assign_epoch_start_offset(self, leader_epoch: int) -> None:
        """``leader_epoch`` begins at the log end (Kafka's UnifiedLog.assignEpochStartOffset
        when a replica becomes leader): the leader-epoch checkpoint is written and fsynced
        then, not by the first append in that epoch."""
        self.leader_epoch_cache.assign(leader_epoch, self.log_end_offset)

    def flush_due(self) -> bool:
        """Whether the appends since the last flush call for one: ``flush.messages`` records
        or ``flush.ms`` since it (Kafka's UnifiedLog.append and its flush scheduler)."""
        if self._unflushed == 0:
            return False
        config, elapsed = self.config, self.clock.milliseconds() - self._last_flush_ms
        return self._unflushed >= config["flush.messages"] or elapsed >= config["flush.ms"]

    def _maybe_roll(self, size: int, max_ts: int, max_offset: int) -> LogSegment:
        segment = self.active_segment
        params = RollParams(
            max_segment_ms=self.config["segment.ms"], max_segment_bytes=self.config.segment_size,
            max_timestamp_in_messages=max_ts, max_offset_in_messages=max_offset,
            messages_size=size, now=self.clock.milliseconds(),
        )  # fmt: skip
        if segment.should_roll(params):
            return self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new segment at the log end offset (the old one's indexes are trimmed).

        The producer snapshot taken here is written (to a temporary, renamed) but not fsynced:
        a roll happens on the append path, and a broker appends on its event loop. As Kafka's
        UnifiedLog.roll, which leaves the snapshot's and the old segment's flush to its
        flush-log task, the next flush (:meth:`plan_flush`; a broker starts one at each roll)
        fsyncs the snapshot, then the segment and the directory, and only then moves the
        recovery point past them. A snapshot lost to a power cut before that is found corrupt
        or missing on load: the producer state is rebuilt from an earlier one and the log.
        """
        self._check_writable()
        new_base = self._log_end_offset
        active = self.active_segment
        if active.base_offset == new_base and active.size() == 0:
            return active  # rolling an empty segment changes nothing
        active.on_become_inactive_segment()
        self.producer_state.update_map_end_offset(new_base)
        snapshot = self.producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self.unsynced_snapshots.append(snapshot)
        segment = LogSegment.open(self.dir, new_base, self.config, self.clock, writable=True,
                                  file_already_exists=False)  # fmt: skip
        self.segments.append(segment)
        return segment

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: everything), indexes
        included, and move the recovery point there: :meth:`plan_flush`, run, completed."""
        plan = self.plan_flush(offset)
        plan.run()
        self.complete_flush(plan)

    def plan_flush(self, offset: int | None = None, *, indexes: bool = True) -> FlushPlan:
        """A flush in three steps, so that the fsyncs can run on another thread while the log
        goes on taking appends (a broker's event loop): this plan, made on the log's thread,
        pins the descriptors to fsync; :meth:`FlushPlan.run` fsyncs them on any thread;
        :meth:`complete_flush`, on the log's thread again, moves the marks.

        What is fsynced: every segment holding offsets below ``offset`` (default: the log end
        now) that is not already durable, and the directory when one of them may have been
        created since the last flush (Kafka's LocalLog.flush). ``indexes=False`` leaves out the
        active segment's indexes, the costly part of an fsync per acks=all produce: the
        ``.log`` is made durable (:attr:`durable_offset` moves) but the recovery point stops at
        the active segment, so after a power cut recovery rebuilds those indexes from the
        ``.log`` (the loader recovers every segment from the one holding the recovery point on,
        as Kafka's LogLoader). A rolled segment is fsynced whole, indexes included, at the
        first flush after its roll (Kafka flushes at roll), which moves the recovery point to
        the active segment. Either way the recovery point only passes data whose ``.log`` and
        indexes are durable.
        """
        self._check_writable()
        upto = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        segments = self.segments
        pins = []
        new_segment = False
        directory_fd = None
        snapshots = tuple(self.unsynced_snapshots)
        snapshot_fds: list[int] = []
        try:
            for path in snapshots:
                try:
                    snapshot_fds.append(os.open(path, os.O_RDONLY))
                except FileNotFoundError:
                    pass  # deleted since (retention, truncation): nothing to make durable
            for i, segment in enumerate(segments):
                if segment.base_offset >= upto:
                    break
                next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if next_base is not None and next_base <= self.recovery_point:
                    continue  # its .log and indexes are durable
                end = upto if next_base is None else min(next_base, upto)
                log_durable = end <= self.durable_offset
                with_indexes = indexes or next_base is not None  # a rolled segment: whole
                if log_durable and not with_indexes:
                    continue
                pins += segment.pin_for_fsync(log=not log_durable, indexes=with_indexes)
                # A segment created since the last flush: its directory entry must be durable
                # too, or a power cut could lose the whole file.
                new_segment = new_segment or segment.base_offset >= self.durable_offset
            if new_segment or snapshot_fds:  # (a snapshot's rename is a new entry too)
                directory_fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except BaseException:
            for pin in pins:
                pin.release()
            for fd in snapshot_fds:
                os.close(fd)
            raise
        active_base = segments[-1].base_offset if segments else upto
        recovery_point = upto if indexes else min(upto, active_base)
        return FlushPlan(
            upto=upto,
            recovery_point=max(self.recovery_point, recovery_point),
            pins=pins,
            directory_fd=directory_fd,
            generation=self._truncations,
            snapshots=snapshots,
            snapshot_fds=snapshot_fds,
        )

    def complete_flush(self, plan: FlushPlan) -> None:
        """After ``plan`` ran without error: its records are durable (:attr:`durable_offset`)
        and the recovery point moves. A truncation since the plan was made voids it (offsets
        below its end may hold other bytes now): the marks stay, the next flush redoes it.
        (The leader epoch cache needs nothing here: it writes its checkpoint, atomically and
        fsynced, whenever it changes.) The roll snapshots it fsynced are durable either way."""
        if plan.snapshots:
            done = set(plan.snapshots)
            self.unsynced_snapshots = [p for p in self.unsynced_snapshots if p not in done]
        if plan.generation != self._truncations:
            return
        self.durable_offset = max(self.durable_offset, min(plan.upto, self._log_end_offset))
        self.recovery_point = max(
            self.recovery_point, min(plan.recovery_point, self._log_end_offset)
        )
        self._unflushed = 0
        self._last_flush_ms = self.clock.milliseconds()

    def _next_base(self, segment: LogSegment) -> int | None:
        i = self.segments.index(segment)
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None

    # -- reading -----------------------------------------------------------------------------------
    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (the last with base <= offset)."""
        bases = [s.base_offset for s in self.segments]
        i = bisect_right(bases, offset) - 1
        return self.segments[i] if i >= 0 else None

    def batches(self, start_offset: int = 0) -> Iterator[Batch]:
        """Every batch whose last offset >= ``start_offset``, across segments."""
        if start_offset >= self._log_end_offset and self._readable_end is not None:
            return  # nothing to find, and the walk would reach the unreadable end
        first = self.segment_for(max(start_offset, 0))
        started = first is None
        for segment in self.segments:
            if not started and segment is not first:
                continue
            started = True
            found = segment.translate_offset(start_offset) if segment is first else None
            position = found.position if found is not None else 0
            if segment is first and found is None:
                continue
            records = segment.log
            if self._readable_end is not None and segment is self.active_segment:
                records = records.slice(records.start, self._readable_end)  # not the damage
            yield from records.batches(position)

    def read(
        self,
        start_offset: int,
        max_length: int,
        *,
        isolation: str = READ_UNCOMMITTED,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Up to ``max_length`` bytes of whole batches from ``start_offset`` (Kafka's Log.read)."""
        if start_offset < self.log_start_offset or start_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition "
                f"{self.topic_partition}, but we only have log segments in the range "
                f"{self.log_start_offset} to {self._log_end_offset}.",
                offset=start_offset, path=str(self.dir),
            )  # fmt: skip
        upper = self.last_stable_offset if isolation == READ_COMMITTED else self.high_watermark
        if start_offset >= upper:
            # Nothing readable at or past the bound (a read_committed fetch at or beyond the
            # LSO): empty, as Kafka's LocalLog.read; no window may reach past the bound.
            aborted = () if isolation == READ_COMMITTED else None
            return FetchDataInfo(LogOffsetMetadata(start_offset), None, False, aborted)
        segment = self.segment_for(start_offset)
        while segment is not None:
            max_position = None
            if segment is self.active_segment or self._next_base(segment) > upper:
                found = segment.translate_offset(upper) if upper < self._log_end_offset else None
                max_position = found.position if found is not None else segment.size()
                if self._readable_end is not None and segment is self.active_segment:
                    max_position = min(max_position, self._readable_end)
            info = segment.read(start_offset, max_length, max_position,
                                min_one_message=min_one_message)  # fmt: skip
            if info is not None:
                if isolation == READ_COMMITTED:
                    aborted = self._collect_aborted(start_offset, upper)
                    return FetchDataInfo(info.fetch_offset_metadata, info.records,
                                         info.first_entry_incomplete, aborted)  # fmt: skip
                return info
            i = self.segments.index(segment)
            segment = self.segments[i + 1] if i + 1 < len(self.segments) else None
        return FetchDataInfo(LogOffsetMetadata(start_offset), None)

    def _collect_aborted(self, start_offset: int, upper: int) -> tuple[AbortedTxn, ...]:
        found: list[AbortedTxn] = []
        first = self.segment_for(start_offset)
        for segment in self.segments[self.segments.index(first) :]:
            result = segment.collect_aborted_txns(start_offset, upper)
            found.extend(result.aborted_txns)
            if result.is_complete:
                break
        return tuple(found)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: earliest (-2), latest (-1), max timestamp (-3) or the first >= timestamp."""
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for segment in self.segments:
            if segment.largest_timestamp() >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        """The max-timestamp spec (-3, KIP-734) as Kafka 3.8+ answers it
        (UnifiedLog.fetchOffsetByTimestamp): the first segment holding the largest timestamp,
        the first batch there whose max timestamp it is, and that batch's first record carrying
        it (RecordBatch.offsetOfMaxTimestamp): of the records sharing the largest timestamp, the
        first. Kafka looks neither at the log start offset nor past that segment, and neither
        does this. None for a log without timestamps."""
        best, best_timestamp = None, NO_TIMESTAMP
        for segment in self.segments:
            largest = segment.max_timestamp_so_far()
            if largest > best_timestamp:  # strictly: the first segment reaching it
                best, best_timestamp = segment, largest
        if best is None:
            return None
        # The first record at or past the largest timestamp is the first carrying it (none in
        # the segment is larger); the segment's time index takes the search to its batch.
        return best.find_offset_by_timestamp(best_timestamp, best.base_offset)

    # -- truncation and retention ------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after ``offset`` (a follower's divergent tail)."""
        self._check_writable()
        if offset >= self._log_end_offset:
            return
        if offset < self.log_start_offset:
            offset = self.log_start_offset
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete_if_exists()
        self.active_segment.truncate_to(offset)
        self._log_end_offset = self.active_segment.read_next_offset()
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self.durable_offset = min(self.durable_offset, self._log_end_offset)
        self._truncations += 1
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self._producer_state = None  # reloaded from snapshots and replay on next use

    def increment_log_start_offset(self, new_start: int) -> int:
        """DeleteRecords: records below ``new_start`` become invisible, whole segments go."""
        self._check_writable()
        if new_start > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_start} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{self.high_watermark}", offset=new_start, path=str(self.dir))  # fmt: skip
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
            self.producer_state.on_log_start_offset_incremented(new_start)
            self._delete_segments(lambda seg, nxt: nxt <= new_start,
                                  "below the log start offset")  # fmt: skip
        return self.log_start_offset

    def delete_old_segments(
        self, *, delete_later: Callable[[LogSegment], None] | None = None
    ) -> list[str]:
        """Retention now: by log start offset, time (retention.ms) and size (retention.bytes).

        The segments are renamed ``.deleted`` and removed at once, or, given ``delete_later``,
        handed to it to be removed later (a broker keeps them for file.delete.delay.ms: Kafka's
        asyncDelete in LocalLog.deleteSegmentFiles).
        """
        self._check_writable()
        deleted = self._delete_segments(
            lambda seg, nxt: nxt <= self.log_start_offset,
            "below the log start offset", delete_later)  # fmt: skip
        if not self.config.delete:
            return deleted
        retention_ms = self.config["retention.ms"]
        if retention_ms >= 0:
            now = self.clock.milliseconds()
            deleted += self._delete_segments(
                lambda seg, nxt: now - seg.largest_timestamp() > retention_ms,
                f"older than retention.ms={retention_ms}", delete_later)  # fmt: skip
        retention_bytes = self.config["retention.bytes"]
        if retention_bytes >= 0:
            deleted += self._delete_segments(
                over_retention_bytes(self.size_in_bytes() - retention_bytes),
                f"beyond retention.bytes={retention_bytes}",
                delete_later,
            )
        return deleted

    def _delete_segments(self, predicate, why: str, delete_later=None) -> list[str]:
        """Delete the oldest segments while ``predicate(segment, next base)`` holds.

        The active segment is only deleted when it is not empty, after rolling a new one, so
        the log keeps its end offset (Kafka's deleteSegments).
        """
        doomed: list[LogSegment] = []
        for i, segment in enumerate(self.segments):
            is_active = i + 1 == len(self.segments)
            next_base = self._log_end_offset if is_active else self.segments[i + 1].base_offset
            if (is_active and segment.size() == 0) or not predicate(segment, next_base):
                break
            doomed.append(segment)
        if not doomed:
            return []
        if doomed[-1] is self.active_segment:
            self.roll()
        names = []
        for segment in doomed:
            self.segments.remove(segment)
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            names.append(f"{os.path.basename(segment.log.path)} ({why})")
            if delete_later is None:
                segment.delete_if_exists()
            else:
                delete_later(segment)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.on_log_start_offset_incremented(self.log_start_offset)
        self.producer_state.delete_snapshots_before(self.segments[0].base_offset)
        return names

    # -- closing -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Snapshot producer state and close every segment (indexes trimmed when writable)."""
        self.closed = True
        if self.writable and self.segments:
            self.producer_state.update_map_end_offset(self._log_end_offset)
            self.producer_state.take_snapshot()
            self._sync_roll_snapshots()
        for segment in self.segments:
            segment.close()

    def _sync_roll_snapshots(self) -> None:
        """fsync the snapshots rolls left unsynced (a log closed without a flush first)."""
        paths, self.unsynced_snapshots = self.unsynced_snapshots, []
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if paths:
            fd = os.open(self.dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self.log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self.segments)})")  # fmt: skip
