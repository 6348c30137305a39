"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the consumer group protocol of KIP-848 on one
node (Kafka's GroupMetadataManager.consumerGroupHeartbeat and consumerGroupDescribe).

The groups share the classic coordinator's lock, scheduler and clock, and live in its
``consumer_groups``, so one group id is either kind and the offset APIs see both. Every change
of a group is written to ``__consumer_offsets`` as Kafka's records (:mod:`.consumer_records`)
before the member hears of it, and replayed on start (:mod:`.load`): after a restart members
carry on with their ids, epochs and assignments. Timeouts: a member's session
(``group.consumer.session.timeout.ms``) restarts at each heartbeat (and at a restart of the
server), and a member asked to revoke partitions has its rebalance timeout to do so; either
fences it out of the group.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from uuid import UUID

from ...errors import KafkalogError
from ...format.internal.consumer_offsets_encode import encode_group_metadata_key
from ..config import broker_settings
from ..error_codes import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_MEMBER_ID,
    code_of,
)
from ..handlers import RequestContext
from .consumer_records import GroupSnapshot, group_records, restored, snapshot
from .coordinator import GroupCoordinator
from .metadata_hash import group_hash
from .modern_state import (
    FENCED_MEMBER_EPOCH,
    INVALID_REGULAR_EXPRESSION,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    assign,
    member_topics,
    reconcile,
)
from .state import ClassicGroup

__all__ = [
    "SETTINGS",
    "ConsumerGroupConfig",
    "ConsumerGroups",
]

_log = logging.getLogger("kafkalog.server")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_MEMBER_TYPE = 1

_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignors(text: str) -> tuple[str, ...]:
    names = tuple(_ASSIGNOR_CLASSES.get(n.strip(), n.strip()) for n in text.split(",") if n.strip())
    unknown = sorted(set(names) - {"uniform", "range"})
    if unknown or not names:
        raise ValueError(f"unknown assignors {unknown} (uniform and range are served)")
    return names


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The broker settings of consumer groups; defaults are Kafka's."""

    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors

    @classmethod
    def from_extra(cls, extra: Mapping[str, str] | None) -> ConsumerGroupConfig:
        return cls(**broker_settings(dict(extra or {}), SETTINGS))  # type: ignore[arg-type]


SETTINGS = (
    ("group.consumer.heartbeat.interval.ms", "heartbeat_interval_ms", int, 1),
    ("group.consumer.session.timeout.ms", "session_timeout_ms", int, 1),
    ("group.consumer.max.size", "max_size", int, 1),
    ("group.consumer.assignors", "assignors", _assignors, None),
)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _new_member_id() -> str:
    """A random id as Kafka's Uuid.randomUuid().toString() makes it (url-safe base64, no
    padding, never starting with a dash)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _wire(assignment: Assignment, names: Mapping[UUID, str] | None = None) -> list[dict]:
    out = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        row: dict = {"topic_id": topic_id, "partitions": sorted(partitions)}
        if names is not None:
            row["topic_name"] = names.get(topic_id, "")
        out.append(row)
    return out


class ConsumerGroups:
    """The consumer groups of a :class:`GroupCoordinator`. ``topics()`` gives every topic's
    id and partition count by name."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        topics: Callable[[], Mapping[str, tuple[UUID, int]]],
        config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.topics = topics
        self.config = config or ConsumerGroupConfig()
        self.groups: dict[str, ConsumerGroup] = coordinator.consumer_groups
        self._resume()

    def now(self) -> int:
        return self.coordinator.now()

    def _resume(self) -> None:
        """Groups replayed from ``__consumer_offsets``: their topics' metadata as it is now,
        and every member's session (and pending revocation) timed from the start, as Kafka
        does when it loads a partition."""
        topics = self.topics()
        now = self.now()
        for group in self.groups.values():
            group.subscription_metadata = _subscribed_metadata(group, topics)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self.coordinator.scheduler.schedule(
                        ("consumer-rebalance", group.group_id, member.member_id),
                        now + member.rebalance_timeout_ms,
                        self._fence_later(group.group_id, member.member_id, member.member_epoch),
                    )  # fmt: skip

    async def _store(
        self, group_id: str, before: GroupSnapshot | None, classic: ClassicGroup | None
    ) -> int:
        """Write what changed in the group since ``before`` as one batch (an empty classic
        group that gave way gets its tombstone). If the log refuses, the group goes back to
        ``before``, as Kafka reverts what a failed write would have stored. Returns an error
        code."""
        records = group_records(group_id, before, self.groups.get(group_id))
        if classic is not None and group_id not in self.coordinator.groups:
            records.insert(0, (encode_group_metadata_key(group_id), None))
        if not records:
            return NONE
        log = self.coordinator.log
        try:
            await log.append(log.partition_for(group_id), records, now_ms=self.now())
        except (KafkalogError, OSError) as e:
            _log.error("storing consumer group %s failed: %s", group_id, e)
            if before is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = restored(group_id, before, self.topics())
            if classic is not None:
                self.coordinator.groups[group_id] = classic
            return code_of(e)
        return NONE

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------
    async def heartbeat(self, ctx: RequestContext, req: dict) -> dict:
        async with self.coordinator.lock:
            group_id = req.get("group_id") or ""
            before = snapshot(self.groups.get(group_id))
            classic_before = self.coordinator.groups.get(group_id)
            try:
                self._validate(req, ctx.api_version)
                if req["member_epoch"] in (
                    LEAVE_GROUP_MEMBER_EPOCH,
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                ):
                    response = self._leave(req)
                else:
                    response = self._heartbeat(ctx, req)
            except _Refused as refused:
                response = {"error_code": refused.code, "error_message": refused.message}
            code = await self._store(group_id, before, classic_before)
            if code != NONE:
                return {"error_code": code, "error_message": "The group's records could not "
                        "be written to the log."}  # fmt: skip
            return response

    def _validate(self, req: dict, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        for name, label in (("group_id", "GroupId"), ("instance_id", "InstanceId"),
                            ("rack_id", "RackId")):  # fmt: skip
            if req.get(name) == "":
                raise _Refused(INVALID_REQUEST, f"{label} can't be empty.")
        if version >= 1 and req.get("member_id") == "":
            raise _Refused(INVALID_REQUEST, "MemberId can't be empty.")
        epoch = req["member_epoch"]
        if epoch == 0:
            if req.get("rebalance_timeout_ms", -1) == -1:
                raise _Refused(
                    INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
                )
            if req.get("topic_partitions") is None or req["topic_partitions"]:
                raise _Refused(INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if (
                req.get("subscribed_topic_names") is None
                and req.get("subscribed_topic_regex") is None
            ):
                raise _Refused(
                    INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.get("instance_id") is None:
                raise _Refused(INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Refused(INVALID_REQUEST, "MemberEpoch is invalid.")
        regex = req.get("subscribed_topic_regex")
        if regex:
            try:
                re.compile(regex)
            except re.error as e:
                raise _Refused(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is "
                               f"not a valid regular expression: {e}.") from None  # fmt: skip
        assignor = req.get("server_assignor")
        if assignor is not None and assignor not in self.config.assignors:
            raise _Refused(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. "
                           f"Supported assignors: {', '.join(self.config.assignors)}.")  # fmt: skip

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup; an empty classic group gives way."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.coordinator.groups.get(group_id)
        if classic is not None:
            if not (create and not classic.members and not classic.pending_members):
                raise _Refused(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            del self.coordinator.groups[group_id]
        elif not create:
            # Kafka answers GROUP_ID_NOT_FOUND, which its clients take as fatal. The groups are
            # stored, so this meets only a member of a group that is gone (deleted, or kept
            # in memory only by a server from before consumer groups were stored): it rejoins.
            raise _Refused(UNKNOWN_MEMBER_ID, f"Consumer group {group_id} not found.")
        # A new group starts at epoch 1, as Kafka's ModernGroup does.
        group = self.groups[group_id] = ConsumerGroup(
            group_id, group_epoch=1, empty_since_ms=self.now()
        )
        return group

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: list | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the previous epoch is accepted
        with a subset of the assignment (the answer that bumped it may have been lost), and
        epoch 0 always: the member rejoins and is told its whole assignment again."""
        if epoch == 0:
            return
        if epoch > member.member_epoch:
            raise _Refused(FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member "
                           f"epoch ({epoch}) than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its partitions "
                           "and rejoin.")  # fmt: skip
        resent = (
            epoch == member.previous_member_epoch
            and owned is not None
            and all(
                p in member.assigned.get(t["topic_id"], ()) for t in owned for p in t["partitions"]
            )
        )
        if epoch < member.member_epoch and not resent:
            raise _Refused(FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member "
                           f"epoch ({epoch}) than the one known by the group coordinator "
                           f"({member.member_epoch}). The member must abandon all its partitions "
                           "and rejoin.")  # fmt: skip

    def _member(self, group: ConsumerGroup, req: dict, member_id: str) -> ConsumerGroupMember:
        """The member the heartbeat is from, created or taken over when it (re)joins."""
        epoch, instance_id = req["member_epoch"], req.get("instance_id")
        owned = req.get("topic_partitions")
        create = epoch == 0
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise _Refused(
                        UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id)
            self._check_epoch(member, epoch, owned)
            return member
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _Refused(UNRELEASED_INSTANCE_ID, f"Static member {existing.member_id} with "
                               f"instance id {instance_id} cannot be replaced because it is still "
                               "in use.")  # fmt: skip
            return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        if existing is None:
            raise _Refused(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise _Refused(FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                           f"{instance_id} was fenced by member {existing.member_id}.")  # fmt: skip
        self._check_epoch(existing, epoch, owned)
        return existing

    def _heartbeat(self, ctx: RequestContext, req: dict) -> dict:
        now = self.now()
        epoch = req["member_epoch"]
        group = self._group(req["group_id"], epoch == 0)
        member_id = req.get("member_id") or ""
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise _Refused(GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                           f"capacity of {self.config.max_size} members.")  # fmt: skip
        member_id = member_id or _new_member_id()
        member = self._member(group, req, member_id)
        names, regex = req.get("subscribed_topic_names"), req.get("subscribed_topic_regex")
        updated = replace(
            member,
            instance_id=req.get("instance_id") or member.instance_id,
            rack_id=req.get("rack_id") or member.rack_id,
            rebalance_timeout_ms=req.get("rebalance_timeout_ms", -1)
            if req.get("rebalance_timeout_ms", -1) != -1 else member.rebalance_timeout_ms,
            server_assignor=req.get("server_assignor") or member.server_assignor,
            subscribed_topic_names=tuple(names) if names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(regex or None) if regex is not None
            else member.subscribed_topic_regex,
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
        )  # fmt: skip
        default_assignor = self.config.assignors[0]
        assignor = group.preferred_assignor(default_assignor)
        group.put(updated, now)
        bump = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or group.preferred_assignor(default_assignor) != assignor
        )
        metadata = _subscribed_metadata(group, self.topics())
        metadata_hash = group_hash(metadata)
        group.subscription_metadata = metadata
        if metadata_hash != group.metadata_hash:
            group.metadata_hash = metadata_hash
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)
        target = group.target.get(member_id, {})
        reconciled = reconcile(updated, group.assignment_epoch, target,
                               req.get("topic_partitions"), group.partition_epoch)  # fmt: skip
        if reconciled != updated:
            group.put(reconciled, now)
            key = ("consumer-rebalance", group.group_id, member_id)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self.coordinator.scheduler.schedule(
                    key, now + reconciled.rebalance_timeout_ms,
                    self._fence_later(group.group_id, member_id, reconciled.member_epoch),
                )  # fmt: skip
            else:
                self.coordinator.scheduler.cancel(key)
        self._schedule_session(group.group_id, member_id)
        response = {
            "error_code": NONE,
            "member_id": member_id,
            "member_epoch": reconciled.member_epoch,
            "heartbeat_interval_ms": self.config.heartbeat_interval_ms,
        }
        full = epoch == 0 or (req.get("rebalance_timeout_ms", -1) != -1 and names is not None
                              and req.get("topic_partitions") is not None)  # fmt: skip
        if full or reconciled.assigned != member.assigned:
            response["assignment"] = {"topic_partitions": _wire(reconciled.assigned)}
        return response

    def _update_target(self, group: ConsumerGroup) -> None:
        topics = group.subscription_metadata
        subscriptions = group.subscribed_topics(self.topics())
        assignor = group.preferred_assignor(self.config.assignors[0])
        group.target = assign(assignor, subscriptions, topics, group.target)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp_ms = self.now()

    # -- leaving, fencing, timeouts --------------------------------------------------------------
    def _consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if group_id in self.coordinator.groups:  # Kafka's consumerGroup(): no full stop
                raise _Refused(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
            raise _Refused(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def _leave(self, req: dict) -> dict:
        group = self._consumer_group(req["group_id"])
        member_id, epoch, instance_id = (
            req["member_id"],
            req["member_epoch"],
            req.get("instance_id"),
        )
        if instance_id is None:
            if member_id not in group.members:
                raise _Refused(
                    UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            self.fence(group, member_id)
            return {"error_code": NONE, "member_id": member_id, "member_epoch": epoch}
        member = group.static_member(instance_id)
        if member is None:
            raise _Refused(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise _Refused(FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                           f"{instance_id} was fenced by member {member.member_id}.")  # fmt: skip
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It means to come back within its session: it keeps its place and assignment.
            group.put(replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                              pending_revocation={}), self.now())  # fmt: skip
            return {"error_code": NONE, "member_id": member_id,
                    "member_epoch": LEAVE_GROUP_STATIC_MEMBER_EPOCH}  # fmt: skip
        self.fence(group, member_id)
        return {"error_code": NONE, "member_id": member_id, "member_epoch": epoch}

    def fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove a member and bump the group epoch (Kafka's consumerGroupFenceMember)."""
        group.remove(member_id, self.now())
        group.subscription_metadata = _subscribed_metadata(group, self.topics())
        group.metadata_hash = group_hash(group.subscription_metadata)
        group.group_epoch += 1
        if not group.members:  # the empty target is the new epoch's, as Kafka records it
            group.assignment_epoch = group.group_epoch
            group.assignment_timestamp_ms = 0
        for kind in ("consumer-session", "consumer-rebalance"):
            self.coordinator.scheduler.cancel((kind, group.group_id, member_id))

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.coordinator.scheduler.schedule(
            ("consumer-session", group_id, member_id),
            self.now() + self.config.session_timeout_ms,
            self._fence_later(group_id, member_id, None),
        )  # fmt: skip

    def _fence_later(self, group_id: str, member_id: str, epoch: int | None):
        """The timer's callback: fence the member if it is still there (for a rebalance
        timeout: still at ``epoch`` with partitions to revoke)."""

        async def expire() -> None:
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if member is None:
                return
            revoking = member.state is MemberState.UNREVOKED_PARTITIONS
            if epoch is not None and (member.member_epoch != epoch or not revoking):
                return
            before = snapshot(group)
            self.fence(group, member_id)
            await self._store(group_id, before, None)

        return expire

    # -- ConsumerGroupDescribe ------------------------------------------------------------------
    async def describe(self, ctx: RequestContext, req: dict) -> dict:
        out = []
        async with self.coordinator.lock:
            names = {tid: name for name, (tid, _) in self.topics().items()}
            for group_id in req.get("group_ids") or []:
                try:
                    group = self._consumer_group(group_id)
                except _Refused as refused:
                    out.append({"error_code": refused.code, "error_message": refused.message,
                                "group_id": group_id})  # fmt: skip
                    continue
                out.append(self._described(group, names))
        return {"groups": out}

    def _described(self, group: ConsumerGroup, names: Mapping[UUID, str]) -> dict:
        members = [
            {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
             "member_epoch": m.member_epoch, "client_id": m.client_id,
             "client_host": m.client_host,
             "subscribed_topic_names": list(m.subscribed_topic_names),
             "subscribed_topic_regex": m.subscribed_topic_regex,
             "assignment": {"topic_partitions": _wire(m.assigned, names)},
             "target_assignment": {"topic_partitions": _wire(group.target.get(m.member_id, {}),
                                                             names)},
             "member_type": CONSUMER_MEMBER_TYPE}
            for m in group.members.values()
        ]  # fmt: skip
        return {
            "error_code": NONE, "group_id": group.group_id, "group_state": group.state.value,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor(self.config.assignors[0]),
            "members": members,
        }  # fmt: skip


def _subscribed_metadata(
    group: ConsumerGroup, topics: Mapping[str, tuple[UUID, int]]
) -> dict[str, tuple[UUID, int]]:
    """The id and partition count of every existing topic some member subscribes to."""
    subscribed = set().union(*(member_topics(m, topics) for m in group.members.values()))
    return {t: topics[t] for t in sorted(subscribed) if t in topics}
