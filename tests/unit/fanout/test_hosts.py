"""fanout/hosts: the one fan-out. Which transport each host goes through (this machine apart, once),
what comes back for a host that could not answer, and real shells (this machine's ``sh``; ssh
across hosts is tests/multihost's)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from mlp_magic.core.results import OK, why_no_answer
from mlp_magic.errors import MlpMagicError
from mlp_magic.fanout.hosts import SKIP, host_names, names_elsewhere, start
from mlp_magic.fanout.transports import InThisProcess, Refused, Shell
from mlp_magic.fanout.underway import Underway
from mlp_magic.core.results import HostResult

HERE = os.uname().nodename


class Recording:
    """A transport that answers every host it is given with its own name, and keeps who asked."""

    def __init__(self, name: str):
        self.name, self.calls = name, []

    def start(self, targets, command, timeout, on_output=None) -> Underway:
        names = [t.name for t in targets]
        self.calls.append(names)
        return Underway(lambda deadline: {n: HostResult(n, stdout=self.name) for n in names})


def _answers(fan) -> dict:
    return {name: result.stdout for name, result in fan.finish(time.monotonic() + 5).items()}


def test_this_machine_is_asked_once_through_here_and_the_others_through_there():
    there, here = Recording("ssh"), Recording("in-process")
    fan = start(["node-a", "localhost", "root@node-b", HERE], "true", timeout=5, there=there, here=here)
    assert there.calls == [["node-a", "node-b"]] and here.calls == [["localhost"]]
    assert fan.given == ["node-a", "localhost", "node-b", HERE]
    assert fan.asked == ["node-a", "localhost", "node-b"] and fan.also_here == {HERE: "localhost"}
    found = fan.finish(time.monotonic() + 5)
    assert fan.answer_for(HERE, found).stdout == "in-process"
    assert _answers(fan) == {"node-a": "ssh", "localhost": "in-process", "node-b": "ssh"}


def test_skip_leaves_this_machine_out_and_one_transport_for_all_is_asked_once():
    there = Recording("ssh")
    fan = start(["localhost", "node-a"], "true", timeout=5, there=there, here=SKIP)
    assert there.calls == [["node-a"]] and fan.asked == ["node-a"] and fan.also_here == {}
    engines = Recording("engines")
    fan = start(["node-a", "localhost", "127.0.0.1"], "true", timeout=5, there=engines, here=engines)
    assert engines.calls == [["node-a", "localhost"]] and fan.also_here == {"127.0.0.1": "localhost"}


def test_without_here_every_host_goes_through_there_unsplit():
    there = Recording("ssh")
    start(["localhost", "node-a"], "true", timeout=5, there=there)
    assert there.calls == [["localhost", "node-a"]]


def test_a_host_no_transport_answered_for_and_a_refused_transport_each_say_why():
    silent = Recording("ssh")
    silent.start = lambda targets, *a, **k: Underway(lambda deadline: {})
    [result] = start(["node-a"], "true", timeout=5, there=silent).finish(time.monotonic() + 1).values()
    assert why_no_answer(result, 5) == "no answer"
    refused = Refused("--ssh: cannot find the command 'nope'")
    found = start(["node-a", "node-b"], "true", timeout=5, there=refused).finish(time.monotonic() + 1)
    assert {n: why_no_answer(r, 5) for n, r in found.items()} == {
        "node-a": "--ssh: cannot find the command 'nope'", "node-b": "--ssh: cannot find the command 'nope'"}


def test_a_bad_host_list_is_one_error_before_anything_starts():
    there = Recording("ssh")
    for hosts, said in (([], "the host list is empty"), (["a", "a"], "host 'a' is listed twice"),
                        (["a;reboot"], "invalid host name")):
        with pytest.raises(MlpMagicError, match=said):
            start(hosts, "true", timeout=5, there=there)
    assert there.calls == []


def test_the_names_a_transport_must_reach_from_here():
    assert host_names(["root@node-a", "localhost"]) == ["node-a", "localhost"]
    assert names_elsewhere(["root@node-a", "localhost", HERE, "127.0.0.2"]) == ["node-a"]


def test_in_this_process_a_failure_is_named_and_a_late_answer_stops_its_work():
    def broken(name):
        raise OSError("no /proc")
    found = start(["localhost"], "scan", timeout=5, there=Recording("ssh"),
                  here=InThisProcess(broken, "local scan")).finish(time.monotonic() + 5)
    assert why_no_answer(found["localhost"], 5) == "local scan: OSError('no /proc')"
    release, stopped = threading.Event(), []
    late = InThisProcess(lambda name: release.wait(5) and "late", "local scan",
                         stop=lambda: stopped.append(1))
    fan = start(["localhost"], "scan", timeout=0.2, there=Recording("ssh"), here=late)
    found = fan.finish(time.monotonic() + 0.2)
    release.set()
    assert why_no_answer(found["localhost"], 0.2) == "timeout: no answer within 0.2 s" and stopped == [1]


def test_this_machines_own_shell_runs_the_command_and_streams_its_lines():
    lines, done = [], threading.Event()
    shell = Shell(local=True, at_once=1, on_done=done.set)
    fan = start(["localhost"], "echo one; echo two >&2; exit 3", timeout=10, there=shell, here=shell,
                on_output=lambda host, stream, line: lines.append((host, stream, line.strip())))
    [result] = fan.finish(time.monotonic() + 10).values()
    assert (result.status, result.exit_code, result.stdout) == ("failed", 3, "one\n")
    assert why_no_answer(result, 10) == "exit 3: two"
    assert ("localhost", "stdout", "one") in lines and ("localhost", "stderr", "two") in lines
    assert done.wait(5) and fan.wait(time.monotonic())
    ok = start(["localhost"], "true", timeout=10, there=shell, here=shell).finish(time.monotonic() + 10)
    assert ok["localhost"].status == OK


def test_a_command_past_its_deadline_is_stopped_and_says_so():
    shell = Shell(local=True, at_once=1)
    started = time.monotonic()
    fan = start(["localhost"], "sleep 30", timeout=30, there=shell, here=shell)
    assert not fan.wait(time.monotonic() + 0.3) and fan.so_far() == {}
    [result] = fan.finish(time.monotonic() + 0.5).values()
    assert why_no_answer(result, 30) == "timeout: no answer within 30 s"
    assert time.monotonic() - started < 10


def test_an_ssh_client_that_does_not_exist_is_refused_before_anything_starts():
    with pytest.raises(MlpMagicError, match="^--ssh: cannot find the command '/nonexistent/ssh'$"):
        Shell("/nonexistent/ssh")
    with pytest.raises(MlpMagicError, match="^--ssh: cannot split"):
        Shell("'unclosed")
