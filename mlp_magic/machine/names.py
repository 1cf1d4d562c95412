"""This machine's names: the one set every part uses to tell "here" from another host.

Two questions are asked of it:
- ``is_this_machine(name)``: is this one of the names of the machine we run on (``localhost``,
  ``127.0.0.1``, ``::1``, its host name, short or full)? A topology of that one host is a local
  World, a cluster view shows it as one row whatever name each part used for it.
- ``stays_here(name, port)``: does reaching this host stay on this machine? Also true for any
  loopback address (``127.0.0.5``); false when an explicit port names another listener here
  (a test host's or a container's sshd), which must be reached like any other host.

The host name comes from ``os.uname()``, not ``socket``: the allrun command asks on its start-up
path, where importing ``socket`` would cost time.
"""
from __future__ import annotations

import os

from mlp_magic.core.hostfile import LOCALHOST, LOOPBACK

_FIXED = (LOCALHOST, "localhost.localdomain", LOOPBACK, "::1")


def this_machine_names(hostname: str | None = None) -> frozenset:
    """Every name of this machine, lower case (``hostname``: its name, for tests)."""
    name = (os.uname().nodename if hostname is None else hostname).lower()
    return frozenset(n for n in (*_FIXED, name, name.split(".")[0]) if n)


def is_this_machine(name: str, names: frozenset | None = None) -> bool:
    return name.lower() in (this_machine_names() if names is None else names)


def stays_here(name: str, port: int | None = None, names: frozenset | None = None) -> bool:
    if port is not None:
        return False
    return is_this_machine(name, names) or name.startswith("127.")
