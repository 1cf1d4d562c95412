"""The plain dashboard page: ``GET {base_url}mlp-magic/dashboard``, the lab panel's view without
JupyterLab (Notebook 7's "open in a tab", VS Code users through ``mlp-magic dashboard``).

The page is the standalone bundle of the same TypeScript (labextension/src/dashboard.ts, built
by esbuild into ``static/``) and the settings ``ServerConnection.makeSettings`` reads: the base
URL and, when the page was opened with a token, the token, so that its requests and websocket
authenticate as the lab's do. Authenticated and authorised as the REST routes are (``read`` on
``mlp_magic``); not logged in is a 403 with one line saying how to log in, not a redirect. A
build without Node.js has no bundle: the page is then one line naming the file and how to
build it.
"""
from __future__ import annotations

import json
import os
from html import escape

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from mlp_magic.panel.jupyter_server_private import prepare_without_login_redirect, token_authenticated
from mlp_magic.panel.live_socket import AUTH_RESOURCE

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
BUNDLE = "dashboard.js"
STYLE = "dashboard.css"

NOT_LOGGED_IN = ("mlp_magic: not logged in to this Jupyter server: open this page with ?token=TOKEN "
                 "(the server's token), or log in at {login} first.")
MISSING_BUNDLE = ("mlp_magic: the dashboard page's bundle {path} is missing (mlp_magic was installed "
                  "without Node.js). Build it in a source checkout: cd labextension && jlpm install && "
                  "jlpm build:dashboard; or install mlp_magic again where Node.js >= 18 is on PATH.")

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MLP Cluster</title>
<script id="jupyter-config-data" type="application/json">{config}</script>
<link rel="stylesheet" href="{style}">
</head>
<body>
<script src="{bundle}"></script>
</body>
</html>
"""


def static_url(base_url: str, name: str, folder: str) -> str:
    """The bundle file's URL, its mtime as version (a rebuilt bundle is not taken from a cache)."""
    version = int(os.stat(os.path.join(folder, name)).st_mtime)
    return url_path_join(base_url, "mlp-magic", "static", name) + f"?v={version}"


class DashboardHandler(JupyterHandler):
    """GET: the page (text/html), or one line of text/plain: 403 not logged in, 500 no bundle."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, static_dir: str = STATIC_DIR) -> None:
        self.static_dir = static_dir

    async def prepare(self):
        # Not logged in: a 403 below (as the REST routes), never the login redirect.
        await prepare_without_login_redirect(super().prepare)

    def say(self, status: int, line: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(line + "\n")

    async def get(self) -> None:
        if self.current_user is None:
            login = url_path_join(self.base_url, "login") + "?next=" + self.request.path
            self.say(403, NOT_LOGGED_IN.format(login=login))
            return
        await self._page()

    @authorized("read", resource=AUTH_RESOURCE)
    async def _page(self) -> None:
        bundle = os.path.join(self.static_dir, BUNDLE)
        if not (os.path.isfile(bundle) and os.path.isfile(os.path.join(self.static_dir, STYLE))):
            self.say(500, MISSING_BUNDLE.format(path=bundle))
            return
        self.xsrf_token   # noqa: B018 (sets the _xsrf cookie a cookie-authenticated POST needs)
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(PAGE.format(config=self.page_config(),
                                style=escape(static_url(self.base_url, STYLE, self.static_dir)),
                                bundle=escape(static_url(self.base_url, BUNDLE, self.static_dir))))

    def page_config(self) -> str:
        """What @jupyterlab/coreutils' PageConfig reads; the token only when the request had one."""
        config = {"baseUrl": self.base_url, "appName": "MLP Cluster"}
        if token_authenticated(self):
            config["token"] = self.identity_provider.get_token(self) or ""
        return json.dumps(config).replace("</", "<\\/")   # never ends the script element


class DashboardStatic(web.StaticFileHandler):
    """The bundle's files: public code, like the server's own /static (no secret in them)."""

    def set_extra_headers(self, path: str) -> None:
        self.set_header("Cache-Control", "max-age=31536000" if self.get_argument("v", None) else "no-cache")


def dashboard_routes(route) -> list:
    """The page's routes, ``route(*parts)`` making each pattern under the server's base URL
    (``STATIC_DIR`` read now: the tests point it at an empty folder)."""
    return [
        (route("dashboard"), DashboardHandler, {"static_dir": STATIC_DIR}),
        (route("static", "(.*)"), DashboardStatic, {"path": STATIC_DIR}),
    ]
