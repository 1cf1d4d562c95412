"""Every setting mlp_magic takes from the environment, read in one place.

Each function reads its variable when called, from ``env`` (default ``os.environ``): a notebook
may change ``os.environ`` between cells, and tests pass their own mappings.

| variable                    | read by                   | meaning                                   |
|-----------------------------|---------------------------|-------------------------------------------|
| ``MLP_MAGIC_HOME``          | ``home``                  | working directory (default ~/.mlp_magic)  |
| ``MLP_MAGIC_LOG_DIR``       | ``log_root``              | root of the per-cell logs                 |
| ``MLP_MAGIC_LOG_KEEP_DAYS`` | ``log_keep_days``         | days cell logs are kept (0: forever)      |
| ``MLP_MAGIC_STATE_DIR``     | ``state_dir``             | where kernels publish their World         |
| ``MLP_MAGIC_SSH``           | ``ssh_command``           | the ssh client of mpiexec, allrun, probes |
| ``MLP_MAGIC_SSH_CONTROL_DIR`` | ``ssh_control_dir``     | allrun's ControlMaster sockets            |
| ``MLP_MAGIC_MPIEXEC``       | ``mpiexec_setting``       | the mpiexec to use, or ``none``           |
| ``MLP_MAGIC_CONTROLLER_IP``, ``MLP_HOST`` | ``controller_address`` | where the controller listens |
| ``MLP_MAGIC_HOSTFILE``      | ``panel_hostfile``        | the lab panel's hostfile                  |
| ``MLP_MAGIC_PULL_CAP``      | ``pull_cap``              | bytes one rank may send for --pull/--push |
| ``MLP_MAGIC_NVML_REPLAY``   | ``nvml_replay``           | captures the GPU sampler replays (tests)  |
| ``MLP_MAGIC_ENCRYPT``       | ``encrypt``               | CurveZMQ across hosts (0: off)            |
| ``MLP_MAGIC_KEEP_HOURS``    | ``keep_hours``            | a kept World's life with no kernel (8 h)  |
| ``NO_COLOR``                | ``no_color``              | no colour on terminals                    |

The job's own variables (``MLP_MPI_*``, ``MLP_WORKER_*``, Slurm, torchrun) describe the hosts,
not mlp_magic: ``core.topology`` parses them from the mapping it is given. A rank's launcher
variables (``OMPI_COMM_WORLD_RANK``...) are read where the rank identifies itself
(``engine.identity``). ARCHITECTURE.md lists them all.

Standard library and ``errors`` only, like ``errors``: any layer may import it, except the pure
core, which is handed the values instead.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence


def _refused(message: str) -> Exception:
    """A bad setting's one-line error. Imported here: every engine reads its settings (``home``),
    and only a bad one needs the error types."""
    from mlp_magic.errors import MlpMagicError

    return MlpMagicError(message)


HOME = "MLP_MAGIC_HOME"
ENCRYPT = "MLP_MAGIC_ENCRYPT"
KEEP_HOURS = "MLP_MAGIC_KEEP_HOURS"
DEFAULT_KEEP_HOURS = 8.0
LOG_DIR = "MLP_MAGIC_LOG_DIR"
LOG_KEEP_DAYS = "MLP_MAGIC_LOG_KEEP_DAYS"
STATE_DIR = "MLP_MAGIC_STATE_DIR"
SSH = "MLP_MAGIC_SSH"
SSH_CONTROL_DIR = "MLP_MAGIC_SSH_CONTROL_DIR"
MPIEXEC = "MLP_MAGIC_MPIEXEC"
CONTROLLER_ADDRESS = ("MLP_MAGIC_CONTROLLER_IP", "MLP_HOST")   # the first one set wins
PANEL_HOSTFILE = "MLP_MAGIC_HOSTFILE"
PULL_CAP = "MLP_MAGIC_PULL_CAP"
NVML_REPLAY = "MLP_MAGIC_NVML_REPLAY"
DEFAULT_PULL_CAP = 64 << 20
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([KMGTkmgt]?)(?:i?[Bb])?")
DEFAULT_LOG_KEEP_DAYS = 30.0


def _env(env: Mapping | None) -> Mapping:
    return os.environ if env is None else env


def home(env: Mapping | None = None) -> str:
    """mlp_magic's working directory on this host: ``$MLP_MAGIC_HOME``, else ``~/.mlp_magic``
    (``~``: the mapping's ``$HOME``, so another process's environment gives that process's)."""
    variables = _env(env)
    return variables.get(HOME) or os.path.join(variables.get("HOME") or os.path.expanduser("~"), ".mlp_magic")


def log_root(explicit: str | None = None, env: Mapping | None = None) -> str:
    """Where cell logs go: ``--log-dir``, else ``$MLP_MAGIC_LOG_DIR``, else ``<home>/logs``."""
    return explicit or _env(env).get(LOG_DIR) or os.path.join(home(env), "logs")


def _number(env: Mapping | None, name: str, default: float, fits, expected: str) -> float:
    """The variable ``name`` as a number ``fits`` accepts (default when unset); else one error."""
    raw = _env(env).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not fits(value):
        raise _refused(f"{name}={raw!r}: expected {expected}")
    return value


def log_keep_days(env: Mapping | None = None) -> float:
    """Days cell logs are kept (``$MLP_MAGIC_LOG_KEEP_DAYS``, default 30); 0: forever."""
    return _number(env, LOG_KEEP_DAYS, DEFAULT_LOG_KEEP_DAYS, lambda days: 0 <= days < float("inf"),
                   "a number of days (0 keeps every log)")


def state_dir(env: Mapping | None = None) -> str:
    """Where kernels publish their World for the lab panel."""
    return _env(env).get(STATE_DIR) or os.path.join(home(env), "worlds")


def ssh_command(explicit: str | Sequence[str] | None = None, env: Mapping | None = None,
                default: tuple | None = ("ssh",)) -> list[str] | None:
    """The ssh client as an argv: ``explicit`` (``--ssh``, a string or a sequence), else
    ``$MLP_MAGIC_SSH`` (e.g. ``ssh -F ~/cluster_ssh_config``), else ``default`` (``None``: the
    caller's own default, e.g. mpiexec's)."""
    chosen = explicit if explicit is not None else (_env(env).get(SSH) or None)
    if chosen is None:
        return None if default is None else list(default)
    if isinstance(chosen, str):
        try:
            argv = shlex.split(chosen)
        except ValueError as err:
            raise _refused(f"--ssh: cannot split {chosen!r}: {err}") from None
    else:
        argv = [str(word) for word in chosen]
    if not argv:
        raise _refused("--ssh: empty ssh command")
    return argv


def ssh_control_dir(env: Mapping | None = None) -> str:
    """allrun's private directory of reusable ssh connections."""
    env = _env(env)
    return env.get(SSH_CONTROL_DIR) or os.path.join(env.get("TMPDIR") or "/tmp",
                                                    f"mlp_magic-ssh-{os.getuid()}")


def mpiexec_setting(env: Mapping | None = None) -> str | None:
    """``$MLP_MAGIC_MPIEXEC``: a path, ``"none"`` (plain local engines, no MPI), or None."""
    value = _env(env).get(MPIEXEC) or None
    return "none" if value is not None and value.lower() == "none" else value


def controller_address(env: Mapping | None = None) -> tuple[str, str] | None:
    """(variable, value) of the address the controller must listen on, when one is set."""
    env = _env(env)
    for name in CONTROLLER_ADDRESS:
        if env.get(name):
            return name, env[name]
    return None


def panel_hostfile(env: Mapping | None = None) -> str:
    """The lab panel's hostfile (its server setting's default); empty: the environment's hosts."""
    return _env(env).get(PANEL_HOSTFILE, "")


def pull_cap(env: Mapping | None = None) -> int:
    """Bytes one rank may send for ``%mpirun --pull`` (and the notebook for ``--push``):
    ``$MLP_MAGIC_PULL_CAP``, a number of bytes with an optional K, M, G or T (powers of 1024,
    ``64M``, ``64MiB`` and ``64MB`` alike); default 64M."""
    raw = _env(env).get(PULL_CAP, "").strip()
    if not raw:
        return DEFAULT_PULL_CAP
    found = _SIZE.fullmatch(raw)
    value = float(found.group(1)) * _SIZE_UNITS[found.group(2).upper()] if found else 0.0
    if not 1 <= value < float(1 << 60):
        raise _refused(f"{PULL_CAP}={raw!r}: expected a size such as 64M, 2G or 1000000 (bytes)")
    return int(value)


def nvml_replay(env: Mapping | None = None) -> list[str] | None:
    """``$MLP_MAGIC_NVML_REPLAY``: the captures (nvidia-smi tables or the sampler's recordings,
    several separated by ``os.pathsep``) the GPU sampler replays instead of asking the driver,
    for tests and demos; None when unset."""
    files = [name for name in _env(env).get(NVML_REPLAY, "").split(os.pathsep) if name.strip()]
    return files or None


def encrypt(env: Mapping | None = None) -> bool:
    """``$MLP_MAGIC_ENCRYPT``: whether a World with ranks on other hosts encrypts its ZeroMQ
    traffic (CurveZMQ); on unless 0, no, false or off."""
    raw = _env(env).get(ENCRYPT, "").strip().lower()
    if raw in ("", "1", "yes", "true", "on"):
        return True
    if raw in ("0", "no", "false", "off"):
        return False
    raise _refused(f"{ENCRYPT}={raw!r}: expected 1 (encrypt across hosts, the default) or 0 (do not)")


def keep_hours(env: Mapping | None = None) -> float:
    """``$MLP_MAGIC_KEEP_HOURS``: how long a kept World lives on once its last kernel left
    (default 8): it never holds GPUs forever."""
    return _number(env, KEEP_HOURS, DEFAULT_KEEP_HOURS, lambda hours: 0 < hours <= 24 * 365,
                   "a number of hours above 0 (such as 8 or 0.5)")


def no_color(env: Mapping | None = None) -> bool:
    """https://no-color.org: set (to anything) means no colour on terminals."""
    return "NO_COLOR" in _env(env)
