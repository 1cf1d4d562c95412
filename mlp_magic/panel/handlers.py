"""HTTP routes of the panel: one small handler per route, every verb authenticated and authorised.

Authentication is jupyter_server's (token or login cookie; a cookie-authenticated POST also needs
the XSRF token, which the panel's requests carry); authorisation asks the server's authorizer for
``read`` (the document, logs, history) or ``execute`` (actions on a World's processes) on the
resource ``mlp_magic``. The actions (panel/actions) reach the World without its kernel: a kernel
stuck in a cell is the case they exist for.
"""
from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from mlp_magic.cluster.gpu_feed import histories_of
from mlp_magic.cluster.live import REFRESH_AT_MOST_EVERY_S, LiveCluster
from mlp_magic.gpu.pure.history import history_csv, history_json
from mlp_magic.errors import MlpMagicError
from mlp_magic.panel import actions
from mlp_magic.panel.dashboard import dashboard_routes
from mlp_magic.panel.live_socket import AUTH_RESOURCE, LiveSocket

ROUTE_PREFIX = "mlp-magic"
WORLD_ID = r"(?P<world_id>[A-Za-z0-9._-]{1,200})"


class _LiveHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    def initialize(self, live: LiveCluster, cache_seconds: float = 4.0) -> None:
        self.live = live
        self.cache_seconds = cache_seconds

    async def prepare(self):
        await super().prepare()
        await self.live.ensure_started()

    def write_json(self, body) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))

    def world_record(self, world_id: str) -> dict:
        record = self.live.world(world_id)
        if record is None:
            raise web.HTTPError(404, f"no World {world_id!r} here (stopped, or its kernel is gone)")
        return record


class ClusterHandler(_LiveHandler):
    """GET: the cluster document (its slow part at most ``cache_seconds`` old when no panel
    keeps it fresh)."""

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def get(self) -> None:
        if not self.live.watchers:
            await self.live.refresh(at_most_every=self.cache_seconds)
        self.write_json(self.live.current)


class RefreshHandler(_LiveHandler):
    """POST: take the slow part (topology, reachability) again now, at most every 2 s."""

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def post(self) -> None:
        self.write_json(await self.live.refresh(at_most_every=REFRESH_AT_MOST_EVERY_S))


class InterruptHandler(_LiveHandler):
    """POST: SIGINT the World's running cell on every rank, through each host's agent."""

    @web.authenticated
    @authorized("execute", resource=AUTH_RESOURCE)
    async def post(self, world_id: str) -> None:
        self.write_json(await actions.interrupt(self.world_record(world_id)))


class UnblockHandler(_LiveHandler):
    """POST: end the hung torch.distributed collectives of the World's busy ranks, keeping them."""

    @web.authenticated
    @authorized("execute", resource=AUTH_RESOURCE)
    async def post(self, world_id: str) -> None:
        self.write_json(await actions.unblock(self.world_record(world_id), lambda: self.live.world(world_id)))


class RestartHandler(_LiveHandler):
    """POST: stop the World's processes (its next %%mpirun cell starts a fresh one)."""

    @web.authenticated
    @authorized("execute", resource=AUTH_RESOURCE)
    async def post(self, world_id: str) -> None:
        self.write_json(await actions.stop(self.world_record(world_id)))


class StacksHandler(_LiveHandler):
    """POST: where every rank of the World is, merged into one tree ({"text", "html"})."""

    @web.authenticated
    @authorized("execute", resource=AUTH_RESOURCE)
    async def post(self, world_id: str) -> None:
        self.write_json(await actions.stacks(self.world_record(world_id)))


class LogHandler(_LiveHandler):
    """GET: the last 64 KiB of one rank's stdout or stderr in the World's running or last cell."""

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def get(self, world_id: str, rank: str) -> None:
        stream = self.get_argument("stream", "stdout")
        try:
            text = await actions.tail(self.world_record(world_id), int(rank), stream)
        except MlpMagicError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(text)


class GpuHistoryHandler(_LiveHandler):
    """GET ?format=csv|json[&host=H]: every host's GPU readings of the last ten minutes, 1 Hz
    (gpu/pure/history's export); a bad format or a host with no history: one 400 error."""

    @web.authenticated
    @authorized("read", resource=AUTH_RESOURCE)
    async def get(self) -> None:
        wanted, host = self.get_argument("format", "json"), self.get_argument("host", None)
        if wanted not in ("csv", "json"):
            raise web.HTTPError(400, f"format {wanted!r}: csv or json")
        histories = await histories_of(self.live.gpu_feed, self.live.worlds)
        if host is not None:
            if host not in histories:
                known = ", ".join(sorted(histories)) or "none"
                raise web.HTTPError(400, f"no GPU history of host {host!r} (hosts with one: {known})")
            histories = {host: histories[host]}
        self.set_header("Cache-Control", "no-store")
        if wanted == "json":
            self.write_json(history_json(histories))
            return
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", 'attachment; filename="gpu-history.csv"')
        self.finish(history_csv(histories))


def setup_handlers(web_app, live: LiveCluster, cache_seconds: float = 4.0) -> list:
    """Register the routes under ``{base_url}mlp-magic/``; returns their URL patterns."""
    base_url = web_app.settings.get("base_url", "/")
    shared = {"live": live, "cache_seconds": cache_seconds}

    def route(*parts: str) -> str:
        return url_path_join(base_url, ROUTE_PREFIX, *parts)

    routes = [
        (route("cluster"), ClusterHandler, shared),
        (route("cluster", "refresh"), RefreshHandler, shared),
        (route("live"), LiveSocket, {"live": live}),
        (route("worlds", WORLD_ID, "interrupt"), InterruptHandler, shared),
        (route("worlds", WORLD_ID, "unblock"), UnblockHandler, shared),
        (route("worlds", WORLD_ID, "restart"), RestartHandler, shared),
        (route("worlds", WORLD_ID, "stacks"), StacksHandler, shared),
        (route("worlds", WORLD_ID, "ranks", r"(?P<rank>[0-9]{1,7})", "log"), LogHandler, shared),
        (route("gpus", "history"), GpuHistoryHandler, shared),
        *dashboard_routes(route),   # the plain page of the same view, and its bundle
    ]
    web_app.add_handlers(".*$", routes)
    return [pattern for pattern, _, _ in routes]
