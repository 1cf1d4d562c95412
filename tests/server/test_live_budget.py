"""A storm of rank changes (512 ranks flipping state 20 times a second) reaches a live view within
its bytes-a-second budget, coalesced, and the view ends with the last state; a lone change after
it still arrives whole. On a real jupyter_server and its websocket."""
from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from mlp_magic.cluster.live import PATCH_BURST_BYTES, PATCH_BYTES_PER_S
from mlp_magic.cluster.pure.delta import apply
from tests.server.test_live import next_message, publish, world_record

pytestmark = pytest.mark.timeout(120)
SINCE = "2026-11-25T10:00:{:02d}.000+00:00"


def flipped(record: dict, step: int) -> dict:
    for row in record["ranks"]:
        row["state"] = "idle" if (row["rank"] + step) % 3 else "busy"
        row["since"] = SINCE.format(step % 60)
    return record


async def test_a_storm_of_rank_changes_keeps_within_the_budget_and_ends_right(
        jp_fetch, jp_ws_fetch, world_state_dir):
    ranks = [{"rank": r, "host": f"h{r // 8}", "state": "idle", "since": SINCE.format(0),
              "last_output": None, "engine_id": r} for r in range(512)]
    record = world_record(os.getpid(), ranks=ranks)
    ws = await jp_ws_fetch("mlp-magic", "live")
    doc = (await next_message(ws))["doc"]
    publish(world_state_dir, record)
    doc = apply(doc, (await next_message(ws))["ops"])

    received, patches, started = 0, 0, time.monotonic()
    steps = 60
    for step in range(1, steps + 1):   # 3 s of a third of the ranks changing, 20 times a second
        publish(world_state_dir, flipped(record, step))
        await asyncio.sleep(0.05)
        while True:
            try:
                text = await asyncio.wait_for(ws.read_message(), 0.001)
            except asyncio.TimeoutError:
                break
            received += len(text)
            patches += 1
            doc = apply(doc, json.loads(text)["ops"])
    elapsed = time.monotonic() - started

    def shown():
        return [(r["state"], r["since"]) for r in doc["worlds"][0]["ranks"]]

    wanted = [(row["state"], row["since"]) for row in record["ranks"]]
    deadline = time.monotonic() + 10
    while shown() != wanted and time.monotonic() < deadline:
        message = await next_message(ws)
        doc = apply(doc, message["ops"])
    assert shown() == wanted   # the last state, in the end
    one_patch = 512 * 120   # every rank's state and since: the most one patch may overdraw
    assert received <= PATCH_BURST_BYTES + PATCH_BYTES_PER_S * elapsed + one_patch, (received, elapsed)
    assert patches < steps   # coalesced: fewer patches than changes

    record["ranks"][5]["state"] = "dead"   # a lone change once the storm is over goes whole
    await asyncio.sleep(2.5)
    publish(world_state_dir, record)
    message = await next_message(ws)
    assert message["ops"] == [["set", ["worlds", 0, "ranks", 5, "state"], "dead"]]
    ws.close()
