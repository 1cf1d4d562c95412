"""Nobody watches: the server's live model follows the published Worlds without building the
document at every change (a 512-rank World flipping four times a second cost the server about 1 %
of a core with no view open). A GET or a new view gets the newest document all the same."""
from __future__ import annotations

import asyncio
import json

from mlp_magic.cluster.collect import CollectOptions
from mlp_magic.cluster.live import LiveCluster
from mlp_magic.cluster.pure.delta import apply
from mlp_magic.world.published import publish, read_worlds
from tests.timing import hang_bound


def record(state: str) -> dict:
    ranks = [{"rank": r, "host": "localhost", "state": state, "since": None, "last_output": None,
              "engine_id": r} for r in range(2)]
    return {"id": "unwatched-1", "state": "running", "np": 2, "mpi": "openmpi", "ranks": ranks,
            "cell": None}


async def seen(live: LiveCluster, state: str, seconds: float) -> bool:
    """Until the model has read a record whose rank 0 is in ``state`` (its folder's watch)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if live.worlds and live.worlds[0]["ranks"][0]["state"] == state:
            return True
        await asyncio.sleep(0.02)
    return False


def rank0(doc: dict) -> str:
    return doc["worlds"][0]["ranks"][0]["state"]


def test_changes_unwatched_build_no_document_until_asked_and_a_new_view_starts_from_the_newest(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    publish(record("starting"), str(folder))
    options = CollectOptions(hosts="localhost:2", gpus="none", reach_timeout=None, state_dir=str(folder))

    async def scenario():
        live = LiveCluster(options, str(folder), read_worlds)
        await live.start()
        try:
            found = {"first": rank0(live.current), "built": live.rebuilds}
            for state in ["busy", "idle"] * 5 + ["busy"]:   # 11 changes, nobody watching
                publish(record(state), str(folder))
                assert await seen(live, state, hang_bound(0.5))
            found["built_unwatched"] = live.rebuilds - found["built"]
            found["asked"] = rank0(live.current)
            found["built_when_asked"] = live.rebuilds - found["built"]
            found["asked_again"] = live.rebuilds - found["built"] if live.current else None
            publish(record("idle"), str(folder))
            assert await seen(live, "idle", hang_bound(0.5))
            messages = []
            unsubscribe = live.subscribe(lambda text: messages.append(json.loads(text)))
            found["snapshot"] = rank0(messages[0]["doc"])
            publish(record("dead"), str(folder))   # watched: a patch at once
            assert await seen(live, "dead", hang_bound(0.5))
            doc = messages[0]["doc"]
            for message in messages[1:]:
                doc = apply(doc, message["ops"]) if message["type"] == "patch" else doc
            found["patched"] = rank0(doc)
            unsubscribe()
            return found
        finally:
            live.stop()

    found = asyncio.run(scenario())
    assert found["first"] == "starting"
    assert found["built_unwatched"] == 0
    assert found["asked"] == "busy" and found["built_when_asked"] == 1
    assert found["asked_again"] == 1   # nothing changed since: nothing built
    assert found["snapshot"] == "idle"
    assert found["patched"] == "dead"
