"""This host's GPUs from the best source at hand: NVML, then nvidia-smi, then "no GPU".

Never raises for a missing GPU or driver, and never hangs: NVML runs in a worker thread
and nvidia-smi under a subprocess timeout, both bounded by ``timeout``.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from typing import Any, Dict, List, Optional

from ..core.deadline import within
from ..errors import MlpMagicError
from .model import HostGpus
from .nvml_probe import probe_nvml


def _run_smi(smi: str, args: List[str], timeout: float) -> str:
    """stdout of nvidia-smi; MlpMagicError with its first message line when it fails."""
    try:
        # Own session, so a timeout kills anything it started too, and no pipe stays held open.
        child = subprocess.Popen([smi] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        raise MlpMagicError("%s: %s" % (smi, exc)) from None
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        raise MlpMagicError("%s %s: no answer in %gs" % (smi, " ".join(args), timeout)) from None
    if child.returncode != 0:
        said = (out + err).strip().splitlines()
        raise MlpMagicError("%s %s: exit %d: %s"
                            % (smi, args[0], child.returncode, said[0] if said else "no output"))
    return out


def _kill_group(child: "subprocess.Popen[str]") -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    child.communicate()


def probe_smi(smi: str, host: str, timeout: float) -> HostGpus:
    """Topology from `nvidia-smi topo -m`, names/memory/utilisation from --query-gpu."""
    from .smi_topo import QUERY_GPU_FIELDS, merge_query, parse_query_gpu, parse_topo_matrix   # hosts with it

    try:
        gpus = parse_topo_matrix(_run_smi(smi, ["topo", "-m"], timeout), host=host)
    except MlpMagicError as exc:
        return HostGpus(host=host, source="none", error=str(exc))
    query = "--query-gpu=" + ",".join(QUERY_GPU_FIELDS)
    try:
        merge_query(gpus, parse_query_gpu(_run_smi(smi, [query, "--format=csv,noheader,nounits"], timeout)))
    except MlpMagicError as exc:  # the matrix is still worth showing
        gpus.error = str(exc)
    return gpus


def probe_local(timeout: float = 5.0, *, host: Optional[str] = None, use_nvml: bool = True,
                smi: str = "nvidia-smi") -> HostGpus:
    """GPUs of this machine: NVML, else nvidia-smi when on PATH, else source "none" (CPU-only)."""
    host = host or socket.gethostname()
    found = None
    if use_nvml:
        found = within(timeout, lambda: probe_nvml(host=host))  # a wedged driver: None
        if found is not None and not found.error:
            return found
    path = shutil.which(smi)
    if path is None:
        return found or HostGpus(host=host, source="none")
    return probe_smi(path, host, timeout)


def probe_on_engine(timeout: float, host: str) -> Dict[str, Any]:
    """Runs on an engine (world/gpus sends it to each host's first rank): this host's GPUs as plain
    data (no pickled classes cross the wire). Here, not in gpu/collect, so that the engine imports
    this module's few and none of the ssh collect's."""
    return probe_local(timeout=timeout, host=host).to_dict()
