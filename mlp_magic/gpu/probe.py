"""This host's GPUs from the best source at hand: NVML, then nvidia-smi, then "no GPU".

Never raises for a missing GPU or driver, and never hangs: NVML runs in a worker thread
and nvidia-smi under a subprocess timeout, both bounded by ``timeout``. A rank probes its host
through a child process (``probe_on_engine``), so that nothing of NVML stays in the rank.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.model import HostGpus

# A child probing for an engine gets this share of its time for the probe itself (all its steps:
# ``probe_local`` keeps one deadline), so that a slow driver comes back as the child's own
# message before the child is killed; the rest is the child's start (~0.1 s) and its answer.
CHILD_PROBE_SHARE = 0.6
KILLED_WAIT_S = 1.0   # a killed child stuck in the driver (D state) dies only when its call returns


def _run(argv: list[str], timeout: float, name: str, env: dict[str, str] | None = None) -> tuple:
    """(exit status, stdout, stderr) of ``argv``; MlpMagicError naming ``name`` when it cannot
    start or gives no answer within ``timeout`` (then it and whatever it started are killed)."""
    try:
        # Own session, so a timeout kills anything it started too, and no pipe stays held open.
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                 stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        raise MlpMagicError("%s: %s" % (name, exc)) from None
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        raise MlpMagicError("%s: no answer in %gs" % (name, timeout)) from None
    return child.returncode, out, err


def _kill_group(child: subprocess.Popen[str]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    try:
        child.communicate(timeout=KILLED_WAIT_S)
    except subprocess.TimeoutExpired:   # not ours to wait on any longer: it goes when it can
        for pipe in (child.stdout, child.stderr):
            pipe.close()


def _left(deadline: float) -> float:
    """Seconds until ``deadline``, to a tenth (a message says "no answer in 2s"), at least 0.1."""
    return max(0.1, round(deadline - time.monotonic(), 1))


def _run_smi(smi: str, args: list[str], timeout: float) -> str:
    """stdout of nvidia-smi; MlpMagicError with its first message line when it fails."""
    returncode, out, err = _run([smi] + args, timeout, "%s %s" % (smi, args[0]))
    if returncode != 0:
        said = (out + err).strip().splitlines()
        raise MlpMagicError("%s %s: exit %d: %s"
                            % (smi, args[0], returncode, said[0] if said else "no output"))
    return out


def probe_smi(smi: str, host: str, timeout: float) -> HostGpus:
    """Topology from `nvidia-smi topo -m`, names/memory/utilisation from --query-gpu, both
    within ``timeout``."""
    # hosts with it
    from mlp_magic.gpu.pure.smi_topo import QUERY_GPU_FIELDS, merge_query, parse_query_gpu, parse_topo_matrix

    deadline = time.monotonic() + timeout
    try:
        gpus = parse_topo_matrix(_run_smi(smi, ["topo", "-m"], timeout), host=host)
    except MlpMagicError as exc:
        return HostGpus(host=host, source="none", error=str(exc))
    query = "--query-gpu=" + ",".join(QUERY_GPU_FIELDS)
    try:
        merge_query(gpus, parse_query_gpu(_run_smi(smi, [query, "--format=csv,noheader,nounits"],
                                                   _left(deadline))))
    except MlpMagicError as exc:  # the matrix is still worth showing
        gpus.error = str(exc)
    return gpus


def probe_local(timeout: float = 5.0, *, host: str | None = None, use_nvml: bool = True,
                smi: str = "nvidia-smi") -> HostGpus:
    """GPUs of this machine: NVML, else nvidia-smi when on PATH, else source "none" (CPU-only);
    every step within one ``timeout``."""
    from mlp_magic.machine.deadline import within
    from mlp_magic.gpu.nvml_probe import probe_nvml

    host = host or socket.gethostname()
    deadline = time.monotonic() + timeout
    found = None
    if use_nvml:
        found = within(timeout, lambda: probe_nvml(host=host))  # a wedged driver: None
        if found is not None and not found.error:
            return found
    path = shutil.which(smi)
    if path is None:
        return found or HostGpus(host=host, source="none")
    return probe_smi(path, host, _left(deadline))


def topo_argv(python: str, probe_timeout: float) -> list[str]:
    """How a host is probed from outside: this package's ``topo --json`` under ``python``."""
    return [python, "-m", "mlp_magic.cli", "topo", "--json", "--timeout", "%g" % probe_timeout]


def probe_in_child(timeout: float, host: str, python: str = sys.executable) -> HostGpus:
    """This host's GPUs, probed by a child process (``topo_argv``) given ``timeout`` seconds in
    all, a share of them for the probe itself; never raises. The child is a rank's helper, as the
    GPU agent is (core/host_command.helper_environment): no rank's identity, and the rank's own
    mlp_magic first on its path, wherever a cell took the rank's working folder."""
    from mlp_magic.location import PACKAGE_PARENT
    from mlp_magic.core.host_command import helper_environment
    from mlp_magic.gpu.pure.model import failed, parse_topo_answer

    argv, env = topo_argv(python, timeout * CHILD_PROBE_SHARE), helper_environment(os.environ, PACKAGE_PARENT)
    try:
        returncode, out, err = _run(argv, timeout, "GPU probe", env)
    except MlpMagicError as exc:
        return failed(host, str(exc))
    if returncode != 0:
        said = err.strip().splitlines()
        return failed(host, "GPU probe: exit %d: %s" % (returncode, said[-1] if said else "no output"))
    return parse_topo_answer(host, out)


def probe_on_engine(timeout: float, host: str) -> dict[str, Any]:
    """Runs on an engine (gpu/engines sends it to each host's first rank as a host chore): this
    host's GPUs as plain data (no pickled classes cross the wire). In a child process, not in
    the rank: NVML's library stays mapped in the process that loaded it (an H100 host's first
    rank held 88 MiB resident against the others' 59), and a driver that never answers holds a
    child, killed at the deadline, not a thread of the user's rank."""
    return probe_in_child(timeout, host).to_dict()
