"""The kernel's collector during a cell: what existed before is set aside, and put back after."""
import gc

import pytest

from mlp_magic.mpirun.collector import cell_objects_only


def test_objects_alive_at_the_start_are_set_aside_and_put_back():
    assert gc.get_freeze_count() == 0
    before = object.__new__(type("Tracked", (), {}))   # a GC-tracked object from before the cell
    with cell_objects_only():
        assert gc.get_freeze_count() > 0
        assert not any(o is before for o in gc.get_objects())   # the collector does not walk it
    assert gc.get_freeze_count() == 0
    assert any(o is before for o in gc.get_objects())


def test_cycles_made_during_the_cell_are_still_collected():
    with cell_objects_only():
        gc.collect()
        cycle = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1


def test_an_error_in_the_cell_still_puts_everything_back():
    with pytest.raises(RuntimeError):
        with cell_objects_only():
            raise RuntimeError("cell")
    assert gc.get_freeze_count() == 0


def test_a_users_own_freeze_or_disabled_collector_is_left_alone():
    # Threads of earlier tests may free frozen objects meanwhile, so the count may only fall;
    # an object made after the user's freeze shows that no freeze of ours came on top of it.
    gc.freeze()
    try:
        after_the_users_freeze = object.__new__(type("Tracked", (), {}))
        with cell_objects_only():
            assert gc.get_freeze_count() > 0
            assert any(o is after_the_users_freeze for o in gc.get_objects())
        assert gc.get_freeze_count() > 0
        assert any(o is after_the_users_freeze for o in gc.get_objects())
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with cell_objects_only():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
