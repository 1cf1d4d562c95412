"""One host's share of ``mlp-magic stacks``: find the processes, dump each with py-spy, say it all.

Runs on every host as ``python -I -S -c 'from mlp_magic.stacks.scan import main; ...' [--pid P,..]
[--match RE] [--native] [--timeout S] [--pyspy PATH]`` (over the allrun transport,
``collect.scan_command``), and in-process for this machine.
It prints JSON lines: first ``{"scan": {...}}`` (this host's name, its py-spy, its
kernel.yama.ptrace_scope, the rank processes it left to other network namespaces and the Python
processes whose environment it could not read), then one line per process found, with its
threads or with why py-spy could not read it.

Which processes: by default every Python process whose environment carries a rank
(``core/proc_ranks``), launchers and this scanner left out; ``--pid`` and ``--match`` choose
others. A process in another network namespace than the scanner's is another host's (a
container sharing this PID space, or a namespace host of the test bed): that host's scan
reports it, this one only counts it.
"""
from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time

from mlp_magic import config
from mlp_magic.engine.identity import PROGRAM as ENGINE_PROGRAM, collectives_path
from mlp_magic.machine.programs import find_pyspy
from mlp_magic.stacks import collectives
from mlp_magic.core.proc_ranks import (children_of_ranks, is_launcher, is_python, is_stacks_tool,
                                       parse_cmdline, parse_environ, rank_of)
from mlp_magic.stacks.pure.pyspy import (GONE, NO_PYSPY, NOT_PYTHON, OTHER, TIMEOUT, DumpError,
                                         classify_failure, parse_dump_json)

# Kept light: every host starts it (with ``python -I -S``) for each call, so no argparse,
# concurrent.futures or dataclasses; py-spy processes run side by side, read as each ends.
PROC = "/proc"
COLLECTIVES_WAIT_S = 1.5
PARALLEL = 16            # py-spy processes at a time (each pauses its target for a few ms)
_CMD_CHARS = 300
_PF_KTHREAD = 0x00200000   # /proc/PID/stat flags: a kernel thread
_PF_EXITING = 0x00000004   # and a task in exit(): its memory, its environment with it, is going


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


class Selection:
    """What to dump: ``pids`` (exactly those), else Python processes whose command line matches
    ``match``, else every Python process carrying a rank."""

    def __init__(self, pids: list | None = None, match: str | None = None):
        self.pids = pids
        self.match = re.compile(match) if match else None

    def wants(self, info: dict) -> bool:
        argv, rank = info["argv"], info["rank"]
        if not info["python"] or is_launcher(argv) or is_stacks_tool(argv):
            return False
        if self.match is not None:
            return bool(self.match.search(" ".join(argv)))
        return rank is not None


def _process(pid: int) -> dict | None:
    """What /proc says of a process (its environment only when it is a Python: the others are
    never dumped), None when it is gone or a kernel thread."""
    argv = parse_cmdline(_read(f"{PROC}/{pid}/cmdline") or b"")
    if not argv:
        return None
    python = is_python(_link(f"{PROC}/{pid}/exe"), argv)
    environ = _read(f"{PROC}/{pid}/environ") if python else None
    if python and environ is None and _why_not_there(pid)["fault"] == GONE:
        return None   # it ended between the two reads: not another user's
    variables = parse_environ(environ) if environ is not None else None
    rank = rank_of(variables) if variables is not None else None
    return {"pid": pid, "ppid": _parent(pid), "argv": argv, "python": python, "rank": rank,
            "unreadable": python and environ is None,
            "home": config.home(variables) if variables is not None else None}   # its own mlp_magic home


def _why_not_there(pid: int) -> dict:
    """The fault of a pid given with --pid that has no command line: gone, a zombie, a kernel
    thread."""
    stat = _read(f"{PROC}/{pid}/stat")
    if stat is None:
        return {"fault": GONE, "error": "no such process"}
    fields = stat.rpartition(b")")[2].split()
    if fields[:1] == [b"Z"]:
        return {"fault": GONE, "error": "it exited (a zombie: its parent has not reaped it)"}
    if len(fields) > 6 and fields[6].isdigit() and int(fields[6]) & _PF_EXITING:
        return {"fault": GONE, "error": "it is exiting"}   # its memory, environment with it, is gone
    if len(fields) > 6 and fields[6].isdigit() and int(fields[6]) & _PF_KTHREAD:
        return {"fault": NOT_PYTHON, "error": "a kernel thread"}
    return {"fault": NOT_PYTHON, "error": "it has no command line"}


def find_processes(selection: Selection, me: int) -> tuple:
    """(the processes to dump, the rank processes seen in other network namespaces, the Python
    processes whose environment could not be read: another user's)."""
    here = _link(f"{PROC}/{me}/ns/net")
    if selection.pids is not None:
        found = [_process(pid) or {"pid": pid, "missing": _why_not_there(pid)} for pid in selection.pids]
        return found, 0, 0
    chosen, elsewhere, unreadable, known = [], 0, 0, {}
    for name in os.listdir(PROC):
        if not name.isdigit() or int(name) == me:
            continue
        info = _process(int(name))
        if info is None:
            continue
        rank = info["rank"]
        unreadable += info["unreadable"] and selection.match is None
        known[info["pid"]] = (info["ppid"], (rank.job, rank.rank) if rank else None)
        if not selection.wants(info):
            continue
        netns = _link(f"{PROC}/{info['pid']}/ns/net")
        if here and netns and netns != here:
            elsewhere += 1
            continue
        chosen.append(info)
    parents = children_of_ranks(known)
    for info in chosen:
        info["child_of"] = parents.get(info["pid"])
    return chosen, elsewhere, unreadable


class Dumps:
    """The py-spy processes of one scan. ``stop()`` (the in-process scan given up: Ctrl-C) kills
    those under way and starts no more: a py-spy holds its target stopped while it reads it, and
    none may outlive the command."""

    def __init__(self):
        import threading   # (loaded by subprocess already)

        self._lock, self._running, self.stopped = threading.Lock(), set(), False

    def start(self, pid: int, pyspy: str, native: bool):
        """A py-spy dumping ``pid``; None once stopped."""
        argv = [pyspy, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
        with self._lock:
            if self.stopped:
                return None
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=dict(os.environ, RUST_BACKTRACE="0"))
            self._running.add(process)
        return process

    def ended(self, process) -> None:
        with self._lock:
            self._running.discard(process)

    def stop(self) -> None:
        with self._lock:
            self.stopped, running = True, list(self._running)
        for process in running:
            process.kill()


def _finish_dump(process, pid: int, deadline: float, timeout: float) -> dict:
    """{"threads": [...]} or {"fault": cause, "error": message} for one started py-spy."""
    try:
        out, err = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {"fault": TIMEOUT, "error": f"py-spy gave no answer within {timeout:g} s"}
    if process.returncode != 0:
        fault, message = classify_failure(err.decode("utf-8", "replace"))
        return {"fault": fault, "error": message}
    try:
        return {"threads": parse_dump_json(out.decode("utf-8", "replace"), pid)}
    except DumpError as error:
        return {"fault": OTHER, "error": str(error)}


def dump_all(pids: list, pyspy: str, native: bool, timeout: float, dumps: Dumps | None = None) -> list:
    """One result of ``_finish_dump`` per pid, ``PARALLEL`` py-spy processes at a time (a new
    one as soon as one ends), all within ``timeout`` of the first start: one deadline for the
    host, so 40 stuck processes cannot spend the host's whole answer time batch after batch.
    Plain threads (subprocess has imported threading): concurrent.futures would add ~15 ms of
    imports to every host's scan."""
    import threading

    deadline = time.monotonic() + timeout
    results: list = [None] * len(pids)
    indices, taking = iter(range(len(pids))), threading.Lock()
    dumps = Dumps() if dumps is None else dumps

    def dump(pid: int) -> dict:
        if time.monotonic() >= deadline:
            return {"fault": TIMEOUT, "error": f"not dumped: the {timeout:g} s for this host had passed"}
        try:
            process = dumps.start(pid, pyspy, native)
        except OSError as err:   # not there, or not runnable: the fix is py-spy's; else a plain failure
            fault = NO_PYSPY if err.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC) else OTHER
            return {"fault": fault, "error": f"cannot run {pyspy}: {err.strerror or err}"}
        if process is None:
            return {"fault": OTHER, "error": "not dumped: the scan was stopped"}
        try:
            return _finish_dump(process, pid, deadline, timeout)
        finally:
            dumps.ended(process)

    def worker() -> None:
        while True:
            with taking:
                index = next(indices, None)
            if index is None:
                return
            try:
                results[index] = dump(pids[index])
            except Exception as err:   # one process's trouble stays that process's
                results[index] = {"fault": OTHER, "error": f"{type(err).__name__}: {err}"}

    workers = [threading.Thread(target=worker, name="mlp-stacks-dump", daemon=True)
               for _ in range(min(PARALLEL, len(pids)))]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return results


def _line(info: dict) -> dict:
    rank = info.get("rank")
    line = {"pid": info["pid"], "ppid": info.get("ppid"), "cmd": " ".join(info.get("argv", []))[:_CMD_CHARS],
            "child_of": info.get("child_of")}
    if rank is not None:
        line.update(rank=rank.rank, variable=rank.variable, job=rank.job, size=rank.size)
    return line


def scan(selection: Selection, native: bool = False, timeout: float = 5.0, pyspy_hint: str | None = None,
         me: int | None = None, dumps: Dumps | None = None) -> list:
    """This host's JSON lines, as dicts: the ``scan`` header, then one per process. ``dumps``:
    to stop its py-spys from another thread."""
    me = os.getpid() if me is None else me
    pyspy = find_pyspy(pyspy_hint)
    scope = (_read("/proc/sys/kernel/yama/ptrace_scope") or b"").decode().strip() or None
    found, elsewhere, unreadable = find_processes(selection, me)
    header = {"scan": {"host": os.uname().nodename, "pid": me, "pyspy": pyspy, "ptrace_scope": scope,
                       "elsewhere": elsewhere, "unreadable": unreadable}}
    lines = [_line(info) for info in found]
    todo = []
    for info, line in zip(found, lines):
        if info.get("missing"):
            line.update(info["missing"])
        elif pyspy is None:
            line.update(fault=NO_PYSPY, error="py-spy is not installed on this host")
        else:
            todo.append(line)
    for line, result in zip(todo, dump_all([line["pid"] for line in todo], pyspy, native, timeout, dumps)):
        line.update(result)
    _ask_engines(found, lines)
    return [header] + lines


def _ask_engines(found: list, lines: list) -> None:
    """Our engines' collectives (stacks/collectives), once py-spy is done with them: under
    ``"collectives"``, {"answer": groups, an error or None}. Other processes are never asked."""
    engines = {line["pid"]: (line, info.get("home")) for info, line in zip(found, lines)
               if ENGINE_PROGRAM in info.get("argv", ()) and not info.get("missing")}
    if engines:
        asked = {pid: (pid, collectives_path(pid, home)) for pid, (_, home) in engines.items()}
        said = collectives.gather(asked, COLLECTIVES_WAIT_S)
        for pid, (line, _) in engines.items():
            line["collectives"] = {"answer": said[pid]}


def main(argv: list | None = None) -> int:
    """``[--pid P,..] [--match RE] [--native] [--timeout S] [--pyspy PATH]``, as ``collect``
    writes them (checked there: this is no user's command line)."""
    words = list(sys.argv[1:] if argv is None else argv)
    given = {"--native": False}
    while words:
        word = words.pop(0)
        given[word] = True if word == "--native" else words.pop(0)
    pids = [int(p) for p in given["--pid"].split(",")] if "--pid" in given else None
    lines = scan(Selection(pids, given.get("--match")), given["--native"], float(given.get("--timeout", 5.0)),
                 given.get("--pyspy"))
    sys.stdout.write(as_text(lines))
    return 0


def as_text(lines: list) -> str:
    """The scan as the scanner prints it: one JSON line each (stacks/pure/jobs.parse_scan reads it)."""
    return "".join(json.dumps(line) + "\n" for line in lines)


if __name__ == "__main__":
    sys.exit(main())
