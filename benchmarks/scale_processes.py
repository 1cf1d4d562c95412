"""Process bookkeeping for benchmarks/scale.py: whose processes, their CPU and memory, and a
sweep that leaves none of ours behind (psutil)."""
from __future__ import annotations

import contextlib
import time

import psutil


def descendants() -> list:
    """This process's live descendants (zombies are dead already; we reap them on exit)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def family(pid: int) -> list:
    with contextlib.suppress(psutil.Error):
        leader = psutil.Process(pid)
        return [leader] + leader.children(recursive=True)
    return []


def tree_cpu(processes: list) -> float:
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += sum(process.cpu_times()[:2])  # user + system
    return total


def memory_per_rank(launcher_pid: int) -> dict:
    """Mean RSS, PSS and USS (MiB) of a rank: the launcher's child and its descendants."""
    ranks = [child for launcher in family(launcher_pid)[:1] for child in launcher.children()]
    sums = {"rss": 0, "pss": 0, "uss": 0}
    processes = [p for rank in ranks for p in family(rank.pid)]
    for process in processes:
        with contextlib.suppress(psutil.Error):
            info = process.memory_full_info()
            for key in sums:
                sums[key] += getattr(info, key)
    count = max(len(ranks), 1)
    return {"ranks": len(ranks), "processes_per_rank": round(len(processes) / count, 2),
            **{f"{key}_mib": round(value / count / 2 ** 20, 1) for key, value in sums.items()}}


def sweep(wait_s: float = 10.0) -> list:
    """Give our descendants ``wait_s`` to leave, then kill those that stay; returns their names."""
    deadline = time.monotonic() + wait_s
    while descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    stray = descendants()
    names = []
    for process in stray:
        with contextlib.suppress(psutil.Error):
            names.append(" ".join(process.cmdline())[:100])
            process.kill()
    psutil.wait_procs(stray, timeout=3)
    return names
