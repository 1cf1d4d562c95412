"""An engine's check of its own Python before it starts (engine/pure/versions says what it needs).

Versions are read from the installed packages' dist-info folder names, so nothing is imported
(the metadata files only where the names do not tell): an ipyparallel too old to register would
otherwise fail later and less clearly (a registration that never comes, or a traceback from
inside the library).
"""
from __future__ import annotations

import os
import sys

from mlp_magic.engine.pure.versions import ENGINE_NEEDS, PYTHON, problems, refusal_line


def _from_folder_names(names) -> dict[str, str]:
    """{name: version} from the first ``NAME-VERSION.dist-info`` folder of each on sys.path (what
    importlib.metadata would find first), read from the folder names alone: reading the
    metadata files would load the email parser into every engine."""
    wanted = {name.lower(): name for name in names}
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            folders = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in folders:
            dist, dash, version = folder[:-len(".dist-info")].partition("-")
            name = wanted.get(dist.lower()) if folder.endswith(".dist-info") and dash else None
            if name is not None:
                found.setdefault(name, version)
    return found


def found_versions() -> dict[str, str | None]:
    """{name: installed version or None} of this Python and the packages an engine needs."""
    found: dict[str, str | None] = {PYTHON.name: ".".join(map(str, sys.version_info[:3]))}
    named = _from_folder_names([need.name for need in ENGINE_NEEDS])
    for need in ENGINE_NEEDS:
        found[need.name] = named.get(need.name) or _metadata_version(need.name)
    return found


def _metadata_version(name: str) -> str | None:
    """Where the folder names do not tell (an egg, an unusual layout): the metadata itself."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def refusal(rank: int | None) -> str | None:
    """The one line to write before exiting, or None when this Python can run an engine."""
    wrong = problems(found_versions()) + curve_problem()
    return refusal_line(rank if rank is not None else -1, wrong) if wrong else None


def curve_problem(environ=os.environ) -> list:
    """An encrypted World (its connection info names the controller's CurveZMQ key) on a host
    whose libzmq cannot do CurveZMQ: one problem, else none."""
    import json

    try:
        encrypted = bool(json.loads(environ.get("IPP_CONNECTION_INFO") or "{}").get("curve_serverkey"))
    except (ValueError, AttributeError):
        return []
    if not encrypted:
        return []
    import zmq

    if zmq.has("curve"):
        return []
    return [f"this host's libzmq {zmq.zmq_version()} cannot do CurveZMQ, which the World's encryption "
            "needs (MLP_MAGIC_ENCRYPT=0 turns it off)"]
