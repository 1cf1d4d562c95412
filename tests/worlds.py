"""The tests' way to the World of the session's IPython shell: the one its mlp_magic owns."""
from __future__ import annotations


def owner():
    from IPython import get_ipython

    from mlp_magic.world.owner import owner_of

    shell = get_ipython()
    return owner_of(shell) if shell is not None else None


def current_world():
    """The running World of the session's shell, or None."""
    found = owner()
    return found.world if found is not None else None


def stop_world() -> None:
    found = owner()
    if found is not None:
        found.stop()
