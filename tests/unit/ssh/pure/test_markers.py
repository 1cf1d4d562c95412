"""ssh/pure/markers: the wrapper's start and end markers found in output cut into any chunks."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.ssh.pure.markers import cut_end_marker, started_pid

END = b"__mlp_allrun_ended_0123456789abcdef3_"
START = b"__mlp_allrun_started_0123456789abcdef3_"
# Output a command may print: bytes, with pieces of the marker's alphabet to make near misses likely.
OUTPUT = st.lists(st.one_of(st.binary(max_size=30), st.sampled_from([b"\n", b"__", END[:10], END[:-1], END])),
                  max_size=12).map(b"".join)


def read(chunks: list[bytes]) -> tuple[bytes, int | None]:
    """Feed ``chunks`` as streams.Stream does: what it keeps, and the status once found."""
    kept, held, status = b"", b"", None
    for chunk in chunks:
        if status is None:
            chunk, held, status = cut_end_marker(held + chunk, END)
        kept += chunk
    return kept + held, status


def cut(data: bytes, at: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(a % (len(data) + 1) for a in at)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@given(OUTPUT, OUTPUT, st.integers(0, 255), st.lists(st.integers(0, 10_000), max_size=8))
def test_the_end_marker_is_found_and_taken_out_however_the_output_is_cut(before, after, status, at):
    while END in before:
        before = before.replace(END, b"")   # the command cannot print the token it never saw
    line = END + str(status).encode() + b"__\n"
    kept, found = read(cut(before + line + after, at))
    assert (kept, found) == (before + after, status)


@given(OUTPUT, st.lists(st.integers(0, 10_000), max_size=8))
def test_output_without_the_end_marker_is_kept_whole(output, at):
    while END in output:
        output = output.replace(END, b"")
    assert read(cut(output, at)) == (output, None)


def test_a_near_miss_stays_output_and_holding_back_is_bounded():
    assert cut_end_marker(END + b"12x__\n" + END + b"3__\n", END) == (END + b"12x__\n", b"", 3)
    flood = END + b"9" * 10_000   # no newline: not the marker, and not held whole
    assert cut_end_marker(flood, END) == (flood, b"", None)
    assert cut_end_marker(b"out" + END[:5], END) == (b"out", END[:5], None)


def test_the_start_marker_names_the_pid():
    assert started_pid(START + b"4242__", START) == 4242
    assert started_pid(START + b"42x__", START) is None
    assert started_pid(b"echo " + START + b"1__", START) is None
