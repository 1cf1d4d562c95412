"""Where this user's cluster dashboard is, for a frontend that cannot show a widget.

``dashboard_url()`` answers, first found wins:
(a) a running Jupyter server of this user (``jupyter_server.serverapp.list_running_servers``: its
    runtime files, which only their owner can read) with the ``mlp_magic.panel`` extension
    enabled: ``{url}mlp-magic/dashboard``, with ``?token=`` when that server has one;
(b) a standalone dashboard (``mlp-magic dashboard``): the files
    ``{jupyter_runtime_dir()}/mlp-magic-dashboard-{pid}.json`` (mode 0600) holding
    ``{"url", "pid", "port", "host"}``; a file whose pid is not alive, whose process or file is not
    this user's, or that cannot be read as that JSON is passed over;
(c) None (``START_HINT`` says how to start one).
Nothing here raises: a dashboard it cannot find is one it does not name.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from urllib.parse import quote

EXTENSION = "mlp_magic.panel"
ROUTE = "mlp-magic/dashboard"
STANDALONE_FILE = re.compile(r"^mlp-magic-dashboard-(\d+)\.json$")
START_HINT = "no dashboard running: start one with `mlp-magic dashboard`"


def dashboard_url() -> str | None:
    """The URL of this user's dashboard, or None (never raises)."""
    for find in (_server_url, _standalone_url):
        try:
            url = find()
        except Exception:  # noqa: BLE001 - a broken runtime folder means: none there
            url = None
        if url:
            return url
    return None


def dashboard_line() -> str:
    """The line a text face ends with: the URL, or how to start a dashboard."""
    url = dashboard_url()
    return "dashboard: %s" % url if url else START_HINT


def _server_url() -> str | None:
    if not _panel_enabled():
        return None
    from jupyter_server.serverapp import list_running_servers

    for info in list_running_servers():
        url = info.get("url")
        if isinstance(url, str) and url and _owned_by_me(info.get("pid")):
            token = info.get("token")
            suffix = "?token=%s" % quote(token, safe="") if isinstance(token, str) and token else ""
            return url.rstrip("/") + "/" + ROUTE + suffix
    return None


def _panel_enabled() -> bool:
    """Whether a Jupyter server of this environment loads the panel (its config says so)."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    manager = ExtensionConfigManager(read_config_path=jupyter_config_path())
    return bool(manager.enabled(EXTENSION))


def _standalone_url() -> str | None:
    for record in standalone_records():
        return record["url"]
    return None


def standalone_records(runtime_dir: str | None = None) -> Iterator[dict]:
    """The live standalone dashboards' records of this user, newest file first."""
    from jupyter_core.paths import jupyter_runtime_dir

    folder = runtime_dir or jupyter_runtime_dir()
    try:
        names = [n for n in os.listdir(folder) if STANDALONE_FILE.match(n)]
    except OSError:
        return
    paths = [os.path.join(folder, n) for n in names]
    for path in sorted(paths, key=_mtime, reverse=True):
        record = _read_record(path)
        if record is not None:
            yield record


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _read_record(path: str) -> dict | None:
    """The file's record when it is this user's, private, well formed and its process alive."""
    try:
        info = os.stat(path)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:   # not mine, or not private
            return None
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not _well_formed(record):
        return None
    name_pid = int(STANDALONE_FILE.match(os.path.basename(path)).group(1))
    if record["pid"] != name_pid or not _owned_by_me(record["pid"]):
        return None
    return record


def _well_formed(record: dict) -> bool:
    return (isinstance(record.get("url"), str) and record["url"].startswith(("http://", "https://"))
            and type(record.get("pid")) is int and type(record.get("port")) is int
            and isinstance(record.get("host"), str))


def _owned_by_me(pid) -> bool:
    """Whether ``pid`` is a live process of this user (a zombie has ended: machine/process_alive)."""
    from mlp_magic.machine.process_alive import alive

    try:
        return alive((pid, None)) and os.stat("/proc/%d" % pid).st_uid == os.getuid()
    except OSError:
        return False
