"""Start a World's processes: ipyparallel's controller, and one engine per rank through the
job's own mpiexec (or plain local engines when there is no MPI).

Every process is appended to the caller's list as soon as it exists, so that a start that fails
halfway (or is interrupted) still stops everything it began.
"""
from __future__ import annotations

import json
import os
import shlex
import uuid

from mlp_magic import config
from mlp_magic.core.hostfile import LOOPBACK
from mlp_magic.core.rank_variables import WORLD_ID, WORLD_RANK, WORLD_SIZE
from mlp_magic.engine.private_files import open_private
from mlp_magic.engine.start_slots import WAIT_VARIABLE as SLOT_WAIT
from mlp_magic.errors import MlpMagicError
from mlp_magic.machine.topology import count_local_gpus
from mlp_magic.world.start.addresses import controller_ip
from mlp_magic.world.start.reach import ReachCheck, refuse_unknown_names
from mlp_magic.world.start.mpi import (FAST_LOCAL_OMPI, OPENMPI, LaunchPlan, MpiInfo, detect_flavour,
                                       find_mpiexec, hostfile_text, launch_settings, mpiexec_argv,
                                       names_to_forward, no_survival_reason, survives_a_rank_death)
from mlp_magic.world.processes import (ManagedProcess, engine_command, relay_when_complete, start_controller,
                                       wait_for_file)


class Launched:
    """What the start found out: the MPI used, where the controller listens, the client's file,
    and whether ssh reaches the other hosts (world/start/reach, asked meanwhile)."""

    def __init__(self, mpi: MpiInfo | None, controller_ip: str, client_file: str, reach: ReachCheck,
                 encrypted: bool = False):
        self.mpi, self.controller_ip, self.client_file, self.reach = mpi, controller_ip, client_file, reach
        self.encrypted = encrypted
        self.survives_deaths = False   # a rank's death ends that rank only (ULFM's recovery)


def start_processes(spec, workdir: str, budget, notice, processes: list, wake=lambda: None) -> Launched:
    """The controller first (``processes[0]``), then the engines; returns at once, without
    waiting for the engines to register. ``wake``: called when the hosts' ssh check is over."""
    topology = spec.topology
    local = topology.is_local
    if not local:
        refuse_unknown_names(topology.host_names())   # before the controller's address is looked for
    path = find_mpiexec()
    mpi = detect_flavour(path) if path else None
    ip = LOOPBACK if local else controller_ip(topology.host_names(), config.ssh_command(default=None))
    # Across hosts the World's messages cross the network: encrypted unless the user said not to.
    # On loopback only this machine's users could read them, and file permissions guard those.
    encrypted = not local and config.encrypt()
    controller, engine_file, client_file = start_controller(workdir, ip, uuid.uuid4().hex[:8], budget.total_s,
                                                            curve=encrypted)
    processes.append(controller)
    if local:   # local engines start at once and wait for the file: they get its whole copy
        engine_file = relay_when_complete(engine_file, controller, budget.stall_s)
    if mpi is None:
        if not local:
            raise MlpMagicError(f"no mpiexec found, needed to start ranks on {topology.source}; "
                                "install the job's MPI or `pip install mlp_magic[mpi]`")
        notice(f"mlp_magic: no MPI (no mpiexec found, or $MLP_MAGIC_MPIEXEC=none); "
               f"starting {spec.np} local engines without MPI "
               "(mpi4py unavailable in cells; `pip install mlp_magic[mpi]` adds it)")
        processes.extend(_plain_engines(spec, workdir, engine_command(engine_file, budget.total_s), budget))
    elif local:
        env = _engine_env(spec, None, budget)
        processes.append(_mpiexec(spec, mpi, workdir, engine_command(engine_file, budget.total_s), env))
    else:
        info = wait_for_file(engine_file, controller, budget.stall_s)
        env = _engine_env(spec, info, budget)
        processes.append(_mpiexec(spec, mpi, workdir, engine_command(None, budget.total_s), env))
    reach = ReachCheck([] if local else topology.host_names(), wake)
    launched = Launched(mpi, ip, client_file, reach, encrypted)
    if mpi is not None:
        launched.survives_deaths = survives_a_rank_death(mpi, env)
        if not launched.survives_deaths:
            notice(f"mlp_magic: a rank's death ends every rank of this World: {no_survival_reason(mpi, env)}")
    return launched


def _engine_env(spec, connection_info: dict | None, budget) -> dict:
    env = dict(os.environ)
    env[SLOT_WAIT] = f"{budget.stall_s / 2:g}"   # no rank waits for a slot longer than its World waits
    env.pop("IPP_CONNECTION_INFO", None)
    if connection_info is not None:
        env["IPP_CONNECTION_INFO"] = json.dumps(connection_info)  # forwarded by name, never on argv
    if spec.topology.is_local and not count_local_gpus():
        for key, value in FAST_LOCAL_OMPI.items():
            env.setdefault(key, value)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _mpiexec(spec, mpi: MpiInfo, workdir: str, command: list, env: dict) -> ManagedProcess:
    topology = spec.topology
    for key, value in launch_settings(mpi, env).items():
        env.setdefault(key, value)
    counts = [(host.name, n) for host, n in
              zip(topology.hosts, topology.ranks_per_host(spec.np, spec.oversubscribe))]
    plan = LaunchPlan(
        counts=counts, command=command, forward=names_to_forward(env),
        recover=survives_a_rank_death(mpi, env),
        ssh_agent=_ssh_agent(mpi, workdir), local=topology.is_local,
        as_root=os.geteuid() == 0, hostfile_path=os.path.join(workdir, "hostfile"),
        session_base=workdir,
    )
    with open_private(plan.hostfile_path) as handle:
        handle.write(hostfile_text(mpi.flavour, counts))
    argv = mpiexec_argv(mpi, plan)
    with open_private(os.path.join(workdir, "mpiexec.argv")) as handle:
        handle.write(shlex.join(argv) + "\n")
    return ManagedProcess(argv, os.path.join(workdir, "mpiexec.log"), env, "mpiexec")


def _ssh_agent(mpi: MpiInfo, workdir: str) -> str | None:
    """``$MLP_MAGIC_SSH`` for mpiexec (None: its own default). MPICH's Hydra runs its launcher as
    one program, so a command with arguments (``ssh -F cfg``) goes into a small wrapper script."""
    ssh = config.ssh_command(default=None)
    if ssh is None:
        return None
    if mpi.flavour == OPENMPI or len(ssh) == 1:
        return shlex.join(ssh)
    wrapper = os.path.join(workdir, "ssh-agent")
    with open_private(wrapper) as handle:
        handle.write(f"#!/bin/sh\nexec {shlex.join(ssh)} \"$@\"\n")
    os.chmod(wrapper, 0o700)
    return wrapper


def _plain_engines(spec, workdir: str, command: list, budget) -> list:
    started = []
    for rank in range(spec.np):
        env = _engine_env(spec, None, budget)
        env[WORLD_RANK] = str(rank)   # read back by engine.identity
        # what `mlp-magic stacks` reads of this job (core/proc_ranks): its size, and its name,
        # so two kernels' plain Worlds on one machine are shown apart
        env.update({WORLD_SIZE: str(spec.np), WORLD_ID: os.path.basename(workdir)})
        log = os.path.join(workdir, f"engine{rank}.log")
        started.append(ManagedProcess(command, log, env, f"engine {rank}"))
    return started
