"""world/host_watch on loopback: a listening port answers, a closed one answers too (refused: the
host's kernel spoke), and a port whose accept queue is full does not (its SYNs are dropped, as a
host behind a downed link's are)."""
import socket
import threading

from mlp_magic.world.host_watch import HostWatch, probe


def listening(backlog: int = 8) -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(backlog)
    return server


def silent() -> tuple:
    """A port that drops new connections: its accept queue filled, nothing accepted."""
    server = listening(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    return server, fillers


def test_who_answers():
    up = listening()
    closed = listening()
    closed_port = closed.getsockname()[1]
    closed.close()
    quiet, fillers = silent()
    try:
        hosts = {"up": ("127.0.0.1", up.getsockname()[1]), "closed": ("127.0.0.1", closed_port),
                 "quiet": ("127.0.0.1", quiet.getsockname()[1])}
        assert probe(hosts, 1.0) == {"up", "closed"}
    finally:
        for sock in [up, quiet, *fillers]:
            sock.close()


def test_a_host_silent_past_the_limit_is_lost_and_wakes_the_wait():
    up = listening()
    quiet, fillers = silent()
    woken = threading.Event()
    watch = HostWatch({"up": ("127.0.0.1", up.getsockname()[1]),
                       "quiet": ("127.0.0.1", quiet.getsockname()[1])}, woken.set, lost_after=3.0)
    try:
        assert woken.wait(15), "the silent host was never given up on"
        assert list(watch.lost) == ["quiet"] and watch.lost["quiet"] >= 3.0
    finally:
        watch.stop()
        for sock in [up, quiet, *fillers]:
            sock.close()


def test_nothing_to_watch_starts_nothing():
    watch = HostWatch({}, lambda: None)
    assert not watch._thread.is_alive() and watch.lost == {}
