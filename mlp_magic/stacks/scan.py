"""One host's share of ``mlp-magic stacks``: find the processes, dump each with py-spy, say it all.

Runs on every host as ``python -m mlp_magic.stacks.scan [--pid P,..] [--match RE] [--native]
[--timeout S] [--pyspy PATH]`` (over the allrun transport), and in-process for this machine.
It prints JSON lines: first ``{"scan": {...}}`` (this host's name, its py-spy, its
kernel.yama.ptrace_scope, and the rank processes it left to other network namespaces), then one
line per process found, with its threads or with why py-spy could not read it.

Which processes: by default every Python process whose environment carries a rank
(``core/proc_ranks``), launchers and this scanner left out; ``--pid`` and ``--match`` choose
others. A process in another network namespace than the scanner's is another host's (a
container sharing this PID space, or a namespace host of the test bed): that host's scan
reports it, this one only counts it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from ..core.proc_ranks import children_of_ranks, is_launcher, is_python, parse_cmdline, parse_environ, rank_of
from ..core.pyspy import GONE, NO_PYSPY, TIMEOUT, DumpError, classify_failure, parse_dump_json

PROC = "/proc"
PARALLEL = 16            # py-spy processes at a time (each pauses its target for a few ms)
_CMD_CHARS = 300


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _parent(pid: int) -> int:
    stat = _read(f"{PROC}/{pid}/stat") or b""
    fields = stat.rpartition(b")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0


def find_pyspy(hint: str | None = None) -> str | None:
    """py-spy: the caller's (same image), on PATH, or beside this Python."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    for candidate in (hint, shutil.which("py-spy"), beside):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class Selection:
    """What to dump: ``pids`` (exactly those), else Python processes whose command line matches
    ``match``, else every Python process carrying a rank."""

    def __init__(self, pids: list | None = None, match: str | None = None):
        self.pids = pids
        self.match = re.compile(match) if match else None

    def wants(self, argv: list, exe: str, rank) -> bool:
        if not is_python(exe, argv) or is_launcher(argv):
            return False
        if self.match is not None:
            return bool(self.match.search(" ".join(argv)))
        return rank is not None


def _process(pid: int) -> dict | None:
    """What /proc says of a process, None when it is gone or a kernel thread."""
    argv = parse_cmdline(_read(f"{PROC}/{pid}/cmdline") or b"")
    if not argv:
        return None
    environ = _read(f"{PROC}/{pid}/environ")
    rank = rank_of(parse_environ(environ)) if environ is not None else None
    return {"pid": pid, "ppid": _parent(pid), "argv": argv, "exe": _link(f"{PROC}/{pid}/exe"), "rank": rank,
            "netns": _link(f"{PROC}/{pid}/ns/net")}


def find_processes(selection: Selection, me: int) -> tuple:
    """(the processes to dump, the rank processes seen in other network namespaces)."""
    here = _link(f"{PROC}/{me}/ns/net")
    if selection.pids is not None:
        found = [_process(pid) or {"pid": pid, "missing": True} for pid in selection.pids]
        return found, 0
    chosen, elsewhere, known = [], 0, {}
    for name in os.listdir(PROC):
        if not name.isdigit() or int(name) == me:
            continue
        info = _process(int(name))
        if info is None:
            continue
        rank = info["rank"]
        known[info["pid"]] = (info["ppid"], (rank.job, rank.rank) if rank else None)
        if not selection.wants(info["argv"], info["exe"], rank):
            continue
        if here and info["netns"] and info["netns"] != here:
            elsewhere += 1
            continue
        chosen.append(info)
    parents = children_of_ranks(known)
    for info in chosen:
        info["child_of"] = parents.get(info["pid"])
    return chosen, elsewhere


def dump(pid: int, pyspy: str, native: bool, timeout: float) -> dict:
    """{"threads": [...]} or {"fault": cause, "error": message} for one process."""
    argv = [pyspy, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL, env=dict(os.environ, RUST_BACKTRACE="0"))
    except subprocess.TimeoutExpired:
        return {"fault": TIMEOUT, "error": f"py-spy gave no answer within {timeout:g} s"}
    except OSError as err:
        return {"fault": NO_PYSPY, "error": f"cannot run {pyspy}: {err.strerror or err}"}
    if done.returncode != 0:
        fault, message = classify_failure(done.stderr)
        return {"fault": fault, "error": message}
    try:
        return {"threads": parse_dump_json(done.stdout, pid)}
    except DumpError as err:
        return {"fault": "failed", "error": str(err)}


def _line(info: dict) -> dict:
    rank = info.get("rank")
    line = {"pid": info["pid"], "ppid": info.get("ppid"), "cmd": " ".join(info.get("argv", []))[:_CMD_CHARS],
            "child_of": info.get("child_of")}
    if rank is not None:
        line.update(rank=rank.rank, variable=rank.variable, job=rank.job, size=rank.size)
    return line


def scan(selection: Selection, native: bool = False, timeout: float = 5.0, pyspy_hint: str | None = None,
         me: int | None = None) -> list:
    """This host's JSON lines, as dicts: the ``scan`` header, then one per process."""
    me = os.getpid() if me is None else me
    pyspy = find_pyspy(pyspy_hint)
    scope = (_read("/proc/sys/kernel/yama/ptrace_scope") or b"").decode().strip() or None
    found, elsewhere = find_processes(selection, me)
    header = {"scan": {"host": os.uname().nodename, "pid": me, "pyspy": pyspy, "ptrace_scope": scope,
                       "elsewhere": elsewhere}}
    lines = [_line(info) for info in found]
    todo = []
    for info, line in zip(found, lines):
        if info.get("missing"):
            line.update(fault=GONE, error="no such process")
        elif pyspy is None:
            line.update(fault=NO_PYSPY, error="py-spy is not installed on this host")
        else:
            todo.append(line)
    if todo:
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(todo))) as pool:
            dumps = pool.map(lambda line: dump(line["pid"], pyspy, native, timeout), todo)
            for line, result in zip(todo, dumps):
                line.update(result)
    return [header] + lines


def _pid_list(text: str) -> list:
    return [int(p) for p in text.split(",") if p.strip()]


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlp_magic.stacks.scan")
    parser.add_argument("--pid", type=_pid_list)
    parser.add_argument("--match")
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--pyspy")
    args = parser.parse_args(argv)
    lines = scan(Selection(args.pid, args.match), args.native, args.timeout, args.pyspy)
    sys.stdout.write("".join(json.dumps(line) + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
