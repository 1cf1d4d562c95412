"""``--links``: start the link test on the job's ranks and add what it measured to the report.

The ranks are laid out as ``%%mpirun`` lays them (``core/topology``: every slot, or ``--np``),
started by the job's own mpiexec (``world/start/mpi``: the same command line a World's start builds),
or, on this machine with no MPI, as plain processes. Rank 0 hosts torch.distributed's store on
the master address (the MPI backend needs none). Everything started is stopped when the test
ends, fails, or passes its deadline; any failure is one finding, never a traceback.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from mlp_magic.doctor.pure.links import add_link_findings, link_answer
from mlp_magic.engine.identity import free_port

MIN_SECONDS = 60.0


def _layout(topology, np):
    """[(host, ranks on it)] and the first rank of each host with ranks."""
    np = np or topology.total_slots
    counts = [(host.name, n) for host, n in zip(topology.hosts, topology.ranks_per_host(np, True)) if n]
    leaders, first = [], 0
    for _, n in counts:
        leaders.append(first)
        first += n
    return counts, leaders, np


# Whether torch.distributed works in this Python (the job's ranks run the same image).
TORCH_CHECK = "import torch.distributed as d\nraise SystemExit(0 if d.is_available() else 3)"
TORCH_CHECK_S = 60.0   # importing torch takes seconds; a hang is a reason to measure MPI instead


def choose_backend(choice: str, env) -> tuple:
    """(backend, why): ``auto`` is decided here, once for every rank (ranks that each decided
    could disagree and never meet): torch where torch.distributed imports and works, else the
    job's MPI; ``why`` says why torch was passed over ("" otherwise)."""
    if choice != "auto":
        return choice, ""
    try:
        done = subprocess.run([sys.executable, "-c", TORCH_CHECK], env=env, capture_output=True, text=True,
                              timeout=TORCH_CHECK_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        return "mpi", f"torch.distributed could not be checked: {error}"
    if done.returncode == 0:
        return "torch", ""
    said = done.stderr.strip().splitlines()
    return "mpi", ("torch.distributed is not available in this torch build" if done.returncode == 3
                   else f"torch.distributed does not import: {said[-1][:200] if said else 'no output'}")


def _rank_command(counts: list, master: str, leaders: list, options, timeout: float, backend: str) -> list:
    return [sys.executable, "-m", "mlp_magic.doctor.links_rank", "--np", str(sum(n for _, n in counts)),
            "--master", master, "--bytes", str(int(options.size_mb * 1e6)), "--leaders",
            ",".join(map(str, leaders)), "--per-host", str(max(n for _, n in counts)),
            "--timeout", "%g" % timeout, "--backend", backend]   # never auto: see choose_backend


def _start(topology, counts, command, env, workdir) -> list:
    """The processes that run every rank: one mpiexec, or plain local processes."""
    from mlp_magic.world.start.mpi import (LaunchPlan, detect_flavour, find_mpiexec, hostfile_text,
                                           mpiexec_argv, names_to_forward)

    path = find_mpiexec(env)
    np = sum(n for _, n in counts)
    if path is None:
        if not topology.is_local:
            raise RuntimeError("no mpiexec found: the link test needs the job's MPI to start ranks on "
                               "other hosts")
        return [subprocess.Popen(command, env=dict(env, MLP_MAGIC_RANK=str(r)), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
                for r in range(np)]
    mpi = detect_flavour(path)
    ssh = env.get("MLP_MAGIC_SSH")
    plan = LaunchPlan(counts=counts, command=command, forward=names_to_forward(env), ssh_agent=ssh or None,
                      local=topology.is_local, as_root=os.geteuid() == 0,
                      hostfile_path=os.path.join(workdir, "hostfile"))
    with open(plan.hostfile_path, "w") as handle:
        handle.write(hostfile_text(mpi.flavour, counts))
    return [subprocess.Popen(mpiexec_argv(mpi, plan), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)]


def _stop(processes: list) -> None:
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
    for process in processes:
        process.wait()


def _answer(outputs: list) -> dict:
    """Rank 0's JSON line, else the first error any rank printed, else the launcher's last words
    (mpiexec may tag each line with its rank: "[1,0]<stdout>: {...}", MPICH "[0] {...}")."""
    lines = [line[line.index("{"):] for out, _ in outputs for line in out.splitlines() if "{" in line]
    answers = []
    for line in lines:
        try:
            answers.append(json.loads(line))
        except ValueError:
            pass
    for answer in answers:
        if "seconds" in answer:
            return answer
    if answers:
        return {"error": answers[0].get("error", "no answer")}
    last = [line for _, err in outputs for line in err.splitlines() if line.strip()]
    return {"error": "the ranks gave no answer" + (f": {last[-1][:300]}" if last else "")}


def measure(topology, options, env) -> dict:
    """The link test's answer (``doctor/pure/links.add_link_findings`` reads it)."""
    counts, leaders, np = _layout(topology, options.np)
    if np < 2:
        return {"skipped": f"the link test needs 2 ranks or more: the job has {np} (--np 2 asks for 2)",
                "hosts": [h for h, _ in counts]}
    timeout = max(MIN_SECONDS, options.timeout * 3)
    master = f"{topology.master_addr}:{free_port()}"
    env = dict(env)
    backend, why = choose_backend(options.links_backend, env)
    if topology.is_local:
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        env.update({"OMPI_MCA_btl": env.get("OMPI_MCA_btl", "self,sm,tcp"), "OMPI_MCA_pml": "ob1"})
    with tempfile.TemporaryDirectory(prefix="mlp-doctor-links-") as workdir:
        command = _rank_command(counts, master, leaders, options, timeout, backend)
        processes = _start(topology, counts, command, env, workdir)
        deadline = time.monotonic() + timeout + 5
        outputs = []
        try:
            for process in processes:
                outputs.append(process.communicate(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            hint = "run again with NCCL_DEBUG=INFO" if backend == "torch" else "check the job's MPI"
            return {"error": f"the link test did not finish within {timeout:g} s (a hung collective: "
                             f"{hint})", "hosts": [h for h, _ in counts]}
        finally:
            _stop(processes)
    answer = link_answer(_answer(outputs))   # json reads NaN, 10**40, a list for a rank
    if why:
        answer["backend_why"] = why
    names = {rank: host for (host, _), rank in zip(counts, leaders)}
    answer["pairs"] = [[names.get(a, str(a)), names.get(b, str(b)), bw]
                       for a, b, bw in answer.get("pairs", [])]
    answer.setdefault("hosts", [h for h, _ in counts])
    return answer


def run_links(report, topology, options, env) -> None:
    """Measure and add the findings; a failure to start is a finding too."""
    try:
        answer = measure(topology, options, env)
    except Exception as error:   # no mpiexec, an mpiexec that is not MPI, no free port
        answer = {"error": f"{type(error).__name__}: {error}"[:300], "hosts": list(topology.host_names())}
    add_link_findings(report, answer, options.fraction)
