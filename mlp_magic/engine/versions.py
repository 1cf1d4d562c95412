"""An engine's check of its own Python before it starts (core/versions says what it needs).

Versions are read from the installed packages' metadata, so nothing is imported: an ipyparallel
too old to register would otherwise fail later and less clearly (a registration that never
comes, or a traceback from inside the library).
"""
from __future__ import annotations

import sys
from typing import Dict, Optional

from ..core.versions import ENGINE_NEEDS, PYTHON, problems, refusal_line


def found_versions() -> Dict[str, Optional[str]]:
    """{name: installed version or None} of this Python and the packages an engine needs."""
    from importlib import metadata

    found: Dict[str, Optional[str]] = {PYTHON.name: ".".join(map(str, sys.version_info[:3]))}
    for need in ENGINE_NEEDS:
        try:
            found[need.name] = metadata.version(need.name)
        except metadata.PackageNotFoundError:
            found[need.name] = None
    return found


def refusal(rank: Optional[int]) -> Optional[str]:
    """The one line to write before exiting, or None when this Python can run an engine."""
    wrong = problems(found_versions())
    return refusal_line(rank if rank is not None else -1, wrong) if wrong else None
