"""allrun fan-out speed against pssh / clush on 8 namespace hosts (needs root).

    python benchmarks/allrun_fanout.py [--hosts 8] [--runs 9]

Brings up the multi-host test bed (tests/multihost/netns.py), then times, interleaved and as
whole commands (interpreter start included for every tool):
- ``allrun -H worker[0-7] -- hostname`` cold: a fresh ssh ControlPath directory, so every host
  needs a full ssh handshake, as the peers do;
- the same call again (warm): the ssh connections of the cold call are reused;
- each peer found: ``parallel-ssh``/``pssh`` (Debian package pssh) and ``clush`` (pip
  ClusterShell; on PATH or $CLUSH), all through the same ssh config. parallel-ssh runs twice:
  as installed (Debian's python3, built with PGO and LTO) and under this benchmark's python,
  the one allrun runs under, so that the interpreter's own speed is told apart from the tool's;
  and allrun runs cold once more under parallel-ssh's interpreter (this checkout on PYTHONPATH,
  started as its console script is): each tool on each interpreter, the tools alone compared.
allrun runs as its console script, as users call it. ``--hosts 1`` shows the latency-bound
case; with 8 hosts on a 2-core machine the handshakes' CPU is the bound.
Every run's output is checked (each host's own hostname). The last line is one JSON object
with the medians and the ratios: goals are cold <= 1.0x the best peer, second call <= 0.3x cold,
and ``%allrun`` through a live World's engines (timed in the kernel) <= 0.1x cold.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(1, os.path.join(HERE, "..", "tests", "multihost"))
import netns  # noqa: E402

COMMAND = "hostname"


def timed(argv: list, env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds, done.stdout


def check_output(tool: str, output: str, names: list) -> None:
    missing = [name for name in names if name not in output]
    if missing:
        raise RuntimeError(f"{tool}: output lacks {missing}: {output[-500:]!r}")


def find_peers(bed, hostfile: str) -> dict:
    """name -> argv of each peer tool present, all using the test bed's ssh config."""
    peers = {}
    for name in ("parallel-ssh", "pssh"):
        path = shutil.which(name)
        if path and "parallel-ssh" not in peers:
            peers["parallel-ssh"] = [path, "-h", hostfile, "-x", f"-F {bed.ssh_config}", "-i", COMMAND]
            if _is_python_script(path):
                peers["parallel-ssh@same-python"] = [sys.executable, *peers["parallel-ssh"]]
    clush = os.environ.get("CLUSH") or shutil.which("clush")
    if clush:
        nodes = f"worker[0-{bed.count - 1}]"
        peers["clush"] = [clush, "-o", f"-F {bed.ssh_config}", "-w", nodes, "-b", COMMAND]
    return peers


def _is_python_script(path: str) -> bool:
    with open(path, "rb") as handle:
        return b"python" in handle.readline()


def peer_env(env: dict, argv: list) -> dict:
    """parallel-ssh under this python needs its library from the Debian package (that library
    alone, not every Debian package on the path)."""
    if argv[0] != sys.executable:
        return env
    return {**env, "PYTHONPATH": _psshlib_only()}


def _psshlib_only() -> str:
    folder = os.path.join(tempfile.gettempdir(), f"mlp-bench-psshlib-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "psshlib")
    if not os.path.islink(link):
        os.symlink("/usr/lib/python3/dist-packages/psshlib", link)
    return folder


def allrun_argv(count: int) -> list:
    """The console script next to this python (what users type), else ``python -m``."""
    script = os.path.join(os.path.dirname(sys.executable), "allrun")
    start = [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "mlp_magic.allrun.command"]
    return [*start, "-H", f"worker[0-{count - 1}]", "--", COMMAND]


def peer_python(peers: dict) -> str | None:
    """The interpreter the installed parallel-ssh runs on, when it is another one than ours."""
    argv = peers.get("parallel-ssh")
    if not argv or not _is_python_script(argv[0]):
        return None
    with open(argv[0]) as handle:
        interpreter = handle.readline()[2:].split()[0]
    same = os.path.realpath(interpreter) == os.path.realpath(sys.executable)
    return None if same or not os.access(interpreter, os.X_OK) else interpreter


def allrun_on(python: str, count: int) -> list:
    """allrun from this checkout under another interpreter, started as its console script does
    (the allrun command needs nothing beyond the standard library)."""
    return [python, "-c", "from mlp_magic.allrun.command import run; run()",
            "-H", f"worker[0-{count - 1}]", "--", COMMAND]


def close_masters(bed, control: str) -> None:
    for name in os.listdir(control):
        subprocess.run(["ssh", "-F", bed.ssh_config, "-o", f"ControlPath={os.path.join(control, name)}",
                        "-O", "exit", "worker0"], capture_output=True, timeout=10)


def measure(bed, runs: int) -> tuple[dict, list]:
    names = bed.host_names()
    hostfile = os.path.join(bed.workdir, "pssh_hosts")
    with open(hostfile, "w") as handle:
        handle.write("".join(f"{name}\n" for name in names))
    peers = find_peers(bed, hostfile)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    env["MLP_MAGIC_SSH"] = f"ssh -F {bed.ssh_config}"
    allrun = allrun_argv(bed.count)
    cold_runs = {"allrun_cold": (allrun, env)}
    other_python = peer_python(peers)
    if other_python:   # allrun on the interpreter parallel-ssh runs on: the tools alone compared
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        cold_runs["allrun_cold@peer-python"] = (allrun_on(other_python, bed.count),
                                                {**env, "PYTHONPATH": repo})
    timings: dict = {"allrun_cold": [], "allrun_second": [], **{name: [] for name in peers}}
    timings.update({label: [] for label in cold_runs})
    # one untimed round: host keys learned, files cached, for every tool alike
    for argv, tool_env in [*cold_runs.values(), *((argv, env) for argv in peers.values())]:
        control = tempfile.mkdtemp(dir=bed.workdir)
        timed(argv, peer_env({**tool_env, "MLP_MAGIC_SSH_CONTROL_DIR": control}, argv))
    for _ in range(runs):
        for label, (argv, tool_env) in cold_runs.items():
            control = tempfile.mkdtemp(prefix="cm", dir=bed.workdir)
            run_env = {**tool_env, "MLP_MAGIC_SSH_CONTROL_DIR": control}
            for run_label in (label, "allrun_second") if label == "allrun_cold" else (label,):
                seconds, output = timed(argv, run_env)
                check_output(run_label, output, names)
                timings[run_label].append(seconds)
            close_masters(bed, control)
        for name, argv in peers.items():
            seconds, output = timed(argv, peer_env(env, argv))
            check_output(name, output, names)
            timings[name].append(seconds)
    return timings, list(peers)


def measure_engines(bed, runs: int) -> float:
    """``%allrun hostname`` through a live World (one engine per namespace host, no ssh): the
    call the magic makes, timed in the kernel. Median seconds."""
    import contextlib
    import io

    from IPython.testing.globalipapp import start_ipython

    from mlp_magic.world.owner import owner_of
    from mlp_magic.allrun.via_engines import WorldTransport

    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                      MLP_MAGIC_SSH=" ".join(bed.ssh_command()), **bed.env())
    hostfile = bed.write_hostfile(os.path.join(tempfile.mkdtemp(prefix="mlpt-bench-"), "hostfile"), slots=1)
    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    with contextlib.redirect_stdout(io.StringIO()):
        started = shell.run_cell(f"%%mpirun --hostfile {hostfile} -np {len(bed.hosts)}\npass").success
    if not started:
        raise SystemExit("could not start a World on the test bed")
    transport = WorldTransport(owner_of(shell).world)
    times = []
    try:
        for _ in range(runs + 1):  # the first call warms the engines' subprocess machinery
            began = time.perf_counter()
            results = transport(bed.host_names(), COMMAND, None, None)
            times.append(time.perf_counter() - began)
            check_output("allrun via engines", "".join(f"{r.host}: {r.stdout}" for r in results),
                         bed.host_names())
    finally:
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_line_magic("mpirun", "--stop")
    return statistics.median(times[1:])


def summary(args, timings: dict, peers: list, medians: dict) -> dict:
    """The run's one JSON object: the medians, the ratios against the best peer, the goals."""
    cold, second = medians["allrun_cold"], medians["allrun_second"]
    best_peer = min(peers, key=lambda name: medians[name]) if peers else None
    paired = statistics.median(
        a / b for a, b in zip(timings["allrun_cold"], timings[best_peer])) if best_peer else None
    result = {
        "benchmark": "allrun_fanout",
        "hosts": args.hosts,
        "command": COMMAND,
        "runs": args.runs,
        "allrun_cold_s": round(cold, 4),
        "allrun_second_s": round(second, 4),
        "peers_s": {name: round(medians[name], 4) for name in peers},
        "best_peer": best_peer,
        "cold_ratio_vs_best_peer": round(cold / medians[best_peer], 3) if best_peer else None,
        # The median of each round's own ratio: rounds interleave the tools, so a slow drift of
        # a shared machine's load cancels out.
        "cold_ratio_vs_best_peer_paired": round(paired, 3) if best_peer else None,
        # The tools alone, each pair on one interpreter: this benchmark's python, and the one the
        # installed parallel-ssh runs on (Debian's, built with PGO and LTO).
        "cold_ratio_vs_parallel_ssh_same_python": (
            round(cold / medians["parallel-ssh@same-python"], 3)
            if "parallel-ssh@same-python" in medians else None),
        "cold_ratio_on_parallel_ssh_python": (
            round(medians["allrun_cold@peer-python"] / medians["parallel-ssh"], 3)
            if "allrun_cold@peer-python" in medians else None),
        "second_over_cold": round(second / cold, 3),
        "allrun_engines_s": round(medians["allrun_engines"], 4),
        "engines_over_cold": round(medians["allrun_engines"] / cold, 3),
        "goals": {"cold_ratio_vs_best_peer": "<= 1.0", "second_over_cold": "<= 0.3",
                  "engines_over_cold": "<= 0.1"},
    }
    result["goals_met"] = bool(best_peer) and result["cold_ratio_vs_best_peer"] <= 1.0 \
        and result["second_over_cold"] <= 0.3 and result["engines_over_cold"] <= 0.1
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    reason = netns.unavailable_reason()
    if reason:
        print(json.dumps({"benchmark": "allrun_fanout", "skipped": reason}))
        return 0
    # Byte-compile the package as an installed wheel is (PYTHONDONTWRITEBYTECODE may be set
    # here, and the peers' modules come compiled by their packages).
    import compileall
    import mlp_magic

    compileall.compile_dir(os.path.dirname(mlp_magic.__file__), quiet=1)
    with netns.Testbed(args.hosts) as bed:
        timings, peers = measure(bed, args.runs)
        medians = {label: statistics.median(values) for label, values in timings.items()}
        medians["allrun_engines"] = measure_engines(bed, args.runs)
    for label, value in medians.items():
        print(f"{label:>16}: {value * 1000:7.1f} ms (median of {args.runs})")
    print(json.dumps(summary(args, timings, peers, medians)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
