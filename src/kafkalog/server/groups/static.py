"""Static members (KIP-345): a consumer with a ``group.instance.id`` that restarts keeps its place.

When a known instance id joins without a member id, the old member id is fenced (its pending
JoinGroup or SyncGroup answers FENCED_INSTANCE_ID) and the new id takes over the member, with
its assignment. A Stable group whose chosen protocol stays the same is not rebalanced: the
change is stored and the member gets the current generation back, which is the point of static
membership (Kafka's updateStaticMemberThenRebalanceOrCompleteJoin). Otherwise, or while a
rebalance is under way, the group rebalances as for any rejoin.
"""

from __future__ import annotations

from ..error_codes import FENCED_INSTANCE_ID
from .state import ClassicGroup, GroupState

__all__ = ["replace_static_member"]


async def replace_static_member(coordinator, group: ClassicGroup, join, old_id: str, new_id: str):
    """Give ``old_id``'s place to ``new_id`` for ``join`` (a ``groups._Join``) and answer it."""
    old = group.members[old_id]
    fenced = {"error_code": FENCED_INSTANCE_ID, "member_id": old_id, "generation_id": -1}
    group.complete_join(old, fenced)
    group.complete_sync(old, {"error_code": FENCED_INSTANCE_ID, "assignment": b""})
    coordinator.scheduler.cancel(("heartbeat", group.group_id, old_id))
    member = group.replace_static_member(old_id, new_id)
    member.protocols = join.protocols
    member.rebalance_timeout_ms = join.rebalance_timeout
    member.session_timeout_ms = join.session_timeout
    member.client_id = join.ctx.client_id or ""
    member.client_host = join.ctx.client_host
    coordinator._schedule_heartbeat(group, new_id, join.session_timeout)
    if group.is_in(GroupState.STABLE):
        if group.select_protocol() == group.protocol_name:
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            await coordinator._store_group(group, assignment)
            response = group.join_response(member)
            if not group.is_leader(new_id):
                response["members"] = []
            join.future.set_result(response)
            return
    group.set_join_future(member, join.future)
    await coordinator._maybe_prepare_rebalance_or_complete_join(group)
