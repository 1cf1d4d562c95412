"""How long ``mlp-magic doctor`` takes over N hosts, against what users run today, in one run.

    python benchmarks/doctor_hosts.py [--hosts 4,16,64] [--peer-max 16] [--rounds 2]

The hosts are the multi-host test bed's (tests/multihost/netns.py: network namespaces, each with
its own sshd), brought up at each size and down at the end; they share this machine's cores, so
every host's ssh handshake, sshd and probe run on the same 2 cores. Per size:
- ours, ``--no-import`` (versions from the packages' metadata: the 64-host goal of 5 s is for
  this), cold (a new ssh connection per host) and again (connections reused);
- ours, the default (every package imported in a child on each host, torch included), again;
- the peer: ``python -m torch.utils.collect_env`` on each host over ssh, one host after the other
  (what users do: it imports torch and asks pip, nvidia-smi and the compilers), measured up to
  ``--peer-max`` hosts; beyond, the per-host figure of the largest measured size times N
  (``--peer-per-host S`` gives that figure from an earlier run).
Each line is one size; the last line is one JSON object with all of them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(1, os.path.join(HERE, "..", "tests", "multihost"))


def doctor(bed, control: str, *args: str) -> float:
    env = dict(os.environ, MLP_MAGIC_SSH=" ".join(bed.ssh_command()), MLP_MAGIC_SSH_CONTROL_DIR=control)
    for name in ("MLP_MPI_HOSTS", "MLP_MPI_HOSTFILE", "MLP_WORKER_GPU", "MLP_MAGIC_NVML_REPLAY"):
        env.pop(name, None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "doctor", "-H", ",".join(bed.host_names()),
                           "--json", *args], capture_output=True, text=True, timeout=600, env=env)
    seconds = time.perf_counter() - started
    report = json.loads(done.stdout)
    unanswered = [f for f in report["findings"] if f["check"] == "reachability"]
    assert report["answered"] == len(bed.hosts), unanswered
    return seconds


def peer(bed, hosts: list) -> float:
    """collect_env on each host, one after the other, over plain ssh (a new connection each)."""
    started = time.perf_counter()
    for host in hosts:
        done = subprocess.run([*bed.ssh_command(), host, sys.executable, "-m", "torch.utils.collect_env"],
                              capture_output=True, text=True, timeout=300)
        assert "PyTorch version" in done.stdout, done.stdout + done.stderr
    return time.perf_counter() - started


def measure(bed, count: int, rounds: int, limits: tuple, peer_per_host: list) -> dict:
    import tempfile

    row = {"hosts": count}
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as folder:
        cold = []
        for index in range(rounds):
            control = os.path.join(folder, f"cold{index}")
            os.makedirs(control, mode=0o700)
            cold.append(doctor(bed, control, "--no-import", "--timeout", "60"))
        warm_dir = os.path.join(folder, "cold0")
        again = [doctor(bed, warm_dir, "--no-import", "--timeout", "60") for _ in range(rounds)]
        peer_max, imports_max = limits
        runs = rounds if count <= imports_max else 0
        full = [doctor(bed, warm_dir, "--timeout", "300") for _ in range(runs)]
        bed.close_ssh_masters()
    row.update(ours_no_import_cold_s=round(statistics.median(cold), 2),
               ours_no_import_again_s=round(statistics.median(again), 2))
    if full:
        row["ours_with_imports_s"] = round(statistics.median(full), 2)
    if count <= peer_max:
        seconds = peer(bed, bed.host_names())
        peer_per_host.append(seconds / count)
        row["peer_collect_env_s"] = round(seconds, 2)
    else:
        row["peer_collect_env_s_projected"] = round(statistics.median(peer_per_host) * count, 2)
    peer_s = row.get("peer_collect_env_s") or row["peer_collect_env_s_projected"]
    row["ratio_no_import_cold_vs_peer"] = round(row["ours_no_import_cold_s"] / peer_s, 3)
    if full:
        row["ratio_with_imports_vs_peer"] = round(row["ours_with_imports_s"] / peer_s, 3)
    return row


def main(argv=None) -> int:
    import netns

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="4,16,64", help="host counts, comma separated (at most 64)")
    parser.add_argument("--peer-max", type=int, default=16, help="the largest size the peer is run at")
    parser.add_argument("--peer-per-host", type=float, help="the peer's seconds per host, measured before")
    parser.add_argument("--imports-max", type=int, default=16,
                        help="the largest size ours runs with imports at (64 hosts importing torch at once "
                             "on 2 shared cores starve the ssh connections' keepalives)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    reason = netns.unavailable_reason()
    if reason:
        print(f"doctor_hosts: skipped ({reason})")
        return 0
    rows, peer_per_host = [], [args.peer_per_host] if args.peer_per_host else []
    for count in [int(n) for n in args.hosts.split(",")]:
        with netns.Testbed(count) as bed:
            row = measure(bed, count, args.rounds, (args.peer_max, args.imports_max), peer_per_host)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps({"benchmark": "doctor_hosts", "machine_cores": os.cpu_count(), "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
