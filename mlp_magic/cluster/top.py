"""``mlp-magic top``: the live cluster in a terminal, like htop or nvitop for the World.

The same live model as the panel (cluster/live.LiveCluster: the Worlds' files watched, the GPUs'
samples from the hosts' agents), drawn by cluster/pure/top_screen on every change and once a second (the
ages tick). On a terminal it takes the whole screen (the alternate screen, restored on exit) and
``q`` or Ctrl-C quits; otherwise (a pipe, ``--once``) it prints frames one after another.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time

from mlp_magic import config
from mlp_magic.cluster.pure.top_screen import top_lines
from mlp_magic.cluster.collect import CollectOptions
from mlp_magic.cluster.gpu_feed import agent_targets, stdio_argv
from mlp_magic.cluster.live import LiveCluster
from mlp_magic.machine.deadline import run_to_end

ENTER, LEAVE = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"   # alternate screen, cursor hidden
HOME_CLEAR = "\x1b[H\x1b[2J"
TICK_S = 1.0
FIRST_READINGS_S = 3.0   # --once: how long the frame waits for every agent's first readings


class Screen:
    """Where frames go: the whole terminal, or plain lines for a pipe."""

    def __init__(self, stream, full: bool):
        self.stream, self.full = stream, full
        self._keys: list | None = None

    def __enter__(self) -> Screen:
        if self.full:
            import termios
            import tty

            self._keys = termios.tcgetattr(sys.stdin.fileno())
            tty.setcbreak(sys.stdin.fileno())
            self.stream.write(ENTER)
        return self

    def __exit__(self, *_exc) -> None:
        if self.full:
            import termios

            self.stream.write(LEAVE)
            self.stream.flush()
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._keys)

    def size(self) -> tuple:
        columns, lines = shutil.get_terminal_size((120, 40))
        return columns, lines if self.full else 0

    def draw(self, lines: list) -> None:
        text = "\n".join(lines)
        self.stream.write(HOME_CLEAR + text if self.full else text + "\n\n")
        self.stream.flush()


async def _frames(live: LiveCluster, screen: Screen, once: bool, interval: float) -> None:
    changed, quit_asked = asyncio.Event(), asyncio.Event()
    unsubscribe = live.subscribe(lambda _text: changed.set())
    loop = asyncio.get_running_loop()
    if screen.full:
        loop.add_reader(sys.stdin.fileno(), lambda: quit_asked.set() if os.read(0, 32)[:1] in b"qQ" else None)
    try:
        while True:
            width, height = screen.size()
            screen.draw(top_lines(live.current, live.gpu_latest, time.time(), width, height))
            if once:
                return
            changed.clear()
            waits = [asyncio.ensure_future(e.wait()) for e in (changed, quit_asked)]
            await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()
            if quit_asked.is_set():
                return
    finally:
        unsubscribe()
        if screen.full:
            loop.remove_reader(sys.stdin.fileno())


def _agents_on_demand(live: LiveCluster, ssh) -> dict:
    """{host: argv} of the GPU agents ``top`` starts itself: on every host no running World's agent
    speaks for (and not known unreachable), here directly, elsewhere over ssh, in --stdio mode."""
    covered = {host for _, host in agent_targets(live.worlds)}
    ssh_argv = config.ssh_command(ssh)
    return {row["name"]: stdio_argv(row["name"], ssh_argv) for row in (live.current or {}).get("hosts") or []
            if row["name"] not in covered and row.get("reachable") is not False}


async def _first_readings(live: LiveCluster, hosts, seconds: float) -> None:
    """For one frame: wait (up to ``seconds``) until every host's agent (the Worlds' and those
    ``top`` started) said what it has: a live sample, not only the history a World's agent sends
    first (it carries no processes: the frame would name no rank holding GPU memory)."""
    deadline = time.monotonic() + seconds
    feed = live.gpu_feed

    def said(host) -> bool:
        view = feed.hosts.get(host)
        return view is not None and (not view["gpus"] or host in feed.sampled)
    while not all(said(host) for host in hosts):
        left = deadline - time.monotonic()
        if left <= 0 or not await feed.heard(left):
            return


async def _top(options: CollectOptions, once: bool, interval: float) -> None:
    live = LiveCluster(options, config.state_dir(), _read_worlds)
    await live.start()
    on_demand = _agents_on_demand(live, options.ssh)
    live.gpu_feed.follow_stdio(on_demand)
    watching = live.subscribe(lambda _text: None)   # a watcher: the Worlds' agents are followed now
    try:
        if once:
            worlds_hosts = {host for _, host in agent_targets(live.worlds)}
            await _first_readings(live, set(on_demand) | worlds_hosts, FIRST_READINGS_S)
        full = not once and sys.stdout.isatty() and sys.stdin.isatty()
        with Screen(sys.stdout, full) as screen:
            await _frames(live, screen, once, interval)
    finally:
        watching()
        live.stop()
        await live.gpu_feed.stopped()


def _read_worlds(directory: str) -> list:
    from mlp_magic.world.published import read_worlds

    return read_worlds(directory)


def run_top(args) -> int:
    """``mlp-magic top``: until q or Ctrl-C (``--once``: one frame)."""
    from mlp_magic.errors import MlpMagicError

    if not args.interval or args.interval <= 0:
        raise MlpMagicError(f"--interval must be positive, got {args.interval!r}")
    options = CollectOptions(hostfile=args.hostfile, hosts=args.hosts, gpus="local", reach_timeout=1.0)
    run_to_end(lambda: _top(options, args.once, args.interval), "mlp-top")
    return 0
