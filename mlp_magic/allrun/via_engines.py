"""``%allrun`` through a live World: one engine per host (its LOCAL_RANK 0) runs the command.

No ssh at all, so it is as fast as a message round trip; used when a World is up and covers
every host the command targets (``%allrun pip install x`` before ``import x`` in a cell).
"""
from __future__ import annotations

import os
import sys
import time

from mlp_magic.core.host_command import caller_folder, host_variables
from mlp_magic.core.placement import first_rank_per_host
from mlp_magic.core.results import FAILED, INTERRUPTED, OK, TIMEOUT, HostResult
from mlp_magic.allrun.rank.shell import run_shell
from mlp_magic.client.ipp_private import children
from mlp_magic.client.job import SHELL, RankJob

INTERRUPT_GRACE = 2.0
# Beyond the command's own timeout (which the engine enforces), for the round trip: an engine
# that cannot answer (stopped, wedged in C, its host gone) is then given up, never waited on.
ANSWER_SLACK = 3.0


def first_engine_per_host(world) -> dict:
    """{host name: engine id} of each host's first rank: the one that runs the command."""
    return {host: world.rank_to_engine[rank] for host, rank in first_rank_per_host(world.layout).items()}


def covers(world, host_names: list) -> bool:
    """The World can run the command now: alive, on every host, and no cell still running
    (the command would otherwise wait in a busy engine's queue)."""
    if world is None or not world.alive():
        return False
    if world.busy_job is not None and world.busy_job.unfinished_ranks():
        return False
    return set(host_names) <= set(first_engine_per_host(world))


class WorldTransport:
    """Callable with the allrun transport signature: (hosts, command, timeout, on_output)."""

    def __init__(self, world):
        self.world = world

    def __call__(self, host_names: list, command: str, timeout: float | None, on_output=None) -> list:
        world = self.world
        first = first_rank_per_host(world.layout)
        started = time.monotonic()
        folder, count = caller_folder(os.getcwd), len(host_names)
        job = RankJob.apply_each(world, SHELL, {
            first[host]: (command, timeout, folder,
                          host_variables(os.environ, host, index, count, sys.executable))
            for index, host in enumerate(host_names)}, run_shell)
        pending = dict(zip(host_names, job.async_results))
        seen = {host: {"stdout": 0, "stderr": 0} for host in host_names}
        deadline = started + timeout + ANSWER_SLACK if timeout else None
        late = False
        try:
            late = not self._wait(job, pending, seen, on_output, deadline)
        except KeyboardInterrupt:
            job.interrupt(INTERRUPT_GRACE)   # run_shell then kills the command's process group
        if late:
            job.interrupt(0.5)   # whatever it still does is stopped
        return [_host_result(host, ar, time.monotonic() - started, late) for host, ar in pending.items()]

    @staticmethod
    def _wait(job: RankJob, pending: dict, seen: dict, on_output, deadline: float | None) -> bool:
        """Until every host answered (True), or ``deadline`` passed (False)."""
        hosts = list(pending)
        while True:
            finished = job.wait(deadline)
            wrote = [hosts[i] for i in sorted(job.requests.take_wrote())]
            if on_output is not None:
                _forward_lines({host: pending[host] for host in (hosts if finished else wrote)},
                               seen, on_output, final=finished)
            if finished:
                return True
            if (deadline is not None and time.monotonic() >= deadline) or job.world_ended():
                return False


def _forward_lines(pending: dict, seen: dict, on_output, final: bool) -> None:
    for host, ar in pending.items():
        metadata = children(ar)[0].output.metadata
        for stream in ("stdout", "stderr"):
            text = metadata.get(stream) or ""
            start = seen[host][stream]
            end = len(text) if final else text.rfind("\n", start) + 1
            if end > start:
                for line in text[start:end].splitlines():
                    on_output(host, stream, line)
                seen[host][stream] = end


def _host_result(host: str, ar, elapsed: float, late: bool = False) -> HostResult:
    """``late``: the hosts still unfinished were given up at the deadline (timed out), not
    interrupted by the user."""
    metadata = children(ar)[0].output.metadata
    result = HostResult(host=host, stdout=metadata.get("stdout") or "", stderr=metadata.get("stderr") or "",
                        seconds=elapsed)
    if not ar.ready():
        result.status, result.exit_code = (TIMEOUT if late else INTERRUPTED), None
        if late:
            result.stderr += (f"allrun: no answer from {host} in time (its engine, or a process the "
                              f"command left running with its output)\n")
        return result
    try:
        outcome = ar.get(timeout=0)
    except Exception as error:  # the engine itself failed (died, interrupted)
        interrupted = getattr(error, "ename", "") == "KeyboardInterrupt"
        result.status, result.exit_code = (INTERRUPTED if interrupted else FAILED), None
        if interrupted:
            return result
        result.stderr += f"allrun: the engine on {host} failed: {error}\n"
        return result
    result.seconds = outcome["seconds"]
    if outcome["timed_out"]:
        result.status, result.exit_code = TIMEOUT, None
    else:
        result.exit_code = outcome["exit_code"]
        result.status = OK if outcome["exit_code"] == 0 else FAILED
    return result
