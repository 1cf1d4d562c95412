"""The job's MPI: find ``mpiexec``, tell OpenMPI from MPICH, build its command line.

``mpiexec_argv`` is pure (flavour + layout in, argv out) so every flag is unit-tested; only
``find_mpiexec`` / ``detect_flavour`` touch the system.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from mlp_magic import config
from mlp_magic.errors import MlpMagicError

OPENMPI, MPICH = "openmpi", "mpich"

# Variables every engine needs wherever it runs; mpiexec does not forward the environment to
# remote ranks unless told to (OpenMPI -x, MPICH -genvlist).
# Not HOME: each container keeps its own (logs and stack files live under it).
FORWARD_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV")
FORWARD_PREFIXES = ("IPP_", "MLP_", "NCCL_", "GLOO_")  # MLP_ covers MLP_MAGIC_

# CPU-only local worlds: skip the fabric probe that costs OpenMPI ~1 s at MPI_Init.
FAST_LOCAL_OMPI = {"OMPI_MCA_btl": "self,sm,tcp", "OMPI_MCA_pml": "ob1"}
# Open MPI 5's fault tolerance (ULFM) on, unless the user set it: a rank's death ends that rank
# only (world/rank_deaths), and %mpirun --unblock can end a blocked MPI call by revoking
# COMM_WORLD (unblock/rank/mpi_world). Only over the ob1 PML: UCX's and cm's PMLs do not carry
# failures (Open MPI's ULFM docs), so a World whose user did not choose a PML gets ob1, and one
# who chose another keeps it, told at the start that a death ends every rank. Across hosts (ob1
# over TCP) a stuck rank's message to an idle one waits for that rank's MPI progress, which the
# unblock drives (unblock/verbs). A user who sets the variable chooses for themselves.
ULFM_OMPI = {"OMPI_MCA_mpi_ft_enable": "1"}
ULFM_PML = {"OMPI_MCA_pml": "ob1"}


def launch_settings(mpi: "MpiInfo", env) -> dict:
    """The variables this MPI's ranks get unless the user set them (``env``: theirs so far)."""
    if _has_ulfm(mpi, env):
        return {**ULFM_OMPI, **ULFM_PML}
    return {}


def mca_settings(mpi: "MpiInfo", env) -> dict:
    """The Open MPI settings (``OMPI_MCA_*``) the World's ranks run with: the launcher's
    environment's and ``launch_settings``. A process spawned on another host does not inherit
    them (its daemon never had them), and one that differs in its transports cannot reach the
    others: a respawned rank gets them (respawn/rank/mpi_join)."""
    found = {name: value for name, value in env.items() if name.startswith("OMPI_MCA_")}
    return {**launch_settings(mpi, env), **found}


def _has_ulfm(mpi: "MpiInfo", env) -> bool:
    return mpi.flavour == OPENMPI and mpi.major >= 5 and env.get("OMPI_MCA_pml", "ob1") == "ob1"


def survives_a_rank_death(mpi: "MpiInfo", env) -> bool:
    """Whether the launcher keeps the other ranks when one dies (ULFM's recovery, ``--with-ft
    ulfm``): Open MPI 5 over ob1 (or no PML chosen), fault tolerance not turned off by the user
    (``env``: the ranks' variables, launch_settings applied)."""
    return _has_ulfm(mpi, env) and env.get("OMPI_MCA_mpi_ft_enable", "1").lower() not in ("0", "false", "no")


def no_survival_reason(mpi: "MpiInfo", env) -> str:
    """Why a rank's death ends this World's every rank (said once when it starts)."""
    if mpi.flavour != OPENMPI:
        return "MPICH has no ULFM recovery"
    if mpi.major < 5:
        return f"Open MPI {mpi.version or '< 5'} has no ULFM recovery (Open MPI 5 has)"
    if env.get("OMPI_MCA_pml", "ob1") != "ob1":
        return f"ULFM needs Open MPI's ob1 PML (OMPI_MCA_pml={env.get('OMPI_MCA_pml')})"
    return f"OMPI_MCA_mpi_ft_enable={env.get('OMPI_MCA_mpi_ft_enable')} turns ULFM off"


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
    """The job's own MPI first: an explicit setting, then PATH, then this Python's bin dir.
    None: no MPI here, or ``$MLP_MAGIC_MPIEXEC=none`` (plain local engines)."""
    explicit = config.mpiexec_setting(env)
    if explicit == "none":
        return None
    env = os.environ if env is None else env
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise MlpMagicError(f"$MLP_MAGIC_MPIEXEC: {explicit!r} is not an executable file")
        return explicit
    found = shutil.which("mpiexec", path=env.get("PATH"))
    if found:
        return found
    beside_python = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside_python if os.access(beside_python, os.X_OK) else None


_VERSION = r"v?([0-9]+(?:\.[0-9]+)*[A-Za-z0-9]*)"
# Open MPI 5: "mpiexec (Open MPI) 5.0.11"; Open MPI 1.x-4.x: "mpiexec (OpenRTE) 4.1.2" (its mpirun
# says "(Open MPI)"); both end with "Report bugs to http://www.open-mpi.org/...".
_OPENMPI = re.compile(r"\((?:Open MPI|OpenRTE)\)\s+" + _VERSION + r"|Open MPI\s+" + _VERSION)
_OPENMPI_HINT = re.compile(r"Open ?MPI|OpenRTE|open-mpi\.org", re.IGNORECASE)
# MPICH/MVAPICH (Hydra): "HYDRA build details:" then "Version: 4.1.2";
# Intel MPI: "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619".
_MPICH_HINT = re.compile(r"HYDRA|MPICH|Intel\(R\) MPI", re.IGNORECASE)
_MPICH_VERSION = re.compile(r"Version:?\s+" + _VERSION)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_version_text(text: str) -> tuple:
    """``mpiexec --version`` output -> (flavour, version); (None, "") when neither."""
    match = _OPENMPI.search(text)
    if match:
        return OPENMPI, match.group(1) or match.group(2)
    if _MPICH_HINT.search(text):
        version = _MPICH_VERSION.search(text)
        return MPICH, version.group(1) if version else ""
    if _OPENMPI_HINT.search(text):
        return OPENMPI, ""
    return None, ""


def detect_flavour(path: str) -> MpiInfo:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=15)
    except (OSError, ValueError, subprocess.TimeoutExpired) as err:
        raise MlpMagicError(f"cannot run {path} --version: {err}") from None
    output = done.stdout + done.stderr
    flavour, version = parse_version_text(output)
    if flavour is None:
        first = output.strip().splitlines()[0][:120] if output.strip() else "(no output)"
        raise MlpMagicError(f"{path}: neither Open MPI nor MPICH (its --version said: {first!r}, "
                            f"exit status {done.returncode})")
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
    session_base: str = ""  # where a local launcher keeps its session files (the World's folder)
    recover: bool = False   # ULFM's recovery: a rank's death ends that rank only


def hostfile_text(flavour: str, counts: list) -> str:
    if flavour == OPENMPI:
        return "".join(f"{host} slots={n}\n" for host, n in counts if n > 0)
    return "".join(f"{host}:{n}\n" for host, n in counts if n > 0)


def names_to_forward(env) -> list:
    """Names only (values travel in mpiexec's environment, never on its command line); odd names
    (``A,B``, spaces) are left out as MPICH's -genvlist could not carry them."""
    names = [n for n in FORWARD_NAMES if n in env]
    names += sorted(n for n in env if n.startswith(FORWARD_PREFIXES) and n not in names
                    and _ENV_NAME.fullmatch(n))
    return names


def _openmpi_argv(info: MpiInfo, plan: LaunchPlan, np: int) -> list:
    argv = [info.path, "-n", str(np), "--oversubscribe"]
    # The job goes on without a dead rank (ULFM). Across hosts first: given after other options, it
    # leaves the other hosts' daemons unable to spawn (a respawned rank there; measured with Open MPI
    # 5.0.11: the daemon is lost, and the whole job with it). One host has no other daemon.
    ulfm = ["--with-ft", "ulfm"] if plan.recover else []
    argv += [] if plan.local else ulfm
    if not plan.local:
        argv += ["--hostfile", plan.hostfile_path]
    # Rank order as the Topology lays it out, locally too: without it Open MPI 5 maps an
    # oversubscribed local world by package, and its local ranks stop matching LOCAL_RANK.
    argv += ["--map-by", "slot"]
    # Each line of a rank's own output tagged with its rank ("[1,3]<stderr>: ..."): a rank that
    # dies before its engine logs anything is still named with its last words (world/start/registration).
    argv += ["--output", "tag"] if info.major >= 5 else ["--tag-output"]
    if plan.as_root:
        argv.append("--allow-run-as-root")
    if plan.local and plan.session_base and info.major >= 5:
        # The launcher's and ranks' session files (/tmp/ompi.<launcher pid> by default) in the
        # World's own folder: a launcher killed with its stuck ranks leaves its folder behind,
        # and a later launcher given the same pid then cannot start ("The PMIx server's listener
        # thread failed to start"). Local only: other hosts may not have this folder.
        argv += ["--prtemca", "prte_tmpdir_base", plan.session_base]
    if plan.recover:
        # The launcher says which rank died, with how it ended, in a line world/rank_deaths reads
        # ("errmgr:dvm: proc [...@1,2] aborted by signal").
        argv += (ulfm if plan.local else []) + ["--prtemca", "errmgr_base_verbose", "5"]
    for name in plan.forward:
        argv += ["-x", name]
    if plan.ssh_agent:
        key = ("--prtemca", "plm_ssh_agent") if info.major >= 5 else ("--mca", "plm_rsh_agent")
        argv += [*key, plan.ssh_agent]
    return argv


def _mpich_argv(info: MpiInfo, plan: LaunchPlan, np: int) -> list:
    argv = [info.path, "-n", str(np), "-prepend-rank"]   # "[3] ...": each rank's output named
    if not plan.local:
        argv += ["-f", plan.hostfile_path]
    if plan.forward:
        argv += ["-genvlist", ",".join(plan.forward)]
    if plan.ssh_agent:
        argv += ["-launcher", "ssh", "-launcher-exec", _single_program(plan.ssh_agent)]
    return argv


def _single_program(agent: str) -> str:
    """Hydra execs -launcher-exec as one program (Open MPI splits its agent on spaces)."""
    try:
        words = shlex.split(agent)
    except ValueError:
        words = [agent, ""]
    if len(words) != 1:
        raise MlpMagicError(
            f"MPICH's mpiexec runs -launcher-exec as a single program, not {agent!r}: put that "
            "command in an executable script (exec ssh ... \"$@\") and name the script instead"
        )
    return words[0]


def mpiexec_argv(info: MpiInfo, plan: LaunchPlan) -> list:
    """The full mpiexec command line that starts ``plan.command`` once per rank.

    Oversubscription is always allowed at the MPI level because the Topology already refused
    more ranks than slots unless the user asked (or it is the embedded local default).
    """
    np = sum(n for _, n in plan.counts)
    if np <= 0:
        raise MlpMagicError(f"no ranks to start (counts {plan.counts!r})")
    build = _openmpi_argv if info.flavour == OPENMPI else _mpich_argv
    return build(info, plan, np) + list(plan.command)
