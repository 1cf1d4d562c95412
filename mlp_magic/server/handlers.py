"""HTTP routes of the panel: one small handler per route, every verb authenticated."""
from __future__ import annotations

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from .snapshot import SnapshotCache

ROUTE_PREFIX = "mlp-magic"


class _SnapshotHandler(APIHandler):
    def initialize(self, snapshots: SnapshotCache) -> None:
        self.snapshots = snapshots

    async def write_snapshot(self) -> None:
        body = await self.snapshots.get()
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        await self.finish(body)


class ClusterHandler(_SnapshotHandler):
    """GET: the current cluster snapshot (cached for a few seconds, shared by every tab)."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self.write_snapshot()


class RefreshHandler(_SnapshotHandler):
    """POST: drop the cached snapshot and answer with a freshly computed one."""

    @tornado.web.authenticated
    async def post(self) -> None:
        self.snapshots.invalidate()
        await self.write_snapshot()


def setup_handlers(web_app, snapshots: SnapshotCache) -> list:
    """Register the routes under ``{base_url}mlp-magic/``; returns their URL patterns."""
    base_url = web_app.settings.get("base_url", "/")
    shared = {"snapshots": snapshots}
    routes = [
        (url_path_join(base_url, ROUTE_PREFIX, "cluster"), ClusterHandler, shared),
        (url_path_join(base_url, ROUTE_PREFIX, "cluster", "refresh"), RefreshHandler, shared),
    ]
    web_app.add_handlers(".*$", routes)
    return [pattern for pattern, _, _ in routes]
