"""The one set of this machine's names, and the two questions asked of it."""
from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.machine.names import is_this_machine, stays_here, this_machine_names

NAMES = this_machine_names("Node7.cluster.example")


def test_the_set_holds_every_spelling_of_this_machine():
    assert NAMES == {"localhost", "localhost.localdomain", "127.0.0.1", "::1",
                     "node7.cluster.example", "node7"}
    assert os.uname().nodename.lower() in this_machine_names()


def test_names_are_compared_without_case_and_a_port_means_another_listener():
    assert is_this_machine("LOCALHOST", NAMES) and is_this_machine("Node7", NAMES)
    assert not is_this_machine("127.0.0.5", NAMES) and not is_this_machine("node8", NAMES)
    assert stays_here("127.0.0.5", None, NAMES) and stays_here("node7", None, NAMES)
    assert not stays_here("localhost", 2222, NAMES) and not stays_here("node8", None, NAMES)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=30))
def test_one_of_this_machines_names_always_stays_here(name):
    names = this_machine_names(name)
    assert is_this_machine(name.upper(), names) and stays_here(name, None, names)
    assert not stays_here(name, 22, names)
