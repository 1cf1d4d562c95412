"""Hosts' scans -> sections and problems: one tree per job, children and rank-less processes
apart, idle threads counted, and everything not shown named."""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.stacks.pure.pyspy import NO_PYSPY, PTRACE
from mlp_magic.stacks.pure.recorded import slim
from mlp_magic.stacks.pure.render import render_report_html, render_report_text
from mlp_magic.stacks.pure.jobs import (HostScan, fault_only, label_for, parse_scan, problems,
                                        scan_from_lines, sections)

from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile
from tests.unit.stacks.pure.test_collectives import DUMP

JOB = "mpi prterun-w0-1@1"
BARRIER = [["/home/me/job.py", 12, "<module>"], ["/home/me/job.py", 6, "wait_all"]]
SLEEP = [["/home/me/job.py", 12, "<module>"], ["/home/me/job.py", 3, "sleeper"]]


def thread(frames, name="MainThread", main=True, idle=True) -> dict:
    return {"name": name, "main": main, "idle": idle, "frames": frames}


def rank_line(rank, pid, frames=BARRIER, job=JOB, size=8, **more) -> dict:
    line = {"pid": pid, "ppid": 1, "cmd": "python job.py", "child_of": None, "rank": rank,
            "variable": "OMPI_COMM_WORLD_RANK", "job": job, "size": size, "threads": [thread(frames)]}
    line.update(more)
    return line


def head(elsewhere=0) -> dict:
    return {"scan": {"host": "w", "pid": 1, "pyspy": "/bin/py-spy", "ptrace_scope": "1",
                     "elsewhere": elsewhere}}


def job_on_four_hosts(sleeping=5) -> list:
    """8 ranks, 2 per host, one asleep, the others in a barrier."""
    scans = []
    for host in range(4):
        lines = [head()] + [rank_line(r, 100 + r, SLEEP if r == sleeping else BARRIER)
                            for r in (2 * host, 2 * host + 1)]
        scans.append(scan_from_lines(f"worker{host}", lines))
    return scans


def test_one_job_one_tree_the_sleeper_named():
    scans = job_on_four_hosts()
    [section] = sections(scans)
    assert section.title == f"job {JOB}: 8 ranks of 8 on worker[0-3]"
    text = render_report_text([section], problems(scans, [section]), "heading")
    assert ("summary: ranks 0-4,6-7 (7) on worker[0-3]: job.py:6 wait_all; "
            "rank 5 on worker2: job.py:3 sleeper") in text
    assert "`-- rank 5 on worker2  [odd]" in text
    assert "not shown" not in text and problems(scans, [section]) == []


def test_the_scanners_json_lines_are_read():
    text = "".join(json.dumps(line) + "\n" for line in [head(), rank_line(0, 10)])
    scan = parse_scan("worker0", text)
    assert scan.error is None and [p.rank for p in scan.processes] == [0]
    assert parse_scan("w", "bash: python: command not found\n").error.startswith("output line 1")
    assert "said nothing" in parse_scan("w", "").error
    assert "could not be read" in parse_scan("w", json.dumps(head()) + '\n{"no": "pid"}\n').error


TORCH = "torch none w0:29500"


def test_two_jobs_children_and_loose_processes_each_get_their_section():
    lines = [head(), rank_line(0, 10), rank_line(1, 11),
             rank_line(0, 20, job=TORCH, size=2), rank_line(1, 21, job=TORCH, size=2),
             rank_line(0, 12, child_of=10, threads=[thread(SLEEP)]),
             {"pid": 30, "ppid": 1, "cmd": "python tool.py", "child_of": None, "threads": [thread(SLEEP)]},
             rank_line(1, 13)]   # rank 1 of the first job again: not silently merged into it
    found = sections([scan_from_lines("w0", lines)])
    assert [(s.kind, sorted(s.members)) for s in found] == [
        ("ranks", [0, 1]), ("children", [0]), ("ranks", [0, 1]), ("processes", [0, 1])]
    assert label_for(found[1])([0]) == "1 child process of rank 0 on w0"
    assert label_for(found[3])([0, 1]) == "pids 13,30 on w0"


def test_processes_without_a_rank_on_several_hosts_are_named_host_by_host():
    """A pid names a process of one host: equal pids on two hosts are one pid on both (before:
    "pids 30 on w[0-1]"), other pids their own part."""
    def loose(pid):
        return {"pid": pid, "ppid": 1, "cmd": "python tool.py", "child_of": None, "threads": [thread(SLEEP)]}
    scans = [scan_from_lines("w0", [head(), loose(30)]), scan_from_lines("w1", [head(), loose(30)]),
             scan_from_lines("w2", [head(), loose(7), loose(9)])]
    [found] = sections(scans)
    assert label_for(found)(found.members) == "pid 30 on w[0-1]; pids 7,9 on w2"
    assert label_for(found)([m for m in found.members if found.members[m].host == "w2"]) == "pids 7,9 on w2"


def test_everything_not_shown_is_named():
    scans = job_on_four_hosts()[:3]
    scans[1].processes[0].threads.clear()
    scans[1].processes[0].fault, scans[1].processes[0].error = PTRACE, "Permission denied (os error 13)"
    scans.append(scan_from_lines("worker3", [head(elsewhere=2)]))
    scans.append(scan_from_lines("worker4", []))
    scans[-1].error = "unreachable: ssh: connect to host worker4 port 22: Connection refused"
    found = sections(scans)
    assert problems(scans, found) == [
        "no matching process on worker3 (2 rank processes in other network namespaces: "
        "other hosts' or containers')",
        "worker4: unreachable: ssh: connect to host worker4 port 22: Connection refused",
        "could not read rank 2 on worker1: ptrace refused: Permission denied (os error 13)",
        f"ranks 6-7 of job {JOB} not found: on a host not asked, one that did not answer, or exited",
        "fix: py-spy attaches with ptrace: run as root or as the processes' user with CAP_SYS_PTRACE "
        "(docker run --cap-add SYS_PTRACE), and allow it with kernel.yama.ptrace_scope=0 "
        "(sysctl -w kernel.yama.ptrace_scope=0) (kernel.yama.ptrace_scope is 1 here)"]
    assert fault_only(scans, found) is None   # some stacks were read


@pytest.mark.parametrize("fault, says", [(PTRACE, "ptrace refused"), (NO_PYSPY, "py-spy is not installed")])
def test_nothing_readable_for_one_known_reason_is_one_error(fault, says):
    scans = job_on_four_hosts()
    for scan in scans:
        for process in scan.processes:
            process.threads.clear()
            process.fault = fault
    message = fault_only(scans, sections(scans))
    assert says in message and "worker[0-3]" in message and "\n" not in message
    assert ("CAP_SYS_PTRACE" in message and "kernel.yama.ptrace_scope" in message) or "pip install" in message
    # a host that did not answer is not hidden behind that one line: the full report lists it
    scans.append(HostScan("worker4", error="unreachable: no route to host"))
    assert fault_only(scans, sections(scans)) is None


def test_idle_threads_are_counted_busy_ones_shown():
    busy = thread([["/home/me/job.py", 30, "prefetch"]], name="Thread-3 (prefetch)", main=False, idle=False)
    idle = thread([["/usr/lib/python3.11/threading.py", 320, "wait"]], name="Thread-4", main=False)
    lines = [head()] + [rank_line(r, 10 + r, threads=[thread(BARRIER), busy, idle]) for r in range(2)]
    [section] = sections([scan_from_lines("w0", lines)])
    text = render_report_text([section], [], "heading")
    assert "other threads:" in text and "thread Thread-N (prefetch)" in text and "threading.py" not in text
    assert "idle threads not shown (--threads shows them): 1 on ranks 0-1 (2) on w0" in text
    [every] = sections([scan_from_lines("w0", lines)], all_threads=True)
    assert "threading.py:320 wait" in render_report_text([every], [], "heading")
    assert "<pre" in render_report_html([every], ["a &problem"], "heading <x>")


@given(st.lists(st.tuples(st.integers(0, 15), st.sampled_from([BARRIER, SLEEP]), st.integers(0, 3)),
                max_size=20))
def test_every_process_found_is_shown_or_named(entries):
    by_host: dict = {}
    for pid, (rank, frames, host) in enumerate(entries):
        by_host.setdefault(host, [head()]).append(rank_line(rank, 1000 + pid, frames, size=16))
    scans = [scan_from_lines(f"w{h}", by_host.get(h, [head()])) for h in range(4)]
    found = sections(scans)
    shown = sum(len(s.members) for s in found)
    assert shown == len(entries)
    missing_hosts = [h for h in range(4) if h not in by_host]
    assert sum("no matching process" in line for line in problems(scans, found)) == len(missing_hosts)


def test_processes_not_looked_at_and_empty_dumps_are_named():
    scan = scan_from_lines("w0", [{"scan": dict(head()["scan"], unreadable=3)},
                                  rank_line(0, 10, threads=[]), rank_line(1, 11)])
    found = sections([scan])
    assert problems([scan], found) == [
        "w0: 3 Python processes of other users were not looked at (their environment is not readable: "
        "run as their user, or as root)",
        "could not read rank 0 on w0: no Python thread: py-spy listed none",
        f"ranks 2-7 of job {JOB} not found: on a host not asked, one that did not answer, or exited"]
    partial = problems([scan], found, whole_jobs=False)
    assert partial[-1] == "could not read rank 0 on w0: no Python thread: py-spy listed none"


# A host's scan as the scanner writes it: its header, two ranks of one job (one an engine of ours
# with its collectives), a child of rank 0, a process without a rank.
SCAN = [{"scan": dict(head(elsewhere=1)["scan"], unreadable=2)},
        rank_line(0, 10, size=2, collectives={"answer": slim(DUMP)["groups"]},
                  threads=[thread(BARRIER), thread(SLEEP, name="Thread-3", main=False, idle=False)]),
        rank_line(1, 11, size=2, collectives={"answer": "RuntimeError: boom"}),
        rank_line(0, 12, size=2, child_of=10, threads=[], fault=PTRACE, error="Permission denied"),
        {"pid": 30, "ppid": 1, "cmd": "python tool.py", "child_of": None, "threads": [thread(SLEEP)]}]


@FUZZ
@given(hostile(SCAN))
@example([SCAN[0], rank_line(0, 10, frames=[["/a.py", float("inf"), "f"]])])   # OverflowError
@example([SCAN[0], rank_line(0, 10, job=TORCH, size=2 ** 63)])   # set(range(2**63)): never ends
@example([SCAN[0], rank_line(-1, 10), rank_line(0, 11)])   # fold_ranks: "rank -1 is negative"
@example([SCAN[0], rank_line(0, 10, job=[])])   # unhashable job
@example([{"scan": dict(SCAN[0]["scan"], elsewhere=float("inf"))}])   # OverflowError
@example([{"scan": dict(SCAN[0]["scan"], ptrace_scope=float("inf"))}])   # sorted([inf, "1"]) (hypothesis)
@example([SCAN[0], rank_line(0, 10, collectives={"answer": [{"name": "0", "enqueued": float("nan")}]})])
def test_a_hostile_scan_is_read_or_is_that_hosts_error_and_the_report_goes_on(lines):
    scans = [parse_scan("w0", "\n".join(dumps(line) for line in lines)), scan_from_lines("w1", SCAN)]
    assert scans[1].error is None and (scans[0].error is None or "\n" not in scans[0].error)
    found = sections(scans, all_threads=True)
    said = problems(scans, found)
    for section in found:
        label_for(section)(section.members)
    assert render_report_text(found, said, "heading") and render_report_html(found, said, "heading")
    fault_only(scans, found)


def test_a_scan_nested_too_deeply_is_that_hosts_error():
    assert "not the scanner's" in parse_scan("w0", "[" * 5000 + "]" * 5000).error
