"""A consumer group of the KIP-848 protocol: members, epochs and assignments (Kafka's
ConsumerGroup and ConsumerGroupMember), with the reconciliation of each member toward its target
assignment (Kafka's CurrentAssignmentBuilder) and the server-side assignors.

The group epoch counts changes of membership, subscriptions and the subscribed topics'
partitions; the target assignment is recomputed whenever it lags the group epoch. A member moves
toward its target one step per heartbeat: partitions it must give up are revoked first (it stays
at its epoch, UNREVOKED_PARTITIONS, until it stops reporting them), then it reaches the target
epoch with what it keeps plus the new partitions no other member still holds
(UNRELEASED_PARTITIONS while some are still held). Assignments map topic ids to partition sets.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from uuid import UUID

__all__ = [
    "FENCED_MEMBER_EPOCH",
    "INVALID_REGULAR_EXPRESSION",
    "STALE_MEMBER_EPOCH",
    "UNRELEASED_INSTANCE_ID",
    "UNSUPPORTED_ASSIGNOR",
    "Assignment",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "assign",
    "member_topics",
    "reconcile",
]

# Kafka's error codes of the consumer group protocol (Errors.java).
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128

Assignment = dict[UUID, frozenset[int]]
TopicsMetadata = Mapping[str, tuple[UUID, int]]  # topic name -> (topic id, partition count)


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroupState; ``value`` is the name ListGroups and the describes give."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member as the coordinator knows it; every change makes a new one (``replace``)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # The member epoch at which each assigned (or pending) partition was given (KIP-1251).
    assigned_epochs: dict[tuple[UUID, int], int] = field(default_factory=dict)

    def with_epoch(self, epoch: int, **changes) -> ConsumerGroupMember:
        """Kafka's updateMemberEpoch: the previous epoch is the one the member had, also when
        the epoch stays."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch,
                       **changes)  # fmt: skip


def _owns_any(owned: list[dict] | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    return any(p in partitions.get(t["topic_id"], ()) for t in owned for p in t["partitions"])


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owned: list[dict] | None,
    partition_epoch: Callable[[UUID, int], int],
) -> ConsumerGroupMember:
    """One step of the member toward ``target`` (Kafka's CurrentAssignmentBuilder.build and
    computeNextAssignment); ``owned`` is what its heartbeat reports, None when left out."""
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    epoch = member.member_epoch
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        epoch += 1  # revoked: on to the next epoch
    unreleased = False
    assigned: Assignment = {}
    revoking: Assignment = {}
    adding: Assignment = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        free = {p for p in wanted - keep if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) < len(wanted - keep)
        if keep:
            assigned[topic_id] = keep
        if current - keep:
            revoking[topic_id] = current - keep
        if free:
            adding[topic_id] = frozenset(free)
    old_epochs = member.assigned_epochs
    if revoking and _owns_any(owned, revoking):
        held = {(t, p): old_epochs.get((t, p), member.member_epoch)
                for a in (assigned, revoking) for t, ps in a.items() for p in ps}  # fmt: skip
        return member.with_epoch(epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                                 pending_revocation=revoking, assigned_epochs=held)  # fmt: skip
    epochs = {(t, p): old_epochs.get((t, p), member.member_epoch)
              for t, ps in assigned.items() for p in ps}  # fmt: skip
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        epochs.update(((topic_id, p), target_epoch) for p in partitions)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={},
                             assigned_epochs=epochs)  # fmt: skip


@dataclass(eq=False)
class ConsumerGroup:
    """One group; members change only through :meth:`put` and :meth:`remove`, which keep the
    owner epoch of every partition (assigned or pending revocation) in step."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, tuple[UUID, int]] = field(default_factory=dict)
    partition_epochs: dict[tuple[UUID, int], int] = field(default_factory=dict)
    empty_since_ms: int = -1
    metadata_hash: int = 0  # of the subscribed topics (:mod:`.metadata_hash`)
    assignment_timestamp_ms: int = 0  # when the target assignment was computed

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def _release(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def put(self, member: ConsumerGroupMember, now_ms: int) -> None:
        """Add or update a member (a static member's new incarnation replaces the old one)."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        if member.instance_id is not None:
            previous = self.static_members.get(member.instance_id)
            if previous is not None and previous != member.member_id:
                if previous in self.target:  # the new incarnation inherits the old one's target
                    self.target[member.member_id] = self.target[previous]
                self.remove(previous, now_ms)
            self.static_members[member.instance_id] = member.member_id
        self.members[member.member_id] = member
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch
        self.empty_since_ms = -1

    def remove(self, member_id: str, now_ms: int) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        if not self.members:
            self.empty_since_ms = now_ms

    def subscribed_topics(self, topics: Iterable[str]) -> dict[str, set[str]]:
        """Each member's subscribed topics among ``topics`` (names, and regex matches)."""
        names = list(topics)
        return {mid: member_topics(m, names) for mid, m in self.members.items()}

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for, else the broker's first (Kafka's
        computePreferredServerAssignor)."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else default


def member_topics(member: ConsumerGroupMember, names: Iterable[str]) -> set[str]:
    """The member's subscribed topic names, and those of ``names`` its regex matches whole."""
    out = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        pattern = re.compile(member.subscribed_topic_regex)
        out.update(n for n in names if pattern.fullmatch(n))
    return out


# -- assignors ------------------------------------------------------------------------------------
def assign(
    assignor: str,
    subscriptions: Mapping[str, set[str]],
    topics: TopicsMetadata,
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target assignment of every member (``subscriptions``: member id -> topic names)."""
    subs = {m: {t for t in ts if t in topics} for m, ts in subscriptions.items()}
    if assignor == "range":
        plan = _range(subs, topics)
    else:
        plan = _uniform(subs, topics, current)
    out: dict[str, Assignment] = {}
    for member_id, partitions in plan.items():
        by_topic: dict[UUID, set[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topics[topic][0], set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def _range(subs: Mapping[str, set[str]], topics: TopicsMetadata) -> dict[str, list]:
    """Kafka's RangeAssignor: each topic's partitions in contiguous ranges over its
    subscribers in member id order, the first ones one partition more."""
    plan: dict[str, list] = {m: [] for m in subs}
    for topic in sorted(set().union(*subs.values()) if subs else ()):
        members = sorted(m for m, ts in subs.items() if topic in ts)
        count = topics[topic][1]
        share, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = share + (1 if i < extra else 0)
            plan[m].extend((topic, p) for p in range(start, start + n))
            start += n
    return plan


def _uniform(
    subs: Mapping[str, set[str]], topics: TopicsMetadata, current: Mapping[str, Assignment]
) -> dict[str, list]:
    """Kafka's UniformAssignor: balanced and sticky. Members keep what they had, up to their
    quota when all subscribe alike; the rest goes to the least loaded member subscribed to it."""
    names = {tid: name for name, (tid, _) in topics.items()}
    partitions = sorted((t, p) for t in set().union(*subs.values()) if subs
                        for p in range(topics[t][1]))  # fmt: skip
    members = sorted(subs)
    plan: dict[str, list] = {m: [] for m in members}
    if not members:
        return plan
    homogeneous = all(subs[m] == subs[members[0]] for m in members)
    quota, extra = divmod(len(partitions), len(members))
    taken: set[tuple[str, int]] = set()
    by_size = sorted(members, key=lambda m: -sum(len(v) for v in current.get(m, {}).values()))
    for m in by_size:
        kept = sorted(
            (names[tid], p) for tid, ps in current.get(m, {}).items() if tid in names
            for p in ps if names[tid] in subs[m] and p < topics[names[tid]][1]
        )  # fmt: skip
        kept = [tp for tp in kept if tp not in taken]
        if homogeneous:
            limit = quota + (1 if extra and len(kept) > quota else 0)
            if limit > quota:
                extra -= 1
            kept = kept[:limit]
        plan[m].extend(kept)
        taken.update(kept)
    for tp in partitions:
        if tp in taken:
            continue
        eligible = [m for m in members if tp[0] in subs[m]]
        if eligible:
            plan[min(eligible, key=lambda m: (len(plan[m]), m))].append(tp)
    return plan
