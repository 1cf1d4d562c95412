"""``mlp-magic stacks`` and ``%mlp_stacks`` share one parser: the same options, the same errors."""
from __future__ import annotations

import pytest

from mlp_magic.cli import _parser
from mlp_magic.errors import MlpMagicError
from mlp_magic.stacks.options import StacksOptions, options_from, parse_stacks_line


def from_cli(*words) -> StacksOptions:
    return options_from(_parser().parse_args(["stacks", *words]))


@pytest.mark.parametrize("line, expected", [
    ("", StacksOptions()),
    ("-H worker[0-3]", StacksOptions(hosts="worker[0-3]")),
    ("--hostfile /tmp/h --native --threads", StacksOptions(hostfile="/tmp/h", native=True, threads=True)),
    ("--pid 12,7,12", StacksOptions(pids=[7, 12])),
    ("--match 'train\\.py --lr'", StacksOptions(match="train\\.py --lr")),
    ("--timeout 2.5 --ssh 'ssh -F cfg' --json", StacksOptions(timeout=2.5, ssh="ssh -F cfg", json=True)),
])
def test_the_command_and_the_magic_agree(line, expected):
    import shlex

    assert parse_stacks_line(line, {}) == expected
    assert from_cli(*shlex.split(line)) == expected


def test_the_magic_expands_names():
    assert parse_stacks_line("-H $HOSTS --pid $pid", {"HOSTS": "w[0-1]"}, {"pid": 42}) == \
        StacksOptions(hosts="w[0-1]", pids=[42])


@pytest.mark.parametrize("line, says", [
    ("--pid 0", "--pid"), ("--pid 1,x", "'x' is not one"), ("--pid ''", "--pid"), ("--pid -3", "--pid"),
    ("--match '('", "not a regular expression"), ("--match ''", "empty pattern"),
    ("--timeout 0", "--timeout"), ("--timeout nan", "--timeout"), ("--timeout inf", "--timeout"),
    ("--timeout 1e9", "up to 86400"),     # poll's and the threads' own limits are far below inf
    ("--pid 1 --match x", "not allowed with"), ("--hostfile a -H b", "not allowed with"),
    ("--bogus", "unrecognized"), ("-H", "expected one argument"), ("'unclosed", "cannot split"),
    ("-H $NOPE", "unknown variable $NOPE"),
])
def test_bad_input_is_one_line_naming_it(line, says):
    with pytest.raises(MlpMagicError) as caught:
        parse_stacks_line(line, {})
    message = str(caught.value)
    assert says in message and "\n" not in message and "%mlp_stacks" in message


def test_the_command_refuses_the_same_way():
    with pytest.raises(MlpMagicError, match="--pid.*'x' is not one"):
        from_cli("--pid", "1,x")


def test_dumps_share_one_deadline_per_host(tmp_path):
    """33 py-spys that never answer (3 rounds of 16 at a time) cost the host one timeout, not three."""
    import time

    from mlp_magic.stacks.scan import TIMEOUT, dump_all

    hung = tmp_path / "py-spy"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    started = time.monotonic()
    results = dump_all(list(range(1, 34)), str(hung), native=False, timeout=1.0)
    assert time.monotonic() - started < 2.5
    assert len(results) == 33 and {r["fault"] for r in results} == {TIMEOUT}


def test_a_dump_that_cannot_start_is_that_processes_fault(monkeypatch, tmp_path):
    """Only a py-spy that is not there (or not runnable) asks for an install; too many open files
    is a plain failure, and any other trouble stays the one process's."""
    import errno

    from mlp_magic.stacks.pure.pyspy import NO_PYSPY
    from mlp_magic.stacks import scan

    def start(self, pid, pyspy, native):
        if pid == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        if pid == 2:
            raise OSError(errno.ENOENT, "No such file or directory")
        raise RuntimeError("something else")

    monkeypatch.setattr(scan.Dumps, "start", start)
    results = scan.dump_all([1, 2, 3], "/x/py-spy", native=False, timeout=5.0)
    assert [r["fault"] for r in results] == ["failed", NO_PYSPY, "failed"]
    assert "Too many open files" in results[0]["error"]
    assert "RuntimeError: something else" in results[2]["error"]


def test_a_host_the_transport_did_not_answer_for_is_listed(monkeypatch):
    from mlp_magic.stacks.collect import collect
    from mlp_magic.stacks.options import StacksOptions

    scans = collect(["mlpt-nohost-a"], StacksOptions(timeout=2.0), transport_for=lambda names: lambda *a: [])
    assert [(s.host, s.error) for s in scans] == [("mlpt-nohost-a", "no answer")]
