"""world/live: the World's live record is written by its publisher thread, and at once when a cell
ends (a reader right after the cell sees it over)."""
import threading
import time

from mlp_magic.world.live import LiveWorld, first_line


class Recorder:
    """The World's publish: keeps each record written, from whichever thread."""

    def __init__(self):
        self.live = None
        self.written: list = []
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.written.append(self.live.record())


def live_world(hosts=("h0", "h0")):
    recorder = Recorder()
    recorder.live = LiveWorld(list(hosts), recorder)
    return recorder.live, recorder


def test_the_cells_end_is_written_before_cell_ended_returns():
    live, written = live_world()
    try:
        live.ready()
        live.cell_started("%%mpirun\nx = 1", [0, 1], "/logs/c1")
        live.sent([0, 1])
        live.ended(0)
        live.ended(1)
        live.cell_ended("/logs/c1")
        last = written.written[-1]
        assert last["cell"] is None and last["log_dir"] == "/logs/c1"
        assert [r["state"] for r in last["ranks"]] == ["idle", "idle"]
    finally:
        live.close()


def test_a_later_cells_record_is_left_alone_and_nothing_unchanged_is_written_twice():
    live, written = live_world()
    try:
        live.ready()
        live.cell_started("y = 2", [0, 1], "/logs/c2")
        live.cell_ended("/logs/c1")          # an older cell's end: the running one stays
        live.flush()
        assert written.written[-1]["cell"]["first_line"] == "y = 2"
        count = len(written.written)
        live.flush()
        time.sleep(0.3)
        assert len(written.written) == count
    finally:
        live.close()


def test_a_change_reaches_the_publisher_within_its_interval():
    live, written = live_world(["h0"])
    try:
        live.ready()
        live.sent([0])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if written.written and written.written[-1]["ranks"][0]["state"] == "busy":
                break
            time.sleep(0.01)
        assert written.written[-1]["ranks"][0]["state"] == "busy"
    finally:
        live.close()


def test_a_failing_publish_never_reaches_the_cell():
    def broken():
        raise OSError("disk full")

    live = LiveWorld(["h0"], broken)
    try:
        live.cell_started("z = 3", [0], "/logs/c3")
        live.cell_ended("/logs/c3")
    finally:
        live.close()


def test_first_line_skips_magics_comments_and_blanks_and_shortens():
    assert first_line("%%mpirun -np 4\n\n# setup\nimport torch\n") == "import torch"
    assert first_line("# only a comment") == ""
    long = first_line("x = '" + "a" * 200 + "'")
    assert len(long) == 120 and long.endswith("…")


def test_a_profiled_cells_report_is_written_at_once_and_stays_for_the_next_cells():
    live, written = live_world()
    try:
        live.ready()
        assert live.record()["profile"] is None
        lines = ["profile of ranks 0-1 at 100 Hz over 1.0 s:", "rank 1 entered last"]
        live.profiled(lines, 1, "/logs/c3/profile")
        profile = written.written[-1]["profile"]
        assert profile["lines"][1] == "rank 1 entered last" and profile["straggler"] == 1
        assert profile["folder"] == "/logs/c3/profile" and profile["at"]
        live.cell_started("z = 3", [0, 1], "/logs/c4")
        live.cell_ended("/logs/c4")
        assert written.written[-1]["profile"] == profile   # the last profile, whatever ran after it
    finally:
        live.close()
