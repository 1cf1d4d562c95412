"""The job's MPI: find ``mpiexec``, tell OpenMPI from MPICH, build its command line.

``mpiexec_argv`` is pure (flavour + layout in, argv out) so every flag is unit-tested; only
``find_mpiexec`` / ``detect_flavour`` touch the system.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from .errors import MlpMagicError

OPENMPI, MPICH = "openmpi", "mpich"

# Variables every engine needs wherever it runs; mpiexec does not forward the environment to
# remote ranks unless told to (OpenMPI -x, MPICH -genvlist).
FORWARD_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME")
FORWARD_PREFIXES = ("IPP_", "MLP_", "NCCL_", "GLOO_", "MLP_MAGIC_")

# CPU-only local worlds: skip the fabric probe that costs OpenMPI ~1 s at MPI_Init.
FAST_LOCAL_OMPI = {"OMPI_MCA_btl": "self,sm,tcp", "OMPI_MCA_pml": "ob1"}


@dataclass(frozen=True)
class MpiInfo:
    path: str
    flavour: str        # openmpi | mpich
    version: str = ""   # "5.0.11"

    @property
    def major(self) -> int:
        match = re.match(r"(\d+)", self.version)
        return int(match.group(1)) if match else 0


def find_mpiexec(env=None) -> str | None:
    """The job's own MPI first: an explicit setting, then PATH, then this Python's bin dir."""
    env = os.environ if env is None else env
    explicit = env.get("MLP_MAGIC_MPIEXEC")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise MlpMagicError(f"$MLP_MAGIC_MPIEXEC: {explicit!r} is not an executable file")
        return explicit
    found = shutil.which("mpiexec", path=env.get("PATH"))
    if found:
        return found
    beside_python = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside_python if os.access(beside_python, os.X_OK) else None


def parse_version_text(text: str) -> tuple:
    """``mpiexec --version`` output -> (flavour, version)."""
    match = re.search(r"Open MPI\)?\s+v?(\d+[\d.]*)", text) or re.search(r"Open MPI", text)
    if match:
        return OPENMPI, match.group(1) if match.groups() else ""
    if re.search(r"HYDRA|MPICH|Intel\(R\) MPI", text, re.IGNORECASE):
        version = re.search(r"Version:\s*(\S+)", text)
        return MPICH, version.group(1) if version else ""
    return None, ""


def detect_flavour(path: str) -> MpiInfo:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise MlpMagicError(f"cannot run {path} --version: {err}") from None
    flavour, version = parse_version_text(done.stdout + done.stderr)
    if flavour is None:
        raise MlpMagicError(f"{path}: neither Open MPI nor MPICH (from its --version output)")
    return MpiInfo(path, flavour, version)


@dataclass
class LaunchPlan:
    """What to start: how many ranks on which hosts, and how."""

    counts: list            # [(host name, ranks on it)] in rank order
    command: list           # the engine command line, run once per rank
    forward: list = field(default_factory=list)  # environment names to forward
    ssh_agent: str | None = None  # e.g. "ssh -F /tmp/cfg"
    local: bool = False     # every rank on this machine
    as_root: bool = False
    hostfile_path: str = ""


def hostfile_text(flavour: str, counts: list) -> str:
    if flavour == OPENMPI:
        return "".join(f"{host} slots={n}\n" for host, n in counts if n > 0)
    return "".join(f"{host}:{n}\n" for host, n in counts if n > 0)


def names_to_forward(env) -> list:
    names = [n for n in FORWARD_NAMES if n in env]
    names += sorted(n for n in env if n.startswith(FORWARD_PREFIXES) and n not in names)
    return names


def _openmpi_argv(info: MpiInfo, plan: LaunchPlan, np: int) -> list:
    argv = [info.path, "-n", str(np), "--oversubscribe"]
    if not plan.local:
        argv += ["--hostfile", plan.hostfile_path, "--map-by", "slot"]
    if plan.as_root:
        argv.append("--allow-run-as-root")
    for name in plan.forward:
        argv += ["-x", name]
    if plan.ssh_agent:
        key = ("--prtemca", "plm_ssh_agent") if info.major >= 5 else ("--mca", "plm_rsh_agent")
        argv += [*key, plan.ssh_agent]
    return argv


def _mpich_argv(info: MpiInfo, plan: LaunchPlan, np: int) -> list:
    argv = [info.path, "-n", str(np)]
    if not plan.local:
        argv += ["-f", plan.hostfile_path]
    if plan.forward:
        argv += ["-genvlist", ",".join(plan.forward)]
    if plan.ssh_agent:
        argv += ["-launcher", "ssh", "-launcher-exec", plan.ssh_agent]
    return argv


def mpiexec_argv(info: MpiInfo, plan: LaunchPlan) -> list:
    """The full mpiexec command line that starts ``plan.command`` once per rank.

    Oversubscription is always allowed at the MPI level because the Topology already refused
    more ranks than slots unless the user asked (or it is the embedded local default).
    """
    np = sum(n for _, n in plan.counts)
    build = _openmpi_argv if info.flavour == OPENMPI else _mpich_argv
    return build(info, plan, np) + list(plan.command)
