"""Where mlp_magic keeps its files on a host: ``$MLP_MAGIC_HOME``, else ``~/.mlp_magic``."""
from __future__ import annotations

import os


def home() -> str:
    return os.environ.get("MLP_MAGIC_HOME") or os.path.join(os.path.expanduser("~"), ".mlp_magic")


def default_log_root() -> str:
    return os.path.join(home(), "logs")
