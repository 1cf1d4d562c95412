"""The reader of fd 1/2 pipes: at a cell's end, everything already written must be delivered,
however slowly the route takes it, and nothing after it is waited for."""
import os
import threading
import time

from hypothesis import given, settings, strategies as st

from mlp_magic.engine.fd_watch import READ_BYTES, FdWatcher


def _watched_pipe(route):
    read_end, write_end = os.pipe()
    devnull = os.open(os.devnull, os.O_WRONLY)
    watcher = FdWatcher(read_end, devnull, route)
    watcher.thread.start()
    return watcher, write_end


def _write_in_background(fd, data):
    """A pipe holds 64 KiB: a bigger write blocks until the reader catches up."""
    writer = threading.Thread(target=os.write, args=(fd, data))
    writer.start()
    return writer


def test_drain_waits_for_the_chunk_being_routed_when_the_pipe_is_already_empty():
    """The race of the old drain: the reader had taken the last bytes out of the pipe (empty,
    so "done") but not yet passed them on; the cell ended without them."""
    got = []

    def slow(text):
        time.sleep(0.5)
        got.append(text)
    watcher, write_end = _watched_pipe(slow)
    os.write(write_end, b"end of the c-level flood\n")
    time.sleep(0.1)               # read: the pipe is empty, the text is in the slow route
    assert watcher.drain() is True
    assert "".join(got) == "end of the c-level flood\n"
    os.close(write_end)


def test_a_slow_route_gets_every_byte_of_a_flood_before_drain_returns():
    got = []

    def slow(text):
        time.sleep(0.01)
        got.append(text)
    watcher, write_end = _watched_pipe(slow)
    data = b"0123456789abcdefghijklmnopqrstuvwxyz\n" * 100_000 + b"end of the c-level flood\n"
    _write_in_background(write_end, data).join()
    assert watcher.drain() is True
    assert "".join(got).encode() == data
    os.close(write_end)


def test_drain_waits_only_for_what_was_written_before_it():
    got = []
    watcher, write_end = _watched_pipe(got.append)
    os.write(write_end, b"before\n")
    assert watcher.drain() is True
    assert "".join(got) == "before\n"
    os.close(write_end)


def test_a_stuck_route_makes_drain_give_up_not_hang(monkeypatch):
    monkeypatch.setattr("mlp_magic.engine.fd_watch.STALL_SECONDS", 0.3)
    release = threading.Event()
    watcher, write_end = _watched_pipe(lambda text: release.wait(10))
    os.write(write_end, b"a" * 10)
    time.sleep(0.1)               # the reader holds the first chunk in its stuck route
    os.write(write_end, b"b" * 10)
    started = time.monotonic()
    assert watcher.drain() is False
    assert time.monotonic() - started < 2
    release.set()
    os.close(write_end)


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=300), st.integers(min_value=0, max_value=3))
def test_multibyte_characters_split_across_reads_survive(text, pad):
    """A read ends wherever the pipe does; a character cut in two must not become two U+FFFD."""
    got = []
    watcher, write_end = _watched_pipe(got.append)
    data = b"a" * (READ_BYTES - pad) + text.encode("utf-8", errors="surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # lone surrogates are not UTF-8: nothing a program could print
    writer = _write_in_background(write_end, data)
    writer.join()
    assert watcher.drain() is True
    assert "".join(got) == data.decode("utf-8")
    os.close(write_end)
