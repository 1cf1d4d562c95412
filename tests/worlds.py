"""The tests' way to the World of the session's kernel: the one its mlp_magic owns.

In the kernel (``tests.kernel.Kernel.call`` runs a function there) these reach the World itself.
In the test process they ask the session's kernel: ``current_world()`` is then a ``RemoteWorld``,
whose attributes are read in the kernel and brought back by pickle, and whose methods run there.
What cannot be pickled (the ipyparallel client, a job) is reached by a function run in the kernel.
"""
from __future__ import annotations


def _in_kernel() -> bool:
    """True in the kernel (there the session's Kernel object does not exist)."""
    from IPython import get_ipython

    return _session() is None and get_ipython() is not None


def owner():
    from IPython import get_ipython

    from mlp_magic.world.owner import owner_of

    shell = get_ipython()
    return owner_of(shell) if shell is not None else None


def _local_world():
    found = owner()
    return found.world if found is not None else None


def _session():
    from tests import kernel

    return kernel.SESSION


def current_world():
    """The running World of the session's kernel, or None."""
    if _in_kernel():
        return _local_world()
    session = _session()
    if session is None or not session.call(_has_world):
        return None
    return RemoteWorld(session)


def stop_world() -> None:
    if _in_kernel():
        found = owner()
        if found is not None:
            found.stop()
        return
    session = _session()
    if session is not None and session.alive():
        session.call(stop_world)


def _has_world() -> bool:
    return _local_world() is not None


def _attribute(name: str):
    value = getattr(_local_world(), name)
    return _METHOD if callable(value) else value


def _method(name: str, args: tuple, kwargs: dict):
    return getattr(_local_world(), name)(*args, **kwargs)


_METHOD = "<a method of the World>"


class RemoteWorld:
    """The kernel's World, seen from the test: ``world.np``, ``world.identities``,
    ``world.alive()``... each read in the kernel when asked."""

    def __init__(self, kernel):
        self._kernel = kernel
        self.workdir = kernel.call(_attribute, "workdir")
        self.id = kernel.call(_attribute, "id")

    def state(self) -> dict:
        """The World's record as the panel reads it (from its file: the kernel may be running a
        cell, as it is when a user clicks in the panel)."""
        from mlp_magic.world.published import read_worlds

        for record in read_worlds():
            if record.get("id") == self.id:
                return record
        raise AssertionError(f"no record of World {self.id} is published")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        value = self._kernel.call(_attribute, name)
        if value == _METHOD:
            return lambda *args, **kwargs: self._kernel.call(_method, name, args, kwargs)
        return value

    def __eq__(self, other) -> bool:
        return isinstance(other, RemoteWorld) and other.workdir == self.workdir

    def __hash__(self) -> int:
        return hash(self.workdir)
