"""%mpirun --compare, --pull and --push against a real World of 4 ranks (real engines, real torch)."""
import pickle
import re

import numpy as np
import pytest
import torch

from mlp_magic.values.pure.compare import Comparison
from tests import worlds

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def values_world(ip):
    """Four ranks holding the same model, except one element of rank 2's, and a few other values."""
    error = run(ip, """%%mpirun -np 4
import torch, numpy as np
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
if rank == 2:
    with torch.no_grad():
        model[5].weight[17, 3] += 1e-3
vec = np.arange(10.0) * (2 if rank == 1 else 1)
nested = {"lr": 0.1, "steps": [10, 20], "tag": ("run", rank == 3)}
shape = torch.zeros(4 if rank == 3 else 3)
if rank != 1:
    only_some = torch.ones(2)
gen = (i for i in range(3))
big = np.zeros(3_000_000)
""")
    assert error is None
    return ip


def _history_length() -> int:
    """In the kernel: how many requests the World's client has sent."""
    return len(worlds.current_world().client.history)


_ASKED: list = []   # in the kernel: each time the patched memory_budget was asked


def _budget_of_50_mb() -> int:
    _ASKED.append(1)
    return 50_000_000


def _limit_memory() -> None:
    """In the kernel: this machine's available memory is 50 MB to --pull (its reading counted)."""
    from mlp_magic.values import transfer

    _ASKED.clear()
    _limit_memory.original = transfer.memory_budget
    transfer.memory_budget = _budget_of_50_mb


def _memory_restored() -> int:
    """In the kernel: memory_budget as it was; how many times it was asked meanwhile."""
    from mlp_magic.values import transfer

    transfer.memory_budget = getattr(_limit_memory, "original", transfer.memory_budget)
    return len(_ASKED)


def compare(ip, capsys, line):
    error = run(ip, f"%mpirun --compare {line}")
    return error, capsys.readouterr().out


def test_a_state_dict_differing_in_one_element_names_rank_key_and_difference(values_world, capsys):
    error, out = compare(values_world, capsys, "model.state_dict() -o cmp")
    assert error is None
    cmp = values_world.user_ns["cmp"]
    assert isinstance(cmp, Comparison) and not cmp.equal
    assert [g.ranks for g in cmp.groups] == [[0, 1, 3], [2]] and cmp.errors == []
    diff, = cmp.groups[1].diffs
    assert diff.path == "5.weight" and diff.at == (17, 3)
    assert diff.max_diff == pytest.approx(1e-3, rel=1e-3)
    assert cmp.groups[1].differing == 1 and cmp.relayed == 1024          # one 1 KiB piece, not the model
    assert cmp.summary_bytes / 4 < 2048                                  # what reached the notebook per rank
    lines = out.strip().splitlines()
    assert lines[0].startswith("ranks 0-1,3 (3 of 4) equal: "
                               "collections.OrderedDict of 16 tensors, float32, cpu")
    assert lines[1].startswith("rank 2 (1 of 4) differs in 1 of 16 keys")
    assert lines[2] == "  5.weight: max |diff| 0.001 at [17, 3]"


def test_equal_values_are_one_line(values_world, capsys):
    error, out = compare(values_world, capsys, "model.state_dict()['0.weight']")
    assert error is None
    assert out.strip().startswith(
        "all 4 ranks equal: torch.Tensor [64, 64] float32 cpu, 16.0 KiB, finite, checksum ")
    assert len(out.strip().splitlines()) == 1


def test_numpy_numbers_nested_values_and_shapes(values_world, capsys):
    _, out = compare(values_world, capsys, "vec")
    assert "rank 1 (1 of 4) differs: max |diff| 9 at [9]" in out
    _, out = compare(values_world, capsys, "nested")
    assert "rank 3 (1 of 4) differs in 1 of 5 entries" in out and "  tag[1]: True vs False, |diff| 1" in out
    _, out = compare(values_world, capsys, "nested['lr'] * 2")
    assert out.strip() == "all 4 ranks equal: float 0.2, finite"
    _, out = compare(values_world, capsys, "shape --ranks 1-3")
    assert out.strip().splitlines()[1].startswith("rank 3 (1 of 3) differs: shape [4] vs [3]")


def test_every_rank_different_gives_one_group_each_with_its_largest_difference(values_world, capsys):
    error = run(values_world, "%%mpirun\ng = torch.Generator().manual_seed(rank)\n"
                              "noise = torch.rand(500, 300, generator=g)")
    assert error is None
    capsys.readouterr()
    error, out = compare(values_world, capsys, "noise -o each")
    each = values_world.user_ns["each"]
    assert error is None and [g.ranks for g in each.groups] == [[0], [1], [2], [3]]
    pulled = run(values_world, "%mpirun --pull noise -o noises") or values_world.user_ns["noises"]
    for group in each.groups[1:]:
        diff, = group.diffs
        expected = (pulled[group.ranks[0]] - pulled[0]).abs()
        assert diff.max_diff == pytest.approx(float(expected.max()), rel=1e-6)
        assert expected[diff.at] == expected.max()
        assert group.relayed == 500 * 300 * 4        # every byte differs: all of it, within the budget
    assert out.splitlines()[0].startswith("rank 0: torch.Tensor [500, 300] float32 cpu")


def test_the_ranks_let_the_compared_value_go_at_the_next_cell(values_world, capsys):
    compare(values_world, capsys, "[torch.ones(3)]")
    cell = "%%mpirun -o kept\nimport mlp_magic.values.rank.compare as v\nprint(len(v._kept))"
    assert run(values_world, cell) is None
    assert {r.stdout for r in values_world.user_ns["kept"]} == {"0\n"}


def test_a_name_missing_on_some_ranks_is_a_grouped_error_and_the_others_are_compared(values_world, capsys):
    error, out = compare(values_world, capsys, "only_some")
    assert error is None
    assert out.strip().splitlines() == [
        "ranks 0,2-3 (3 of 4) equal: torch.Tensor [2] float32 cpu, 8 B, finite, checksum "
        + out.split("checksum ")[1].split()[0],
        "rank 1 (1 of 4): NameError: name 'only_some' is not defined"]


def test_a_syntax_error_is_one_line_and_nothing_runs(values_world, capsys):
    sent = values_world.call(_history_length)
    error, _ = compare(values_world, capsys, "model.state_dict(")
    assert "%mpirun --compare: '(' was never closed in 'model.state_dict('" in str(error)
    assert "nothing was run" in str(error)
    assert values_world.call(_history_length) == sent


def test_an_expression_that_hangs_times_out_and_the_world_stays_usable(values_world, capsys):
    error, _ = compare(values_world, capsys, "__import__('time').sleep(60) --timeout 1")
    assert "timed out after 1 s: ranks 0-3 did not answer; they were interrupted" in str(error)
    assert run(values_world, "%%mpirun -o after\nprint(rank)") is None
    assert [r.stdout for r in values_world.user_ns["after"]] == ["0\n", "1\n", "2\n", "3\n"]


def test_pull_brings_every_ranks_value_as_a_dict(values_world):
    assert run(values_world, "pulled = %mpirun --pull vec") is None
    pulled = values_world.user_ns["pulled"]
    assert sorted(pulled) == [0, 1, 2, 3]
    assert np.array_equal(pulled[1], np.arange(10.0) * 2) and np.array_equal(pulled[0], np.arange(10.0))
    assert run(values_world, "%mpirun --pull model --ranks 2 -o models") is None
    models = values_world.user_ns["models"]
    assert list(models) == [2] and isinstance(models[2], torch.nn.Sequential)
    assert models[2][5].weight[17, 3] != 0


def test_pull_refuses_what_is_over_the_cap_or_cannot_be_pickled(values_world, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_PULL_CAP", "10M")
    error = run(values_world, "%mpirun --pull big")
    assert str(error) == ("%mpirun --pull big: nothing pulled: ranks 0-3: big is 22.9 MiB, over the pull cap "
                          "of 10.0 MiB per rank (MLP_MAGIC_PULL_CAP)")
    error = run(values_world, "%mpirun --pull gen")
    assert str(error) == ("%mpirun --pull gen: nothing pulled: ranks 0-3: gen is a generator that cannot be "
                          "pickled: TypeError: cannot pickle 'generator' object")
    error = run(values_world, "%mpirun --pull only_some")
    assert "nothing pulled: rank 1: NameError: name 'only_some' is not defined" in str(error)
    # each rank's object lives at its own address: one clause for all of them, not one per rank
    assert run(values_world, "%%mpirun\nclass Handle:\n    def __reduce__(self):\n"
                             "        raise TypeError(f'cannot send {self!r}')\nhandle = Handle()") is None
    error = str(run(values_world, "%mpirun --pull handle"))
    assert error.startswith("%mpirun --pull handle: nothing pulled: ranks 0-3: ") and "; rank" not in error
    assert "0x..." in error, error


def test_pull_refuses_a_total_beyond_the_kernels_memory_before_anything_moves(values_world):
    values_world.call(_limit_memory)
    try:
        error = run(values_world, "%mpirun --pull big")   # 4 x 22.9 MiB, each under the 64 MiB cap
        assert str(error) == ("%mpirun --pull big: nothing pulled: 4 ranks hold 91.6 MiB of it in all, "
                              "over half of this machine's available memory (47.7 MiB): pull fewer ranks "
                              "(--ranks) or a part of the value")
        assert "pulled_big" not in values_world.user_ns
        # two ranks' 45.8 MiB fit
        assert run(values_world, "pulled_big = %mpirun --pull big --ranks 0,1") is None
    finally:
        asked = values_world.call(_memory_restored)
    assert asked
    assert sorted(values_world.user_ns["pulled_big"]) == [0, 1]


def test_push_sends_the_notebooks_value_to_the_ranks(values_world, capsys):
    values_world.user_ns["settings"] = {"lr": 3e-4, "layers": [1, 2]}
    assert run(values_world, "%mpirun --push settings --ranks 1,3") is None
    assert "pushed settings (dict, " in capsys.readouterr().out
    assert run(values_world, "%%mpirun -o seen\nprint(globals().get('settings'))") is None
    seen = [r.stdout.strip() for r in values_world.user_ns["seen"]]
    assert seen == ["None", "{'lr': 0.0003, 'layers': [1, 2]}", "None", "{'lr': 0.0003, 'layers': [1, 2]}"]
    assert run(values_world, "not_sendable = (i for i in range(2))") is None   # a generator: not by pickle
    error = run(values_world, "%mpirun --push not_sendable")
    # the type, its size and why (issue 49's wording)
    assert re.fullmatch(r"%mpirun --push not_sendable: a generator of \d+ B \(its own size\) cannot be "
                        r"pickled: TypeError: cannot pickle 'generator' object", str(error)), error
    error = run(values_world, "%mpirun --push never_defined")
    assert str(error) == "%mpirun --push: name 'never_defined' is not defined in the notebook"


def test_a_pushed_function_runs_on_the_ranks_and_comes_back(values_world):
    assert run(values_world, "double = lambda v: 2 * v") is None   # a lambda: not by pickle
    assert run(values_world, "%mpirun --push double") is None
    assert run(values_world, "%%mpirun\nresult = double(rank)") is None
    assert run(values_world, "%mpirun --pull result -o results") is None
    assert values_world.user_ns["results"] == {0: 0, 1: 2, 2: 4, 3: 6}
    assert pickle.dumps(values_world.user_ns["results"])


def test_the_cell_form_is_refused(values_world):
    assert "--pull is a line form" in str(run(values_world, "%%mpirun --pull vec\npass"))
