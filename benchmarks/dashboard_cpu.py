"""What `mlp-magic dashboard` costs with one page open at 64 hosts x 8 ranks; one command:
``python benchmarks/dashboard_cpu.py [--seconds S] [--changes]``.

The standalone server (`mlp-magic dashboard`, as a user starts it) watches a World record of 512
ranks on 64 hosts (a hostfile of 64 loopback addresses, whose ssh ports refuse at once) while one
headless Chromium page shows it live. Its CPU (psutil: user + system, children included, % of
one core) over ``--seconds`` once the page shows the 512 ranks; ``--changes``: a third of the
ranks change state every second meanwhile (the steady case is the default). The peer, in the
same run and the same window: an idle plain ``jupyter server`` (its default extensions, ours
off), which is what a user without the dashboard would leave running. Goal: under 2 % of a core.
Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from panel_load import cpu_seconds, wait_until_serving  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
HOSTS, PER_HOST = 64, 8
START_TIMEOUT = 60.0


def world_record(state_dir: Path) -> tuple:
    """A published World of HOSTS x PER_HOST idle ranks, its kernel this (live) process."""
    now = "2026-11-25T10:00:00.000+00:00"
    ranks = [{"rank": h * PER_HOST + g, "host": f"127.0.1.{h + 1}", "state": "idle", "since": now,
              "last_output": None, "engine_id": h * PER_HOST + g}
             for h in range(HOSTS) for g in range(PER_HOST)]
    record = {"id": "bench-1-1", "pid": os.getpid(), "host": socket.gethostname(), "state": "running",
              "np": len(ranks), "mpi": "openmpi", "started_at": now, "updated_at": now, "ranks": ranks,
              "cell": None}
    path = state_dir / "bench-1-1.json"
    rewrite(path, record)
    return path, record


def rewrite(path: Path, record: dict) -> None:
    part = path.parent / f".tmp-{path.name}"
    part.write_text(json.dumps(record))
    os.replace(part, path)


def start_dashboard(home: Path, env: dict) -> tuple:
    process = subprocess.Popen([sys.executable, "-m", "mlp_magic.cli", "dashboard"], env=env,
                               stdout=subprocess.PIPE, stderr=open(home / "dashboard.log", "wb"), text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    return process, lines.get(timeout=START_TIMEOUT).strip()


def start_peer(home: Path, env: dict) -> subprocess.Popen:
    """A plain `jupyter server`, mlp_magic's extension off, nothing connected."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(16)
    argv = [sys.executable, "-m", "jupyter_server", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
            "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
            "--ServerApp.jpserver_extensions=mlp_magic.panel=False", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={home}"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(home / "peer.log", "wb"))
    return wait_until_serving(process, port, token, home / "peer.log")


def measure(processes: dict, seconds: float, change=None) -> dict:
    """% of one core each process used over ``seconds`` (``change(step)`` once a second)."""
    handles = {name: psutil.Process(p.pid) for name, p in processes.items()}
    before = {name: cpu_seconds(h) for name, h in handles.items()}
    started = time.monotonic()
    for step in range(int(seconds)):
        if change is not None:
            change(step)
        time.sleep(max(0.0, started + step + 1 - time.monotonic()))
    elapsed = time.monotonic() - started
    return {name: round(100 * (cpu_seconds(h) - before[name]) / elapsed, 2) for name, h in handles.items()}


def open_page(playwright, url: str):
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url)
    page.wait_for_function("() => { const s = document.querySelector('.jp-MlpLive-summary'); "
                           f"return s && s.textContent.startsWith('{HOSTS * PER_HOST} ranks'); }}",
                           timeout=START_TIMEOUT * 1000)
    page.wait_for_timeout(3000)   # the start's own work (the first probes, the page's load) done
    return browser


def run(args) -> dict:
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="mlp-dashboard-cpu-"))
    (home / "worlds").mkdir()
    hostfile = home / "hostfile"
    hostfile.write_text("".join(f"127.0.1.{h + 1} slots={PER_HOST}\n" for h in range(HOSTS)))
    path, record = world_record(home / "worlds")
    env = dict(os.environ, MLP_MAGIC_STATE_DIR=str(home / "worlds"), MLP_MAGIC_HOSTFILE=str(hostfile),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"))

    def change(step: int) -> None:
        for row in record["ranks"]:
            row["state"] = "idle" if (row["rank"] + step) % 3 else "busy"
        rewrite(path, record)

    dashboard, url = start_dashboard(home, env)
    peer = start_peer(home, env)
    try:
        with sync_playwright() as playwright:
            browser = open_page(playwright, url)
            found = measure({"dashboard": dashboard, "peer": peer}, args.seconds,
                            change if args.changes else None)
            browser.close()
    finally:
        for process in (dashboard, peer):
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    return {"hosts": HOSTS, "ranks": HOSTS * PER_HOST, "seconds": args.seconds, "changes": args.changes,
            "dashboard_cpu_percent": found["dashboard"], "peer_cpu_percent": found["peer"],
            # an idle peer may measure 0.0 %: then no ratio, the difference says it
            "ratio": round(found["dashboard"] / found["peer"], 2) if found["peer"] else None,
            "over_peer_percent": round(found["dashboard"] - found["peer"], 2),
            "goal_percent": 2.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--changes", action="store_true", help="a third of the ranks change every second")
    result = run(parser.parse_args())
    print(f"mlp-magic dashboard, one page open, {result['ranks']} ranks on {result['hosts']} hosts"
          f"{' changing every second' if result['changes'] else ''}: {result['dashboard_cpu_percent']} % "
          f"of a core over {result['seconds']:g} s; idle plain jupyter server (peer): "
          f"{result['peer_cpu_percent']} %; ratio {result['ratio']}, "
          f"{result['over_peer_percent']} points over it "
          f"(goal: under {result['goal_percent']} %)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
