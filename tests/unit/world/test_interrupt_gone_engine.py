"""World.interrupt when the client drops an engine while it runs: ipyparallel's IO thread
forgets a dead engine at any moment (a rank whose death the World survived). The others must
still be aborted and interrupted; before, the KeyError of the first call for the dropped engine
left every rank running (CI: two ranks died at once, and the survivors were never interrupted)."""
from types import SimpleNamespace

from mlp_magic.world.world import World


class DroppingClient:
    """ipyparallel's Client as World.interrupt uses it: ``ids`` still lists ``dropped``, which
    it forgets before the first control request (as its IO thread would)."""

    def __init__(self, ids, dropped):
        self._engines = {engine: f"uuid-{engine}" for engine in ids}
        self._listed, self.dropped, self.sent = list(ids), dropped, []

    @property
    def ids(self):
        listed = list(self._listed)
        self._engines.pop(self.dropped, None)   # the IO thread, right after the caller looked
        return listed

    def _send_control_request(self, targets, msg_type, content, block):
        idents = [self._engines[target] for target in targets]   # KeyError, as _build_targets
        self.sent.append((msg_type, idents))

    def abort(self, jobs, targets, block):
        return self._send_control_request(targets, "abort_request", {"msg_ids": jobs}, block)


def test_an_engine_dropped_meanwhile_leaves_the_others_aborted_and_interrupted():
    client = DroppingClient(ids=[0, 1, 2, 3], dropped=0)
    world = SimpleNamespace(client=client)
    reached_all = World.interrupt(world, {0: "m0", 1: "m1", 2: "m2", 3: None})
    assert reached_all is False   # engine 0 could not be told
    interrupted = [idents for kind, idents in client.sent if kind == "interrupt_request"]
    aborted = [idents for kind, idents in client.sent if kind == "abort_request"]
    assert sorted(sum(interrupted, [])) == ["uuid-1", "uuid-2", "uuid-3"]
    assert sorted(sum(aborted, [])) == ["uuid-1", "uuid-2"]   # engine 3 had nothing queued


def test_every_engine_there_is_every_one_interrupted():
    client = DroppingClient(ids=[0, 1], dropped=None)
    assert World.interrupt(SimpleNamespace(client=client), {0: "m0", 1: "m1"}) is True
    assert sorted(sum((idents for kind, idents in client.sent if kind == "interrupt_request"), [])) == \
        ["uuid-0", "uuid-1"]
