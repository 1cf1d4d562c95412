"""``mlp-magic stacks``' gathering (its options: tests/unit/commands/pure/test_parse_others.py): the
py-spy dumps of one host share one deadline, a dump that cannot start is its process's fault, and a
host the transport did not answer for is listed."""
from __future__ import annotations


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
    from mlp_magic.commands.pure.table import STACKS, options_for
    from mlp_magic.stacks.collect import collect

    scans = collect(["mlpt-nohost-a"], options_for(STACKS, timeout=2.0),
                    transport_for=lambda names: lambda *a: [])
    assert [(s.host, s.error) for s in scans] == [("mlpt-nohost-a", "no answer")]
