"""A classic consumer group's membership and state machine (Kafka's ClassicGroup).

States and the moves between them, as Kafka allows them::

    Empty ----------------> PreparingRebalance <----------------+
      ^                       |        ^                        |
      |   (all members left)  v        | (join, leave, expiry)  |
      +------------------- CompletingRebalance --(leader syncs)--> Stable

A rebalance gathers JoinGroup requests until every known member has rejoined (or the rebalance
timeout passes), then bumps the generation, picks the protocol every member supports that gets
most first-choice votes, and answers all joins; the leader's SyncGroup carries every member's
assignment, which is stored before the group turns Stable and the other syncs are answered.

Futures for pending JoinGroup/SyncGroup answers live on the members; the coordinator
(:mod:`.coordinator`) owns the timers and the log.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..error_codes import FENCED_INSTANCE_ID, NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID

__all__ = ["ClassicGroup", "GroupMember", "GroupState"]


class GroupState(enum.Enum):
    """Kafka's ClassicGroupState; ``value`` is the name DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState) - {GroupState.DEAD},
}


@dataclass(eq=False)
class GroupMember:
    """One member: its identity, timeouts, the protocols it offers, and pending answers."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == [(n, bytes(m)) for n, m in protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first of the member's protocols that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def _superseded(member_id: str) -> dict:
    return {"error_code": REBALANCE_IN_PROGRESS, "member_id": member_id, "generation_id": -1}


def _complete(future: asyncio.Future | None, value: dict) -> bool:
    if future is None or future.done():
        return False
    future.set_result(value)
    return True


@dataclass(eq=False)
class ClassicGroup:
    """One group's state; every change goes through a method named for Kafka's operation."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, GroupMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    new_member_added: bool = False
    num_members_awaiting_join: int = 0

    # -- state ------------------------------------------------------------------------------------
    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            allowed = sorted(s.value for s in _VALID_PREVIOUS[state])
            raise RuntimeError(
                f"Group {self.group_id} should be in one of {allowed} before moving to "
                f"{state.value}, but it is {self.state.value}"
            )
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: GroupMember, join_future: asyncio.Future | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.set_join_future(member, join_future)

    def set_join_future(self, member: GroupMember, future: asyncio.Future | None) -> None:
        if member.join_future is None and future is not None:
            self.num_members_awaiting_join += 1
        elif member.join_future is not None and future is None:
            self.num_members_awaiting_join -= 1
        elif member.join_future is not None and member.join_future is not future:
            # The member sent another JoinGroup: it gave up on the first, which is answered
            # now rather than left hanging on its connection.
            _complete(member.join_future, _superseded(member.member_id))
        member.join_future = future

    def set_sync_future(self, member: GroupMember, future: asyncio.Future) -> None:
        if member.sync_future is not None and member.sync_future is not future:
            _complete(member.sync_future, {"error_code": REBALANCE_IN_PROGRESS, "assignment": b""})
        member.sync_future = future

    def remove(self, member_id: str) -> None:
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.join_future is not None:
            self.num_members_awaiting_join -= 1
            member.join_future = None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def replace_static_member(self, old_id: str, new_id: str) -> GroupMember:
        """A static member came back under a new member id: same place, same assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return member

    def update_member(
        self,
        member: GroupMember,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_join_future(member, join_future)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[GroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """NONE, or UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as Kafka's validateMember."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return UNKNOWN_MEMBER_ID
            if existing != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID

    # -- protocols --------------------------------------------------------------------------------
    def _candidates(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(
        self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]
    ) -> bool:
        """A joiner fits if the group is empty, or its type matches and a protocol is shared."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self._candidates())

    def select_protocol(self) -> str:
        candidates = self._candidates()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else elect a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- answers ----------------------------------------------------------------------------------
    def join_response(self, member: GroupMember) -> dict:
        members = []
        if self.is_leader(member.member_id) and self.protocol_name is not None:
            members = [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)}
                for m in self.members.values()
            ]  # fmt: skip
        return {
            "error_code": NONE,
            "generation_id": self.generation_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocol_name,
            "leader": self.leader_id or "",
            "member_id": member.member_id,
            "members": members,
        }

    def complete_join(self, member: GroupMember, response: dict) -> bool:
        future = member.join_future
        self.set_join_future(member, None)
        return _complete(future, response)

    def complete_sync(self, member: GroupMember, response: dict) -> bool:
        future, member.sync_future = member.sync_future, None
        return _complete(future, response)
