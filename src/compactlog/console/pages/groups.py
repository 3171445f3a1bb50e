"""Consumer groups: their state, members, committed offsets and lag (the overview's totals come from here)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ...server.coordinator.state import DEAD

routes = web.RouteTableDef()
COORDINATOR = "group_coordinator"  # the broker's extras key of the group coordinator


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    members: int
    partitions: int  # partitions with a committed offset
    lag: int  # sum over those partitions of (high watermark - committed offset), never below 0


def coordinator(broker):
    return broker.extras.get(COORDINATOR)


def summaries(broker) -> list[GroupSummary]:
    """Every group the coordinator holds, with its total lag. Runs on the event loop, which owns the
    coordinator's state; reads only in-memory figures (the log end offsets are attributes)."""
    coord = coordinator(broker)
    if coord is None:
        return []
    out = []
    for g in sorted(coord.groups.values(), key=lambda g: g.group_id):
        if g.is_(DEAD):
            continue
        lag = 0
        for (topic, partition), committed in g.offsets.items():
            try:
                end = broker.cl.manager.get_log(topic, partition).high_watermark
            except Exception:  # noqa: BLE001 - a topic deleted since the commit has no lag to show
                continue
            lag += max(0, end - committed.offset)
        out.append(GroupSummary(g.group_id, g.state.value, g.protocol_type or "", len(g.members), len(g.offsets), lag))
    return out
