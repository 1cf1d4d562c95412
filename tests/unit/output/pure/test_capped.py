"""The note at a capped stream's end: written by the rank, read back by -o NAME."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.output.pure.capped import CappedStream, cap_note, capped_stream

HOSTS = st.text(st.characters(blacklist_characters=":\n", blacklist_categories=("Cs",)), min_size=1,
                max_size=20)
PATHS = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), min_size=1,
                max_size=60)


@given(shown=st.text(max_size=200), left_out=st.integers(1, 10**12), host=HOSTS, path=PATHS)
def test_a_note_reads_back_as_what_it_says(shown, left_out, host, path):
    expected = CappedStream(shown, left_out, host, path)
    assert capped_stream(shown + cap_note(left_out, host, path, "")) == expected


@given(text=st.text(max_size=300))
def test_a_stream_without_a_note_is_not_capped(text):
    found = capped_stream(text)
    assert found is None or text.endswith(f"; full text in {found.host}:{found.path}]\n")


def test_the_note_says_what_the_notebook_did_not_get_and_where_it_is():
    assert cap_note(1234567, "w1", "/logs/c/rank3.stdout", "") == \
        "\n[mlp_magic: 1,234,567 more characters not shown; full text in w1:/logs/c/rank3.stdout]\n"
    assert capped_stream("abc\n[mlp_magic: 12 more characters not shown; full text in w1:/a:b/r]\n") == \
        CappedStream("abc", 12, "w1", "/a:b/r")


def test_nothing_to_fetch_where_the_log_could_not_be_written():
    unlogged = cap_note(5, "w1", "/x", "/x: Permission denied")
    assert unlogged == "\n[mlp_magic: 5 more characters not shown; and the log could not be written " \
                       "(/x: Permission denied)]\n"
    assert capped_stream("abc" + unlogged) is None
    assert cap_note(0, "w1", "/x", "/x: No space left on device") == \
        "\n[mlp_magic: this rank's output was not logged (/x: No space left on device)]\n"
    assert cap_note(0, "w1", "/x", "") == ""


def test_a_note_inside_the_text_is_not_the_ranks_note():
    note = cap_note(3, "w1", "/x", "")
    assert capped_stream(note + "the rank printed more after it\n") is None
