"""OffsetCommit, OffsetFetch and TxnOffsetCommit (Kafka's OffsetMetadataManager, classic groups).

Who may commit is the group's business (ClassicGroup.validateOffsetCommit): a commit with
generation -1 from outside the group management ("simple" consumers, admin tools) is accepted
while the group has no members; a member must name its id and the current generation, and waits
out a rebalance (REBALANCE_IN_PROGRESS while the group completes one). Transactional commits
skip the state check, are written with the producer's id and epoch in a transactional batch,
and count only once the transaction commits (:class:`~.offsets_store.OffsetsStore`).
"""

from __future__ import annotations

from ...errors import KafkalogError
from ...errors import RequestRefused as _CommitRefused
from ...format.internal.consumer_offsets_encode import (
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from ..error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNSTABLE_OFFSET_COMMIT,
    UNSUPPORTED_VERSION,
    code_of,
)
from ..handlers import RequestContext
from .consumer_records import group_records, snapshot
from .coordinator import GroupCoordinator
from .modern_state import STALE_MEMBER_EPOCH, ConsumerGroup
from .offsets_store import OffsetAndMetadata, OffsetsStore
from .state import ClassicGroup, GroupState

__all__ = ["GroupOffsets"]

NO_OFFSET = -1


def _consumer_commit_check(
    group: ConsumerGroup, member_id: str, instance_id: str | None, epoch: int,
    transactional: bool, new_protocol: bool,
) -> set[tuple[str, int]] | None:  # fmt: skip
    """Kafka's ConsumerGroup.validateOffsetCommit: None when every partition may be committed,
    else the partitions a member a step behind may still commit (those it owns)."""
    if epoch < 0 and not group.members:
        return None
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return None
    member = group.members.get(member_id)
    if member is None:
        raise _CommitRefused(UNKNOWN_MEMBER_ID)
    if not transactional and not new_protocol:
        raise _CommitRefused(UNSUPPORTED_VERSION)
    if epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        raise _CommitRefused(STALE_MEMBER_EPOCH)
    names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
    return {(names[tid], p) for owned in (member.assigned, member.pending_revocation)
            for tid, ps in owned.items() if tid in names for p in ps}  # fmt: skip


class GroupOffsets:
    """The offset APIs of a :class:`GroupCoordinator`, over its groups, lock and log."""

    def __init__(self, coordinator: GroupCoordinator, store: OffsetsStore | None = None) -> None:
        self.coordinator = coordinator
        self.store = store or OffsetsStore()

    # -- validation -----------------------------------------------------------------------------
    def _group_for_commit(self, group_id: str, generation: int, version_9: bool) -> ClassicGroup:
        groups = self.coordinator.groups
        group = groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise _CommitRefused(GROUP_ID_NOT_FOUND if version_9 else ILLEGAL_GENERATION)
            group = groups[group_id] = ClassicGroup(group_id)  # a "simple" group
        return group

    @staticmethod
    def _validate(
        group: ClassicGroup, member_id: str, instance_id: str | None, generation: int,
        transactional: bool,
    ) -> None:  # fmt: skip
        if group.is_in(GroupState.DEAD):
            raise _CommitRefused(COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return
        if generation >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                raise _CommitRefused(error)
            if generation != group.generation_id:
                raise _CommitRefused(ILLEGAL_GENERATION)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            raise _CommitRefused(UNKNOWN_MEMBER_ID)
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            raise _CommitRefused(REBALANCE_IN_PROGRESS)

    def _offsets_of(self, req: dict, now: int, expire: int | None):
        """Per partition: (topic, partition, OffsetAndMetadata or None when refused, error)."""
        limit = self.coordinator.config.offset_metadata_max_bytes
        for topic in req.get("topics") or []:
            for p in topic.get("partitions") or []:
                metadata = p.get("committed_metadata") or ""
                if len(metadata.encode("utf-8")) > limit:
                    yield topic["name"], p["partition_index"], None, OFFSET_METADATA_TOO_LARGE
                    continue
                value = OffsetAndMetadata(
                    offset=p["committed_offset"], leader_epoch=p.get("committed_leader_epoch", -1),
                    metadata=metadata, commit_timestamp_ms=now, expire_timestamp_ms=expire,
                )  # fmt: skip
                yield topic["name"], p["partition_index"], value, NONE

    @staticmethod
    def _response(req: dict, errors: dict[tuple[str, int], int], default: int) -> dict:
        return {"topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": errors.get((t["name"], p["partition_index"]), default)}
                for p in t.get("partitions") or []]}
            for t in req.get("topics") or []
        ]}  # fmt: skip

    async def _write(
        self, group_id: str, accepted: list[tuple[str, int, OffsetAndMetadata]],
        producer_id: int = -1, producer_epoch: int = -1,
    ) -> list[tuple[str, int, OffsetAndMetadata]]:  # fmt: skip
        """Append the commits as one batch; returns them with their offsets in the log."""
        records = [
            (encode_offset_commit_key(group_id, t, p), encode_offset_commit_value(
                offset=v.offset, metadata=v.metadata, commit_timestamp=v.commit_timestamp_ms,
                leader_epoch=v.leader_epoch, expire_timestamp=v.expire_timestamp_ms))
            for t, p, v in accepted
        ]  # fmt: skip
        log = self.coordinator.log
        last = await log.append(
            log.partition_for(group_id), records, now_ms=self.coordinator.now(),
            producer_id=producer_id, producer_epoch=producer_epoch,
            transactional=producer_id >= 0,
        )  # fmt: skip
        first = last - len(records) + 1
        return [(t, p, _with_record_offset(v, first + i)) for i, (t, p, v) in enumerate(accepted)]

    # -- OffsetCommit ---------------------------------------------------------------------------
    async def offset_commit(self, ctx: RequestContext, req: dict) -> dict:
        group_id = req["group_id"]
        generation = req.get("generation_id_or_member_epoch", -1)
        if not group_id:
            return self._response(req, {}, INVALID_GROUP_ID)
        now = self.coordinator.now()
        retention = req.get("retention_time_ms", -1)
        expire = now + retention if retention is not None and retention >= 0 else None
        return await self._commit(req, generation, expire, ctx.api_version >= 9)

    # -- TxnOffsetCommit ------------------------------------------------------------------------
    async def txn_offset_commit(self, ctx: RequestContext, req: dict) -> dict:
        producer = (req["producer_id"], req["producer_epoch"])
        return await self._commit(req, req.get("generation_id", -1), None, False, producer)

    async def _commit(
        self,
        req: dict,
        generation: int,
        expire: int | None,
        new_protocol: bool,
        producer: tuple[int, int] | None = None,
    ) -> dict:
        """OffsetCommit, or TxnOffsetCommit for ``producer`` (id, epoch): the group and member
        checked, each offset checked, the accepted ones written to ``__consumer_offsets`` and
        then committed (pending until the transaction's marker, for a producer's)."""
        group_id = req["group_id"]
        member_id, instance_id = req.get("member_id") or "", req.get("group_instance_id")
        async with self.coordinator.lock:
            owned = None
            try:
                consumer_group = self.coordinator.consumer_groups.get(group_id)
                if consumer_group is not None:
                    owned = _consumer_commit_check(
                        consumer_group,
                        member_id,
                        instance_id,
                        generation,
                        producer is not None,
                        new_protocol,
                    )
                else:
                    group = self._group_for_commit(group_id, generation, new_protocol)
                    self._validate(group, member_id, instance_id, generation,
                                   transactional=producer is not None)  # fmt: skip
            except _CommitRefused as refused:
                return self._response(req, {}, refused.code)
            errors, accepted = {}, []
            for topic, partition, value, error in self._offsets_of(req, self.coordinator.now(),
                                                                   expire):  # fmt: skip
                if owned is not None and (topic, partition) not in owned:
                    value, error = None, STALE_MEMBER_EPOCH
                errors[(topic, partition)] = error
                if value is not None:
                    accepted.append((topic, partition, value))
            if accepted:
                try:
                    written = await self._write(group_id, accepted, *(producer or ()))
                except (KafkalogError, OSError) as e:
                    return self._response(req, {}, code_of(e))
                for topic, partition, value in written:
                    if producer is None:
                        self.store.commit(group_id, (topic, partition), value)
                    else:
                        self.store.add_pending(producer[0], group_id, (topic, partition), value)
        return self._response(req, errors, NONE)

    async def complete_transaction(self, producer_id: int, partition: int, commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` landed in this offsets partition."""
        async with self.coordinator.lock:
            self.replay_marker(producer_id, partition, commit)

    def replay_marker(self, producer_id: int, partition: int, commit: bool) -> None:
        log = self.coordinator.log
        groups = [g for g in self.store.pending_groups(producer_id)
                  if log.partition_for(g) == partition]  # fmt: skip
        self.store.complete_transaction(producer_id, groups, commit)

    # -- expiration -----------------------------------------------------------------------------
    async def expire_offsets(self) -> int:
        """Delete offsets past retention, then empty groups left without offsets (Kafka's
        cleanupGroupMetadata); returns the number of tombstones written.

        Offsets of a group with members never expire. For an empty group the clock starts when
        it became empty; for a group without a protocol (simple consumers, admin commits) at the
        commit; an explicit expire timestamp (OffsetCommit v2-v4 retention) wins.
        """
        coordinator = self.coordinator
        written = 0
        async with coordinator.lock:
            now = coordinator.now()
            consumer_groups = coordinator.consumer_groups
            for group_id in sorted(
                self.store.groups() | set(coordinator.groups) | set(consumer_groups)
            ):
                group = coordinator.groups.get(group_id)
                consumer_group = consumer_groups.get(group_id)
                expired = self._expired(group_id, group, now)
                records = [(encode_offset_commit_key(group_id, t, p), None) for t, p in expired]
                deletes_group = (
                    (group is not None and group.is_in(GroupState.EMPTY))
                    or (consumer_group is not None and not consumer_group.members)
                ) and (
                    not (set(self.store.committed(group_id)) - set(expired))
                    and not self.store.has_pending(group_id)
                )
                if deletes_group and consumer_group is not None:
                    # Kafka's ConsumerGroup.createGroupTombstoneRecords
                    records += group_records(group_id, snapshot(consumer_group), None)
                elif deletes_group:
                    records.append((encode_group_metadata_key(group_id), None))
                if not records:
                    continue
                log = coordinator.log
                await log.append(log.partition_for(group_id), records, now_ms=now)
                for tp in expired:
                    self.store.delete(group_id, tp)
                if deletes_group and consumer_group is not None:
                    del consumer_groups[group_id]
                elif deletes_group and group is not None:
                    group.transition_to(GroupState.DEAD, now)
                    del coordinator.groups[group_id]
                written += len(records)
        return written

    def _expired(self, group_id: str, group: ClassicGroup | None, now: int) -> list:
        retention = self.coordinator.config.offsets_retention_ms
        if group is not None and group.protocol_type and not group.is_in(GroupState.EMPTY):
            return []
        consumer_group = self.coordinator.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            return []
        since_empty = (
            group.state_timestamp_ms
            if group is not None and group.protocol_type and group.state_timestamp_ms >= 0
            else None
        )
        out = []
        for tp, value in sorted(self.store.committed(group_id).items()):
            if self.store.has_pending(group_id, tp):
                continue
            if value.expire_timestamp_ms is not None:
                if now >= value.expire_timestamp_ms:
                    out.append(tp)
            elif now - (since_empty if since_empty is not None else value.commit_timestamp_ms) >= (
                retention
            ):
                out.append(tp)
        return out

    # -- OffsetFetch ----------------------------------------------------------------------------
    async def offset_fetch(self, ctx: RequestContext, req: dict) -> dict:
        require_stable = bool(req.get("require_stable"))
        if ctx.api_version >= 8:
            groups = [self._fetch_group(g["group_id"], g.get("topics"), require_stable,
                                        g.get("member_id"), g.get("member_epoch", -1))
                      for g in req.get("groups") or []]  # fmt: skip
            return {"groups": groups}
        found = self._fetch_group(req["group_id"], req.get("topics"), require_stable)
        return {"topics": found["topics"], "error_code": found["error_code"]}

    def _fetch_group(
        self, group_id: str, topics: list | None, require_stable: bool,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> dict:  # fmt: skip
        consumer_group = self.coordinator.consumer_groups.get(group_id)
        if consumer_group is not None and not (member_id is None and member_epoch < 0):
            # Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ names the member)
            member = consumer_group.members.get(member_id or "")
            if member is None:
                error = UNKNOWN_MEMBER_ID
            else:
                error = STALE_MEMBER_EPOCH if member.member_epoch != member_epoch else NONE
            if error:
                return {"group_id": group_id, "topics": [], "error_code": error}
        committed = self.store.committed(group_id)
        if topics is None:  # every partition the group has an offset for
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t["name"]: list(t.get("partition_indexes") or []) for t in topics}
        out = []
        for topic, partitions in wanted.items():
            rows = []
            for partition in partitions:
                value = committed.get((topic, partition))
                if require_stable and self.store.has_pending(group_id, (topic, partition)):
                    rows.append({"partition_index": partition, "committed_offset": NO_OFFSET,
                                 "committed_leader_epoch": -1, "metadata": "",
                                 "error_code": UNSTABLE_OFFSET_COMMIT})  # fmt: skip
                elif value is None:
                    rows.append({"partition_index": partition, "committed_offset": NO_OFFSET,
                                 "committed_leader_epoch": -1, "metadata": "",
                                 "error_code": NONE})  # fmt: skip
                else:
                    rows.append({"partition_index": partition, "committed_offset": value.offset,
                                 "committed_leader_epoch": value.leader_epoch,
                                 "metadata": value.metadata, "error_code": NONE})  # fmt: skip
            out.append({"name": topic, "partitions": rows})
        return {"group_id": group_id, "topics": out, "error_code": NONE}


def _with_record_offset(value: OffsetAndMetadata, offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms,
        value.expire_timestamp_ms, offset,
    )  # fmt: skip
