"""What a World does when ipyparallel's or ipykernel's internals are not where we look for them
(client/ipp_private, engine/ipykernel_private): it falls back to plain ipyparallel behaviour, more
messages for the same output, and says so once per kernel, not once per World or cell.

- The client's reply hooks missing (its half of the quiet replies): the engines are asked to
  publish plain ipykernel messages again (engine/quiet.unquieten), before any request of the
  World waits on its output.
- An engine's ipykernel without the hooks engine/quiet replaces, or without the fd pipe
  engine/fd_watch takes over: that engine kept ipykernel's own behaviour; the bootstrap's
  answer names what it lacked (engine/ipykernel_private.missing).
- The client unable to send ipykernel's interrupt_request: the ranks' processes get SIGINT
  (agent/signals).
"""
from __future__ import annotations

from mlp_magic.output.pure.grouping import ranks_label
from mlp_magic.core.ranges import fold_hosts
from mlp_magic.engine import quiet
from mlp_magic.agent import signals as rank_signals

_said: set = set()   # the lines this kernel has said already


def say_once(notice, line: str, key: str | None = None) -> None:
    key = key or line
    if key not in _said:
        _said.add(key)
        notice(line)


PLAIN_REPLIES = ("mlp_magic: this ipyparallel's client keeps its reply handlers elsewhere "
                 "(Client._queue_handlers, _output_futures are gone): the ranks send plain ipyparallel "
                 "messages instead (a 'busy' and an 'idle' per request: slower, the same output)")


KEPT_RESULTS = ("mlp_magic: this ipyparallel's client keeps its results where mlp_magic cannot drop "
                "them (Client._futures, _output_futures, outstanding): each cell's results stay in the "
                "kernel's memory until the World stops")


def plain_replies(world) -> None:
    """Every engine publishes as plain ipykernel does from now on; said once."""
    client = world.client
    asked = {eid: client[eid].apply_async(quiet.unquieten) for eid in client.ids}
    world.gather_at_start(asked, "switching to plain replies", "switching to plain replies (engine/quiet)")
    say_once(world.notice, PLAIN_REPLIES)


def report_missing(world, answers: dict) -> None:
    """The bootstrap's answers {rank: {"missing": {name: what for}}}: one line per set of
    missing internals, with the ranks and hosts that lack them; each line once per kernel."""
    by_names: dict = {}
    for rank, answer in sorted(answers.items()):
        missing = (answer or {}).get("missing") if isinstance(answer, dict) else None
        if missing:
            by_names.setdefault(tuple(sorted(missing.items())), []).append(rank)
    for items, ranks in by_names.items():
        names = ", ".join(name for name, _ in items)
        uses = "; ".join(dict.fromkeys(use for _, use in items))
        hosts = fold_hosts(dict.fromkeys(world.host_of(rank) for rank in ranks))
        say_once(world.notice, f"mlp_magic: {ranks_label(ranks, hosts)}: this ipykernel has no {names}, "
                               f"so ipykernel's own behaviour is kept there for: {uses} "
                               "(more messages or later fd output; nothing is lost)", key=names)


SIGNALLED = ("mlp_magic: this ipyparallel's client has no _send_control_request: interrupts reach the "
             "ranks as SIGINT to their processes (here directly, elsewhere through each host's agent)")


def interrupt_by_signal(world, engines: list) -> bool:
    """The interrupt's fallback (agent/signals), said once; True when every rank got it."""
    say_once(world.notice, SIGNALLED)
    by_engine = {engine: rank for rank, engine in world.rank_to_engine.items()}
    return rank_signals.interrupt(world, [by_engine[e] for e in engines if e in by_engine])
