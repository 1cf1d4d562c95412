"""The server's live GPU readings: one subscription to each running World's per-host agent
(agent/, started by agent/launch), held only while a panel or ``top`` watches.

From each agent's stream (agent/client.subscribe): the host's static facts and compute processes
become ``live_gpus`` in the document's host row (a patch when they change, never per sample); the
samples go into a ring buffer per host (gpu/pure/history: the sparklines' history and the CSV or
JSON export) and into ``latest``, from which the aggregator (cluster/live) sends one "gpus" message
a second for all hosts. The agent's own history (it samples whether watched or not) seeds the
host's buffer and is handed on at once (``history_came``): the panel whose opening made us follow
the agent gets the ten minutes before it too. A subscription that breaks is made again (0.5 s
doubling to 10 s, from 0.5 s again once one worked), and its host's last readings are dropped
(they are no longer live); a host whose agent has no GPUs is told once and not followed further.
``mlp-magic top`` with no World on a host starts the agent there itself, in its ``--stdio`` mode
(``stdio_argv``: here directly, elsewhere over ssh), for as long as it runs.
"""
from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from collections.abc import Callable

from mlp_magic.agent.client import AgentError, subscribe
from mlp_magic.gpu.pure.history import MAX_GPUS, GpuHistory, reading, reading_rows, sample_time
from mlp_magic.machine.names import stays_here
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.pure.record import agent_key, agents as checked_agents

SILENT_S = 5.0            # an agent that sends nothing this long is asked again
BACKOFF_S = (0.5, 10.0)   # first and longest wait before asking a broken agent again
FRESH_S = 2.0             # an agent's newest history sample still shown as its latest reading
GPU_FACTS = ("index", "name", "memory_total_mib", "power_limit_w")


class _Done(Exception):
    """The agent has nothing more to say (no GPUs): stop following it."""


def agent_targets(worlds: list) -> dict[tuple[str, str], tuple]:
    """{(world id, host): (addr, port, key)} of every running World's agents that started (their
    entries as world/pure/record checks them: a port of 2**63 or Infinity reaches no agent)."""
    targets = {}
    for world in worlds:
        key, world_id = agent_key(world.get("private")), world.get("id")
        if world.get("state") != "running" or not key or not isinstance(world_id, (str, type(None))):
            continue
        for host, entry in checked_agents(world.get("agents")).items():
            if "port" in entry:
                targets[(world_id, host)] = (entry["addr"], entry["port"], key)
    return targets


def stdio_argv(host: str, ssh: list, python: str = sys.executable) -> list:
    """The agent in ``--stdio`` mode on ``host`` (the same image everywhere: this Python's path)."""
    from mlp_magic.ssh.argv import as_target, destination, ssh_options

    command = [python, "-m", "mlp_magic.agent", "--stdio"]
    if stays_here(host):
        return command
    return [*ssh, *ssh_options(5.0, None), *destination(as_target(host)), shlex.join(command)]


def live_gpus(static: dict, processes: list) -> dict:
    """A host row's ``live_gpus`` from an agent's static facts and its latest processes, as
    strict JSON (the panel's JSON.parse reads no NaN)."""
    def fact(name: str, value):
        return _text(value) if name == "name" else reading(value)
    return {"source": _text(static.get("source")), "error": _text(static.get("error")),
            "gpus": [{name: fact(name, gpu.get(name)) for name in GPU_FACTS}
                     for gpu in static.get("gpus") or []],
            "processes": [list(row) for row in processes]}


def _text(value):
    return None if value is None else str(value)


def _static_gpus(message: dict):
    """An agent's static facts' GPUs (a list of objects), or None when they are not."""
    gpus = message.get("gpus") or []
    ok = isinstance(gpus, list) and len(gpus) <= MAX_GPUS and all(isinstance(g, dict) for g in gpus)
    return gpus if ok else None


class GpuFeed:
    """``changed()`` is called when a host's ``live_gpus`` changed (the document must be rebuilt),
    ``history_came(host)`` when an agent's history of ``host`` was taken in."""

    def __init__(self, changed: Callable[[], None], history_came: Callable[[str], None] = lambda host: None):
        self._changed = changed
        self._history_came = history_came
        self._tasks: dict[tuple[str, str], asyncio.Task] = {}
        self._stdio: dict[str, asyncio.Task] = {}   # host -> its --stdio agent (top, no World)
        self.hosts: dict[str, dict] = {}          # host -> live_gpus
        self.histories: dict[str, GpuHistory] = {}
        self.latest: dict[str, tuple] = {}        # host -> (t, rows), the newest sample
        self.sample_count = 0                     # samples taken in (the "gpus" sender's cue)
        self.sampled: set = set()                 # hosts a live sample came from (with processes)
        self._news = asyncio.Event()              # set by whatever an agent says (``heard``)

    # ------------------------------------------------------------------ which agents
    def follow(self, worlds: list, watched: bool) -> None:
        """Follow exactly the agents of ``worlds`` (none when nobody watches)."""
        targets = agent_targets(worlds) if watched else {}
        for key in [k for k in self._tasks if k not in targets]:
            self._tasks.pop(key).cancel()
            self._forget(key[1])
        for key, (addr, port, secret) in targets.items():
            if key not in self._tasks:
                self._tasks[key] = asyncio.ensure_future(self._follow(key[1], addr, port, secret))

    def stop(self) -> None:
        self.follow([], watched=False)
        for task in self._stdio.values():
            task.cancel()

    async def stopped(self) -> None:
        """After ``stop``: until the agents ``follow_stdio`` started have been reaped (a process
        left to the garbage collector after its loop closed says so on stderr)."""
        await asyncio.gather(*self._stdio.values(), return_exceptions=True)

    def follow_stdio(self, argvs: dict[str, list]) -> None:
        """Start ``{host: argv}``'s agents in ``--stdio`` mode and follow them (``top``)."""
        for host, argv in argvs.items():
            if host not in self._stdio:
                self._stdio[host] = asyncio.ensure_future(self._follow_stdio(host, argv))

    async def _follow_stdio(self, host: str, argv: list) -> None:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        try:
            async for line in process.stdout:
                try:
                    self._take(host, json.loads(line))
                except ValueError:
                    continue   # a login banner, a half line
            code = await process.wait()
            self._set_host(host, {"source": None, "error": f"GPU agent ended (exit {code})",
                                  "gpus": [], "processes": []})
        except _Done:
            pass
        finally:
            if process.returncode is None:
                process.kill()   # its stdin closes with it: the remote agent ends too
                await process.wait()

    def _forget(self, host: str) -> None:
        if any(key[1] == host for key in self._tasks):
            return   # another World's agent on the same host still speaks for it
        self.histories.pop(host, None)
        self.latest.pop(host, None)
        self.sampled.discard(host)
        if self.hosts.pop(host, None) is not None:
            self._changed()

    async def _follow(self, host: str, addr: str, port: int, key: str) -> None:
        wait = BACKOFF_S[0]
        while True:
            heard = []

            def take(message: dict) -> None:
                heard.append(True)
                self._take(host, message)
            try:
                await subscribe(addr, port, key, take, timeout=SILENT_S)
                why = "the agent closed the connection"
            except _Done:
                return
            except (AgentError, MlpMagicError, OSError) as error:
                why = str(error)
            self.latest.pop(host, None)   # no longer live: no "gpus" message repeats them
            self.sampled.discard(host)
            self._set_host(host, {"source": None, "error": f"agent: {why}", "gpus": [], "processes": []})
            wait = BACKOFF_S[0] if heard else wait
            await asyncio.sleep(wait)
            wait = min(wait * 2, BACKOFF_S[1])

    # ------------------------------------------------------------------ what agents say
    async def heard(self, timeout: float) -> bool:
        """Until an agent next says something (static facts, a history, a sample, an error):
        True, or False after ``timeout`` seconds of silence."""
        self._news.clear()
        try:
            await asyncio.wait_for(self._news.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _take(self, host: str, message: dict) -> None:
        """One message; one that is not an agent's (another version's, not ours) is left, and
        the stream goes on: an exception here would end the host's subscription for good."""
        self._news.set()
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "static":
            gpus = _static_gpus(message)
            if gpus is None:
                return
            self._set_host(host, live_gpus(message, []))
            self.histories[host] = GpuHistory(len(gpus))
            if not gpus:
                raise _Done()
        elif kind == "history":
            self._take_history(host, message)
        elif kind == "sample":
            self._take_sample(host, message)

    def _take_history(self, host: str, message: dict) -> None:
        try:
            history = self.histories[host] = GpuHistory.from_json(message)
        except MlpMagicError:
            return   # an agent of another version: the samples from now on still count
        newest = history.latest()
        if newest is not None and host not in self.latest and newest[0] > time.time() - FRESH_S:
            self.latest[host] = newest   # the next "gpus" message need not wait for a sample
            self.sample_count += 1
        self._history_came(host)

    def _take_sample(self, host: str, message: dict) -> None:
        t, rows = sample_time(message.get("t") or 0.0), reading_rows(message.get("gpus") or [])
        processes = reading_rows(message.get("processes") or [], 4)   # [gpu, rank, pid, used_mib]
        if t is None or rows is None or processes is None:
            return
        history = self.histories.get(host)
        if history is not None and len(rows) == history.gpus:
            history.append(t, rows)
        self.latest[host] = (t, rows)
        self.sample_count += 1
        self.sampled.add(host)
        known = self.hosts.get(host)
        if known is not None and known["processes"] != processes:
            self._set_host(host, dict(known, processes=processes))

    def _set_host(self, host: str, view: dict) -> None:
        self._news.set()
        if self.hosts.get(host) != view:
            self.hosts[host] = view
            self._changed()

    # ------------------------------------------------------------------ messages
    def samples_message(self) -> dict | None:
        """{"t", "hosts": {host: rows}} of the newest samples, or None when there are none."""
        if not self.latest:
            return None
        return {"t": max(t for t, _ in self.latest.values()),
                "hosts": {host: rows for host, (_, rows) in self.latest.items()}}

    def history_message(self, now: float, seconds: float = 600.0, step_s: float = 10.0,
                        only: str | None = None) -> dict:
        """{"t0", "step_s", "hosts": {host: {"util": [[...] per GPU], "mem": [...]}}} (one host
        with ``only``)."""
        t0 = now - seconds
        hosts = {}
        for host, history in self.histories.items():
            if len(history) and only in (None, host):
                hosts[host] = {"util": history.series("util_pct", since=t0, step_s=step_s)[1],
                               "mem": history.series("mem_used_mib", since=t0, step_s=step_s)[1]}
        return {"t0": t0, "step_s": step_s, "hosts": hosts}


async def _one_history(addr: str, port: int, key: str, timeout: float) -> GpuHistory | None:
    found = []

    def take(message: dict) -> None:
        if message.get("type") == "static" and not message.get("gpus"):
            raise _Done()
        if message.get("type") == "history":
            found.append(GpuHistory.from_json(message))
            raise _Done()

    try:
        await asyncio.wait_for(subscribe(addr, port, key, take, timeout=timeout), timeout)
    except (_Done, AgentError, MlpMagicError, OSError, asyncio.TimeoutError):
        pass
    return found[0] if found else None


async def histories_of(feed: GpuFeed, worlds: list, timeout: float = 3.0) -> dict[str, GpuHistory]:
    """Every host's history: the feed's where it follows the host, else asked of the host's agent
    once (each agent keeps its last ten minutes whether anyone watched or not)."""
    found = dict(feed.histories)
    asked = {host: where for (_, host), where in agent_targets(worlds).items() if host not in found}
    answers = await asyncio.gather(*(_one_history(*where, timeout) for where in asked.values()))
    found.update({host: history for host, history in zip(asked, answers) if history is not None})
    return found
