"""The overview: every topic with its size, records, policy, codec, dirty ratio and cleaner state;
consumer groups with their lag; the server's listeners and uptime."""

from __future__ import annotations

import time

from aiohttp import web

from .. import inventory
from ..handlers import console, page, viewer
from .groups import summaries

routes = web.RouteTableDef()


@routes.get("/")
async def overview(request: web.Request) -> web.Response:
    c = console(request)
    v = viewer(request)
    topics = [t for t in await c.run(inventory.all_topics, c.cl) if v.can("DESCRIBE", "TOPIC", t.name)]
    groups = [g for g in summaries(c.broker, v.describes_topic) if v.can("DESCRIBE", "GROUP", g.group_id)]
    server = c.server
    listeners = [x.url(server.bound[x.name][1]) for x in server.listeners] if server is not None else []
    return page(request, "overview.html", topics=topics, groups=groups, listeners=listeners,
                http=c.urls, uptime=time.time() - c.started, node_id=c.broker.node_id,
                cluster_id=c.broker.cluster_id, data_dir=str(c.cl.data_dir))
