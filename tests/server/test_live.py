"""The live panel's server side on a real jupyter_server: the websocket's snapshot and patches,
Worlds coming and going, and the actions on a World (interrupt, restart, log tail) done without
its kernel, on real processes."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import psutil
import pytest
from tornado.httpclient import HTTPClientError

from mlp_magic.cluster.live import LIVENESS_EVERY_S
from mlp_magic.cluster.pure.delta import apply
from tests.timing import HANG_FLOOR_S, hang_bound, wait_until

pytestmark = pytest.mark.timeout(120)
LIVENESS_BOUND_S = hang_bound(LIVENESS_EVERY_S)   # a dead kernel's World leaves at the next check

SIGINT_CATCHER = """
import signal, sys, time
def caught(*_):
    open(sys.argv[1], "w").write("SIGINT")
    sys.exit(0)
signal.signal(signal.SIGINT, caught)
print("ready", flush=True)
time.sleep(60)
"""


class Processes:
    """Real child processes standing in for ranks; every one is stopped at the end."""

    def __init__(self, tmp_path):
        self.tmp_path, self.children = tmp_path, []

    def catcher(self, name: str) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-c", SIGINT_CATCHER, str(self.tmp_path / name)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "ready\n"
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in self.children:
            child.kill()
            child.wait()


@pytest.fixture
def processes(tmp_path):
    made = Processes(tmp_path)
    yield made
    made.close()


def world_record(pid: int, world_id: str = "here-1-1", ranks=None, **extra) -> dict:
    since = "2026-11-25T10:00:00.000+00:00"
    ranks = ranks or [{"rank": r, "host": "localhost", "state": "idle", "since": since, "last_output": None,
                       "engine_id": r} for r in range(2)]
    return {"id": world_id, "pid": pid, "state": "running", "np": len(ranks), "ranks": ranks, **extra}


def publish(state_dir, record: dict) -> None:
    path = state_dir / f"{record['id']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(record))
    os.replace(path.with_suffix(".tmp"), path)


async def next_message(ws, seconds: float = HANG_FLOOR_S) -> dict:
    text = await asyncio.wait_for(ws.read_message(), seconds)
    assert text is not None, "the server closed the websocket"
    return json.loads(text)


async def test_a_panel_gets_the_document_then_each_change_of_a_world(
        jp_fetch, jp_ws_fetch, world_state_dir):
    ws = await jp_ws_fetch("mlp-magic", "live")
    snapshot = await next_message(ws)
    assert snapshot["type"] == "snapshot" and snapshot["doc"]["worlds"] == []
    doc, seq = snapshot["doc"], snapshot["seq"]

    record = world_record(os.getpid())
    publish(world_state_dir, record)
    patch = await next_message(ws)   # how soon (the folder is watched): benchmarks/live_latency.py
    assert patch["type"] == "patch" and patch["seq"] == seq + 1
    doc = apply(doc, patch["ops"])
    assert [w["id"] for w in doc["worlds"]] == ["here-1-1"]

    record["ranks"][1]["state"] = "busy"
    publish(world_state_dir, record)
    patch = await next_message(ws)
    assert patch["ops"] == [["set", ["worlds", 0, "ranks", 1, "state"], "busy"]]
    doc = apply(doc, patch["ops"])
    served = json.loads((await jp_fetch("mlp-magic", "cluster")).body)
    assert doc == served
    ws.close()


async def test_the_private_part_of_a_world_is_never_served(jp_fetch, jp_ws_fetch, world_state_dir):
    publish(world_state_dir, world_record(os.getpid(), private={"agent_key": "s3cret", "ranks": {}}))
    served = (await jp_fetch("mlp-magic", "cluster")).body.decode()
    assert "s3cret" not in served and '"private"' not in served
    ws = await jp_ws_fetch("mlp-magic", "live")
    assert "s3cret" not in await asyncio.wait_for(ws.read_message(), 5)
    ws.close()


async def test_a_world_whose_kernel_is_gone_leaves_at_a_liveness_check(
        jp_ws_fetch, world_state_dir, processes):
    kernel = processes.catcher("unused")
    publish(world_state_dir, world_record(kernel.pid))
    ws = await jp_ws_fetch("mlp-magic", "live")
    doc = (await next_message(ws))["doc"]
    assert [w["pid"] for w in doc["worlds"]] == [kernel.pid]
    kernel.kill()
    kernel.wait()
    started = time.monotonic()
    doc = apply(doc, (await next_message(ws, LIVENESS_BOUND_S))["ops"])
    assert doc["worlds"] == [] and time.monotonic() - started < LIVENESS_BOUND_S
    ws.close()


async def test_a_websocket_without_the_token_is_refused(jp_ws_fetch):
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("mlp-magic", "live", headers={"Authorization": ""})
    assert refused.value.code == 403


async def test_interrupt_signals_the_ranks_still_the_published_processes(
        jp_fetch, world_state_dir, processes):
    rank0, rank1 = processes.catcher("rank0"), processes.catcher("rank1")
    created = {r: psutil.Process(p.pid).create_time() for r, p in ((0, rank0), (1, rank1))}
    # rank 1's pid is published with another start time: a reused pid, never to be signalled
    private = {"ranks": {"0": [rank0.pid, created[0]], "1": [rank1.pid, created[1] - 5.0]}}
    publish(world_state_dir, world_record(os.getpid(), private=private))

    answer = json.loads((await jp_fetch("mlp-magic", "worlds", "here-1-1", "interrupt", method="POST",
                                        body=b"")).body)
    assert answer["signalled"] == "0" and answer["problems"] == {}
    assert rank0.wait(hang_bound(0.5)) == 0 and (processes.tmp_path / "rank0").read_text() == "SIGINT"
    time.sleep(0.2)
    assert rank1.poll() is None and not (processes.tmp_path / "rank1").exists()


UNBLOCK_LISTENER = ("import sys, time\nfrom mlp_magic.unblock.rank import mpi_world, side\n"
                    "side.cut_gloo_connections = lambda: open(sys.argv[1], 'a').write('unblock ') or {}\n"
                    "mpi_world.progress_beside_main_thread = (\n"
                    "    lambda: open(sys.argv[1], 'a').write('progress '))\n"
                    "assert side.install() and mpi_world.install_progress()\n"
                    "print('ready', flush=True)\ntime.sleep(60)")


def _ranks_listening(processes, tmp_path) -> dict:
    """Ranks 0-1: processes with the unblock and the progress threads (each writes what woke it
    to ``woke<rank>``); rank 2: one without (it would die of either signal); the record's part."""
    children = [subprocess.Popen([sys.executable, "-c", UNBLOCK_LISTENER, str(tmp_path / f"woke{r}")],
                                 stdout=subprocess.PIPE, text=True) for r in range(2)]
    deaf = processes.catcher("deaf")
    processes.children += children
    assert [child.stdout.readline() for child in children] == ["ready\n", "ready\n"]
    return {"ranks": {str(r): [p.pid, psutil.Process(p.pid).create_time()]
                      for r, p in enumerate((*children, deaf))}}


def _rows(*states) -> list:
    since = "2026-11-25T10:00:00.000+00:00"
    return [{"rank": r, "host": "localhost", "state": state, "since": since, "last_output": None,
             "engine_id": r} for r, state in enumerate(states)]


async def _unblock(jp_fetch) -> dict:
    answer = await jp_fetch("mlp-magic", "worlds", "here-1-1", "unblock", method="POST", body=b"")
    return json.loads(answer.body)


async def test_unblock_signals_the_busy_ranks_only_and_never_one_that_would_die_of_it(
        jp_fetch, world_state_dir, processes, tmp_path):
    """Issue 31: the busy ranks' unblock threads wake; a busy process without the thread is
    named, not signalled; an idle rank is left alone until a busy one is still busy a second
    later, in an Open MPI World: it is then sent the progress signal (a revoked MPI call may
    wait on it). The busy one is not signalled again (a rank freed meanwhile may be in a new
    group already)."""
    private = _ranks_listening(processes, tmp_path)
    publish(world_state_dir, world_record(os.getpid(), ranks=_rows("busy", "idle", "busy"), private=private,
                                          mpi="openmpi"))
    await _served(jp_fetch, ["busy", "idle", "busy"])
    answer = await _unblock(jp_fetch)
    assert answer["signalled"] == "0" and answer["progressed"] == "1", answer   # rank 0 stays busy here
    assert answer["problems"] == {"localhost": "ranks 2 have no unblock thread (not an engine mlp_magic "
                                               "set up, or one of an older mlp_magic): not signalled"}, answer
    assert wait_until(lambda: _said(tmp_path / "woke1") == "progress ")
    time.sleep(0.2)
    assert _said(tmp_path / "woke0") == "unblock "
    publish(world_state_dir, world_record(os.getpid(), private=private))   # every rank idle
    await _served(jp_fetch, ["idle", "idle"])
    assert await _unblock(jp_fetch) == {"world": "here-1-1", "signalled": "", "problems": {}}


@pytest.mark.alone   # times a sub-second answer
async def test_ranks_freed_within_the_second_ask_nothing_of_the_idle_ones(
        jp_fetch, world_state_dir, processes, tmp_path):
    """The usual gloo unblock: the busy rank comes free at once (its record says idle 0.3 s
    later): no progress signal; and in a World of another MPI none is ever sent (ULFM is Open
    MPI's)."""
    private = _ranks_listening(processes, tmp_path)
    busy = world_record(os.getpid(), ranks=_rows("busy", "idle", "idle"), private=private, mpi="openmpi")
    publish(world_state_dir, busy)
    await _served(jp_fetch, ["busy", "idle", "idle"])   # the server started, and read it
    asyncio.get_running_loop().call_later(0.3, publish, world_state_dir,
                                          world_record(os.getpid(), ranks=_rows("idle", "idle", "idle"),
                                                       private=private, mpi="openmpi"))
    began = time.monotonic()
    answer = await _unblock(jp_fetch)
    assert (answer["signalled"], answer.get("progressed")) == ("0", ""), answer
    assert time.monotonic() - began < 0.9, "waited for the rank that had come free"
    publish(world_state_dir, dict(busy, mpi="mpich"))
    await _served(jp_fetch, ["busy", "idle", "idle"])
    answer = await _unblock(jp_fetch)
    assert answer["signalled"] == "0" and "progressed" not in answer, answer
    assert wait_until(lambda: _said(tmp_path / "woke0") == "unblock unblock ")
    time.sleep(1.2)
    assert _said(tmp_path / "woke1") == ""


async def _served(jp_fetch, states: list) -> None:
    deadline = time.monotonic() + hang_bound(5)
    while time.monotonic() < deadline:
        doc = json.loads((await jp_fetch("mlp-magic", "cluster")).body)
        if [[row["state"] for row in world["ranks"]] for world in doc.get("worlds") or []] == [states]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server never served ranks {states}")


def _said(path) -> str:
    return path.read_text() if path.exists() else ""


async def test_restart_stops_the_worlds_own_processes(jp_fetch, world_state_dir, processes):
    """The launcher, and the ranks that outlived a killed launcher (nobody's children: named only
    by the record's private part); never a pid reused by another process."""
    launcher, rank0, rank1 = (processes.catcher(name) for name in ("launcher", "rank0", "rank1"))
    created = {p.pid: psutil.Process(p.pid).create_time() for p in (launcher, rank0, rank1)}
    private = {"ranks": {"0": [rank0.pid, created[rank0.pid]], "1": [rank1.pid, created[rank1.pid] - 5.0]}}
    record = world_record(os.getpid(), private=private,
                          processes=[{"pid": launcher.pid, "create_time": created[launcher.pid]}])
    publish(world_state_dir, record)
    answer = json.loads((await jp_fetch("mlp-magic", "worlds", "here-1-1", "restart", method="POST",
                                        body=b"")).body)
    assert answer["stopped"] is True and answer["processes"] == 2
    assert launcher.wait(hang_bound(0.5)) is not None and rank0.wait(hang_bound(0.5)) is not None
    assert rank1.poll() is None   # its pid was published with another start time: not the rank


async def test_a_ranks_log_tail_and_bad_requests(jp_fetch, world_state_dir, tmp_path):
    logs = tmp_path / "cell"
    logs.mkdir()
    (logs / "rank1.stdout").write_text("x" * 70_000 + "the end\n")
    publish(world_state_dir, world_record(os.getpid(), log_dir=str(logs)))
    tail = await jp_fetch("mlp-magic", "worlds", "here-1-1", "ranks", "1", "log", params={"stream": "stdout"})
    assert tail.body.decode().endswith("the end\n") and len(tail.body) == 64 * 1024
    assert (await jp_fetch("mlp-magic", "worlds", "here-1-1", "ranks", "0", "log")).body == b""
    for parts, params, code in ((("here-1-1", "ranks", "1", "log"), {"stream": "stdin"}, 400),
                                (("here-1-1", "ranks", "7", "log"), {}, 400),
                                (("nobody-1-1", "ranks", "0", "log"), {}, 404)):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("mlp-magic", "worlds", *parts, params=params)
        assert refused.value.code == code


async def test_the_tail_of_a_rank_whose_hosts_agent_did_not_start_says_why(
        jp_fetch, world_state_dir, tmp_path):
    """The record names such an agent by its error (agent/launch): no address, no port (a
    KeyError and a 500 before)."""
    since = "2026-11-25T10:00:00.000+00:00"
    ranks = [{"rank": 0, "host": "w1", "state": "idle", "since": since, "last_output": None, "engine_id": 0}]
    publish(world_state_dir, world_record(os.getpid(), ranks=ranks, log_dir=str(tmp_path),
                                          agents={"w1": {"error": "no python3 on w1"}},
                                          private={"agent_key": "ab" * 32}))
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "worlds", "here-1-1", "ranks", "0", "log")
    assert refused.value.code == 400
    assert "the agent on w1 did not start: no python3 on w1" in refused.value.response.body.decode()


async def test_actions_refuse_a_cookie_post_without_xsrf(jp_fetch, world_state_dir, processes):
    rank0 = processes.catcher("rank0")
    private = {"ranks": {"0": [rank0.pid, psutil.Process(rank0.pid).create_time()]}}
    publish(world_state_dir, world_record(os.getpid(), private=private))
    first = await jp_fetch("mlp-magic", "cluster")
    cookies = "; ".join(h.split(";", 1)[0] for h in first.headers.get_list("Set-Cookie"))
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "worlds", "here-1-1", "interrupt", method="POST", body=b"",
                       headers={"Authorization": "", "Cookie": cookies})
    assert refused.value.code == 403
    time.sleep(0.2)
    assert rank0.poll() is None   # nothing was signalled


async def test_a_world_whose_launcher_died_shows_stopped_even_if_its_kernel_cannot_say(
        jp_ws_fetch, world_state_dir, processes):
    launcher = processes.catcher("launcher")
    record = world_record(os.getpid(), processes=[
        {"pid": launcher.pid, "create_time": psutil.Process(launcher.pid).create_time()}])
    publish(world_state_dir, record)
    ws = await jp_ws_fetch("mlp-magic", "live")
    doc = (await next_message(ws))["doc"]
    assert doc["worlds"][0]["state"] == "running"
    launcher.kill()
    launcher.wait()
    doc = apply(doc, (await next_message(ws, LIVENESS_BOUND_S))["ops"])   # the next liveness check
    assert doc["worlds"][0]["state"] == "stopped"
    assert {r["state"] for r in doc["worlds"][0]["ranks"]} == {"dead"}
    ws.close()
