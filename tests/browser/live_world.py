"""Helpers of the live panel's browser tests: a real World run by a real kernel (as JupyterLab
starts one), the panel's page, and a hand-written World of any size."""
from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
PANEL = "#mlp-magic-cluster"
PANEL_TAB = '.jp-SideBar .lm-TabBar-tab[data-id="mlp-magic-cluster"]'
UI_TIMEOUT_MS = 60_000


class Kernel:
    """A notebook's kernel as JupyterLab starts it (a real ipykernel, tests/kernel.py), fed cells in
    order by a thread of its own: ``run`` sends one, ``next`` says when each ended, as
    ``{"ended": True, "error": None | "<exception type>", "ranks": {rank: "<status>: <last line>"}}``
    (``ranks``: a failed cell's ranks, so a test tells an interrupted cell from one that broke).
    close() leaves none of its processes behind, even when a cell still hangs."""

    def __init__(self, state_dir: Path):
        from tests.kernel import Kernel as RealKernel

        self.kernel = RealKernel(env={"MLP_MAGIC_STATE_DIR": str(state_dir)}, echo=False)
        self.process = self.kernel.manager.provisioner.process   # a Popen
        self.said: queue.Queue = queue.Queue()
        self._cells: queue.Queue = queue.Queue()
        self._sent = self._ended = 0
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        from tests.kernel import failed_ranks

        while (cell := self._cells.get()) is not None:
            try:
                run = self.kernel.run_cell(cell, timeout=900)
                error = run.error_in_exec
                said = {"ended": True, "error": None if error is None else error.ename}
                if error is not None:
                    said["ranks"] = self.kernel.call(failed_ranks)
            except Exception as why:   # the kernel died: said, never a hang of the test
                said = {"ended": True, "error": f"no kernel: {why}"[:200]}
            self._ended += 1
            self.said.put(said)

    def run(self, cell: str) -> float:
        """Send a cell; the monotonic time it was sent (latencies are measured from it)."""
        self._sent += 1
        sent = time.monotonic()
        self._cells.put(cell)
        return sent

    def next(self, seconds: float) -> dict:
        return self.said.get(timeout=seconds)

    def close(self) -> None:
        """The stop button for a cell still running, then the kernel shut down as Jupyter does
        (its World stops with it). Whatever of it is left after that is killed by its PID."""
        descendants = self.process_tree()
        if self.process.poll() is None:
            if self._sent > self._ended:
                self.kernel.interrupt()
                _until(lambda: self._sent <= self._ended, 20)
            self._cells.put(None)
            try:
                self.kernel.shutdown()
                self.process.wait(30)
            except Exception:
                self.process.kill()
                self.process.wait(10)
        else:
            self._cells.put(None)
            self.kernel.client.stop_channels()
        _, alive = psutil.wait_procs(descendants, timeout=10)
        for process in alive:
            try:
                process.kill()   # psutil checks the start time: never a recycled PID
            except psutil.NoSuchProcess:
                pass

    def process_tree(self) -> list:
        """The kernel's processes: its World's controller, launcher, engines, agents."""
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []


def _until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Panel:
    """The panel in a page of its own: its ranks' and its connection's states."""

    def __init__(self, browser, lab, init_script: str | None = None, open_tab: bool = True):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        if init_script:
            self.page.add_init_script(init_script)   # before any script of the page
        self.page.goto(f"{lab.url}lab?token={lab.token}")
        self.page.locator(PANEL_TAB).wait_for(timeout=UI_TIMEOUT_MS)
        if open_tab:
            self.open()

    def open(self) -> None:
        self.page.locator(PANEL_TAB).click(timeout=UI_TIMEOUT_MS)
        self.connection_is("live", UI_TIMEOUT_MS)

    def locator(self, selector: str):
        return self.page.locator(f"{PANEL} {selector}")

    def connection_is(self, state: str, timeout_ms: float) -> None:
        self.locator(f".jp-MlpLive-connection[data-state={state}]").wait_for(timeout=timeout_ms)

    def states(self) -> dict:
        """{rank: data-state} of the rank rows in the DOM (those in view, the list is virtual)."""
        rows = self.page.eval_on_selector_all(f"{PANEL} .jp-MlpLive-rank[data-rank]",
                                              "rows => rows.map(r => [r.dataset.rank, r.dataset.state])")
        return {int(rank): state for rank, state in rows}

    def wait_for_states(self, wanted: dict, seconds: float, since: float | None = None) -> float | None:
        """Seconds from ``since`` (monotonic; default now) until every rank in ``wanted`` shows
        its state, or None when that took over ``seconds``."""
        started = time.monotonic() if since is None else since
        while time.monotonic() - started < seconds:
            states = self.states()
            if all(states.get(rank) == state for rank, state in wanted.items()):
                return time.monotonic() - started
            self.page.wait_for_timeout(10)
        return None


def big_world(state_dir: Path, hosts: int, per_host: int) -> Path:
    """A World record of hosts x per_host ranks, all idle, its kernel this process (so alive)."""
    names = [f"127.0.1.{h + 1}" for h in range(hosts)]
    now = "2026-11-25T10:00:00.000+00:00"
    ranks = [{"rank": h * per_host + g, "host": host, "state": "idle", "since": now,
              "last_output": None, "engine_id": h * per_host + g}
             for h, host in enumerate(names) for g in range(per_host)]
    record = {"id": "big-1-1", "pid": os.getpid(), "host": socket.gethostname(), "state": "running",
              "np": len(ranks), "mpi": "openmpi", "started_at": now, "updated_at": now,
              "ranks": ranks, "cell": None}
    path = state_dir / "big-1-1.json"
    rewrite(path, record)
    return path


def rewrite(path: Path, record: dict) -> None:
    """As the kernel publishes: a whole new file, renamed into place (a reader never sees half)."""
    part = path.parent / f".tmp-{path.name}"   # a dot first: readers skip it
    part.write_text(json.dumps(record))
    os.replace(part, path)


# Tasks over 50 ms (the Long Tasks API reports only those), and the longest gap between two
# animation frames (a frame is 16.7 ms; a longer gap is a task that held the main thread).
LONGTASKS = """
window.__mlpLongTasks = [];
window.__mlpFrameGap = 0;
new PerformanceObserver(list => {
  for (const entry of list.getEntries()) window.__mlpLongTasks.push(Math.round(entry.duration));
}).observe({ type: 'longtask', buffered: true });
let lastFrame = null;
const frame = now => {
  if (lastFrame !== null) window.__mlpFrameGap = Math.max(window.__mlpFrameGap, now - lastFrame);
  lastFrame = now;
  requestAnimationFrame(frame);
};
requestAnimationFrame(frame);
"""
RESET = "window.__mlpLongTasks = []; window.__mlpFrameGap = 0"
# From now (the panel's tab is clicked next) to the frame that has every rank's cell: first paint.
FIRST_PAINT = """() => {
  window.__mlpFirstPaint = null;
  const started = performance.now();
  const check = () => {
    if (document.querySelectorAll('#mlp-magic-cluster .jp-MlpLive-gridCell').length >= 512) {
      window.__mlpFirstPaint = Math.round(performance.now() - started);
    } else if (performance.now() - started < 30000) {
      requestAnimationFrame(check);
    }
  };
  requestAnimationFrame(check);
}"""
MEASURED = "[window.__mlpLongTasks, Math.round(window.__mlpFrameGap)]"


def busy_until(rank: int, flag: Path, bound_s: float) -> str:
    """A cell in which ``rank`` stays busy until ``flag`` exists (the test saw it busy: it then
    touches the flag) or ``bound_s`` passed, the others idle: no fixed sleep to wait out."""
    return (f"%%mpirun\nimport os, time\nuntil = time.monotonic() + {bound_s}\n"
            f"while rank == {rank} and not os.path.exists({str(flag)!r}) and time.monotonic() < until:\n"
            "    time.sleep(0.05)")


def flipping_windows(page, record_path, record: dict, windows: int = 3) -> list:
    """The ranks' states flipped 20 times in 5 s (a third of them each time), measured from a
    reset, in up to ``windows`` windows: [([tasks over 50 ms], longest gap between frames, the
    last flip's states)], stopping at the first window without a long task. Best of three: on
    these 2 cores, beside 64 agents, a JupyterLab and Chromium's other processes, a task is now
    and then descheduled past 50 ms (one of 67 ms in a CI run), while a render that is slow is
    slow in every window."""
    seen = []
    for window in range(windows):
        page.evaluate(RESET)
        for step in range(20 * window, 20 * window + 20):   # every 0.25 s, as a World can
            wanted = flip(record, step)
            rewrite(record_path, record)
            page.wait_for_timeout(250)
        page.wait_for_timeout(1000)
        over_50_ms, gap = page.evaluate(MEASURED)
        seen.append((over_50_ms, gap, wanted))
        if not over_50_ms:
            break
    return seen


def flip(record: dict, step: int) -> dict:
    """A third of the ranks busy, a different third each step."""
    since = f"2026-11-25T10:00:{step:02d}.000+00:00"
    for row in record["ranks"]:
        row["state"], row["since"] = ("idle" if (row["rank"] + step) % 3 else "busy"), since
    return {str(row["rank"]): row["state"] for row in record["ranks"]}
