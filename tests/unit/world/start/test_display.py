"""The progress of a starting World outside a notebook: a line in place, or a line now and then."""
from __future__ import annotations

import io

from mlp_magic.world.start import display as start_display
from mlp_magic.world.start.display import StartProgress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _clock(monkeypatch, times):
    ticks = iter(times)
    monkeypatch.setattr(start_display.time, "monotonic", lambda: next(ticks))


def test_a_terminal_gets_one_line_rewritten_in_place_and_cleared_at_the_end(monkeypatch):
    _clock(monkeypatch, [0.0, 0.5, 1.2, 1.3, 1.9])
    out = Terminal()
    progress = StartProgress(notebook=False, stream=out)
    progress("starting 8 ranks: 0 registered 0 s", 0, 8)       # 0.5 s: too early to show
    progress("starting 8 ranks: 3 registered 1 s", 3, 8)       # 1.2 s: shown
    progress("starting 8 ranks: 4 registered 1 s", 4, 8)       # 1.3 s: within 0.5 s of the last
    progress("starting 8 ranks: 8 registered 2 s", 8, 8)       # 1.9 s: shown
    assert out.getvalue() == "\rstarting 8 ranks: 3 registered 1 s\rstarting 8 ranks: 8 registered 2 s"
    progress.close()
    assert out.getvalue().endswith("\r" + " " * 34 + "\r")


def test_captured_output_gets_a_line_every_ten_seconds(monkeypatch):
    _clock(monkeypatch, [0.0, 2.0, 5.0, 12.5, 30.0])
    out = io.StringIO()
    progress = StartProgress(notebook=False, stream=out)
    for n in range(4):
        progress(f"line {n}", n, 8)
    assert out.getvalue() == "line 0\nline 2\nline 3\n"
    progress.close()
    assert out.getvalue() == "line 0\nline 2\nline 3\n"


def test_the_display_says_when_it_is_next_due_so_the_start_wakes_only_then(monkeypatch):
    import pytest

    _clock(monkeypatch, [10.0, 10.0, 11.25])
    terminal = StartProgress(notebook=False, stream=Terminal())
    log = StartProgress(notebook=False, stream=io.StringIO())
    assert terminal.wake_at() == 11.0 and log.wake_at() == 11.0   # nothing shown before a second
    terminal("starting 8 ranks: 3 registered 1 s", 3, 8)          # shown at 11.25
    assert terminal.wake_at() == pytest.approx(11.75)            # then every half second
