"""The programs this machine runs for us: py-spy, for the stacks (stacks/scan, on every host) and
the profiles (profile/rank/sampler, in every rank)."""
from __future__ import annotations

import os
import sys


def find_pyspy(hint: str | None = None) -> str | None:
    """py-spy: ``hint`` (the caller's: the hosts run one image), on PATH, or beside this Python."""
    folders = os.environ.get("PATH", "").split(os.pathsep) + [os.path.dirname(sys.executable)]
    for candidate in [hint] + [os.path.join(folder, "py-spy") for folder in folders if folder]:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
