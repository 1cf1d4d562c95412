"""``%mlp_cluster``'s line: the keywords of ``cluster_view()`` (pure; MlpMagicError on bad input)."""
from __future__ import annotations

import shlex
from typing import Any, Dict, Mapping

from mlp_magic.errors import MlpMagicError

CLUSTER_USAGE = ("%mlp_cluster [--hostfile FILE | -H HOSTS] [--refresh SECONDS] [--timeout SECONDS] "
                 "[--no-probe] [--topo-file HOST=FILE]...")


def _usage_error(message: str, usage: bool = False) -> MlpMagicError:
    return MlpMagicError("%%mlp_cluster: %s%s" % (message, " (usage: %s)" % CLUSTER_USAGE if usage else ""))


def _seconds(option: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise _usage_error("%s expects a number of seconds > 0, got %r" % (option, value))
    return seconds


def _topo_file(value: str, given: Mapping[str, str]) -> tuple:
    host, sep, path = value.partition("=")
    if not sep or not host.strip() or not path.strip():
        raise _usage_error("--topo-file expects HOST=FILE (a saved `nvidia-smi topo -m`), got %r" % value)
    if host.strip() in given:
        raise _usage_error("--topo-file gives host %r twice" % host.strip())
    return host.strip(), path.strip()


# option -> (keyword of cluster_view, takes a value)
_CLUSTER_OPTIONS = {"--hostfile": ("hostfile", True), "-H": ("hosts", True), "--hosts": ("hosts", True),
                    "--refresh": ("auto_refresh", True), "--timeout": ("timeout", True),
                    "--no-probe": ("probe", False), "--topo-file": ("gpus", True)}


def parse_cluster_args(line: str) -> Dict[str, Any]:
    """The keywords of ``cluster_view()`` for a ``%mlp_cluster`` line. Pure; MlpMagicError on bad input.

    ``--hostfile FILE`` or ``-H HOSTS``; ``--refresh S``: auto-refresh every S seconds;
    ``--timeout S``: per-host probe timeout; ``--no-probe``: no GPU probing;
    ``--topo-file HOST=FILE`` (repeatable): HOST's saved `nvidia-smi topo -m` text.
    Options also take ``--option=value``.
    """
    try:
        words = shlex.split(line or "")
    except ValueError as exc:
        raise _usage_error("cannot split %r: %s" % (line, exc)) from None
    found: Dict[str, Any] = {}
    topo_files: Dict[str, str] = {}
    position = 0
    while position < len(words):
        option, sep, inline = words[position].partition("=") if words[position].startswith("--") \
            else (words[position], "", "")
        if option not in _CLUSTER_OPTIONS:
            raise _usage_error("unknown argument %r" % words[position], usage=True)
        keyword, takes_value = _CLUSTER_OPTIONS[option]
        position += 1
        if not takes_value:
            if sep:
                raise _usage_error("%s takes no value, got %r" % (option, inline))
            found[keyword] = False
            continue
        if sep:
            value = inline
        elif position < len(words):
            value, position = words[position], position + 1
        else:
            raise _usage_error("%s needs a value" % option)
        if keyword == "gpus":
            host, path = _topo_file(value, topo_files)
            topo_files[host] = path
        elif keyword in found:
            raise _usage_error("%s given twice" % option)
        elif keyword in ("auto_refresh", "timeout"):
            found[keyword] = _seconds(option, value)
        elif not value.strip():
            raise _usage_error("%s needs a non-empty value" % option)
        else:
            found[keyword] = value
    if "hostfile" in found and "hosts" in found:
        raise _usage_error("give --hostfile or -H, not both")
    return {"hostfile": found.get("hostfile"), "hosts": found.get("hosts"),
            "auto_refresh": found.get("auto_refresh"), "timeout": found.get("timeout", 5.0),
            "probe": found.get("probe", True), "gpus": topo_files or None}
