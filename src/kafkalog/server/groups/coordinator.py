"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups and
DescribeGroups (Kafka's GroupMetadataManager for classic groups, one node).

Every operation runs under one lock, as Kafka runs a coordinator partition's operations one at a
time; a JoinGroup or SyncGroup that must wait for the rest of the group parks a future on its
member and awaits it outside the lock. Timeouts (a member's session, the join phase, the sync
phase, the initial rebalance delay) are :class:`~.scheduler.Scheduler` entries fired by
:meth:`GroupCoordinator.run_due`. Each completed rebalance and each group that empties is stored
as a GroupMetadata record in ``__consumer_offsets`` (:mod:`..coordinator_log`) before anyone is
told.

Request and response dicts use the protocol module's snake_case field names; error codes are
Kafka's.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from ...errors import KafkalogError
from ...format.internal.consumer_offsets_encode import (
    GroupMemberRecord,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from ..coordinator_log import CoordinatorLog
from ..error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
    code_of,
)
from ..handlers import RequestContext
from .consumer_records import group_records, snapshot
from .modern_state import ConsumerGroup
from .scheduler import Scheduler
from .state import ClassicGroup, GroupMember, GroupState
from .static import replace_static_member

__all__ = ["GroupConfig", "GroupCoordinator"]


_EMPTY, _PREPARING = GroupState.EMPTY, GroupState.PREPARING_REBALANCE
_COMPLETING, _STABLE, _DEAD = (
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings the group coordinator reads; defaults are Kafka's."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    new_member_join_timeout_ms: int = 300_000  # a new member's first join (Kafka: 5 minutes)
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions


class GroupCoordinator:
    """Classic groups of one node. ``clock`` has ``milliseconds()``; ``log`` is where the
    ``__consumer_offsets`` records go."""

    def __init__(self, log: CoordinatorLog, clock, config: GroupConfig | None = None) -> None:
        self.log = log
        self.clock = clock
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups (:mod:`.consumer_protocol`): a group id names a group of one kind only.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.scheduler = Scheduler()
        self.lock = asyncio.Lock()

    def now(self) -> int:
        return self.clock.milliseconds()

    async def run_due(self) -> None:
        """Fire the timeouts that have passed (the server calls this from a background task)."""
        async with self.lock:  # taken first: a timer reset while waiting must not fire
            for callback in self.scheduler.due(self.now()):
                await callback()

    # -- JoinGroup ------------------------------------------------------------------------------
    async def join_group(self, ctx: RequestContext, req: dict) -> dict:
        group_id, member_id = req["group_id"], req.get("member_id") or ""
        session_timeout = req["session_timeout_ms"]
        rebalance_timeout = req.get("rebalance_timeout_ms", -1)
        if ctx.api_version == 0 or rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        protocols = [(p["name"], bytes(p["metadata"])) for p in req.get("protocols") or []]
        instance_id = req.get("group_instance_id")
        protocol_type = req.get("protocol_type") or ""

        def fail(code: int, member: str = member_id) -> dict:
            return {"error_code": code, "member_id": member, "generation_id": -1}

        if not group_id:
            return fail(INVALID_GROUP_ID)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout <= cfg.max_session_timeout_ms:
            return fail(INVALID_SESSION_TIMEOUT)
        if not protocol_type or not protocols:
            return fail(INCONSISTENT_GROUP_PROTOCOL)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        async with self.lock:
            consumer_group = self.consumer_groups.get(group_id)
            if consumer_group is not None:
                if consumer_group.members:  # classic members do not join a consumer group here
                    return fail(INCONSISTENT_GROUP_PROTOCOL)
                # An empty one gives way, as in Kafka: its records get their tombstones.
                tombstones = group_records(group_id, snapshot(consumer_group), None)
                try:
                    await self.log.append(self.log.partition_for(group_id), tombstones,
                                          now_ms=self.now())  # fmt: skip
                except (KafkalogError, OSError) as e:
                    return fail(code_of(e))
                del self.consumer_groups[group_id]
            group = self.groups.get(group_id)
            is_new_group = group is None
            if group is None:
                if member_id:
                    return fail(UNKNOWN_MEMBER_ID)
                group = self.groups[group_id] = ClassicGroup(group_id)
            if not self._accept_joining_member(group, member_id):
                group.remove(member_id)
                return fail(GROUP_MAX_SIZE_REACHED, "")
            join = _Join(ctx, member_id, instance_id, protocol_type, protocols,
                         session_timeout, rebalance_timeout, future)  # fmt: skip
            if group.is_in(_DEAD):
                return fail(COORDINATOR_NOT_AVAILABLE)
            if not group.supports_protocols(protocol_type, protocols):
                return fail(INCONSISTENT_GROUP_PROTOCOL, "" if not member_id else member_id)
            if not member_id:
                await self._join_new_member(group, join)
            else:
                await self._join_existing_member(group, join)
            if is_new_group and group.is_in(_EMPTY):
                await self._store_group(group, {})
        return await future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_in(_EMPTY, _DEAD):
            return True
        if group.is_in(_PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_members_awaiting_join < limit
            )
        return group.has_member(member_id) or len(group.members) < limit

    async def _join_new_member(self, group: ClassicGroup, join: _Join) -> None:
        prefix = join.instance_id if join.instance_id is not None else (join.ctx.client_id or "")
        new_id = f"{prefix}-{uuid.uuid4()}"
        if join.instance_id is not None:
            existing = group.static_members.get(join.instance_id)
            if existing is not None:
                await replace_static_member(self, group, join, existing, new_id)
                return
            await self._add_member_then_rebalance(group, join, new_id)
        elif join.ctx.api_version >= 4:
            # Since JoinGroup v4 a member first learns its id, then joins with it (KIP-394).
            group.pending_members.add(new_id)
            self._schedule_heartbeat(group, new_id, join.session_timeout)
            join.future.set_result(_error(MEMBER_ID_REQUIRED, new_id))
        else:
            await self._add_member_then_rebalance(group, join, new_id)

    async def _join_existing_member(self, group: ClassicGroup, join: _Join) -> None:
        member_id = join.member_id
        if member_id in group.pending_members:
            await self._add_member_then_rebalance(group, join, member_id)
            return
        error = group.validate_member(member_id, join.instance_id)
        if error:
            join.future.set_result(_error(error, member_id))
            return
        member = group.members[member_id]
        if group.is_in(_PREPARING):
            await self._update_member_then_rebalance(group, member, join)
        elif group.is_in(_COMPLETING):
            if member.matches(join.protocols):
                join.future.set_result(group.join_response(member))
            else:
                await self._update_member_then_rebalance(group, member, join)
        elif group.is_in(_STABLE):
            if group.is_leader(member_id) or not member.matches(join.protocols):
                await self._update_member_then_rebalance(group, member, join)
            else:
                response = group.join_response(member)
                response["members"] = []
                join.future.set_result(response)
        else:
            join.future.set_result(_error(UNKNOWN_MEMBER_ID, member_id))

    async def _add_member_then_rebalance(
        self, group: ClassicGroup, join: _Join, member_id: str
    ) -> None:
        member = GroupMember(
            member_id=member_id, group_instance_id=join.instance_id,
            client_id=join.ctx.client_id or "", client_host=join.ctx.client_host,
            rebalance_timeout_ms=join.rebalance_timeout, session_timeout_ms=join.session_timeout,
            protocol_type=join.protocol_type, protocols=join.protocols, is_new=True,
        )  # fmt: skip
        if group.is_in(_PREPARING) and group.previous_state == _EMPTY:
            group.new_member_added = True
        group.add(member, join.future)
        self._schedule_heartbeat(group, member_id, self.config.new_member_join_timeout_ms)
        await self._maybe_prepare_rebalance_or_complete_join(group)

    async def _update_member_then_rebalance(
        self, group: ClassicGroup, member: GroupMember, join: _Join
    ) -> None:
        group.update_member(member, join.protocols, join.rebalance_timeout,
                            join.session_timeout, join.future)  # fmt: skip
        await self._maybe_prepare_rebalance_or_complete_join(group)

    async def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            await self._prepare_rebalance(group)
        elif (group.is_in(_PREPARING) and group.previous_state != _EMPTY
              and group.has_all_members_joined()):  # fmt: skip
            await self._complete_join(group)

    async def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(_COMPLETING):
            self._propagate_assignment(group, REBALANCE_IN_PROGRESS, reset=True)
        group.pending_sync_members.clear()
        self.scheduler.cancel(("sync", group.group_id))
        initial = group.is_in(_EMPTY)
        group.transition_to(_PREPARING, self.now())
        gid = group.group_id
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.scheduler.schedule(
                ("join", gid), self.now() + delay,
                lambda: self._initial_rebalance_due(gid, delay, remaining),
            )  # fmt: skip
        elif group.has_all_members_joined():
            await self._complete_join(group)
        else:
            self.scheduler.schedule(("join", gid), self.now() + group.rebalance_timeout_ms(),
                                    lambda: self._complete_join_of(gid))  # fmt: skip

    async def _initial_rebalance_due(self, group_id: str, delay: int, remaining: int) -> None:
        """The initial delay: wait while new members keep arriving, up to the rebalance timeout."""
        group = self.groups.get(group_id)
        if group is None or not group.is_in(_PREPARING):
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.scheduler.schedule(
                ("join", group_id), self.now() + new_delay,
                lambda: self._initial_rebalance_due(group_id, new_delay, new_remaining),
            )  # fmt: skip
        else:
            await self._complete_join(group)

    async def _complete_join_of(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(_PREPARING):
            await self._complete_join(group)

    async def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.scheduler.cancel(("join", gid))
        for failed in group.not_yet_rejoined():
            if failed.group_instance_id is None:
                group.remove(failed.member_id)
                self.scheduler.cancel(("heartbeat", gid, failed.member_id))
        if group.is_in(_DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self.scheduler.schedule(("join", gid), self.now() + group.rebalance_timeout_ms(),
                                    lambda: self._complete_join_of(gid))  # fmt: skip
            return
        group.init_next_generation(self.now())
        if group.is_in(_EMPTY):
            await self._store_group(group, {})
            return
        for member in list(group.members.values()):
            group.complete_join(member, group.join_response(member))
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.scheduler.schedule(("sync", gid), self.now() + group.rebalance_timeout_ms(),
                                lambda: self._expire_pending_sync(gid, generation))  # fmt: skip

    async def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(_COMPLETING, _STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                group.remove(member_id)
                self.scheduler.cancel(("heartbeat", group_id, member_id))
            await self._prepare_rebalance(group)

    # -- heartbeats and expiry ------------------------------------------------------------------
    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        gid = group.group_id
        self.scheduler.schedule(("heartbeat", gid, member_id), self.now() + timeout_ms,
                                lambda: self._expire_heartbeat(gid, member_id))  # fmt: skip

    async def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(_DEAD):
            return
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.is_in(_PREPARING) and group.has_all_members_joined():
                await self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.is_awaiting_join or member.sync_future is not None):
            # Members waiting on a rebalance count as alive (Kafka's hasSatisfiedHeartbeat).
            self._schedule_heartbeat(group, member_id, member.session_timeout_ms)
            return
        await self._remove_member(group, member)

    async def _remove_member(self, group: ClassicGroup, member: GroupMember) -> None:
        group.complete_join(member, _error(UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        if group.is_in(_STABLE, _COMPLETING):
            await self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(_PREPARING) and group.has_all_members_joined():
            await self._complete_join(group)

    def _member_error(self, req: dict) -> tuple[ClassicGroup | None, int]:
        """The request's group and the error Kafka's Heartbeat and SyncGroup answer before
        anything else: an unknown group or member, a dead group, another generation."""
        group = self.groups.get(req["group_id"])
        if group is None:
            return None, UNKNOWN_MEMBER_ID
        if group.is_in(_DEAD):
            return group, COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(req["member_id"], req.get("group_instance_id"))
        if error:
            return group, error
        if req["generation_id"] != group.generation_id:
            return group, ILLEGAL_GENERATION
        return group, NONE

    async def heartbeat(self, ctx: RequestContext, req: dict) -> dict:
        async with self.lock:
            group, error = self._member_error(req)
            if error or group is None:
                return {"error_code": error}
            if group.is_in(_EMPTY):
                return {"error_code": UNKNOWN_MEMBER_ID}
            member = group.members[req["member_id"]]
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
            if group.is_in(_PREPARING):
                return {"error_code": REBALANCE_IN_PROGRESS}
            return {"error_code": NONE}

    # -- SyncGroup ------------------------------------------------------------------------------
    async def sync_group(self, ctx: RequestContext, req: dict) -> dict:
        member_id = req["member_id"]
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        async with self.lock:
            group, error = self._member_error(req)
            if error or group is None:
                return {"error_code": error}
            for asked, actual in ((req.get("protocol_type"), group.protocol_type),
                                  (req.get("protocol_name"), group.protocol_name)):  # fmt: skip
                if asked is not None and actual is not None and asked != actual:
                    return {"error_code": INCONSISTENT_GROUP_PROTOCOL}
            member = group.members[member_id]
            if group.is_in(_PREPARING):
                return {"error_code": REBALANCE_IN_PROGRESS}
            if group.is_in(_STABLE):
                group.pending_sync_members.discard(member_id)
                self._sync_done_if_all(group)
                return self._sync_response(group, member)
            group.set_sync_future(member, future)  # CompletingRebalance
            group.pending_sync_members.discard(member_id)
            self._sync_done_if_all(group)
            if group.is_leader(member_id):
                assignment = {a["member_id"]: bytes(a["assignment"])
                              for a in req.get("assignments") or []}  # fmt: skip
                for other in group.members:
                    assignment.setdefault(other, b"")
                generation = group.generation_id
                try:
                    await self._store_group(group, assignment)
                except Exception as e:  # the log refused: every member hears it and rejoins
                    if group.is_in(_COMPLETING) and group.generation_id == generation:
                        code = code_of(e)
                        self._propagate_assignment(group, _store_error(code), reset=True)
                        await self._maybe_prepare_rebalance_or_complete_join(group)
                else:
                    if group.is_in(_COMPLETING) and group.generation_id == generation:
                        for m in group.members.values():
                            m.assignment = assignment[m.member_id]
                        self._propagate_assignment(group, NONE)
                        group.transition_to(_STABLE, self.now())
        return await future

    def _sync_done_if_all(self, group: ClassicGroup) -> None:
        if not group.pending_sync_members:
            self.scheduler.cancel(("sync", group.group_id))

    @staticmethod
    def _sync_response(group: ClassicGroup, member: GroupMember) -> dict:
        return {
            "error_code": NONE,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "assignment": member.assignment,
        }

    def _propagate_assignment(
        self, group: ClassicGroup, error: int, *, reset: bool = False
    ) -> None:
        for member in group.members.values():
            if reset:
                member.assignment = b""
            response = self._sync_response(group, member) if error == NONE else {
                "error_code": error, "assignment": b""}  # fmt: skip
            if group.complete_sync(member, response):
                self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    # -- LeaveGroup -----------------------------------------------------------------------------
    async def leave_group(self, ctx: RequestContext, req: dict) -> dict:
        legacy = ctx.api_version < 3
        identities = (
            [{"member_id": req["member_id"], "group_instance_id": None}]
            if legacy else req.get("members") or []
        )  # fmt: skip
        async with self.lock:
            group = self.groups.get(req["group_id"])
            if group is None:
                return {"error_code": UNKNOWN_MEMBER_ID}
            if group.is_in(_DEAD):
                return {"error_code": COORDINATOR_NOT_AVAILABLE}
            results, left = [], False
            for identity in identities:
                member_id, instance_id = identity["member_id"], identity.get("group_instance_id")
                error = NONE
                if not member_id:
                    member_id = group.static_members.get(instance_id) if instance_id else None
                    if member_id is None:
                        error = UNKNOWN_MEMBER_ID
                elif member_id in group.pending_members:
                    group.remove(member_id)
                    self.scheduler.cancel(("heartbeat", group.group_id, member_id))
                    member_id = None
                    left = True
                else:
                    error = group.validate_member(member_id, instance_id)
                if error == NONE and member_id is not None:
                    member = group.members[member_id]
                    self.scheduler.cancel(("heartbeat", group.group_id, member_id))
                    group.complete_join(member, _error(UNKNOWN_MEMBER_ID, ""))
                    group.remove(member_id)
                    left = True
                results.append({"member_id": identity["member_id"],
                                "group_instance_id": instance_id, "error_code": error})  # fmt: skip
            if left:
                if group.is_in(_STABLE, _COMPLETING):
                    await self._maybe_prepare_rebalance_or_complete_join(group)
                elif group.is_in(_PREPARING) and group.has_all_members_joined():
                    await self._complete_join(group)
        if legacy:
            return {"error_code": results[0]["error_code"]}
        return {"error_code": NONE, "members": results}

    # -- storage --------------------------------------------------------------------------------
    async def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Write the group's GroupMetadata record (members with their assignment) and flush."""
        members = [
            GroupMemberRecord(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        ] if group.is_in(_COMPLETING, _STABLE) else []  # fmt: skip
        value = encode_group_metadata_value(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=group.protocol_name, leader=group.leader_id if members else None,
            current_state_timestamp=group.state_timestamp_ms, members=members,
        )  # fmt: skip
        key = encode_group_metadata_key(group.group_id)
        partition = self.log.partition_for(group.group_id)
        await self.log.append(partition, [(key, value)], now_ms=self.now())


@dataclass(frozen=True, slots=True)
class _Join:
    ctx: RequestContext
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout: int
    rebalance_timeout: int
    future: asyncio.Future


def _error(code: int, member_id: str) -> dict:
    return {"error_code": code, "member_id": member_id, "generation_id": -1}


def _store_error(code: int) -> int:
    """Kafka's appendGroupMetadataErrorToResponseError: storage trouble means retry elsewhere."""
    if code in (3, 15, 14, 19, 20):  # unknown partition, not available, loading, not enough rep.
        return COORDINATOR_NOT_AVAILABLE
    if code in (6, 39):  # NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR
        return 16  # NOT_COORDINATOR
    return UNKNOWN_SERVER_ERROR
