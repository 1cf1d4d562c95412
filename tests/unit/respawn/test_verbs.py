"""``%mpirun --respawn`` refuses a World that has stopped before it asks any rank anything."""
from types import SimpleNamespace

import pytest

from mlp_magic.errors import MlpMagicError
from mlp_magic.respawn import verbs


class StoppedWorld:
    """A World whose launcher ended: no rank to ask, none to start from."""
    survives_deaths = True
    dead_ranks = {2: "killed by SIGKILL"}

    def alive(self):
        return False

    def __getattr__(self, name):
        raise AssertionError(f"a stopped World was asked for {name}")


def test_a_stopped_world_is_refused_with_the_way_out_and_left_as_it_is():
    idled = []
    owner = SimpleNamespace(world=StoppedWorld(), idle_world=lambda *args, **kwargs: idled.append(args))
    options = SimpleNamespace(ranks=None, names=None, source=None)
    with pytest.raises(MlpMagicError, match=r"the World has stopped, every rank with it; "
                       r"`%mpirun --restart` starts it again"):
        verbs.respawn(SimpleNamespace(owner=owner, env={}), options)
    assert idled == []
