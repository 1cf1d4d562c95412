"""What the kernel side of a World knows after its start (the rank map, the ranks' identities,
MPI, the client's connection file, its processes), saved in the World's own folder (0700, the
file 0600, next to the connection files that hold its key) once the ranks are set up, for a
kernel that attaches later (world/attach)."""
from __future__ import annotations

import os
import pickle

import mlp_magic
from mlp_magic.errors import MlpMagicError

FACTS_FILE = "attach.pickle"
FACTS = ("id", "mpi", "controller_ip", "client_file", "encrypted", "identities", "rank_to_engine",
         "master", "started_at", "ranks_per_cpu", "workdir", "agents", "agent_key")


def save_facts(world) -> None:
    """The kernel side's facts, for a kernel that attaches later (only its owner can read them)."""
    from mlp_magic.engine.private_files import open_private

    facts = {name: getattr(world, name) for name in FACTS}
    facts.update(version=mlp_magic.__version__, spec=world.spec,
                 processes=[(p.name, p.pid, p.create_time, p.log_path) for p in world.processes])
    with open_private(os.path.join(world.workdir, FACTS_FILE), "wb") as handle:
        pickle.dump(facts, handle)


def read_facts(workdir: str) -> dict:
    """The facts a World's start saved; one error naming what is wrong."""
    path = os.path.join(workdir, FACTS_FILE)
    try:
        if os.stat(path).st_uid != os.getuid():
            raise MlpMagicError(f"{path} belongs to another user: not attaching to it")
        with open(path, "rb") as handle:
            facts = pickle.load(handle)
    except FileNotFoundError:
        raise MlpMagicError(f"the World in {workdir} saved no facts to attach with (it was still "
                            "starting, or it is gone)") from None
    except (OSError, pickle.UnpicklingError, AttributeError, ImportError, EOFError) as err:
        raise MlpMagicError(f"cannot read {path}: {err}") from None
    if not isinstance(facts, dict) or facts.get("version") != mlp_magic.__version__:
        raise MlpMagicError(f"the World was started by another mlp_magic version "
                            f"({facts.get('version') if isinstance(facts, dict) else '?'}, this is "
                            f"{mlp_magic.__version__}): `mlp-magic stop` it and start a new one")
    return facts
