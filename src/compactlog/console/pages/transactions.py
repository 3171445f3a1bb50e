"""Transactions: the transaction coordinator's transactional ids and every partition's open transactions,
with the hanging ones flagged (``kafka-transactions list`` and ``find-hanging`` in one page).

The coordinator's ids are read on the event loop through ``server.state_views`` (plain values: the
console never touches the coordinator's objects); the partitions' open transactions on the console's
threads (``open_transactions.py``: it may load a partition's producer state). As ListTransactions does,
only the ids the viewer may DESCRIBE are listed; a partition's transactions only when the viewer may
DESCRIBE its topic.
"""

from __future__ import annotations

from aiohttp import web

from ...server import state_views
from ..handlers import console, page, topic_url, viewer
from ..open_transactions import all_rows

routes = web.RouteTableDef()


@routes.get("/transactions")
async def list_transactions(request: web.Request) -> web.Response:
    c = console(request)
    v = viewer(request)
    view = state_views.transactions(c.broker)  # on the event loop, which owns the coordinator's state
    now = c.cl.time.milliseconds()
    rows = await c.run(all_rows, c.cl, view, now, v.describes_topic)
    ids = [] if view is None else [t for t in view.ids if v.can("DESCRIBE", "TRANSACTIONAL_ID", t.transactional_id)]
    return page(request, "transactions.html", view=view, ids=ids, rows=rows, now=now, topic_url=topic_url,
                hanging=[r for r in rows if r.hanging])
