"""The live model follows the doctor's report (issue 25): a run that writes it while a panel
watches changes the host's health in a patch at once, not at the next slow collect (every 30 s)."""
from __future__ import annotations

import asyncio
import json
import os

from mlp_magic.cluster.collect import CollectOptions
from mlp_magic.cluster.live import LiveCluster
from mlp_magic.doctor.pure.report import REPORT_NAME
from mlp_magic.world.published import read_worlds
from tests.timing import hang_bound


def save(folder, findings) -> None:
    """As doctor/command.save_report: a whole new file renamed into place."""
    part = folder / ".tmp-doctor-test.json"
    part.write_text(json.dumps({"hosts": ["localhost"], "findings": findings, "checked_at": 1.0}))
    os.replace(part, folder / REPORT_NAME)


async def health_after(live, messages, change, seconds: float):
    """Make ``change``; the host's health once a patch changed it (None if none came in time)."""
    before = len(messages)
    change()
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if any(m["type"] == "patch" for m in messages[before:]):
            return live.doc["hosts"][0]["health"]
        await asyncio.sleep(0.02)
    return None


def test_a_new_doctor_report_reaches_the_watchers_without_a_slow_collect(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    save(folder, [{"severity": "error", "title": "import torch", "hosts": ["localhost"]}])
    options = CollectOptions(hosts="localhost:2", gpus="none", reach_timeout=None, state_dir=str(folder))

    async def watched():
        live = LiveCluster(options, str(folder), read_worlds)
        await live.start()
        messages = []
        unsubscribe = live.subscribe(lambda text: messages.append(json.loads(text)))
        try:
            first = live.doc["hosts"][0]["health"]
            warned = await health_after(live, messages, lambda: save(folder, [
                {"severity": "warning", "title": "package x", "hosts": ["localhost"]},
                {"severity": "info", "title": "a note", "hosts": ["localhost"]}]), hang_bound(0.5))
            healthy = await health_after(live, messages, lambda: save(folder, []), hang_bound(0.5))
            same = await health_after(live, messages, lambda: save(folder, []), 0.5)   # no change: no patch
            return first, warned, healthy, same, live.slow_collects
        finally:
            unsubscribe()
            live.stop()

    first, warned, healthy, same, slow_collects = asyncio.run(watched())
    assert first == {"state": "error", "findings": ["import torch"], "checked_at": 1.0}
    assert warned == {"state": "warning", "findings": ["package x"], "checked_at": 1.0}
    assert healthy == {"state": "ok", "findings": [], "checked_at": 1.0}
    assert same is None
    assert slow_collects == 1   # the start's: the report was read on its own
