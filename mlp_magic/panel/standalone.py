"""``mlp-magic dashboard``: the panel's view for people without a Jupyter server (VS Code runs
kernels without one).

A jupyter_server ServerApp started here with only the panel's server extension (every other
extension found in the config paths is turned off): the same routes, websocket and page as in
JupyterLab (panel/handlers, panel/dashboard). It listens on 127.0.0.1 by default, with a fresh
random token, opens no browser, and prints one line: the page's URL with the token. Its
authorizer (panel/dashboard_only) allows the panel's routes only: the token runs no kernel and
reads no file. A kernel
finds it through its runtime file (the contract another part reads, keep it):

    {jupyter_runtime_dir()}/mlp-magic-dashboard-{pid}.json, mode 0600,
    {"url": "<the page's URL with the token>", "pid": <int>, "port": <int>, "host": "<host>"}

removed when the server stops (SIGINT or SIGTERM: both stop it cleanly).
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import socket

from mlp_magic.errors import MlpMagicError

PANEL_EXTENSION = "mlp_magic.panel"
RUNTIME_PREFIX = "mlp-magic-dashboard-"
PAGE_PATH = "/mlp-magic/dashboard"


def runtime_file(pid: int) -> str:
    from jupyter_core.paths import jupyter_runtime_dir

    return os.path.join(jupyter_runtime_dir(), f"{RUNTIME_PREFIX}{pid}.json")


def free_port(host: str) -> int:
    """A port the OS has free on ``host`` now (the server binds it a moment later)."""
    with _bound(host, 0) as sock:
        return sock.getsockname()[1]


def check_port(host: str, port: int) -> None:
    """One line naming the port when it cannot be listened on (before anything starts)."""
    with _bound(host, port):
        pass


def _bound(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) as tornado binds; a bad host or port is one line."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        raise MlpMagicError(f"--host {host!r}: not an address to listen on ({err.strerror})") from None
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        why = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be listened on ({err.strerror})"
        raise MlpMagicError(f"port {port or '(any)'} on {host} {why}; "
                            "give another with --port or --host") from None
    return sock


def write_runtime_file(path: str, record: dict) -> None:
    """Created 0600 from the start (the URL holds the token)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(record, handle)


def remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _server_class():
    from jupyter_server.serverapp import ServerApp

    class DashboardServer(ServerApp):
        """jupyter_server with the panel's extension only, stopped cleanly by SIGINT and SIGTERM."""

        def init_server_extensions(self) -> None:
            # After every config file was read: whatever they enabled is off, the panel on.
            self.jpserver_extensions = {name: name == PANEL_EXTENSION
                                        for name in {*self.jpserver_extensions, PANEL_EXTENSION}}
            super().init_server_extensions()

        def init_signal(self) -> None:
            from mlp_magic.panel.jupyter_server_private import signal_stopper

            stop = signal_stopper(self)
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)   # no "shut down? (y/n)" prompt

        def start_app(self) -> None:
            super().start_app()
            self.started()

        def started(self) -> None:
            """Listening: the runtime file, then the one line."""
            url = f"http://{_url_host(self.ip)}:{self.port}{PAGE_PATH}?token={self.identity_provider.token}"
            write_runtime_file(self.runtime_path, {"url": url, "pid": os.getpid(), "port": self.port,
                                                   "host": self.ip})
            print(url, flush=True)

    return DashboardServer


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def serve(host: str = "127.0.0.1", port: int = 0) -> int:
    """Run the dashboard server until SIGINT/SIGTERM; the exit status."""
    port = port or free_port(host)
    check_port(host, port)
    server = _server_class()()
    server.cookie_secret = secrets.token_bytes(32)   # fresh as the token: no jupyter_cookie_secret file
    server.runtime_path = runtime_file(os.getpid())
    argv = [f"--ServerApp.ip={host}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            "--ServerApp.open_browser=False", "--ServerApp.allow_root=True", "--ServerApp.log_level=WARN",
            f"--ServerApp.default_url={PAGE_PATH}", f"--IdentityProvider.token={secrets.token_hex(24)}",
            # the view only: jupyter_server's kernels, contents and terminals refuse every request
            "--ServerApp.authorizer_class=mlp_magic.panel.dashboard_only.DashboardOnlyAuthorizer"]
    try:
        server.initialize(argv=argv, find_extensions=False)
        server.start()
    except SystemExit as stopped:   # the server's own exit (a port taken meanwhile): said in its log
        if stopped.code:
            raise MlpMagicError(f"the dashboard server on {host}:{port} could not start "
                                f"(exit status {stopped.code}; see the lines above)") from None
    finally:
        remove_quietly(server.runtime_path)
    return 0


def run_command(options) -> int:
    """``mlp-magic dashboard [--port P] [--host H]``."""
    return serve(options.bind, options.port or 0)
