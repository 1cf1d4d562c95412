"""engine/pure/versions: an engine's needs, the problems of a found set of versions, the refusal line an
engine writes and the one line a World makes of many hosts' refusals."""
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.engine.pure.versions import (ENGINE_NEEDS, MARK, PYTHON, Needed, problem, problems,
                                            refusal_error, refusal_line, refusals, release)

GOOD = {"Python": "3.11.7", "ipyparallel": "9.2.0", "ipykernel": "7.4.0", "mpi4py": "4.1.2"}
numbers = st.lists(st.integers(0, 30), min_size=1, max_size=4)


def test_release_reads_versions_as_pep_440_releases_do():
    assert release("6.23.1") == (6, 23, 1)
    assert release("7") == release("7.0.0") == (7,)
    assert release("9.0.0rc1") == (9,) and release("v2.1") == (2, 1)
    assert release("") == release("unknown") == ()


@given(numbers, numbers)
def test_release_orders_like_the_numbers(a, b):
    text = ".".join(map(str, a)), ".".join(map(str, b))

    def trimmed(values):
        values = list(values)
        while values and values[-1] == 0:
            values.pop()
        return tuple(values)
    assert (release(text[0]) < release(text[1])) == (trimmed(a) < trimmed(b))


def test_within_bounds_is_no_problem_and_each_edge_is_named():
    need = Needed("ipyparallel", "9.0.0", "10")
    assert problem(need, "9.0.0") is None and problem(need, "9.99") is None
    assert problem(need, "8.8.0") == "ipyparallel 8.8.0 (needs >=9.0.0,<10)"
    assert problem(need, "10.0.0") == "ipyparallel 10.0.0 (needs >=9.0.0,<10)"
    assert problem(need, None) == "ipyparallel not installed (needs >=9.0.0,<10)"
    assert problem(Needed("mpi4py", "4.1.0", required=False), None) is None
    assert problem(Needed("mpi4py", "4.1.0", required=False), "3.1.6") == "mpi4py 3.1.6 (needs >=4.1.0)"


def test_problems_lists_every_shortfall_in_order():
    assert problems(GOOD) == []
    old = dict(GOOD, Python="3.8.10", ipyparallel="8.8.0", mpi4py=None)
    assert problems(old) == ["Python 3.8.10 (needs >=3.9)", "ipyparallel 8.8.0 (needs >=9.0.0,<10)"]
    assert [n.name for n in (PYTHON, *ENGINE_NEEDS)] == ["Python", "ipyparallel", "ipykernel", "mpi4py"]


HOSTS = ["worker0", "worker0", "worker1", "worker1", "worker2", "worker2", "worker3", "worker3"]


def test_refusals_of_several_hosts_become_one_line_hosts_folded_by_reason():
    old_ipp = ["ipyparallel 8.8.0 (needs >=9.0.0,<10)"]
    log = "\n".join([
        "some launcher line",
        refusal_line(2, old_ipp),
        refusal_line(3, old_ipp),
        "  " + refusal_line(4, old_ipp) + "  ",
        refusal_line(6, ["Python 3.8.10 (needs >=3.9)"]),
        refusal_line(9, ["a rank the World does not have"]),
        f"[rank 1] {MARK[:-1]}, not quite our mark",
    ])
    assert refusals(log, HOSTS) == {"worker1": old_ipp[0], "worker2": old_ipp[0],
                                    "worker3": "Python 3.8.10 (needs >=3.9)"}
    assert refusal_error(log, HOSTS) == ("the engines cannot start, mlp_magic needs another Python there: "
                                         "worker[1-2]: ipyparallel 8.8.0 (needs >=9.0.0,<10); "
                                         "worker3: Python 3.8.10 (needs >=3.9)")
    assert refusal_error("no refusals\n[rank 1] registered", HOSTS) is None


@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["x 1 (needs >=2)", "y 3 (needs >=1,<3)"])),
                max_size=20))
def test_every_refusing_host_is_in_the_line(lines):
    log = "\n".join(refusal_line(rank, [why]) for rank, why in lines)
    error = refusal_error(log, HOSTS)
    assert (error is None) == (not lines)
    assert set(refusals(log, HOSTS)) == {HOSTS[rank] for rank, _ in lines}


def test_two_ranks_refusals_written_onto_one_line_are_both_read():
    """Ranks share the launcher's log: two writing at once may land on one line (seen in CI)."""
    from mlp_magic.engine.pure.versions import MARK, refusal_error

    line = (f"[rank 1] {MARK} ipyparallel 8.8.0 (needs >=9.0.0,<10)"
            f"[rank 0] {MARK} ipyparallel 8.8.0 (needs >=9.0.0,<10)\n")
    assert refusal_error(line, ["localhost", "localhost"]) == (
        "the engines cannot start, mlp_magic needs another Python there: "
        "localhost: ipyparallel 8.8.0 (needs >=9.0.0,<10)")
