"""What the panel's buttons do to a World, without its kernel's help (it may be stuck in a cell).

Everything needed is in the World's published record (world/world.World.state): its ranks' hosts,
pids and process start times (in its private part), its own processes, its agents (one per host,
agent/). Ranks on this machine are signalled directly; ranks elsewhere through their host's agent,
which checks each pid's start time the same way, so a reused pid is never signalled.
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from mlp_magic.machine.names import is_this_machine, this_machine_names
from mlp_magic.core.ranges import fold_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.unblock.pure.timing import AGAIN_AFTER_S
from mlp_magic.world.start.mpi import OPENMPI
from mlp_magic.world.published import private_part, recorded_ranks
from mlp_magic.agent.signals import Targets, signal_all

TAIL_BYTES = 64 * 1024
AGENT_TIMEOUT_S = 5.0
STACKS_TIMEOUT_S = 10.0
STREAMS = ("stdout", "stderr")


async def _agent_call(world: dict, host: str, op: str, **args) -> dict:
    agent = (world.get("agents") or {}).get(host) or {}
    key = private_part(world).get("agent_key")
    if "error" in agent:   # it could not start: what the World's start said of it
        raise MlpMagicError(f"the agent on {host} did not start: {agent['error']}")
    if "port" not in agent or not key:
        raise MlpMagicError(f"no agent on {host} for this World (it started without one)")
    from mlp_magic.agent.client import call

    return await call(agent["addr"], agent["port"], key, op, timeout=AGENT_TIMEOUT_S, **args)


async def interrupt(world: dict) -> dict:
    """SIGINT every rank of the World (ranks between cells ignore it); what was done, host by host
    (agent/signals, as the World's own interrupt does without ipyparallel's)."""
    signalled, problems = await signal_all(_targets(world, _ranks_by_host(world)))
    return {"world": world.get("id"), "signalled": fold_ranks(signalled), "problems": problems}


async def unblock(world: dict, current: Callable[[], dict | None] | None = None) -> dict:
    """The unblock signal to the World's busy ranks (unblock/rank/side): their hung
    torch.distributed collectives fail, every process stays; the kernel makes the default process
    group again at its next use of the World (unblock/after). No busy rank: nothing is sent.
    ``current``, where given, reads the World's record as it is now: in an Open MPI World, where
    ranks are still busy a second later, the idle ones are asked to drive MPI's progress (a
    revoked call across hosts may wait on one of them, unblock/rank/mpi_world); "progressed"
    names them."""
    by_host = _ranks_by_host(world, "busy")
    signalled, problems = await signal_all(_targets(world, by_host), "unblock") if by_host else ([], {})
    answer = {"world": world.get("id"), "signalled": fold_ranks(signalled), "problems": problems}
    if signalled and current is not None and world.get("mpi") == OPENMPI:   # (ULFM is Open MPI's)
        answer["progressed"] = fold_ranks(await _progress_if_still_busy(current, signalled, problems))
    return answer


async def _progress_if_still_busy(current, signalled: list, problems: dict) -> list:
    """After ``AGAIN_AFTER_S`` (at once when every signalled rank is free), where one still is:
    the progress signal to the idle ranks; the ranks sent it. The busy ones are not signalled
    again (``%mpirun --unblock`` does): the record runs up to world/live.STATE_EVERY_S behind,
    and a rank freed meanwhile may be in a new group already, which a second signal would end."""
    deadline = time.monotonic() + AGAIN_AFTER_S
    while True:
        record = current()
        if record is None or not _ranks_by_host(record, "busy", among=set(signalled)):
            return []   # the World is gone, or every rank came free
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.05)
    driven, failed = await signal_all(_targets(record, _ranks_by_host(record, "idle")), "progress")
    for host, why in failed.items():   # a host's earlier problem is kept
        problems[host] = f"{problems[host]}; {why}" if host in problems else why
    return driven


def _ranks_by_host(world: dict, state: str | None = None, among=None) -> dict[str, list[int]]:
    """The World's ranks by host: all, or those in ``state`` (and in ``among``)."""
    by_host: dict[str, list[int]] = {}
    for row in world.get("ranks") or []:
        if (state is None or row.get("state") == state) and (among is None or row["rank"] in among):
            by_host.setdefault(row["host"], []).append(row["rank"])
    return by_host


def _targets(world: dict, by_host: dict[str, list[int]]) -> Targets:
    names = this_machine_names()
    return Targets(by_host, recorded_ranks(world), world.get("agents") or {},
                   private_part(world).get("agent_key"), here=lambda host: is_this_machine(host, names))


async def stop(world: dict) -> dict:
    """Stop the World's own processes (launcher, controller) and its ranks on this machine."""
    from mlp_magic.world.processes import stop_recorded

    killed = await asyncio.get_running_loop().run_in_executor(None, stop_recorded, world)
    return {"world": world.get("id"), "stopped": killed > 0, "processes": killed}


async def stacks(world: dict) -> dict:
    """The merged stack tree of every process on the World's hosts ({"text", "html"}, or "error")."""
    from mlp_magic.errors import StacksFault
    from mlp_magic.stacks.command import gather
    from mlp_magic.commands.pure.table import STACKS, options_for

    options = options_for(STACKS, hosts=",".join(_ranks_by_host(world)), timeout=STACKS_TIMEOUT_S)

    def collect() -> dict:
        try:
            report = gather(options, env={})
        except (StacksFault, MlpMagicError) as exc:
            return {"error": str(exc)}
        return {"text": report.text, "html": report.html}

    return await asyncio.get_running_loop().run_in_executor(None, collect)


async def tail(world: dict, rank: int, stream: str) -> str:
    """The last ``TAIL_BYTES`` of a rank's stdout or stderr in the World's current or last cell."""
    if stream not in STREAMS:
        raise MlpMagicError(f"stream must be stdout or stderr, got {stream!r}")
    rows = {row["rank"]: row for row in world.get("ranks") or []}
    if rank not in rows:
        raise MlpMagicError(f"rank {rank} is not in this World (0-{len(rows) - 1})" if rows
                            else f"rank {rank}: this World's record names no ranks")
    log_dir = world.get("log_dir")
    if not log_dir:
        return ""   # no cell has run yet
    host = rows[rank]["host"]
    if is_this_machine(host, this_machine_names()):
        return _tail_file(os.path.join(log_dir, f"rank{rank}.{stream}"))
    answer = await _agent_call(world, host, "tail", rank=rank, stream=stream, bytes=TAIL_BYTES,
                               log_dir=log_dir)
    return answer.get("text") or ""


def _tail_file(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise MlpMagicError(f"cannot read {path}: {exc.strerror or exc}") from None
