"""tests/workers: the two xdist workers' groups, and an ``alone`` test's hold on the machine."""
from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from tests import workers


def test_the_bed_and_the_browser_tier_share_one_worker_and_a_file_stays_together():
    assert workers.scope_of("tests/notebook/test_platform_notebook.py::test_a_platform") == "testbed"
    assert workers.scope_of("tests/multihost/test_link_down.py::test_a_host[x]") == "testbed"
    assert workers.scope_of("tests/browser/test_heatmap.py::test_64") == "testbed"
    assert workers.scope_of("tests/integration/test_unblock.py::test_a_rank") == \
        "tests/integration/test_unblock.py"


def test_a_test_of_the_bed_outside_its_scope_is_refused_at_collection():
    item = type("Item", (), {"nodeid": "tests/integration/test_x.py::test_y",
                             "fixturenames": ("ip", "testbed")})()
    with pytest.raises(pytest.UsageError, match="uses the namespace hosts"):
        workers.check_bed_scope(item)
    item.nodeid = "tests/multihost/test_x.py::test_y"
    workers.check_bed_scope(item)


def test_the_browser_tier_and_a_test_marked_alone_run_alone_and_no_other():
    def item(nodeid: str, marked: bool):
        def marker(self, name: str):
            return (marked and name == "alone") or None
        return type("Item", (), {"nodeid": nodeid, "get_closest_marker": marker})()

    assert workers.runs_alone(item("tests/browser/test_frontends.py::test_lab", marked=False))
    assert workers.runs_alone(item("tests/server/test_live.py::test_ranks_freed", marked=True))
    assert not workers.runs_alone(item("tests/server/test_live.py::test_a_page", marked=False))


def _hold(alone: bool, seconds: float, events, name: str) -> None:
    os.environ["PYTEST_XDIST_WORKER"] = name
    with workers.machine_share(alone=alone):
        events.put((name, "in", time.monotonic()))
        time.sleep(seconds)
        events.put((name, "out", time.monotonic()))


def _two_workers(first_alone: bool, second_alone: bool, first_holds_s: float, first=None) -> list:
    """Two workers of one run (children of this process, as xdist's are of its controller), the
    second starting while the first holds the machine: the order they went in and out.
    ``first(events)``: what the first worker does, if not one test held ``first_holds_s``."""
    context = multiprocessing.get_context("fork")
    events = context.Queue()
    first = context.Process(target=first or _hold, args=(events,) if first else
                            (first_alone, first_holds_s, events, "gw0"))
    first.start()
    assert events.get(timeout=10)[:2] == ("gw0", "in")
    second = context.Process(target=_hold, args=(second_alone, 0.0, events, "gw1"))
    second.start()
    for process in (first, second):
        process.join(10)
    # In the order they happened, not the order they arrived: a Queue's put hands the event to
    # a feeder thread, so one worker's "out" can reach the pipe after the other's "in".
    arrived = [events.get(timeout=10) for _ in range(3)]
    order = [event[:2] for event in sorted(arrived, key=lambda event: event[2])]
    _remove_locks_of_this_process()
    return order


@pytest.mark.parametrize("first_alone", [True, False])
def test_an_alone_test_never_overlaps_the_other_workers(first_alone):
    """The second waits for the first whenever either of them runs alone."""
    assert _two_workers(first_alone, not first_alone, 0.5) == [("gw0", "out"), ("gw1", "in"), ("gw1", "out")]


def test_shared_tests_overlap():
    assert _two_workers(False, False, 1.0) == [("gw1", "in"), ("gw1", "out"), ("gw0", "out")]


def _remove_locks_of_this_process() -> None:
    """What remove_locks does in a controller, here where this process played one."""
    import shutil

    folder = workers._lock_folder(os.getpid())
    assert os.path.isdir(folder)
    shutil.rmtree(folder)


def _two_alone_tests_in_a_row(events) -> None:
    os.environ["PYTEST_XDIST_WORKER"] = "gw0"
    with workers.machine_share(alone=True, keep=True):
        events.put(("gw0", "in", time.monotonic()))
        time.sleep(0.5)
    time.sleep(0.3)   # between the two tests: the machine stays this worker's
    with workers.machine_share(alone=True):
        time.sleep(0.2)
        events.put(("gw0", "out", time.monotonic()))


def test_a_run_of_alone_tests_keeps_the_machine_from_the_first_to_the_last():
    order = _two_workers(True, False, 0.0, first=_two_alone_tests_in_a_row)
    assert order == [("gw0", "out"), ("gw1", "in"), ("gw1", "out")]
