"""Folded output on real ranks (issue 13): 16 ranks printing losses, one of them nan, fold to a few
lines that name the nan rank, live and in the summary; --no-fold gives the exact groups back.

In a notebook the live lines are one display area, redrawn at most every 0.25 s and replaced by the
summary at the end: what it holds when the cell ends is read in the kernel (``live_area``), each
state a frontend was sent is read from the cell's messages (``live_states``)."""
from __future__ import annotations

from contextlib import contextmanager

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


_LIVE: list = []   # in the kernel: what each cell's live area held when the summary replaced it


def _watch_live() -> None:
    """In the kernel: keep what the live area holds (its lines, as it draws them) at the end."""
    from mlp_magic.output import display

    original = display.StreamingOutput.finish

    def finish(self, bundle):
        _LIVE.append(self.folded.view(self.lines.maxlen) if self.folded is not None else list(self.lines))
        original(self, bundle)
    finish.original = original
    display.StreamingOutput.finish = finish


def _live_held() -> list:
    from mlp_magic.output import display

    finish = display.StreamingOutput.finish
    display.StreamingOutput.finish = getattr(finish, "original", finish)
    held = list(_LIVE)
    _LIVE.clear()
    return held


@contextmanager
def live_area(ip):
    """The lines each cell's live area held when it ended (filled when the block ends)."""
    held: list = []
    ip.call(_watch_live)
    try:
        yield held
    finally:
        held.extend(ip.call(_live_held))


def live_states(cell_run) -> list:
    """Each state of the live area a frontend was sent (its lines), before the summary replaced it."""
    shown = [m["content"] for m in cell_run.messages
             if m["msg_type"] in ("display_data", "update_display_data")]
    summary_id = next(c["transient"]["display_id"] for c in reversed(shown)
                      if c["data"].get("text/plain", "").startswith("----------------"))
    states = [c["data"]["text/plain"].splitlines() for c in shown
              if (c.get("transient") or {}).get("display_id") == summary_id]
    return states[:-1]


def test_16_ranks_printing_losses_fold_to_a_few_lines_naming_the_nan_rank(ip, capsys):
    with live_area(ip) as held:
        cell_run = ip.run_cell(LOSSES.format(options=""))
    assert cell_run.error_in_exec is None
    _, summary = split_output(capsys.readouterr().out)
    assert summary[:4] == [
        "---------------- ranks 0-15 (16) on localhost ----------------",
        "[rank 0] === training on 16 ranks ===",
        "step 10 loss {0.5000..0.5150 ~0.5070} rank {rank}",
        "  ! rank 11: loss nan",
    ]
    assert summary[4].startswith("16 ranks | ") and len(summary) == 5   # then the footer
    live, = held
    assert all(line.startswith("[") for line in live)
    assert "[0] === training on 16 ranks ===" in live and len(live) <= 4   # one line per template
    for state in live_states(cell_run):   # as it was drawn, on the way
        assert all(line.startswith("[") for line in state) and len(state) <= 4, state
    losses = ip.user_ns["losses"]
    assert losses[11].stdout == "step 10 loss nan rank 11\n"            # the exact output is kept
    assert losses[0].stdout == "=== training on 16 ranks ===\nstep 10 loss 0.5000 rank 0\n"
    assert "  ! rank 11: loss nan" in losses.text


def test_no_fold_gives_the_exact_groups(ip, capsys):
    try:
        with live_area(ip) as held:
            cell_run = ip.run_cell(LOSSES.format(options="--no-fold"))
        assert cell_run.error_in_exec is None
        _, summary = split_output(capsys.readouterr().out)
        headers = [line for line in summary if line.startswith("----------------")]
        assert len(headers) == 16 and headers[11] == "---------------- rank 11 on localhost ----------------"
        assert "step 10 loss nan rank 11" in summary and not any("{" in line for line in summary)
        live, = held
        assert len([line for line in live if line.startswith("[")]) == 17   # every line, live
        assert "[11] step 10 loss nan rank 11" in live and not any("×" in line for line in live)
        for state in live_states(cell_run):   # as it was drawn, on the way: lines of those
            assert set(state) <= set(live), state
    finally:
        assert run(ip, "%%mpirun -np 4\npass") is None   # the next tests get 4 ranks again
