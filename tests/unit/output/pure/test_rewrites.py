"""Reading a rank's stream as ipyparallel's client keeps it, a line rewritten with \\r and all
(output/pure/rewrites): what a reader is told, put on a terminal, is what the client's text shows."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.output.pure.rewrites import Seen, new_text

# ipyparallel's client rewrites its stream text so when a chunk holds "\r" (client.py, _cr_pat)
CLIENT_REWRITE = re.compile(r".*\r(?=[^\n])")


def on_terminal(text: str) -> str:
    return CLIENT_REWRITE.sub("", text)


chunks = st.lists(st.text(st.sampled_from("ab1\r\n "), max_size=8), max_size=30)


@given(chunks, st.lists(st.booleans(), max_size=30))
def test_what_a_reader_is_told_shows_what_the_client_keeps_read_as_often_as_it_likes(pieces, reads):
    kept, seen, told = "", Seen(), ""
    for piece, read in zip(pieces, reads + [True] * len(pieces)):
        kept += piece
        if "\r" in piece:
            kept = on_terminal(kept)
        if read:
            new, seen = new_text(kept, seen)
            told += new
    new, seen = new_text(kept, seen)
    told += new
    assert on_terminal(told) == on_terminal(kept)


def test_a_bar_rewritten_is_told_as_a_carriage_return_and_its_new_state():
    seen = Seen()
    new, seen = new_text("start\nepoch 0: 1/9", seen)
    assert new == "start\nepoch 0: 1/9"
    new, seen = new_text("start\nepoch 0: 2/9", seen)   # the client kept only the rewrite
    assert new == "\repoch 0: 2/9"
    new, seen = new_text("start\nepoch 0: 2/9 done\nnext", seen)
    assert (new, seen) == (" done\nnext", Seen(len("start\nepoch 0: 2/9 done\n"), 2, "next"))
