"""Every host's scan (``stacks/scan``'s JSON lines) -> the sections of a stacks report (pure).

One section per job found (its ranks, merged into one tree), one for the children of its ranks
(DataLoader workers and the like), one for processes that carry no rank (``--pid``, ``--match``).
Each process's main thread goes into the section's tree; its other threads into a second tree,
under their name, when they are busy (all of them with ``threads``): idle ones are counted.
Nothing is dropped silently: hosts that did not answer or had no matching process, processes
py-spy could not read, and ranks of a job that no host reported are the report's ``problems``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from mlp_magic.stacks.pure.pyspy import NO_PYSPY, NO_PYSPY_FIX, PTRACE, PTRACE_FIX, frames_of
from mlp_magic.output.pure.grouping import fold_hosts_shown, ranks_label
from mlp_magic.core.ranges import MAX_RANKS, fold_ranks
from mlp_magic.core.records import Record, fresh
from mlp_magic.stacks.pure.collectives import section as collectives_section
from mlp_magic.stacks.pure.recorded import checked_groups
from mlp_magic.stacks.pure.frames import Frame, from_the_cell, user_line
from mlp_magic.stacks.pure.tree import merge

THREAD_PREFIX = "thread "


class ProcessStacks(Record):
    """One process a host's scan found: where it is in its job, and its threads or why none."""

    host: str
    pid: int
    cmd: str = ""
    rank: int | None = None
    job: str | None = None
    size: int | None = None
    child_of: int | None = None      # pid of the rank it descends from (same job, same rank)
    threads: list = fresh(list)      # [{"name", "main", "idle", "frames"}], the main thread first
    fault: str | None = None         # why there are no threads (core.pyspy's causes)
    error: str = ""
    collectives: dict | None = None  # an engine of ours: {"answer": its recorder's} (stacks/pure/collectives)


class HostScan(Record):
    """One host's answer, or why there is none (``error``)."""

    host: str
    processes: list = fresh(list)
    error: str | None = None
    pyspy: str | None = None
    ptrace_scope: str | None = None
    elsewhere: int = 0               # rank processes seen in other network namespaces
    unreadable: int = 0              # Python processes whose environment could not be read


class Section(Record):
    """One tree's worth of the report: ``stacks`` maps each member to its frames."""

    title: str
    members: dict                    # member -> ProcessStacks (a member: a rank, or an index)
    kind: str                        # "ranks", "children" or "processes"
    tree: object = None              # the main threads' merged tree (core.stack_tree.Node)
    threads: object = None           # the other shown threads' tree, or None
    hidden_idle: dict = fresh(dict)  # member -> idle threads not shown
    collectives: list = fresh(list)  # the ranks' collectives lines (stacks/pure/collectives.section)


def parse_scan(host: str, text: str) -> HostScan:
    """A host's JSON lines -> its HostScan (a line that is not ours: the host's error)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError):   # RecursionError: nested too deeply
            return HostScan(host, error=f"output line {number} is not the scanner's: {raw[:80]!r}")
        lines.append(line)
    return scan_from_lines(host, lines)


def scan_from_lines(host: str, lines: list) -> HostScan:
    if not lines or not isinstance(lines[0], dict) or not isinstance(lines[0].get("scan"), dict):
        return HostScan(host, error="the scanner said nothing (is mlp_magic installed there?)")
    head = lines[0]["scan"]
    try:
        texts = [_text_or_none(head, name) for name in ("pyspy", "ptrace_scope")]
        counts = [_count(head.get(name)) for name in ("elsewhere", "unreadable")]
        processes = [_process(host, line) for line in lines[1:]]
        return HostScan(host, processes, None, *texts, *counts)
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        return HostScan(host, error=f"a line of the scanner could not be read: {err!r}"[:300])


def _count(value) -> int:
    """A count of the header (None: 0); ValueError for what no count is (-1, 0.5, "12", Infinity)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a count {value!r}")
    return value


def _text_or_none(line: dict, name: str):
    """A text field (job, fault, ...) as written, or None; ValueError for another type (a list
    would be an unhashable key where processes are grouped)."""
    value = line.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is text, got {value!r}")
    return value


def _process(host: str, line: dict) -> ProcessStacks:
    """One process line (AttributeError, KeyError, TypeError or ValueError where it is not one)."""
    rank, size, child_of = line.get("rank"), line.get("size"), line.get("child_of")
    # ranks and sizes are named by fold_ranks (none negative); child_of is a pid
    if not all(value is None or type(value) is int and value >= 0 for value in (rank, size)) \
            or (child_of is not None and (type(child_of) is not int or child_of < 0)):
        raise ValueError(f"rank, size and child_of are numbers, got {rank!r}, {size!r}, {child_of!r}")
    pid = line["pid"]   # shown, never signalled: any number the user asked for (--pid 999999999)
    if type(pid) is not int or pid < 0:
        raise ValueError(f"pid {pid!r} is not a process number")
    threads = [dict(t, frames=frames_of(t)) for t in line.get("threads") or []]
    if not all(isinstance(t.get("name"), str) and isinstance(t.get("idle"), bool) for t in threads):
        raise ValueError("a thread without its name or idle flag")
    asked = line.get("collectives")
    if asked is not None and not isinstance(asked, dict):
        raise ValueError(f"collectives is an object, got {asked!r}")
    return ProcessStacks(host, pid, str(line.get("cmd") or ""), rank, _text_or_none(line, "job"),
                         size, child_of, threads, _text_or_none(line, "fault"),
                         str(line.get("error") or ""), asked)


def _thread_name(name: str) -> str:
    """Numbers out (``Thread-3 (worker)`` and ``Thread-5 (worker)`` merge)."""
    return re.sub(r"[0-9]+", "N", name)


def _section(title: str, members: dict, kind: str, all_threads: bool) -> Section:
    readable = {m: p for m, p in members.items() if p.threads}
    # an engine of ours reads as the hang report shows a rank: from its cell on, or idle
    main = {m: from_the_cell(list(p.threads[0]["frames"])) if p.collectives is not None
            else p.threads[0]["frames"] for m, p in readable.items()}
    others, hidden = {}, {}
    for member, process in readable.items():
        for index, thread in enumerate(process.threads[1:]):
            if thread["idle"] and not all_threads:
                hidden[member] = hidden.get(member, 0) + 1
                continue
            name = _thread_name(thread["name"])
            others[(member, index)] = (frames_of_thread_name(name),) + tuple(thread["frames"])
    return Section(title, members, kind, merge(main) if main else None, merge(others) if others else None,
                   hidden)


def frames_of_thread_name(name: str) -> Frame:
    """The pseudo-frame a non-main thread's stack starts with: its name."""
    return Frame("", 0, THREAD_PREFIX + name)


def sections(scans: Iterable[HostScan], all_threads: bool = False) -> list:
    """The report's sections: each job's ranks, their children, then the processes without a rank."""
    jobs: dict = {}
    children: dict = {}
    loose: list = []
    for scan in scans:
        for process in scan.processes:
            if process.rank is None:
                loose.append(process)
            elif process.child_of is not None:
                children.setdefault(process.job, []).append(process)
            elif process.rank in jobs.setdefault(process.job, {}):
                loose.append(process)    # the same rank twice: shown, but not as the rank
            else:
                jobs[process.job][process.rank] = process
    found = []
    for job, ranks in jobs.items():
        section = _section(job_title(job, ranks), dict(sorted(ranks.items())), "ranks", all_threads)
        section.collectives = ranks_collectives(ranks)
        found.append(section)
        if job in children:
            kids = dict(enumerate(children.pop(job)))
            found.append(_section(f"children of the ranks of {job}", kids, "children", all_threads))
    for job, kids in children.items():   # their rank itself was not found
        title = f"children of the ranks of {job}"
        found.append(_section(title, dict(enumerate(kids)), "children", all_threads))
    if loose:
        found.append(_section("processes without a rank", dict(enumerate(loose)), "processes", all_threads))
    return found


def ranks_collectives(ranks: Mapping) -> list:
    """The collectives lines of one job's ranks ({rank: ProcessStacks}): those of our engines."""
    asked = {rank: p for rank, p in ranks.items() if p.collectives is not None}
    answers = {rank: _checked_answer(p.collectives.get("answer")) for rank, p in asked.items()}
    where = {rank: user_line(p.threads[0]["frames"]) if p.threads else None for rank, p in asked.items()}
    return collectives_section(answers, where)


def _checked_answer(answer):
    return answer if isinstance(answer, str) else checked_groups(answer)


def job_title(job: str, ranks: Mapping) -> str:
    sizes = {p.size for p in ranks.values() if p.size}
    hosts = fold_hosts_shown(p.host for p in ranks.values())
    of = f" of {sizes.pop()}" if len(sizes) == 1 else ""
    return f"job {job}: {len(ranks)} ranks{of} on {hosts}"


def label_for(section: Section):
    """The ``label`` of a section's tree: what a set of its members reads as."""
    def label(keys: Iterable) -> str:
        members = sorted({k[0] if isinstance(k, tuple) else k for k in keys})
        processes = [section.members[m] for m in members]
        hosts = fold_hosts_shown(p.host for p in processes)
        if section.kind == "ranks":
            return ranks_label(members, hosts)
        if section.kind == "children":
            parents = fold_ranks(p.rank for p in processes)
            plural = "es" if len(members) > 1 else ""
            return f"{len(members)} child process{plural} of rank {parents} on {hosts}"
        return _pids_label(processes)
    return label


def _pids_label(processes: list) -> str:
    """``pids 13,30 on w0``; over several hosts, hosts with the same pids together (a pid names
    a process of one host): ``pid 15837 on w[0-1]; pids 7,9 on w2``."""
    by_host: dict = {}
    for process in processes:
        by_host.setdefault(process.host, []).append(process.pid)
    hosts_of: dict = {}
    for host, pids in by_host.items():
        hosts_of.setdefault((len(pids), fold_ranks(pids)), []).append(host)
    return "; ".join(f"pid{'s' if count > 1 else ''} {pids} on {fold_hosts_shown(hosts)}"
                     for (count, pids), hosts in hosts_of.items())


def problems(scans: list, found: list, whole_jobs: bool = True) -> list:
    """Lines naming everything not shown: hosts, unreadable processes, the fix for each fault once,
    and (``whole_jobs``: every rank was asked for, not some chosen by pid or pattern) the ranks
    of a job that no host reported."""
    lines, faults = [], set()
    for scan in scans:
        if scan.error:
            lines.append(f"{scan.host}: {scan.error}")
        elif not scan.processes:
            elsewhere = (f" ({scan.elsewhere} rank processes in other network namespaces: other hosts'"
                         " or containers')") if scan.elsewhere else ""
            lines.append(f"no matching process on {scan.host}{elsewhere}")
        if scan.unreadable:
            lines.append(f"{scan.host}: {scan.unreadable} Python processes of other users were not looked at"
                         " (their environment is not readable: run as their user, or as root)")
    for section in found:
        label = label_for(section)
        failed: dict = {}
        for member, process in section.members.items():
            if not process.threads:
                why = (process.fault or "no Python thread", process.error or "py-spy listed none")
                failed.setdefault(why, []).append(member)
        for (fault, error), members in failed.items():
            faults.add(fault)
            lines.append(f"could not read {label(members)}: {fault}: {error}")
        lines.extend(_missing(section) if whole_jobs else [])
    scopes = sorted({s.ptrace_scope for s in scans if s.ptrace_scope and s.ptrace_scope != "0"})
    if PTRACE in faults:
        scope = f" (kernel.yama.ptrace_scope is {','.join(scopes)} here)" if scopes else ""
        lines.append(f"fix: {PTRACE_FIX}{scope}")
    if NO_PYSPY in faults:
        lines.append(f"fix: {NO_PYSPY_FIX}")
    return lines


def _missing(section: Section) -> list:
    sizes = {p.size for p in section.members.values() if p.size}
    if section.kind != "ranks" or len(sizes) != 1 or max(sizes) > MAX_RANKS:
        return []   # (a size past any job's: listing its missing ranks would not end)
    missing = sorted(set(range(sizes.pop())) - set(section.members))
    if not missing:
        return []
    return [f"rank{'s' if len(missing) > 1 else ''} {fold_ranks(missing)} of {section.title.split(':')[0]}"
            " not found: on a host not asked, one that did not answer, or exited"]


def fault_only(scans: list, found: list) -> str | None:
    """One line when nothing could be dumped at all for one reason with a known fix (py-spy
    missing, ptrace refused), else None; never when a host did not answer (it is then listed
    with the rest)."""
    processes = [p for s in scans for p in s.processes]
    if not processes or any(p.threads for p in processes) or any(s.error for s in scans):
        return None
    faults = {p.fault for p in processes}
    hosts = fold_hosts_shown(p.host for p in processes)
    if faults == {NO_PYSPY}:
        return f"py-spy is not installed on {hosts}: {NO_PYSPY_FIX}"
    if faults == {PTRACE}:
        return f"py-spy may not read the processes on {hosts} (ptrace refused): {PTRACE_FIX}"
    return None
