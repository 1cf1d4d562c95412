"""Folded output on real ranks (issue 13): 16 ranks printing losses, one of them nan, fold to a few
lines that name the nan rank, live and in the summary; --no-fold gives the exact groups back."""
from __future__ import annotations

import pytest

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(300)

LOSSES = """%%mpirun -np 16 --oversubscribe -o losses {options}
loss = float('nan') if rank == 11 else 0.5 + rank / 1000
if rank == 0:
    print('=== training on', world_size, 'ranks ===')
print(f'step 10 loss {{loss:.4f}} rank {{rank}}')
"""


def split_output(out: str) -> tuple[list, list]:
    """(live lines, summary lines): the summary starts at the first group header."""
    start = out.index("----------------")
    return out[:start].splitlines(), out[start:].splitlines()


def test_16_ranks_printing_losses_fold_to_a_few_lines_naming_the_nan_rank(ip, capsys):
    assert run(ip, LOSSES.format(options="")) is None
    live, summary = split_output(capsys.readouterr().out)
    assert summary[:4] == [
        "---------------- ranks 0-15 (16) on localhost ----------------",
        "[rank 0] === training on 16 ranks ===",
        "step 10 loss {0.5000..0.5150 ~0.5070} rank {rank}",
        "  ! rank 11: loss nan",
    ]
    assert summary[4].startswith("16 ranks | ") and len(summary) == 5   # then the footer
    live = [line for line in live if line.startswith("[")]
    assert "[0] === training on 16 ranks ===" in live and len(live) <= 4   # one line per template
    losses = ip.user_ns["losses"]
    assert losses[11].stdout == "step 10 loss nan rank 11\n"            # the exact output is kept
    assert losses[0].stdout == "=== training on 16 ranks ===\nstep 10 loss 0.5000 rank 0\n"
    assert "  ! rank 11: loss nan" in losses.text


def test_no_fold_gives_the_exact_groups(ip, capsys):
    try:
        assert run(ip, LOSSES.format(options="--no-fold")) is None
        live, summary = split_output(capsys.readouterr().out)
        headers = [line for line in summary if line.startswith("----------------")]
        assert len(headers) == 16 and headers[11] == "---------------- rank 11 on localhost ----------------"
        assert "step 10 loss nan rank 11" in summary and not any("{" in line for line in summary)
        assert len([line for line in live if line.startswith("[")]) == 17   # every line, live
    finally:
        assert run(ip, "%%mpirun -np 4\npass") is None   # the next tests get 4 ranks again
