"""ListGroups and DescribeGroups over the classic group coordinator's groups (ListGroups lists
the consumer groups of KIP-848 too; DescribeGroups answers for them as for an unknown group).

Member metadata and assignments are shown only for a Stable group, as Kafka does: during a
rebalance they are in flux. States are Kafka's names (Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead); the state filter of ListGroups matches them case-blind.
"""

from __future__ import annotations

from ..error_codes import GROUP_ID_NOT_FOUND, NONE
from ..handlers import RequestContext
from .coordinator import GroupCoordinator
from .state import GroupState

__all__ = ["describe_groups", "list_groups"]

_STABLE, _DEAD = GroupState.STABLE, GroupState.DEAD


async def list_groups(coordinator: GroupCoordinator, ctx: RequestContext, req: dict) -> dict:
    """ListGroups: classic groups, filtered by state (v4+) and type (v5+)."""
    states = {s.lower() for s in req.get("states_filter") or []}
    types = {t.lower() for t in req.get("types_filter") or []}
    out = []
    if not types or "classic" in types:
        for group in coordinator.groups.values():
            if group.is_in(_DEAD) or (states and group.state.value.lower() not in states):
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state.value, "group_type": "classic"})  # fmt: skip
    if not types or "consumer" in types:
        for consumer_group in coordinator.consumer_groups.values():
            state = consumer_group.state.value
            if not states or state.lower() in states:
                out.append({"group_id": consumer_group.group_id, "protocol_type": "consumer",
                            "group_state": state, "group_type": "consumer"})  # fmt: skip
    return {"error_code": NONE, "groups": out}


async def describe_groups(coordinator: GroupCoordinator, ctx: RequestContext, req: dict) -> dict:
    """DescribeGroups: an unknown (or deleted) group is GROUP_ID_NOT_FOUND from v6 on
    (KIP-1043), and Dead without error before, as Kafka answers."""
    out = []
    for group_id in req.get("groups") or []:
        group = coordinator.groups.get(group_id)
        if (group is None or group.is_in(_DEAD)) and ctx.api_version >= 6:
            other_kind = group_id in coordinator.consumer_groups
            message = (f"Group {group_id} is not a classic group." if other_kind
                       else f"Group {group_id} not found.")  # fmt: skip
            out.append({"error_code": GROUP_ID_NOT_FOUND, "error_message": message,
                        "group_id": group_id, "group_state": "Dead" if other_kind else "",
                        "protocol_type": "", "protocol_data": "", "members": []})  # fmt: skip
            continue
        if group is None:
            out.append({"error_code": NONE, "group_id": group_id, "group_state": "Dead",
                        "protocol_type": "", "protocol_data": "", "members": []})  # fmt: skip
            continue
        stable = group.is_in(_STABLE)
        members = [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "client_id": m.client_id, "client_host": m.client_host,
             "member_metadata": m.metadata(group.protocol_name)
             if stable and group.protocol_name else b"",
             "member_assignment": m.assignment if stable else b""}
            for m in group.members.values()
        ]  # fmt: skip
        out.append({
            "error_code": NONE, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": group.protocol_name or "" if stable else "", "members": members,
        })  # fmt: skip
    return {"groups": out}
